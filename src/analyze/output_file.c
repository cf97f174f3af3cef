/*
 * output_file.c — reports written under the output path rules, through a
 * temporary file renamed into place (output_file.h). The path checks are
 * the forwarder's own (forward/output_path.h), not a second copy.
 */
#include "analyze/output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forward/output_path.h"

static mst_status out_err(char *err, size_t err_size, mst_status st, const char *what,
                          const char *path, const char *why) {
    if (err && err_size) snprintf(err, err_size, "%s: cannot write %s: %s", what, path, why);
    return st;
}

/* f's writes: straight to the fd, remembering why the first failed one
 * failed (stdio keeps only "an error happened"). */
static ssize_t cookie_write(void *cookie, const char *buf, size_t n) {
    mst_an_output *o = cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t k = write(o->fd, buf + done, n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (!o->write_errno) o->write_errno = k < 0 ? errno : EIO;
            return done ? (ssize_t)done : -1;
        }
        done += (size_t)k;
    }
    return (ssize_t)done;
}

static int cookie_close(void *cookie) {
    mst_an_output *o = cookie;
    int rc = close(o->fd);
    o->fd = -1;
    return rc;
}

/* Creates the temporary file for `leaf` in dirfd (which o takes over):
 * ".<leaf>.tmp<pid>-<n>", exclusive, no link followed, mode 0640 (or the
 * narrower mode of the report it replaces). */
static mst_status open_temp(mst_an_output *o, int dirfd, const char *leaf, const char *what,
                            char *err, size_t err_size) {
    o->dirfd = dirfd;
    size_t n = strlen(leaf);
    if (n == 0 || n >= sizeof o->leaf) return out_err(err, err_size, MST_ERR_PATH, what, o->path, "bad file name");
    memcpy(o->leaf, leaf, n + 1);
    mst_status st = mst_output_check_leaf(dirfd, leaf, o->path, what, err, err_size);
    if (st != MST_OK) return st;
    for (unsigned attempt = 0; attempt < 100; attempt++) {
        /* The name is cut to fit NAME_MAX; the suffix keeps it unique. */
        char suffix[40];
        int k = snprintf(suffix, sizeof suffix, ".tmp%ld-%u", (long)getpid(), attempt);
        int keep = (int)(NAME_MAX - 1 - (size_t)k);
        snprintf(o->tmp, sizeof o->tmp, ".%.*s%s", keep, leaf, suffix);
        int fd = openat(dirfd, o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
        if (fd < 0 && errno == EEXIST) continue;
        if (fd < 0) {
            int e = errno;
            o->tmp[0] = '\0';
            return out_err(err, err_size, e == EACCES || e == EPERM ? MST_ERR_PERMISSION : MST_ERR_IO,
                           what, o->path, strerror(e));
        }
        /* Replacing a report keeps a narrower mode it had (0600 stays
         * 0600): never wider than 0640, never wider than before. */
        struct stat old;
        if (fstatat(dirfd, leaf, &old, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(old.st_mode) &&
            (old.st_mode & 0640) != 0640)
            fchmod(fd, old.st_mode & 0640);
        o->fd = fd;
        cookie_io_functions_t io = {.write = cookie_write, .close = cookie_close};
        if (!(o->f = fopencookie(o, "w", io))) {
            close(fd);
            o->fd = -1;
            unlinkat(dirfd, o->tmp, 0);
            o->tmp[0] = '\0';
            return out_err(err, err_size, MST_ERR_NOMEM, what, o->path, "out of memory");
        }
        return MST_OK;
    }
    o->tmp[0] = '\0';
    return out_err(err, err_size, MST_ERR_IO, what, o->path, "no free temporary name");
}

/* Releases o after a failed open (nothing to remove but the fd). */
static void release(mst_an_output *o) {
    if (o->f) fclose(o->f);
    if (o->tmp[0]) unlinkat(o->dirfd, o->tmp, 0);
    if (o->dirfd >= 0) close(o->dirfd);
    o->f = NULL;
    o->tmp[0] = '\0';
    o->dirfd = -1;
}

mst_status mst_an_output_open(mst_an_output *o, const char *path, const char *what, char *err,
                              size_t err_size) {
    memset(o, 0, sizeof *o);
    o->dirfd = o->fd = -1;
    o->what = what;
    if (strcmp(path, "-") == 0) {
        o->f = stdout;
        snprintf(o->path, sizeof o->path, "standard output");
        return MST_OK;
    }
    mst_status st = mst_output_abs_path(path, what, o->path, err, err_size);
    if (st != MST_OK) return st;
    size_t n = strlen(path);
    if (strcmp(o->path, "/") == 0 || (n && path[n - 1] == '/'))
        return out_err(err, err_size, MST_ERR_PATH, what, path, "a directory, not a file name");
    const char *leaf;
    int dirfd = mst_output_open_parent(o->path, what, &leaf, &st, err, err_size);
    if (dirfd < 0) return st;
    st = open_temp(o, dirfd, leaf, what, err, err_size);
    if (st != MST_OK) release(o);
    return st;
}

mst_status mst_an_output_open_in(mst_an_output *o, int dirfd, const char *dir, const char *name,
                                 const char *what, char *err, size_t err_size) {
    memset(o, 0, sizeof *o);
    o->dirfd = o->fd = -1;
    o->what = what;
    snprintf(o->path, sizeof o->path, "%s/%s", dir, name);
    int own = fcntl(dirfd, F_DUPFD_CLOEXEC, 0); /* o closes its own copy */
    if (own < 0) return out_err(err, err_size, MST_ERR_IO, what, o->path, strerror(errno));
    mst_status st = open_temp(o, own, name, what, err, err_size);
    if (st != MST_OK) release(o);
    return st;
}

int mst_an_output_open_dir(const char *path, const char *what, char *err, size_t err_size) {
    mst_status st;
    return mst_output_open_dir(path, what, &st, err, err_size);
}

mst_status mst_an_output_commit(mst_an_output *o, char *err, size_t err_size) {
    if (o->dirfd < 0) { /* stdout */
        bool ok = !ferror(o->f) && fflush(o->f) == 0;
        o->f = NULL;
        return ok ? MST_OK : out_err(err, err_size, MST_ERR_IO, o->what, o->path, strerror(errno));
    }
    int e = 0;
    if (fflush(o->f) != 0 || ferror(o->f)) e = o->write_errno ? o->write_errno : EIO;
    if (!e && fsync(o->fd) != 0) e = errno; /* on disk before it takes the name */
    if (fclose(o->f) != 0 && !e) e = errno;
    o->f = NULL;
    if (!e && renameat(o->dirfd, o->tmp, o->dirfd, o->leaf) != 0) e = errno;
    else if (!e) o->tmp[0] = '\0'; /* renamed: nothing to remove */
    release(o);
    return e ? out_err(err, err_size, MST_ERR_IO, o->what, o->path, strerror(e)) : MST_OK;
}

void mst_an_output_abort(mst_an_output *o) {
    if (o->dirfd < 0) {
        o->f = NULL;
        return;
    }
    release(o);
}
