/*
 * test_output_path.c — the --perfetto-output path rules
 * (src/forward/output_path.c, docs/forwarder.md "Output path rules"): .json suffix, refused characters,
 * parent directories created 0750, file created 0640, symlinks / FIFOs /
 * directories refused, a file of another user refused (needs root: chowns
 * to uid 65534; skipped with a message otherwise), an own file truncated;
 * no symbolic link followed in any directory of the path (nothing created
 * or truncated behind one), hard-linked files refused, an existing file's
 * mode narrowed to 0640.
 */
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forward/output_path.h"
#include "testlib.h"

static char g_dir[64];

static const char *dir(void) {
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "/tmp/mst_outpath_test_XXXXXX");
        if (!mkdtemp(g_dir)) abort();
    }
    return g_dir;
}

/* A path inside the test directory (8 rotating buffers, so a test can
 * hold several at once). */
static const char *in_dir(const char *rel) {
    static char paths[8][PATH_MAX];
    static unsigned next;
    char *path = paths[next++ % 8];
    snprintf(path, PATH_MAX, "%s/%s", dir(), rel);
    return path;
}

static mst_status try_open(const char *path, char *err, size_t n) {
    int fd = -1;
    mst_status st = mst_output_path_open(path, &fd, err, n);
    if (st == MST_OK) {
        CHECK(fd >= 0);
        close(fd);
    } else {
        CHECK(fd == -1);
    }
    return st;
}

static void test_suffix_and_characters(void) {
    char err[512];
    CHECK_EQ_INT(try_open("trace.txt", err, sizeof err), MST_ERR_PATH);
    CHECK(strstr(err, ".json") != NULL);
    CHECK_EQ_INT(try_open("trace.json;", err, sizeof err), MST_ERR_PATH);
    CHECK_EQ_INT(try_open("", err, sizeof err), MST_ERR_PATH);
    CHECK_EQ_INT(try_open("trace.json/", err, sizeof err), MST_ERR_PATH);
    CHECK_EQ_INT(try_open("trace", err, sizeof err), MST_ERR_PATH);
    const char *bad[] = {";", "|", "&", "$", "`", "<", ">", "(", ")", "{", "}", "[", "]",
                         "*", "?", "!", "'", "\"", "\\", "\n", " ", "#", "^", "\t", "\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "a%sb.json", bad[i]);
        CHECK_EQ_INT(try_open(in_dir(rel), err, sizeof err), MST_ERR_PATH);
        CHECK(strstr(err, "unsupported character") != NULL);
    }
    /* Every allowed punctuation character, and a case-insensitive suffix. */
    const char *ok = in_dir("a-b_c.d+e,f@g:h=i~j%k.JSON");
    CHECK_EQ_INT(try_open(ok, err, sizeof err), MST_OK);
    unlink(ok);
    /* Normalisation must not let "x.json/.." name the directory. */
    CHECK_EQ_INT(try_open(in_dir("x.json/.."), err, sizeof err), MST_ERR_PATH);
}

static void test_parents_created_and_modes(void) {
    char err[512];
    mode_t old = umask(022);
    const char *path = in_dir("p1/p2/p3/trace.json");
    CHECK_EQ_INT(try_open(path, err, sizeof err), MST_OK);
    struct stat st;
    CHECK(stat(in_dir("p1"), &st) == 0 && S_ISDIR(st.st_mode));
    CHECK_EQ_INT(st.st_mode & 0777, 0750);
    CHECK(stat(in_dir("p1/p2/p3"), &st) == 0);
    CHECK_EQ_INT(st.st_mode & 0777, 0750);
    CHECK(stat(path, &st) == 0 && S_ISREG(st.st_mode));
    CHECK_EQ_INT(st.st_mode & 0777, 0640);
    CHECK_EQ_INT(st.st_size, 0);
    umask(old);
    /* "." and ".." and "//" are normalised lexically. */
    CHECK_EQ_INT(try_open(in_dir("p1//p2/./x/../p3/trace.json"), err, sizeof err), MST_OK);
    CHECK(stat(in_dir("p1/p2/x"), &st) != 0); /* never created */
    unlink(path);
    rmdir(in_dir("p1/p2/p3"));
    rmdir(in_dir("p1/p2"));
    rmdir(in_dir("p1"));
    /* A parent component that is a file. */
    int fd = open(in_dir("plain"), O_WRONLY | O_CREAT, 0600);
    close(fd);
    CHECK_EQ_INT(try_open(in_dir("plain/trace.json"), err, sizeof err), MST_ERR_PATH);
    CHECK(strstr(err, "not a directory") != NULL);
    unlink(in_dir("plain"));
}

