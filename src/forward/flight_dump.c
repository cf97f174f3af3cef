/*
 * flight_dump.c — selecting and writing one flight-recorder dump, and the
 * dump directory's disk budget (flight_dump.h).
 */
#include "forward/flight_dump.h"

#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/arena.h"
#include "forward/output_path.h"
#include "forward/writer_sinks.h"
#include "wire/buf.h"

#define MARK_SELECTED 1u
#define TMP_TAG ".tmp-"

struct mst_flight_dumper {
    char dir[PATH_MAX];
    char stem[PATH_MAX];   /* NAME */
    char ext[16];          /* ".pftrace" / ".json" as given */
    mst_perfetto_format format;
    uint64_t disk_budget;
    uint64_t seq;
    const mst_output_sink *export_to;
};

void mst_flight_dumper_set_export(mst_flight_dumper *d, const mst_output_sink *to) {
    if (d) d->export_to = to;
}

static mst_status fail(char *err, size_t err_size, mst_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static mst_status fail(char *err, size_t err_size, mst_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
    return st;
}

/* A leftover temporary file of this template whose writer is gone. */
static bool stale_temp(const mst_flight_dumper *d, const char *name) {
    size_t sl = strlen(d->stem);
    if (name[0] != '.' || strncmp(name + 1, d->stem, sl) != 0 ||
        strncmp(name + 1 + sl, TMP_TAG, strlen(TMP_TAG)) != 0)
        return false;
    long pid = strtol(name + 1 + sl + strlen(TMP_TAG), NULL, 10);
    return pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH) || pid == (long)getpid();
}

static void remove_stale_temps(const mst_flight_dumper *d) {
    DIR *dir = opendir(d->dir);
    if (!dir) return;
    for (struct dirent *e; (e = readdir(dir));)
        if (stale_temp(d, e->d_name)) {
            char p[PATH_MAX * 2];
            snprintf(p, sizeof p, "%.3800s/%.255s", d->dir, e->d_name);
            unlink(p);
        }
    closedir(dir);
}

static void temp_path(const mst_flight_dumper *d, uint64_t n, char *out, size_t size) {
    snprintf(out, size, "%.3000s/.%.900s" TMP_TAG "%ld-%llu%s", d->dir, d->stem, (long)getpid(),
             (unsigned long long)n, d->ext);
}

mst_status mst_flight_dumper_new(const char *template_path, mst_perfetto_format format,
                                 uint64_t disk_budget, mst_flight_dumper **out, char *err,
                                 size_t err_size) {
    char abs[PATH_MAX];
    mst_status st = mst_output_path_absolute(template_path, abs, err, err_size);
    if (st != MST_OK) return st;
    mst_flight_dumper *d = calloc(1, sizeof *d);
    if (!d) return MST_ERR_NOMEM;
    char *slash = strrchr(abs, '/');
    char *dot = strrchr(slash, '.');
    size_t dir_len = (size_t)(slash - abs);
    memcpy(d->dir, abs, dir_len ? dir_len : 1);
    snprintf(d->ext, sizeof d->ext, "%s", dot);
    snprintf(d->stem, sizeof d->stem, "%.*s", (int)(dot - slash - 1), slash + 1);
    d->format = format == MST_PERFETTO_FORMAT_AUTO ? mst_perfetto_format_for_path(abs) : format;
    d->disk_budget = disk_budget;
    /* Every path rule (and the directory's creation) checked now, on the
     * temporary name the dumps use. */
    char tmp[PATH_MAX * 2];
    temp_path(d, 0, tmp, sizeof tmp);
    int fd = -1;
    st = mst_output_path_open(tmp, &fd, err, err_size);
    if (st != MST_OK) {
        free(d);
        return st;
    }
    close(fd);
    unlink(tmp);
    remove_stale_temps(d);
    *out = d;
    return MST_OK;
}

void mst_flight_dumper_free(mst_flight_dumper *d) { free(d); }

/* ---- selection ---- */

