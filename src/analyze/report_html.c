/*
 * report_html.c — writes the HTML report: a fixed page shell, the embedded
 * stylesheet and script (report_assets.h), and the analysis JSON escaped for a
 * <script type="application/json"> element. The page carries a
 * Content-Security-Policy that forbids every fetch, so "opens offline" is
 * enforced by the browser, not only promised.
 */
#include "analyze/report_html.h"

#include <string.h>

#include "analyze/report_assets.h"
#include "core/err_text.h"
#include "wire/json_reader.h"

static const char PAGE_HEAD[] =
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    /* Nothing may be fetched: inline style and script only, images from data: */
    "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
    "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n"
    "<meta name=\"generator\" content=\"mstrace analyze\">\n"
    "<title>mstrace analyze report</title>\n<style>\n";
static const char PAGE_MID[] =
    "</style>\n</head>\n<body>\n"
    "<noscript><p>This report draws its tables and charts with JavaScript; enable it to read the report. "
    "The analysis itself is the JSON in this file's source.</p></noscript>\n"
    "<script type=\"application/json\" id=\"mst-data\">";
static const char PAGE_SCRIPT[] = "</script>\n<script>\n";
static const char PAGE_TAIL[] = "</script>\n</body>\n</html>\n";

/* The JSON with every byte that could end the element or confuse an HTML or
 * JavaScript parser replaced by its \u escape. Valid JSON has "<", ">" and
 * "&" only inside strings, where the escape means the same character. */
static bool write_escaped_json(FILE *out, const char *s, size_t len) {
    size_t run = 0; /* start of the bytes not yet written */
    for (size_t i = 0; i < len; i++) {
        const unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        size_t skip = 1;
        if (c == '<') esc = "\\u003c";
        else if (c == '>') esc = "\\u003e";
        else if (c == '&') esc = "\\u0026";
        else if (c == 0xE2 && i + 2 < len && (unsigned char)s[i + 1] == 0x80 &&
                 ((unsigned char)s[i + 2] == 0xA8 || (unsigned char)s[i + 2] == 0xA9)) {
            esc = (unsigned char)s[i + 2] == 0xA8 ? "\\u2028" : "\\u2029";
            skip = 3;
        }
        if (!esc) continue;
        if (i > run && fwrite(s + run, 1, i - run, out) != i - run) return false;
        if (fputs(esc, out) == EOF) return false;
        i += skip - 1;
        run = i + 1;
    }
    return len <= run || fwrite(s + run, 1, len - run, out) == len - run;
}

mst_status mst_report_html_write(FILE *out, const char *analysis_json, size_t len, char *err,
                                 size_t err_size) {
    if (!out || (!analysis_json && len)) {
        mst_err_set(err, err_size, "report: no output or no analysis");
        return MST_ERR_INVALID_ARG;
    }
    const char *why = NULL;
    size_t off = 0;
    if (!mst_json_validate(analysis_json, len, 64, &why, &off)) {
        char msg[160];
        snprintf(msg, sizeof msg, "report: the analysis is not valid JSON (%s at byte %zu)",
                 why ? why : "empty", off);
        mst_err_set(err, err_size, "%s", msg);
        return MST_ERR_PARSE;
    }
    bool ok = fputs(PAGE_HEAD, out) != EOF &&
              fwrite(mst_report_css, 1, mst_report_css_len, out) == mst_report_css_len &&
              fputs(PAGE_MID, out) != EOF && write_escaped_json(out, analysis_json, len) &&
              fputs(PAGE_SCRIPT, out) != EOF &&
              fwrite(mst_report_js, 1, mst_report_js_len, out) == mst_report_js_len &&
              fputs(PAGE_TAIL, out) != EOF;
    if (!ok || ferror(out)) {
        mst_err_set(err, err_size, "report: writing the HTML failed");
        return MST_ERR_IO;
    }
    return MST_OK;
}
