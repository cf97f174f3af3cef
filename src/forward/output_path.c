/*
 * output_path.c — the --perfetto-output path rules (docs/forwarder.md "Output path rules", output_path.h).
 * The forwarder may run as root and writes wherever the user says, so the
 * path is checked before anything is created and the final open cannot be
 * raced into following a link or truncating somebody else's file.
 *
 * Rules, in order:
 *   1. non-empty, shorter than PATH_MAX, ends in ".json" (any case), does
 *      not end in '/'; a leading "~/" is expanded from $HOME (as upstream's
 *      expanduser does);
 *   2. made absolute with the current directory and normalised lexically
 *      ("//", "/./" and "/../" collapsed, like upstream's os.path.abspath;
 *      no symlink resolution);
 *   3. every character of the absolute path is in the allowed set
 *      ASCII letters, digits and  - _ . / + , @ : = ~ %
 *      (so no spaces, no shell-special characters ; | & $ ` < > ( ) { } [ ]
 *      * ? ! ' " \ # ^, no control characters, no non-ASCII bytes);
 *   4. missing parent directories are created with mode 0750 (minus the
 *      umask); an existing component that is not a directory is an error;
 *   5. the final component: lstat — a symlink or anything but a regular
 *      file is refused (MST_ERR_PATH); a file of another user is refused
 *      (MST_ERR_PERMISSION);
 *   6. open(O_WRONLY|O_CREAT|O_NOFOLLOW|O_CLOEXEC|O_NONBLOCK, 0640) — no
 *      O_TRUNC yet, and O_NONBLOCK so a FIFO swapped in cannot block us —
 *      then fstat re-checks "regular file owned by geteuid()" on the very
 *      file opened, and only then ftruncate(0).
 */
#include "forward/output_path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static mst_status path_err(char *err, size_t err_size, mst_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static mst_status path_err(char *err, size_t err_size, mst_status st, const char *fmt, ...) {
    if (err && err_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_size, fmt, ap);
        va_end(ap);
    }
    return st;
}

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

/* Builds the absolute, normalised path into abs (PATH_MAX bytes). */
static mst_status make_absolute(const char *path, char *abs, char *err, size_t err_size) {
    char tmp[2 * PATH_MAX];
    int n;
    if (path[0] == '~' && path[1] == '/') {
        const char *home = getenv("HOME");
        if (!home || home[0] != '/')
            return path_err(err, err_size, MST_ERR_PATH,
                            "--perfetto-output: cannot expand '~' (HOME is not an absolute path)");
        n = snprintf(tmp, sizeof tmp, "%s/%s", home, path + 2);
    } else if (path[0] == '/') {
        n = snprintf(tmp, sizeof tmp, "%s", path);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd))
            return path_err(err, err_size, MST_ERR_IO,
                            "--perfetto-output: cannot read the current directory: %s",
                            strerror(errno));
        n = snprintf(tmp, sizeof tmp, "%s/%s", cwd, path);
    }
    if (n < 0 || (size_t)n >= sizeof tmp)
        return path_err(err, err_size, MST_ERR_PATH, "--perfetto-output: path too long");
    normalize(tmp);
    if (strlen(tmp) >= PATH_MAX)
        return path_err(err, err_size, MST_ERR_PATH, "--perfetto-output: path too long");
    strcpy(abs, tmp);
    return MST_OK;
}

/* mkdir -p of the parent of abs (an absolute normalised file path). */
static mst_status make_parents(const char *abs, char *err, size_t err_size) {
    char dir[PATH_MAX];
    size_t len = strlen(abs);
    memcpy(dir, abs, len + 1);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return MST_OK; /* parent is "/" */
    *slash = '\0';
    for (char *p = dir + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        struct stat st;
        if (stat(dir, &st) == 0) {
            if (!S_ISDIR(st.st_mode))
                return path_err(err, err_size, MST_ERR_PATH,
                                "--perfetto-output: '%s' exists and is not a directory", dir);
        } else if (errno == ENOENT) {
            if (mkdir(dir, 0750) != 0 && errno != EEXIST)
                return path_err(err, err_size, errno == EACCES ? MST_ERR_PERMISSION : MST_ERR_IO,
                                "--perfetto-output: cannot create directory '%s': %s", dir,
                                strerror(errno));
        } else {
            return path_err(err, err_size, errno == EACCES ? MST_ERR_PERMISSION : MST_ERR_IO,
                            "--perfetto-output: cannot access '%s': %s", dir, strerror(errno));
        }
        *p = saved;
        if (saved == '\0') break;
    }
    return MST_OK;
}

