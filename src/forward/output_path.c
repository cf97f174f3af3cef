/*
 * output_path.c — the --perfetto-output path rules (docs/forwarder.md "Output path rules", output_path.h).
 * The forwarder may run as root and writes wherever the user says, so the
 * path is checked before anything is created and the final open cannot be
 * raced into following a link or truncating somebody else's file.
 *
 * Rules, in order:
 *   1. non-empty, shorter than PATH_MAX, ends in ".json" or ".pftrace" (any case), does
 *      not end in '/'; a leading "~/" is expanded from $HOME (as upstream's
 *      expanduser does);
 *   2. made absolute with the current directory and normalised lexically
 *      ("//", "/./" and "/../" collapsed, like upstream's os.path.abspath;
 *      no symlink resolution);
 *   3. every character of the absolute path is in the allowed set
 *      ASCII letters, digits and  - _ . / + , @ : = ~ %
 *      (so no spaces, no shell-special characters ; | & $ ` < > ( ) { } [ ]
 *      * ? ! ' " \ # ^, no control characters, no non-ASCII bytes);
 *   4. the path is walked from "/" one component at a time with openat(
 *      O_DIRECTORY|O_NOFOLLOW) on the directory opened before, so no
 *      symbolic link is followed anywhere in the path (a link planted as
 *      /tmp/traces -> /somewhere cannot redirect us) and no component can
 *      be swapped between check and use; a symlink component is refused,
 *      so is one that is not a directory; missing directories are created
 *      (mkdirat, mode 0750 minus the umask) and then opened the same way;
 *   5. the final component, relative to that directory: fstatat(
 *      AT_SYMLINK_NOFOLLOW) — a symlink or anything but a regular file is
 *      refused (MST_ERR_PATH); a file of another user (MST_ERR_PERMISSION)
 *      or with more than one hard link (MST_ERR_PATH: truncating it would
 *      truncate the other name too) is refused;
 *   6. openat(O_WRONLY|O_CREAT|O_NOFOLLOW|O_CLOEXEC|O_NONBLOCK, 0640) — no
 *      O_TRUNC yet, and O_NONBLOCK so a FIFO swapped in cannot block us —
 *      then fstat re-checks rule 5 on the very file opened; an existing
 *      file with permission bits beyond 0640 gets them removed (fchmod to
 *      mode & 0640: never widened); only then ftruncate(0).
 */
#include "forward/output_path.h"

#include "core/err_text.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static bool allowed_char(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    return c != '\0' && strchr("-_./+,@:=~%", c) != NULL;
}

/* Lexical normalisation of an absolute path in place: collapses repeated
 * slashes, "." and ".." (".." at the root stays at the root). */
static void normalize(char *path) {
    char *out = path; /* write cursor; path[0] == '/' */
    const char *p = path;
    size_t len = 0;
    while (*p) {
        while (*p == '/') p++;
        if (!*p) break;
        const char *seg = p;
        while (*p && *p != '/') p++;
        size_t n = (size_t)(p - seg);
        if (n == 1 && seg[0] == '.') continue;
        if (n == 2 && seg[0] == '.' && seg[1] == '.') {
            while (len > 0 && out[len - 1] != '/') len--;
            if (len > 0) len--; /* the slash before the removed segment */
            continue;
        }
        out[len++] = '/';
        memmove(out + len, seg, n);
        len += n;
    }
    if (len == 0) out[len++] = '/';
    out[len] = '\0';
}

mst_status mst_output_abs_path(const char *path, const char *what, char *abs, char *err,
                               size_t err_size) {
    char tmp[2 * PATH_MAX];
    int n;
    if (path[0] == '~' && path[1] == '/') {
        const char *home = getenv("HOME");
        if (!home || home[0] != '/')
            return mst_err_fail(err, err_size, MST_ERR_PATH,
                            "%s: cannot expand '~' (HOME is not an absolute path)", what);
        n = snprintf(tmp, sizeof tmp, "%s/%s", home, path + 2);
    } else if (path[0] == '/') {
        n = snprintf(tmp, sizeof tmp, "%s", path);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd))
            return mst_err_fail(err, err_size, MST_ERR_IO,
                            "%s: cannot read the current directory: %s", what,
                            strerror(errno));
        n = snprintf(tmp, sizeof tmp, "%s/%s", cwd, path);
    }
    if (n < 0 || (size_t)n >= sizeof tmp)
        return mst_err_fail(err, err_size, MST_ERR_PATH, "%s: path too long", what);
    normalize(tmp);
    if (strlen(tmp) >= PATH_MAX)
        return mst_err_fail(err, err_size, MST_ERR_PATH, "%s: path too long", what);
    strcpy(abs, tmp);
    return MST_OK;
}

static mst_status errno_status(int e) {
    return e == EACCES || e == EPERM ? MST_ERR_PERMISSION : MST_ERR_IO;
}

