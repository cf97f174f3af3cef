/*
 * flight_trigger.c — parsing and evaluating the flight recorder's triggers
 * (flight_trigger.h). The parsers read outside input (command-line flags):
 * every byte is checked, nothing is read past `len`, and the first problem
 * is named in one line.
 *
 * Percentiles: one log-linear histogram per metric and minute (8 buckets
 * per power of two, so a bucket is at most 12.5 % wide), kept for the
 * longest window asked for. The estimate is the upper edge of the bucket
 * that holds the q-th percentile, so a request fires only when it is
 * clearly above it.
 */
#include "forward/flight_trigger.h"

#include "core/err_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUB_BITS 3
#define N_BUCKETS (64 << SUB_BITS)
#define DEFAULT_WINDOW_MIN 5

/* A parse error: the message, then MST_ERR_PARSE. */
#define perr(err, err_size, ...) mst_err_fail(err, err_size, MST_ERR_PARSE, __VA_ARGS__)

static const char *const METRIC_NAMES[MST_FLIGHT_METRICS] = {"e2e", "ttft", "tpot", "queue"};

const char *mst_flight_metric_name(mst_flight_metric m) {
    return (unsigned)m < MST_FLIGHT_METRICS ? METRIC_NAMES[m] : "?";
}

/* Digits with an optional fraction at the start of [p, p + len): the value
 * times `scale` as an exact integer. Returns the bytes read, 0 when no
 * number, -1 when it does not fit 64 bits, -2 when it is not a whole
 * number of the base unit (1.5ns, 1.1KiB). */
static long read_scaled(const char *p, size_t len, uint64_t scale, uint64_t *out) {
    size_t i = 0;
    uint64_t whole = 0;
    while (i < len && p[i] >= '0' && p[i] <= '9') {
        unsigned d = (unsigned)(p[i] - '0');
        if (whole > (UINT64_MAX - d) / 10) return -1;
        whole = whole * 10 + d;
        i++;
    }
    if (i == 0) return 0;
    if (scale && whole > UINT64_MAX / scale) return -1;
    unsigned __int128 frac = 0, den = 1;
    if (i < len && p[i] == '.') {
        size_t f = ++i;
        while (i < len && p[i] >= '0' && p[i] <= '9') {
            if (i - f < 19) { /* later digits must be zeros to be whole anyway */
                frac = frac * 10 + (unsigned)(p[i] - '0');
                den *= 10;
            } else if (p[i] != '0') {
                return -2;
            }
            i++;
        }
        if (i == f) return 0; /* "1." */
    }
    unsigned __int128 part = frac * scale;
    if (part % den) return -2;
    unsigned __int128 v = (unsigned __int128)whole * scale + part / den;
    if (v > UINT64_MAX) return -1;
    *out = (uint64_t)v;
    return (long)i;
}

typedef struct unit_def {
    const char *name;
    uint64_t scale;
} unit_def;

/* Matches the whole rest [p, p + n) against the units; 0 when none. */
static uint64_t unit_scale(const unit_def *units, const char *p, size_t n) {
    for (const unit_def *u = units; u->name; u++)
        if (strlen(u->name) == n && memcmp(u->name, p, n) == 0) return u->scale;
    return 0;
}

static const unit_def TIME_UNITS[] = {{"ns", 1},
                                      {"us", 1000},
                                      {"ms", 1000000},
                                      {"s", 1000000000ull},
                                      {"m", 60ull * 1000000000ull},
                                      {"min", 60ull * 1000000000ull},
                                      {"h", 3600ull * 1000000000ull},
                                      {NULL, 0}};

static const unit_def SIZE_UNITS[] = {{"B", 1},
                                      {"K", 1ull << 10}, {"KiB", 1ull << 10}, {"KB", 1000},
                                      {"M", 1ull << 20}, {"MiB", 1ull << 20}, {"MB", 1000000},
                                      {"G", 1ull << 30}, {"GiB", 1ull << 30}, {"GB", 1000000000},
                                      {"T", 1ull << 40}, {"TiB", 1ull << 40},
                                      {"TB", 1000000000000ull},
                                      {NULL, 0}};

