/*
 * output_file.h — how every report of `mstrace analyze` (-o HTML, --json,
 * --csv DIR) reaches its file, under the forwarder's output path rules
 * (forward/output_path.h): no symbolic link is followed anywhere in the
 * path, missing directories are created 0750 and files 0640 (less the
 * umask: never wider, whatever the umask; a replaced report's narrower
 * mode is kept), an existing name must be a
 * regular file of the current user. A report is written under a temporary
 * name in the same directory and renamed over the final name only once
 * complete and flushed to disk, so a crash or a failed write never leaves
 * half a report under that name (the old file, if any, stays until then).
 * "-" is standard output.
 */
#ifndef MST_ANALYZE_OUTPUT_FILE_H
#define MST_ANALYZE_OUTPUT_FILE_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>

#include "mstrace.h"

typedef struct mst_an_output {
    FILE *f;                   /* write the report here */
    const char *what;          /* the option, for messages */
    int dirfd;                 /* the directory it goes to; -1 for stdout */
    char path[PATH_MAX];       /* the final name, for messages */
    char leaf[NAME_MAX + 1];   /* the final name in dirfd */
    char tmp[NAME_MAX + 1];    /* the temporary name in dirfd */
    int fd;                    /* the temporary file, under f */
    int write_errno;           /* the first failed write's errno (f's own state loses it) */
} mst_an_output;

/* Opens a report for `path` ("-": stdout); `what` names the option in
 * messages ("--json"). On error: the one-line reason in err. */
mst_status mst_an_output_open(mst_an_output *o, const char *path, const char *what, char *err,
                              size_t err_size);

/* The same for the file `name` inside the directory dirfd (from
 * mst_an_output_open_dir), shown as "<dir>/<name>". */
mst_status mst_an_output_open_in(mst_an_output *o, int dirfd, const char *dir, const char *name,
                                 const char *what, char *err, size_t err_size);

/* Opens (creating when missing) the directory `path` for reports, links
 * refused in every component. Returns its fd, or -1 with err set. */
int mst_an_output_open_dir(const char *path, const char *what, char *err, size_t err_size);

/* Finishes the report: flushes, syncs and renames it to its final name.
 * On error (a write failed, disk full) the temporary file is removed, the
 * final name left as it was, and err says why. Always releases o. */
mst_status mst_an_output_commit(mst_an_output *o, char *err, size_t err_size);

/* Gives up on the report: the temporary file is removed. Releases o. */
void mst_an_output_abort(mst_an_output *o);

#endif /* MST_ANALYZE_OUTPUT_FILE_H */