/* Opens the directory `name` inside dirfd without following a link;
 * creates it (0750) when missing. `shown` is the absolute path so far, for
 * messages. Returns the new fd or -1 with the error set. */
static int open_dir_component(int dirfd, const char *name, const char *shown, const char *what,
                              mst_status *st, char *err, size_t err_size) {
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) return fd;
        int e = errno;
        struct stat sb;
        if (e == ENOENT && attempt == 0) {
            if (mkdirat(dirfd, name, 0750) != 0 && errno != EEXIST) {
                e = errno;
                *st = mst_err_fail(err, err_size, errno_status(e),
                               "%s: cannot create directory '%s': %s", what, shown,
                               strerror(e));
                return -1;
            }
            continue; /* open what was just made (or raced in), still without links */
        }
        if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode)) {
            *st = mst_err_fail(err, err_size, MST_ERR_PATH,
                           "%s: '%s' is a symbolic link; links are not followed "
                           "in the output path (give the real directory)",
                           what, shown);
        } else if (e == ENOTDIR || (e == ELOOP) ||
                   (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(sb.st_mode))) {
            *st = mst_err_fail(err, err_size, MST_ERR_PATH,
                           "%s: '%s' exists and is not a directory", what, shown);
        } else {
            *st = mst_err_fail(err, err_size, errno_status(e),
                           "%s: cannot access '%s': %s", what, shown, strerror(e));
        }
        return -1;
    }
    *st = mst_err_fail(err, err_size, MST_ERR_IO,
                   "%s: '%s' keeps changing while being created", what, shown);
    return -1;
}

int mst_output_open_parent(const char *abs, const char *what, const char **leaf, mst_status *st,
                           char *err, size_t err_size) {
    char shown[PATH_MAX];
    const char *slash = strrchr(abs, '/');
    *leaf = slash + 1;
    int dirfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        *st = mst_err_fail(err, err_size, MST_ERR_IO, "%s: cannot open '/': %s", what,
                       strerror(errno));
        return -1;
    }
    const char *p = abs + 1;
    while (p < slash) {
        const char *end = strchr(p, '/'); /* never NULL before the last slash */
        char name[NAME_MAX + 1];
        size_t n = (size_t)(end - p);
        if (n > NAME_MAX) {
            close(dirfd);
            *st = mst_err_fail(err, err_size, MST_ERR_PATH, "%s: name too long", what);
            return -1;
        }
        memcpy(name, p, n);
        name[n] = '\0';
        memcpy(shown, abs, (size_t)(end - abs));
        shown[end - abs] = '\0';
        int next = open_dir_component(dirfd, name, shown, what, st, err, err_size);
        close(dirfd);
        if (next < 0) return -1;
        dirfd = next;
        p = end + 1;
    }
    return dirfd;
}

/* The regular-file + owner rule for an lstat/fstat result. */
static mst_status check_stat(const struct stat *st, const char *abs, const char *what, char *err,
                             size_t err_size) {
    if (S_ISLNK(st->st_mode))
        return mst_err_fail(err, err_size, MST_ERR_PATH,
                        "%s cannot be a symbolic link: %s", what, abs);
    if (!S_ISREG(st->st_mode))
        return mst_err_fail(err, err_size, MST_ERR_PATH,
                        "%s must be a regular file: %s", what, abs);
    if (st->st_uid != geteuid())
        return mst_err_fail(err, err_size, MST_ERR_PERMISSION,
                        "%s must be owned by the current user (uid %u): %s is owned by uid %u",
                        what, (unsigned)geteuid(), abs, (unsigned)st->st_uid);
    if (st->st_nlink > 1)
        return mst_err_fail(err, err_size, MST_ERR_PATH,
                        "%s must not have other hard links: %s has %llu links "
                        "(truncating it would truncate the other names too)",
                        what, abs, (unsigned long long)st->st_nlink);
    return MST_OK;
}

mst_status mst_output_check_leaf(int dirfd, const char *leaf, const char *abs, const char *what,
                                 char *err, size_t err_size) {
    struct stat sb;
    if (fstatat(dirfd, leaf, &sb, AT_SYMLINK_NOFOLLOW) == 0) return check_stat(&sb, abs, what, err, err_size);
    if (errno == ENOENT) return MST_OK;
    int e = errno;
    return mst_err_fail(err, err_size, errno_status(e), "%s: cannot access %s: %s", what, abs,
                    strerror(e));
}

int mst_output_open_dir(const char *path, const char *what, mst_status *st, char *err,
                        size_t err_size) {
    char abs[PATH_MAX];
    *st = mst_output_abs_path(path, what, abs, err, err_size);
    if (*st != MST_OK) return -1;
    if (strcmp(abs, "/") == 0) return open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const char *leaf;
    int parent = mst_output_open_parent(abs, what, &leaf, st, err, err_size);
    if (parent < 0) return -1;
    int fd = open_dir_component(parent, leaf, abs, what, st, err, err_size);
    close(parent);
    return fd;
}