typedef struct trace_set {
    uint8_t (*keys)[16];
    uint8_t *used;
    size_t mask;
} trace_set;

static bool set_init(trace_set *s, size_t want) {
    size_t n = 64;
    while (n < want * 2) n <<= 1;
    s->keys = calloc(n, 16);
    s->used = calloc(n, 1);
    s->mask = n - 1;
    return s->keys && s->used;
}

static void set_free(trace_set *s) {
    free(s->keys);
    free(s->used);
}

static size_t set_slot(const trace_set *s, const uint8_t k[16]) {
    uint64_t h;
    memcpy(&h, k + 8, 8);
    h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull;
    size_t j = (h ^ (h >> 32)) & s->mask;
    while (s->used[j] && memcmp(s->keys[j], k, 16) != 0) j = (j + 1) & s->mask;
    return j;
}

static void set_add(trace_set *s, const uint8_t k[16]) {
    size_t j = set_slot(s, k);
    if (!s->used[j]) {
        s->used[j] = 1;
        memcpy(s->keys[j], k, 16);
    }
}

static bool set_has(const trace_set *s, const uint8_t k[16]) { return s->used[set_slot(s, k)]; }

/* The request ids as the JSON string texts spans carry them in. */
typedef struct needles {
    mst_buf text[MST_FLIGHT_DUMP_MAX_IDS];
    size_t n;
} needles;

static bool names_request(const mst_flight_rec *rec, const needles *nd) {
    for (size_t i = 0; i < nd->n; i++) {
        const char *t = (const char *)nd->text[i].data;
        size_t n = nd->text[i].len;
        if (rec->rid_len == n && memcmp(mst_flight_rec_text(rec, rec->rid_off), t, n) == 0)
            return true;
        if (rec->ids_len >= n && memmem(mst_flight_rec_text(rec, rec->ids_off), rec->ids_len, t, n))
            return true;
    }
    return false;
}

/* Marks the plan's records; returns the number of spans and the window. */
static size_t select_records(mst_flight_ring *ring, const mst_flight_dump_plan *plan,
                             int64_t *lo, int64_t *hi) {
    needles nd;
    nd.n = plan->n_ids;
    for (size_t i = 0; i < nd.n; i++) {
        mst_buf_init(&nd.text[i], 0);
        mst_buf_append_json_str(&nd.text[i], plan->ids[i], strnlen(plan->ids[i], MST_FLIGHT_ID_MAX));
    }
    size_t marked = 0;
    *lo = INT64_MAX;
    *hi = INT64_MIN;
    for (mst_flight_rec *r = mst_flight_ring_first(ring); r; r = mst_flight_ring_next(ring, r)) {
        r->mark = 0;
        if (r->type != MST_FLIGHT_REC_SPAN) continue;
        bool seed = plan->whole_ring || names_request(r, &nd);
        for (size_t t = 0; !seed && t < plan->n_traces; t++)
            seed = memcmp(r->trace_id, plan->traces[t], 16) == 0;
        if (seed) {
            r->mark = MARK_SELECTED;
            marked++;
        }
    }
    for (size_t i = 0; i < nd.n; i++) mst_buf_free(&nd.text[i]);
    /* Their traces: a step's child spans, the request's own trace. */
    trace_set ts = {0};
    if (!plan->whole_ring && marked && set_init(&ts, marked)) {
        for (mst_flight_rec *r = mst_flight_ring_first(ring); r; r = mst_flight_ring_next(ring, r))
            if (r->mark) set_add(&ts, r->trace_id);
        for (mst_flight_rec *r = mst_flight_ring_first(ring); r; r = mst_flight_ring_next(ring, r))
            if (r->type == MST_FLIGHT_REC_SPAN && !r->mark && set_has(&ts, r->trace_id)) {
                r->mark = MARK_SELECTED;
                marked++;
            }
    }
    set_free(&ts);
    for (mst_flight_rec *r = mst_flight_ring_first(ring); r; r = mst_flight_ring_next(ring, r))
        if (r->mark) {
            if (r->start_ns < *lo) *lo = r->start_ns;
            if (r->end_ns > *hi) *hi = r->end_ns;
        }
    if (marked && plan->margin_ns > 0 && !plan->whole_ring) {
        int64_t a = *lo - plan->margin_ns, b = *hi + plan->margin_ns;
        for (mst_flight_rec *r = mst_flight_ring_first(ring); r; r = mst_flight_ring_next(ring, r))
            if (r->type == MST_FLIGHT_REC_SPAN && !r->mark && r->end_ns >= a && r->start_ns <= b) {
                r->mark = MARK_SELECTED;
                marked++;
            }
        *lo = a;
        *hi = b;
    }
    return marked;
}