static void test_relative_path_uses_cwd(void) {
    char err[512], old[PATH_MAX];
    CHECK(getcwd(old, sizeof old) != NULL);
    CHECK(chdir(dir()) == 0);
    CHECK_EQ_INT(try_open("rel/trace.json", err, sizeof err), MST_OK);
    CHECK(access(in_dir("rel/trace.json"), F_OK) == 0);
    CHECK(chdir(old) == 0);
    unlink(in_dir("rel/trace.json"));
    rmdir(in_dir("rel"));
}

static void test_existing_own_file_truncated(void) {
    char err[512];
    const char *path = in_dir("own.json");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(write(fd, "old content", 11) == 11);
    close(fd);
    fd = -1;
    CHECK_EQ_INT(mst_output_path_open(path, &fd, err, sizeof err), MST_OK);
    struct stat st;
    CHECK(fstat(fd, &st) == 0);
    CHECK_EQ_INT(st.st_size, 0);
    CHECK_EQ_INT(st.st_mode & 0777, 0600); /* an existing file keeps its mode */
    int fl = fcntl(fd, F_GETFL);
    CHECK(!(fl & O_NONBLOCK));
    CHECK((fl & O_ACCMODE) == O_WRONLY);
    CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);
    unlink(path);
}

static void test_symlink_refused(void) {
    char err[512];
    const char *target = in_dir("target.json");
    int fd = open(target, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(write(fd, "keep", 4) == 4);
    close(fd);
    const char *link = in_dir("link.json");
    CHECK(symlink(target, link) == 0);
    CHECK_EQ_INT(try_open(link, err, sizeof err), MST_ERR_PATH);
    CHECK(strstr(err, "symbolic link") != NULL);
    /* A dangling symlink is refused too (O_NOFOLLOW would not create it). */
    const char *dangling = in_dir("dangling.json");
    CHECK(symlink(in_dir("nowhere.json"), dangling) == 0);
    CHECK_EQ_INT(try_open(dangling, err, sizeof err), MST_ERR_PATH);
    CHECK(access(in_dir("nowhere.json"), F_OK) != 0);
    struct stat st;
    CHECK(stat(target, &st) == 0 && st.st_size == 4); /* untouched */
    unlink(link);
    unlink(dangling);
    unlink(target);
}

static void test_non_regular_refused(void) {
    char err[512];
    const char *d = in_dir("adir.json");
    CHECK(mkdir(d, 0700) == 0);
    CHECK_EQ_INT(try_open(d, err, sizeof err), MST_ERR_PATH);
    CHECK(strstr(err, "regular file") != NULL);
    rmdir(d);
    const char *fifo = in_dir("fifo.json");
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK_EQ_INT(try_open(fifo, err, sizeof err), MST_ERR_PATH); /* and does not block */
    unlink(fifo);
}

static void test_other_owner_refused(void) {
    if (geteuid() != 0) {
        fprintf(stderr, "  skipped: other-owner check needs root (chown to uid 65534)\n");
        return;
    }
    char err[512];
    const char *path = in_dir("other.json");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(write(fd, "theirs", 6) == 6);
    close(fd);
    CHECK(chown(path, 65534, 65534) == 0);
    CHECK_EQ_INT(try_open(path, err, sizeof err), MST_ERR_PERMISSION);
    CHECK(strstr(err, "owned by the current user") != NULL);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 6); /* not truncated */
    unlink(path);
}

static void cleanup(void) {
    if (g_dir[0]) rmdir(g_dir);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) abort();
    fputs(text, f);
    fclose(f);
}