/* Ends in .json (Chrome Trace JSON) or .pftrace (native Perfetto), any case. */
static bool known_extension(const char *p, size_t len) {
    return (len >= 5 && strcasecmp(p + len - 5, ".json") == 0) ||
           (len >= 8 && strcasecmp(p + len - 8, ".pftrace") == 0);
}

static mst_status check_syntax(const char *path, char *err, size_t err_size) {
    size_t len = strlen(path);
    if (len == 0) return mst_err_fail(err, err_size, MST_ERR_PATH, "--perfetto-output is empty");
    if (len >= PATH_MAX) return mst_err_fail(err, err_size, MST_ERR_PATH, "--perfetto-output: path too long");
    if (!known_extension(path, len))
        return mst_err_fail(err, err_size, MST_ERR_PATH,
                        "--perfetto-output must point to a .json or .pftrace file: %s", path);
    return MST_OK;
}

mst_status mst_output_path_open(const char *path, int *fd_out, char *err, size_t err_size) {
    if (err && err_size) err[0] = '\0';
    if (!path || !fd_out) return mst_err_fail(err, err_size, MST_ERR_INVALID_ARG, "NULL argument");
    *fd_out = -1;
    mst_status st = check_syntax(path, err, err_size);
    if (st != MST_OK) return st;
    char abs[PATH_MAX];
    st = mst_output_abs_path(path, "--perfetto-output", abs, err, err_size);
    if (st != MST_OK) return st;
    for (const char *c = abs; *c; c++)
        if (!allowed_char((unsigned char)*c))
            return mst_err_fail(err, err_size, MST_ERR_PATH,
                            "--perfetto-output contains an unsupported character (0x%02x); allowed: "
                            "letters, digits and - _ . / + , @ : = ~ %%",
                            (unsigned)(unsigned char)*c);
    /* Normalisation may have eaten the file name (e.g. "x.json/.."). */
    size_t alen = strlen(abs);
    if (!known_extension(abs, alen) || abs[alen - 1] == '/')
        return mst_err_fail(err, err_size, MST_ERR_PATH,
                        "--perfetto-output must point to a .json or .pftrace file: %s", abs);
    const char *leaf;
    int dirfd = mst_output_open_parent(abs, "--perfetto-output", &leaf, &st, err, err_size);
    if (dirfd < 0) return st;
    st = mst_output_check_leaf(dirfd, leaf, abs, "--perfetto-output", err, err_size);
    if (st != MST_OK) {
        close(dirfd);
        return st;
    }
    struct stat sb;

    int fd = openat(dirfd, leaf, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0640);
    int open_errno = errno;
    close(dirfd);
    if (fd < 0) {
        int e = open_errno;
        if (e == ELOOP)
            return mst_err_fail(err, err_size, MST_ERR_PATH,
                            "--perfetto-output cannot be a symbolic link: %s", abs);
        return mst_err_fail(err, err_size, errno_status(e), "--perfetto-output: cannot open %s: %s",
                        abs, strerror(e));
    }
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return mst_err_fail(err, err_size, MST_ERR_IO, "--perfetto-output: fstat %s: %s", abs,
                        strerror(e));
    }
    st = check_stat(&sb, abs, "--perfetto-output", err, err_size);
    /* An existing file keeps its mode on open: take away anything beyond
     * 0640 (never add), so an old 0666 file does not stay world-writable. */
    if (st == MST_OK && (sb.st_mode & 07777 & ~(mode_t)0640) &&
        fchmod(fd, sb.st_mode & 0640) != 0)
        st = mst_err_fail(err, err_size, errno_status(errno),
                      "--perfetto-output: cannot set mode 0640 on %s: %s", abs, strerror(errno));
    if (st == MST_OK && ftruncate(fd, 0) != 0)
        st = mst_err_fail(err, err_size, MST_ERR_IO, "--perfetto-output: cannot truncate %s: %s", abs,
                      strerror(errno));
    int fl = st == MST_OK ? fcntl(fd, F_GETFL) : -1;
    if (st == MST_OK && (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0))
        st = mst_err_fail(err, err_size, MST_ERR_IO, "--perfetto-output: fcntl %s: %s", abs,
                      strerror(errno));
    if (st != MST_OK) {
        close(fd);
        return st;
    }
    *fd_out = fd;
    return MST_OK;
}

mst_status mst_output_path_absolute(const char *path, char *abs, char *err, size_t err_size) {
    if (err && err_size) err[0] = '\0';
    if (!path || !abs) return mst_err_fail(err, err_size, MST_ERR_INVALID_ARG, "NULL argument");
    mst_status st = check_syntax(path, err, err_size);
    return st == MST_OK ? mst_output_abs_path(path, "--perfetto-output", abs, err, err_size) : st;
}