/* ---- writing ---- */

/* The span that says why this dump exists, on the forwarder's process. */
static mst_status add_trigger_span(const mst_output_sink *o, const mst_flight_dump_plan *plan,
                                   int64_t lo, int64_t hi, uint64_t n) {
    mst_buf reason, ids;
    mst_buf_init(&reason, 0);
    mst_buf_init(&ids, 0);
    mst_buf_append_json_str(&reason, plan->reason, strlen(plan->reason));
    mst_buf_append_byte(&ids, '[');
    for (size_t i = 0; i < plan->n_ids; i++) {
        if (i) mst_buf_append_byte(&ids, ',');
        mst_buf_append_json_str(&ids, plan->ids[i], strnlen(plan->ids[i], MST_FLIGHT_ID_MAX));
    }
    mst_buf_append_byte(&ids, ']');
    static const char on_demand[] = "true", not_demand[] = "false";
    mst_pf_kv attrs[3] = {
        {{"flight.trigger", 14}, {(const char *)reason.data, reason.len}},
        {{"flight.request_ids", 18}, {(const char *)ids.data, ids.len}},
        {{"flight.on_demand", 16},
         {plan->whole_ring ? on_demand : not_demand, plan->whole_ring ? 4 : 5}},
    };
    mst_pf_span s;
    mst_pf_span_defaults(&s);
    s.name = (mst_str){"mstrace.flight_recorder.trigger", 31};
    s.category = (mst_str){"mstrace", 7};
    uint64_t t = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull ^ (uint64_t)hi ^ n;
    snprintf(s.trace_id, sizeof s.trace_id, "%016llx%016llx", (unsigned long long)(t | 1),
             (unsigned long long)n + 1);
    snprintf(s.span_id, sizeof s.span_id, "%016llx", (unsigned long long)(t | 1));
    s.start_ns = lo;
    s.end_ns = hi;
    s.kind = 1;
    s.has_pid = true;
    s.pid = (int64_t)getpid();
    s.attrs = attrs;
    s.n_attrs = 3;
    mst_status st = reason.failed || ids.failed ? MST_ERR_NOMEM : o->ops->add_span(o->self, &s);
    mst_buf_free(&reason);
    mst_buf_free(&ids);
    return st;
}

/* Counter samples of the spans left out of the dump, derived again by a
 * scratch timeline (the spans in it give theirs through the dump's own). */
static void counter_to_output(void *self, const mst_tl_counter *c) {
    const mst_output_sink *o = self;
    o->ops->add_counter(o->self, c);
}

