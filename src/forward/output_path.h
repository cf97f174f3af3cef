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

/* The absolute, lexically normalised form of `path` (PATH_MAX bytes in
 * abs; '~/' expanded), after the syntax rule (a .json or .pftrace name).
 * The other rules are checked when the file is opened. */
mst_status mst_output_path_absolute(const char *path, char *abs, char *err, size_t err_size);

#endif /* MST_FORWARD_OUTPUT_PATH_H */