/* NUMBER UNIT, all of [text, text + len). */
static mst_status parse_quantity(const char *text, size_t len, const unit_def *units,
                                 const char *what, const char *unit_list, uint64_t *out,
                                 char *err, size_t err_size) {
    size_t u = 0;
    while (u < len && ((text[u] >= '0' && text[u] <= '9') || text[u] == '.')) u++;
    if (u == 0) return perr(err, err_size, "a %s must start with a number: '%.*s'", what,
                            (int)(len > 40 ? 40 : len), text);
    if (u == len) return perr(err, err_size, "a %s needs a unit (%s): '%.*s'", what, unit_list,
                              (int)(len > 40 ? 40 : len), text);
    uint64_t scale = unit_scale(units, text + u, len - u);
    if (!scale) return perr(err, err_size, "unknown unit '%.*s' in a %s (use %s)",
                            (int)(len - u > 16 ? 16 : len - u), text + u, what, unit_list);
    uint64_t v = 0;
    long got = read_scaled(text, u, scale, &v);
    if (got == -1) return perr(err, err_size, "%s out of range: '%.*s'", what,
                               (int)(len > 40 ? 40 : len), text);
    if (got == -2) return perr(err, err_size, "a %s must be a whole number of %s: '%.*s'", what,
                               units[0].name, (int)(len > 40 ? 40 : len), text);
    if (got == 0 || (size_t)got != u)
        return perr(err, err_size, "malformed number in a %s: '%.*s'", what, (int)u, text);
    if (v == 0) return perr(err, err_size, "a %s must be more than 0: '%.*s'", what,
                            (int)(len > 40 ? 40 : len), text);
    *out = v;
    return MST_OK;
}

mst_status mst_flight_parse_duration(const char *text, size_t len, int64_t *ns, char *err,
                                     size_t err_size) {
    uint64_t v = 0;
    mst_status st = parse_quantity(text, len, TIME_UNITS, "duration", "ns, us, ms, s, m, h", &v,
                                   err, err_size);
    if (st != MST_OK) return st;
    if (v > (uint64_t)INT64_MAX) return perr(err, err_size, "duration out of range");
    *ns = (int64_t)v;
    return MST_OK;
}

mst_status mst_flight_parse_size(const char *text, size_t len, uint64_t *bytes, char *err,
                                 size_t err_size) {
    return parse_quantity(text, len, SIZE_UNITS, "size", "B, KiB, MiB, GiB, TiB, KB, MB, GB, TB",
                          bytes, err, err_size);
}

/* A duration's units end in s/m/h or are "min"; a size's in B or K/M/G/T. */
static bool looks_like_duration(const char *p, size_t n) {
    if (!n) return false;
    char c = p[n - 1];
    return c == 's' || c == 'm' || c == 'h' || (n >= 3 && memcmp(p + n - 3, "min", 3) == 0);
}

mst_status mst_flight_parse_capacity(const char *text, uint64_t *bytes, int64_t *duration_ns,
                                     char *err, size_t err_size) {
    *bytes = 0;
    *duration_ns = 0;
    if (!text || !*text)
        return perr(err, err_size, "expected SIZE, DURATION or SIZE,DURATION (e.g. 256MiB, 120s)");
    const char *p = text;
    for (int part = 0;; part++) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (part == 2) return perr(err, err_size, "expected at most one size and one duration");
        if (looks_like_duration(p, n)) {
            if (*duration_ns) return perr(err, err_size, "two durations given");
            mst_status st = mst_flight_parse_duration(p, n, duration_ns, err, err_size);
            if (st != MST_OK) return st;
        } else {
            if (*bytes) return perr(err, err_size, "two sizes given");
            mst_status st = mst_flight_parse_size(p, n, bytes, err, err_size);
            if (st != MST_OK) return st;
        }
        if (!comma) break;
        p = comma + 1;
    }
    return MST_OK;
}

