/*
 * input_info.c — building and freeing the per-input report (input_info.h).
 */
#include "analyze/input_info.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mst_an_input_cut(mst_an_input_info *info, const char *where) {
    info->truncated = true;
    mst_an_input_warn(info,
                      "the file ends %s (cut while being written, e.g. the forwarder was killed): "
                      "analysed the %llu complete spans before the cut",
                      where, (unsigned long long)info->spans);
}

void mst_an_input_broken(mst_an_input_info *info, const char *why, uint64_t at) {
    info->truncated = true;
    mst_an_input_warn(info, "%s at byte %llu: analysed the %llu spans before it", why,
                      (unsigned long long)at, (unsigned long long)info->spans);
}

bool mst_an_input_info_init(mst_an_input_info *info, const char *kind, const char *name) {
    memset(info, 0, sizeof *info);
    info->kind = kind;
    info->spans_dropped = -1;
    info->spans_failed = -1;
    info->name = strdup(name ? name : "");
    return info->name != NULL;
}

void mst_an_input_warn(mst_an_input_info *info, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (info->n_warnings < MST_AN_MAX_INPUT_WARNINGS) {
        char *w = strdup(line);
        if (w) info->warnings[info->n_warnings++] = w;
        return;
    }
    /* Cap reached: the last slot counts what was left out. */
    static const char more[] = "(further warnings left out)";
    char *last = info->warnings[MST_AN_MAX_INPUT_WARNINGS - 1];
    if (last && strcmp(last, more) != 0) {
        char *w = strdup(more);
        if (w) {
            free(last);
            info->warnings[MST_AN_MAX_INPUT_WARNINGS - 1] = w;
        }
    }
}

void mst_an_input_info_free(mst_an_input_info *info) {
    if (!info) return;
    free(info->name);
    for (size_t i = 0; i < info->n_warnings; i++) free(info->warnings[i]);
    memset(info, 0, sizeof *info);
}