/* Writes the marked records (ring order) and the extras into `o`. */
static mst_status write_records(const mst_output_sink *o, const mst_output_sink *export_to,
                                mst_flight_ring *ring, const mst_flight_dump_plan *plan,
                                int64_t lo, int64_t hi, const mst_tl_counter *own, size_t n_own,
                                uint64_t n, mst_flight_dump_result *res) {
    mst_arena arena;
    mst_arena_init(&arena);
    mst_timeline *scratch = mst_timeline_new(2);
    mst_tl_sink sink = {(void *)o, NULL, counter_to_output};
    mst_status st = scratch ? add_trigger_span(o, plan, lo, hi, n) : MST_ERR_NOMEM;
    for (mst_flight_rec *r = mst_flight_ring_first(ring); r && st == MST_OK;
         r = mst_flight_ring_next(ring, r)) {
        if (r->type == MST_FLIGHT_REC_COUNTER) { /* the forwarder's own */
            if (r->start_ns < lo || r->start_ns > hi) continue;
            mst_tl_counter c;
            mst_flight_ring_counter(r, &c);
            o->ops->add_counter(o->self, &c);
            res->counters++;
            continue;
        }
        if (!r->mark && (r->end_ns < lo || r->end_ns > hi)) continue;
        mst_pf_span s;
        if (!mst_flight_ring_span(ring, r, &arena, &s)) {
            st = MST_ERR_NOMEM;
        } else if (r->mark) {
            st = o->ops->add_span(o->self, &s);
            if (st == MST_OK) res->spans++;
            /* A collector gets each span once (its failures are its own). */
            if (export_to && !plan->whole_ring && !r->exported &&
                export_to->ops->add_span(export_to->self, &s) == MST_OK) {
                r->exported = 1;
                res->exported++;
            }
        } else {
            mst_tl_stats before, after;
            mst_timeline_get_stats(scratch, &before);
            mst_timeline_add_span(scratch, &s, s.has_pid ? s.pid : (int64_t)getpid(), &arena, &sink);
            mst_timeline_get_stats(scratch, &after);
            res->counters += after.counters_emitted - before.counters_emitted;
        }
        mst_arena_reset_keep(&arena, 1 << 16);
    }
    for (size_t i = 0; i < n_own && st == MST_OK; i++) {
        mst_tl_counter c = own[i];
        c.ts_ns = hi;
        o->ops->add_counter(o->self, &c);
    }
    mst_timeline_free(scratch);
    mst_arena_release(&arena);
    return st;
}

typedef struct dump_file {
    char name[256];
    uint64_t size;
} dump_file;

static int by_name(const void *a, const void *b) {
    return strcmp(((const dump_file *)a)->name, ((const dump_file *)b)->name);
}

/* A finished dump of this template: NAME.<yyyymmddThhmmssZ>-<n>.EXT
 * exactly, so no other file of the directory is ever deleted. */
static bool is_dump_name(const mst_flight_dumper *d, const char *name) {
    size_t sl = strlen(d->stem), el = strlen(d->ext), nl = strlen(name);
    if (nl < sl + 1 + 16 + 2 + el || strncmp(name, d->stem, sl) != 0 || name[sl] != '.' ||
        strcmp(name + nl - el, d->ext) != 0)
        return false;
    const char *p = name + sl + 1, *end = name + nl - el;
    for (int i = 0; i < 16; i++) {
        bool digit = p[i] >= '0' && p[i] <= '9';
        if (i == 8 ? p[i] != 'T' : i == 15 ? p[i] != 'Z' : !digit) return false;
    }
    if (p[16] != '-' || p + 17 >= end) return false;
    for (const char *q = p + 17; q < end; q++)
        if (*q < '0' || *q > '9') return false;
    return true;
}

/* Deletes the oldest dumps until the rest fit the budget. */
static void enforce_budget(const mst_flight_dumper *d, const char *newest,
                           mst_flight_dump_result *res) {
    DIR *dir = opendir(d->dir);
    if (!dir) return;
    size_t n = 0, cap = 0;
    dump_file *files = NULL;
    uint64_t total = 0;
    for (struct dirent *e; (e = readdir(dir));) {
        if (!is_dump_name(d, e->d_name) || strlen(e->d_name) >= sizeof files->name) continue;
        struct stat sb;
        if (fstatat(dirfd(dir), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode))
            continue;
        if (n == cap) {
            size_t c = cap ? cap * 2 : 64;
            dump_file *f = realloc(files, c * sizeof *f);
            if (!f) break;
            files = f;
            cap = c;
        }
        snprintf(files[n].name, sizeof files[n].name, "%s", e->d_name);
        files[n].size = (uint64_t)sb.st_size;
        total += files[n].size;
        n++;
    }
    if (files) qsort(files, n, sizeof *files, by_name);
    for (size_t i = 0; i < n && total > d->disk_budget; i++) {
        if (unlinkat(dirfd(dir), files[i].name, 0) != 0) continue;
        total -= files[i].size;
        if (strcmp(files[i].name, newest) == 0) {
            res->over_budget = true;
        } else {
            res->deleted++;
            res->deleted_bytes += files[i].size;
        }
    }
    free(files);
    closedir(dir);
}