mst_status mst_flight_parse_trigger(const char *text, mst_flight_trigger *out, char *err,
                                    size_t err_size) {
    if (!text || !out) return perr(err, err_size, "empty trigger");
    memset(out, 0, sizeof *out);
    size_t len = strlen(text);
    if (len == 0) return perr(err, err_size, "empty trigger (expected e.g. e2e>2s, ttft>p99, error)");
    if (len >= sizeof out->text)
        return perr(err, err_size, "trigger longer than %zu characters", sizeof out->text - 1);
    memcpy(out->text, text, len + 1);
    if (strcmp(text, "error") == 0) {
        out->kind = MST_FLIGHT_ON_ERROR;
        return MST_OK;
    }
    const char *gt = memchr(text, '>', len);
    if (!gt) return perr(err, err_size, "trigger '%s': expected METRIC>THRESHOLD or 'error' "
                                        "(e.g. e2e>2s, ttft>p99)", text);
    size_t mlen = (size_t)(gt - text);
    while (mlen && text[mlen - 1] == ' ') mlen--;
    int metric = -1;
    for (int m = 0; m < MST_FLIGHT_METRICS; m++)
        if (strlen(METRIC_NAMES[m]) == mlen && memcmp(METRIC_NAMES[m], text, mlen) == 0) metric = m;
    if (metric < 0)
        return perr(err, err_size, "trigger '%s': unknown metric '%.*s' (use e2e, ttft, tpot, queue)",
                    text, (int)mlen, text);
    out->metric = (mst_flight_metric)metric;
    const char *t = gt + 1;
    while (*t == ' ') t++;
    size_t tlen = strlen(t);
    if (tlen == 0) return perr(err, err_size, "trigger '%s': missing threshold after '>'", text);
    if (t[0] == 'p') {
        const char *at = memchr(t, '@', tlen);
        size_t qlen = at ? (size_t)(at - t) - 1 : tlen - 1;
        uint64_t q1000 = 0;
        long got = read_scaled(t + 1, qlen, 1000, &q1000);
        if (got <= 0 || (size_t)got != qlen || q1000 == 0 || q1000 >= 100000)
            return perr(err, err_size, "trigger '%s': a percentile is p followed by a number "
                                       "above 0 and below 100 with at most 3 decimals (p99, p99.9)",
                        text);
        out->kind = MST_FLIGHT_ABOVE_PCT;
        out->percentile = (double)q1000 / 1000.0;
        out->window_min = DEFAULT_WINDOW_MIN;
        if (at) {
            int64_t w = 0;
            char e2[160];
            if (mst_flight_parse_duration(at + 1, strlen(at + 1), &w, e2, sizeof e2) != MST_OK)
                return perr(err, err_size, "trigger '%s': window: %s", text, e2);
            const int64_t minute = 60ll * 1000000000ll;
            if (w % minute || w / minute < 1 || w / minute > MST_FLIGHT_PCT_MAX_MINUTES)
                return perr(err, err_size, "trigger '%s': the window must be whole minutes, 1m to "
                                           "%dm", text, MST_FLIGHT_PCT_MAX_MINUTES);
            out->window_min = (uint32_t)(w / minute);
        }
        return MST_OK;
    }
    char e2[160];
    if (mst_flight_parse_duration(t, tlen, &out->threshold_ns, e2, sizeof e2) != MST_OK)
        return perr(err, err_size, "trigger '%s': %s", text, e2);
    out->kind = MST_FLIGHT_ABOVE;
    return MST_OK;
}

/* ---- evaluation ---- */

typedef struct minute_hist {
    uint64_t minute;        /* forwarder minute it counts; 0 = unused */
    uint32_t count;
    uint32_t b[N_BUCKETS];
} minute_hist;

struct mst_flight_rules {
    mst_flight_trigger t[MST_FLIGHT_MAX_TRIGGERS];
    size_t n;
    bool on_error;
    minute_hist *hist[MST_FLIGHT_METRICS]; /* MST_FLIGHT_PCT_MAX_MINUTES each; NULL if unused */
};

static unsigned bucket_of(int64_t v) {
    uint64_t x = v < 1 ? 1 : (uint64_t)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(x);
    unsigned sub = e >= SUB_BITS ? (unsigned)(x >> (e - SUB_BITS)) & ((1u << SUB_BITS) - 1)
                                 : (unsigned)(x << (SUB_BITS - e)) & ((1u << SUB_BITS) - 1);
    return (e << SUB_BITS) | sub;
}

/* The exclusive upper edge of a bucket (ns). */
static int64_t bucket_top(unsigned b) {
    unsigned e = b >> SUB_BITS, sub = b & ((1u << SUB_BITS) - 1);
    double top = ldexp(1.0 + (double)(sub + 1) / (1 << SUB_BITS), (int)e);
    return top >= 9.2e18 ? INT64_MAX : (int64_t)top;
}

mst_flight_rules *mst_flight_rules_new(const mst_flight_trigger *triggers, size_t n) {
    if (n > MST_FLIGHT_MAX_TRIGGERS) return NULL;
    mst_flight_rules *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->n = n;
    for (size_t i = 0; i < n; i++) {
        r->t[i] = triggers[i];
        if (triggers[i].kind == MST_FLIGHT_ON_ERROR) r->on_error = true;
        mst_flight_metric m = triggers[i].metric;
        if (triggers[i].kind == MST_FLIGHT_ABOVE_PCT && !r->hist[m] &&
            !(r->hist[m] = calloc(MST_FLIGHT_PCT_MAX_MINUTES, sizeof(minute_hist)))) {
            mst_flight_rules_free(r);
            return NULL;
        }
    }
    return r;
}

