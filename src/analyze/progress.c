/*
 * progress.c — the progress line of `mstrace analyze` (progress.h).
 */
#include "analyze/progress.h"

bool mst_an_progress_due(double secs, double last_print, bool tty) {
    return secs >= 1.0 && secs - last_print >= (tty ? 0.5 : 5.0);
}

void mst_an_progress_print(FILE *out, const char *name, uint64_t done, uint64_t total, double secs,
                           bool tty) {
    double mib = (double)done / 1048576.0;
    if (total)
        fprintf(out, "%smstrace analyze: reading %s: %.0f / %.0f MiB (%.0f%%), %.1f MiB/s%s",
                tty ? "\r" : "", name, mib, (double)total / 1048576.0, 100.0 * (double)done / (double)total,
                mib / secs, tty ? "" : "\n");
    else
        fprintf(out, "%smstrace analyze: reading %s: %.0f MiB%s", tty ? "\r" : "", name, mib,
                tty ? "" : "\n");
}

void mst_an_progress_print_query(FILE *out, const char *name, uint64_t requests, uint64_t spans,
                                 uint64_t traces, int64_t window_us, bool tty) {
    fprintf(out, "%smstrace analyze: reading %s: %llu requests, %llu spans of %llu traces, window at %lld us%s",
            tty ? "\r" : "", name, (unsigned long long)requests, (unsigned long long)spans,
            (unsigned long long)traces, (long long)window_us, tty ? "" : "\n");
}
