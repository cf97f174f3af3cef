/*
 * output_path.h — the --perfetto-output path rules (docs/forwarder.md "Output path rules"): ends in .json
 * (any case); no shell-special characters; parent directory created with
 * mode 0750; refuse a symlink, anything but a regular file, and an existing
 * file owned by another user. The file itself is opened with O_NOFOLLOW,
 * O_CREAT mode 0640, so the check and the open cannot be raced into
 * following a link.
 */
#ifndef MST_FORWARD_OUTPUT_PATH_H
#define MST_FORWARD_OUTPUT_PATH_H

#include <stddef.h>
#include "mstrace.h"

/* Validates `path`, creates the parent directory, opens (truncating) and
 * returns the fd in *fd_out. On error: MST_ERR_PATH / MST_ERR_PERMISSION /
 * MST_ERR_IO and a message naming the rule in err. */
mst_status mst_output_path_open(const char *path, int *fd_out, char *err, size_t err_size);

/* ---- the parts any output of mstrace follows (also `mstrace analyze`'s
 * reports, analyze/output_file.h). `what` names the output in messages
 * ("--perfetto-output", "--json", ...). */

/* Rules 1-2 without the extension: `path` ("~/" expanded) made absolute
 * and normalised lexically into abs (PATH_MAX bytes). */
mst_status mst_output_abs_path(const char *path, const char *what, char *abs, char *err,
                               size_t err_size);

/* Rule 4: walks the parent directories of abs (absolute, normalised) from
 * "/" without following a link, creating missing ones (0750 less the
 * umask). Returns an fd of the parent directory (or -1 with *st and err
 * set) and the last component in *leaf (pointing into abs). */
int mst_output_open_parent(const char *abs, const char *what, const char **leaf, mst_status *st,
                           char *err, size_t err_size);

/* Rule 5 for the name `leaf` in dirfd: absent is fine, else it must be a
 * regular file (not a link) of the current user with no other hard link.
 * `abs` is the full path, for messages. */
mst_status mst_output_check_leaf(int dirfd, const char *leaf, const char *abs, const char *what,
                                 char *err, size_t err_size);

/* A directory `path` itself opened (O_DIRECTORY) with rule 4 applied to
 * every component, the last included: created (0750 less the umask) when
 * missing, refused when a link. Returns the fd, or -1 with *st and err set. */
int mst_output_open_dir(const char *path, const char *what, mst_status *st, char *err,
                        size_t err_size);

/* The absolute, lexically normalised form of `path` (PATH_MAX bytes in
 * abs; '~/' expanded), after the syntax rule (a .json or .pftrace name).
 * The other rules are checked when the file is opened. */
mst_status mst_output_path_absolute(const char *path, char *abs, char *err, size_t err_size);

#endif /* MST_FORWARD_OUTPUT_PATH_H */