static bool has_text(const char *path, const char *text) {
    char buf[64] = "";
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strcmp(buf, text) == 0;
}

/* A directory of the path that is a symlink (planted /tmp/traces ->
 * somebody's directory) is refused: the file behind it is not truncated,
 * and nothing is created behind it for a deeper path. */
static void test_symlinked_directory_refused(void) {
    char err[512];
    CHECK(mkdir(in_dir("victim"), 0700) == 0);
    write_text(in_dir("victim/run.json"), "keep");
    CHECK(symlink(in_dir("victim"), in_dir("traces")) == 0);
    CHECK_EQ_INT(try_open(in_dir("traces/run.json"), err, sizeof err), MST_ERR_PATH);
    CHECK(strstr(err, "symbolic link") != NULL);
    CHECK(strstr(err, "traces") != NULL);
    CHECK(has_text(in_dir("victim/run.json"), "keep"));
    CHECK_EQ_INT(try_open(in_dir("traces/deeper/run.json"), err, sizeof err), MST_ERR_PATH);
    struct stat sb;
    CHECK(stat(in_dir("victim/deeper"), &sb) != 0 && errno == ENOENT);
    /* A link higher up, followed by real directories, is refused too. */
    CHECK(mkdir(in_dir("victim/sub"), 0700) == 0);
    CHECK_EQ_INT(try_open(in_dir("traces/sub/run.json"), err, sizeof err), MST_ERR_PATH);
    CHECK(stat(in_dir("victim/sub/run.json"), &sb) != 0 && errno == ENOENT);
    /* "..": normalised lexically, so "traces/../x.json" is dir()/x.json. */
    CHECK_EQ_INT(try_open(in_dir("traces/../x.json"), err, sizeof err), MST_OK);
}

/* A file with a second hard link is refused (and not truncated). */
static void test_hard_linked_file_refused(void) {
    char err[512];
    write_text(in_dir("linked.json"), "keep");
    CHECK(link(in_dir("linked.json"), in_dir("other-name.json")) == 0);
    CHECK_EQ_INT(try_open(in_dir("linked.json"), err, sizeof err), MST_ERR_PATH);
    CHECK(strstr(err, "hard link") != NULL);
    CHECK(has_text(in_dir("other-name.json"), "keep"));
}

/* An existing file keeps no permission beyond 0640. */
static void test_existing_file_mode_narrowed(void) {
    char err[512];
    write_text(in_dir("wide.json"), "x");
    CHECK(chmod(in_dir("wide.json"), 0666) == 0);
    CHECK_EQ_INT(try_open(in_dir("wide.json"), err, sizeof err), MST_OK);
    struct stat sb;
    CHECK(stat(in_dir("wide.json"), &sb) == 0);
    CHECK_EQ_INT(sb.st_mode & 07777, 0640);
    write_text(in_dir("narrow.json"), "x");
    CHECK(chmod(in_dir("narrow.json"), 0600) == 0);
    CHECK_EQ_INT(try_open(in_dir("narrow.json"), err, sizeof err), MST_OK);
    CHECK(stat(in_dir("narrow.json"), &sb) == 0);
    CHECK_EQ_INT(sb.st_mode & 07777, 0600); /* never widened */
}

static const mst_test_case TESTS[] = {
    {"symlinked_directory_refused", test_symlinked_directory_refused},
    {"hard_linked_file_refused", test_hard_linked_file_refused},
    {"existing_file_mode_narrowed", test_existing_file_mode_narrowed},
    {"suffix_and_characters", test_suffix_and_characters},
    {"parents_created_and_modes", test_parents_created_and_modes},
    {"relative_path_uses_cwd", test_relative_path_uses_cwd},
    {"existing_own_file_truncated", test_existing_own_file_truncated},
    {"symlink_refused", test_symlink_refused},
    {"non_regular_refused", test_non_regular_refused},
    {"other_owner_refused", test_other_owner_refused},
};

int main(int argc, char **argv) {
    atexit(cleanup);
    return mst_test_run_all(TESTS, sizeof TESTS / sizeof TESTS[0], argc, argv);
}