uint64_t mst_flight_dump_export(mst_flight_dumper *d, mst_flight_ring *ring,
                                const mst_flight_dump_plan *plan) {
    if (!d->export_to || plan->whole_ring) return 0;
    int64_t lo, hi;
    if (!select_records(ring, plan, &lo, &hi)) return 0;
    mst_arena arena;
    mst_arena_init(&arena);
    uint64_t sent = 0;
    for (mst_flight_rec *r = mst_flight_ring_first(ring); r; r = mst_flight_ring_next(ring, r)) {
        if (!r->mark || r->exported || r->type != MST_FLIGHT_REC_SPAN) continue;
        mst_pf_span s;
        if (mst_flight_ring_span(ring, r, &arena, &s) &&
            d->export_to->ops->add_span(d->export_to->self, &s) == MST_OK) {
            r->exported = 1;
            sent++;
        }
        mst_arena_reset_keep(&arena, 1 << 16);
    }
    mst_arena_release(&arena);
    return sent;
}

mst_status mst_flight_dump_write(mst_flight_dumper *d, mst_flight_ring *ring,
                                 const mst_flight_dump_plan *plan, const mst_tl_counter *own,
                                 size_t n_own, mst_flight_dump_result *res, char *err,
                                 size_t err_size) {
    memset(res, 0, sizeof *res);
    int64_t lo, hi;
    size_t marked = select_records(ring, plan, &lo, &hi);
    if (!marked) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        lo = hi = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    }
    res->start_ns = lo;
    res->end_ns = hi;
    uint64_t n = ++d->seq;
    char tmp[PATH_MAX * 2];
    temp_path(d, n, tmp, sizeof tmp);
    mst_output_sink o;
    mst_status st = mst_writer_sink_open(tmp, d->format, (int64_t)getpid(), &o, err, err_size);
    if (st != MST_OK) {
        unlink(tmp);
        return st;
    }
    st = write_records(&o, d->export_to, ring, plan, lo, hi, own, n_own, n, res);
    mst_status fst = o.ops->finish(o.self);
    mst_chrome_stats cs;
    memset(&cs, 0, sizeof cs);
    mst_status cst = o.ops->close(o.self, &cs);
    if (st == MST_OK) st = fst != MST_OK ? fst : cst;
    if (st == MST_OK && (cs.spans_dropped || cs.write_errors)) st = MST_ERR_IO;
    if (st != MST_OK) {
        unlink(tmp);
        return fail(err, err_size, st, "writing %s failed (%s; %llu write errors, %llu spans "
                    "not written)", tmp, mst_strerror(st), (unsigned long long)cs.write_errors,
                    (unsigned long long)cs.spans_dropped);
    }
    /* Durable before it gets its name: a crash after the rename must not
     * leave a named dump with holes. */
    int fd = open(tmp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat sb;
    bool synced = fd >= 0 && fsync(fd) == 0 && fstat(fd, &sb) == 0;
    int e = errno;
    if (fd >= 0) close(fd);
    char stamp[32];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    char name[256];
    snprintf(name, sizeof name, "%.180s.%s-%06llu%s", d->stem, stamp, (unsigned long long)n, d->ext);
    snprintf(res->path, sizeof res->path, "%.3800s/%s", d->dir, name);
    if (!synced || rename(tmp, res->path) != 0) {
        if (synced) e = errno;
        unlink(tmp);
        return fail(err, err_size, MST_ERR_IO, "finishing dump %s failed: %s", res->path,
                    strerror(e));
    }
    res->bytes = (uint64_t)sb.st_size;
    enforce_budget(d, name, res);
    return MST_OK;
}