void mst_flight_rules_free(mst_flight_rules *r) {
    if (!r) return;
    for (int m = 0; m < MST_FLIGHT_METRICS; m++) free(r->hist[m]);
    free(r);
}

bool mst_flight_rules_on_error(const mst_flight_rules *r) { return r && r->on_error; }

int64_t mst_flight_rules_percentile(const mst_flight_rules *r, mst_flight_metric m, double q,
                                    uint32_t window_min, uint64_t now_ms) {
    if (!r || (unsigned)m >= MST_FLIGHT_METRICS || !r->hist[m]) return -1;
    uint64_t minute = now_ms / 60000 + 1;
    uint64_t total = 0;
    uint64_t sum[N_BUCKETS] = {0}; /* 4 KiB of stack, once per request checked */
    for (unsigned k = 0; k < MST_FLIGHT_PCT_MAX_MINUTES; k++) {
        const minute_hist *h = &r->hist[m][k];
        if (!h->minute || h->minute + window_min <= minute || h->minute > minute) continue;
        total += h->count;
        for (unsigned b = 0; b < N_BUCKETS; b++) sum[b] += h->b[b];
    }
    if (total < MST_FLIGHT_PCT_MIN_SAMPLES) return -1;
    /* The smallest bucket with at least q % of the samples at or below it. */
    double need = q / 100.0 * (double)total;
    uint64_t seen = 0;
    for (unsigned b = 0; b < N_BUCKETS; b++) {
        seen += sum[b];
        if ((double)seen >= need) return bucket_top(b);
    }
    return INT64_MAX;
}

static void record(mst_flight_rules *r, const mst_flight_metrics *m, uint64_t now_ms) {
    uint64_t minute = now_ms / 60000 + 1;
    for (int k = 0; k < MST_FLIGHT_METRICS; k++) {
        if (!r->hist[k] || m->v[k] < 0) continue;
        minute_hist *h = &r->hist[k][minute % MST_FLIGHT_PCT_MAX_MINUTES];
        if (h->minute != minute) {
            memset(h, 0, sizeof *h);
            h->minute = minute;
        }
        h->count++;
        h->b[bucket_of(m->v[k])]++;
    }
}

/* ns as a short human text: 2.31s, 850ms, 12.5us. */
static void fmt_ns(char *buf, size_t size, int64_t ns) {
    if (ns >= 1000000000) snprintf(buf, size, "%.3gs", (double)ns / 1e9);
    else if (ns >= 1000000) snprintf(buf, size, "%.3gms", (double)ns / 1e6);
    else if (ns >= 1000) snprintf(buf, size, "%.3gus", (double)ns / 1e3);
    else snprintf(buf, size, "%lldns", (long long)ns);
}

int mst_flight_rules_check(mst_flight_rules *r, const mst_flight_metrics *m, bool had_error,
                           uint64_t now_ms, char *reason, size_t reason_size) {
    int fired = -1;
    for (size_t i = 0; r && i < r->n && fired < 0; i++) {
        const mst_flight_trigger *t = &r->t[i];
        char a[32], b[32];
        if (t->kind == MST_FLIGHT_ON_ERROR) {
            if (had_error) {
                snprintf(reason, reason_size, "error");
                fired = (int)i;
            }
            continue;
        }
        int64_t v = m->v[t->metric];
        if (v < 0) continue;
        int64_t limit = t->kind == MST_FLIGHT_ABOVE
                            ? t->threshold_ns
                            : mst_flight_rules_percentile(r, t->metric, t->percentile,
                                                          t->window_min, now_ms);
        if (limit < 0 || v <= limit) continue;
        fmt_ns(a, sizeof a, v);
        fmt_ns(b, sizeof b, limit);
        if (t->kind == MST_FLIGHT_ABOVE)
            snprintf(reason, reason_size, "%s=%s>%s", METRIC_NAMES[t->metric], a, b);
        else
            snprintf(reason, reason_size, "%s=%s>p%g(%s over %um)", METRIC_NAMES[t->metric], a,
                     t->percentile, b, t->window_min);
        fired = (int)i;
    }
    if (r) record(r, m, now_ms);
    return fired;
}