/* The regular-file + owner rule for an lstat/fstat result. */
static mst_status check_stat(const struct stat *st, const char *abs, char *err, size_t err_size) {
    if (S_ISLNK(st->st_mode))
        return path_err(err, err_size, MST_ERR_PATH,
                        "--perfetto-output cannot be a symbolic link: %s", abs);
    if (!S_ISREG(st->st_mode))
        return path_err(err, err_size, MST_ERR_PATH,
                        "--perfetto-output must be a regular file: %s", abs);
    if (st->st_uid != geteuid())
        return path_err(err, err_size, MST_ERR_PERMISSION,
                        "--perfetto-output must be owned by the current user (uid %u): %s is "
                        "owned by uid %u",
                        (unsigned)geteuid(), abs, (unsigned)st->st_uid);
    return MST_OK;
}

static mst_status check_syntax(const char *path, char *err, size_t err_size) {
    size_t len = strlen(path);
    if (len == 0) return path_err(err, err_size, MST_ERR_PATH, "--perfetto-output is empty");
    if (len >= PATH_MAX) return path_err(err, err_size, MST_ERR_PATH, "--perfetto-output: path too long");
    if (len < 5 || strcasecmp(path + len - 5, ".json") != 0)
        return path_err(err, err_size, MST_ERR_PATH,
                        "--perfetto-output must point to a .json file: %s", path);
    return MST_OK;
}

mst_status mst_output_path_open(const char *path, int *fd_out, char *err, size_t err_size) {
    if (err && err_size) err[0] = '\0';
    if (!path || !fd_out) return path_err(err, err_size, MST_ERR_INVALID_ARG, "NULL argument");
    *fd_out = -1;
    mst_status st = check_syntax(path, err, err_size);
    if (st != MST_OK) return st;
    char abs[PATH_MAX];
    st = make_absolute(path, abs, err, err_size);
    if (st != MST_OK) return st;
    for (const char *c = abs; *c; c++)
        if (!allowed_char((unsigned char)*c))
            return path_err(err, err_size, MST_ERR_PATH,
                            "--perfetto-output contains an unsupported character (0x%02x); allowed: "
                            "letters, digits and - _ . / + , @ : = ~ %%",
                            (unsigned)(unsigned char)*c);
    /* Normalisation may have eaten the file name (e.g. "x.json/.."). */
    size_t alen = strlen(abs);
    if (alen < 5 || strcasecmp(abs + alen - 5, ".json") != 0 || abs[alen - 1] == '/')
        return path_err(err, err_size, MST_ERR_PATH,
                        "--perfetto-output must point to a .json file: %s", abs);
    st = make_parents(abs, err, err_size);
    if (st != MST_OK) return st;

    struct stat sb;
    if (lstat(abs, &sb) == 0) {
        st = check_stat(&sb, abs, err, err_size);
        if (st != MST_OK) return st;
    } else if (errno != ENOENT) {
        return path_err(err, err_size, errno == EACCES ? MST_ERR_PERMISSION : MST_ERR_IO,
                        "--perfetto-output: cannot access %s: %s", abs, strerror(errno));
    }

    int fd = open(abs, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0640);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP)
            return path_err(err, err_size, MST_ERR_PATH,
                            "--perfetto-output cannot be a symbolic link: %s", abs);
        return path_err(err, err_size, e == EACCES ? MST_ERR_PERMISSION : MST_ERR_IO,
                        "--perfetto-output: cannot open %s: %s", abs, strerror(e));
    }
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return path_err(err, err_size, MST_ERR_IO, "--perfetto-output: fstat %s: %s", abs,
                        strerror(e));
    }
    st = check_stat(&sb, abs, err, err_size);
    if (st == MST_OK && ftruncate(fd, 0) != 0)
        st = path_err(err, err_size, MST_ERR_IO, "--perfetto-output: cannot truncate %s: %s", abs,
                      strerror(errno));
    int fl = st == MST_OK ? fcntl(fd, F_GETFL) : -1;
    if (st == MST_OK && (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0))
        st = path_err(err, err_size, MST_ERR_IO, "--perfetto-output: fcntl %s: %s", abs,
                      strerror(errno));
    if (st != MST_OK) {
        close(fd);
        return st;
    }
    *fd_out = fd;
    return MST_OK;
}
