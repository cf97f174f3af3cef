/*
 * progress.h — the progress line `mstrace analyze` prints on stderr while it
 * reads a large input (docs/analyze.md "Inputs"): when a line is due
 * and what it says. Pure functions of their arguments (the caller reads the
 * clock), so the rule and the text are unit-tested without waiting.
 */
#ifndef MST_ANALYZE_PROGRESS_H
#define MST_ANALYZE_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Whether a line is due `secs` after the input began, the last one printed
 * at `last_print` (0: none yet): only for inputs that take more than a
 * second, then every 0.5 s on a terminal (`tty`, the line updates in
 * place) and every 5 s into a log. */
bool mst_an_progress_due(double secs, double last_print, bool tty);

/* Prints the line for `done` of `total` bytes (total 0: unknown, e.g. a
 * pipe or a Jaeger query) of the input `name` read in `secs`:
 *   mstrace analyze: reading NAME: 12 / 40 MiB (30%), 11.8 MiB/s
 *   mstrace analyze: reading NAME: 12 MiB
 * On a terminal it starts with '\r' and ends without a newline (the next
 * line overwrites it; the caller ends the last one); into a log it ends
 * with '\n'. */
void mst_an_progress_print(FILE *out, const char *name, uint64_t done, uint64_t total, double secs,
                           bool tty);

/* The line for a query read page by page (Jaeger), where bytes say little
 * about how far it got: requests, spans and traces so far, and the start
 * of the window being read (Unix microseconds; everything before it is
 * read):
 *   mstrace analyze: reading NAME: 1200 requests, 3456 spans of 789 traces, window at 1764525600000000 us
 * Terminal and log as mst_an_progress_print. */
void mst_an_progress_print_query(FILE *out, const char *name, uint64_t requests, uint64_t spans,
                                 uint64_t traces, int64_t window_us, bool tty);

#endif /* MST_ANALYZE_PROGRESS_H */
