/* test_sampler.c — head sampling (docs/configuration.md): every OTEL_TRACES_SAMPLER value
 * and OTEL_TRACES_SAMPLER_ARG / OTEL_SDK_DISABLED parse rule (one warning
 * per bad value, counted from the captured stderr), the trace-id ratio rule
 * (exact bounds, determinism, monotonicity, a statistical check over 100k
 * random roots), parent-based decisions with local and remote, sampled and
 * unsampled parents, the sampled bit of recorded spans, the kill switch,
 * and exact counters (started + unsampled = attempts) under threads. */
#include "testlib.h"
#include "core/tracer.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

/* ------------------------------------------------------------ helpers */

static int g_saved_fd = -1;
static FILE *g_capture;

/* Sends fd 2 (where the library logs) to a temp file until capture_end. */
static void capture_begin(void) {
    fflush(stderr);
    g_capture = tmpfile();
    g_saved_fd = dup(2);
    dup2(fileno(g_capture), 2);
}

/* Restores fd 2 and returns how many WARNING lines were logged. */
static int capture_end(void) {
    fflush(stderr);
    dup2(g_saved_fd, 2);
    close(g_saved_fd);
    rewind(g_capture);
    char line[2048];
    int n = 0;
    while (fgets(line, sizeof line, g_capture))
        if (strstr(line, " WARNING ")) n++;
    fclose(g_capture);
    return n;
}

static void clear_env(void) {
    unsetenv("OTEL_TRACES_SAMPLER");
    unsetenv("OTEL_TRACES_SAMPLER_ARG");
    unsetenv("OTEL_SDK_DISABLED");
}

/* Options from the environment after setting the two sampler variables
 * (NULL = unset); *warnings gets the number of warnings logged. */
static mst_tracer_options env_opts(const char *sampler, const char *arg, int *warnings) {
    clear_env();
    if (sampler) setenv("OTEL_TRACES_SAMPLER", sampler, 1);
    if (arg) setenv("OTEL_TRACES_SAMPLER_ARG", arg, 1);
    mst_tracer_options o;
    memset(&o, 0xAB, sizeof o); /* the reader must fill every field */
    capture_begin();
    mst_tracer_options_from_env(&o);
    *warnings = capture_end();
    clear_env();
    return o;
}

static mst_tracer *make_tracer(mst_sampler_kind kind, double ratio) {
    mst_tracer_options o = {.max_queue_size = 4096, .max_export_batch_size = 512, .schedule_delay_ms = 600000};
    o.sampler = kind;
    o.sampler_ratio = ratio;
    mst_tracer *t = NULL;
    CHECK_EQ_INT(mst_tracer_create(&o, &t), MST_OK);
    mst_tracer_add_exporter(t, mst_null_exporter_create());
    return t;
}

static mst_trace_id id_from_hex(const char *hex) {
    mst_trace_id id;
    memset(&id, 0, sizeof id);
    CHECK_EQ_INT(mst_trace_id_from_hex(hex, 32, &id), MST_OK);
    return id;
}

static mst_span_context remote_parent(const char *traceparent) {
    mst_span_context c;
    memset(&c, 0, sizeof c);
    CHECK_EQ_INT(mst_ctx_parse_traceparent(traceparent, strlen(traceparent), &c), MST_OK);
    return c;
}

/* Starts a span with the given trace id (a root unless parent given);
 * returns whether it was recorded, and ends it. */
static bool sampled_with_id(mst_tracer *t, const mst_trace_id *id, const mst_span_context *parent) {
    mst_span_id sid = mst_span_id_random();
    mst_span *s = mst_span_start_with_ids(t, NULL, "s", MST_SPAN_KIND_INTERNAL, parent, id, &sid, 0);
    if (!s) return false;
    mst_span_end(s, 0);
    return true;
}

static mst_tracer_stats stats(mst_tracer *t) {
    mst_tracer_stats st;
    mst_tracer_get_stats(t, &st);
    return st;
}

/* ---------------------------------------------------------- env parsing */

static void test_env_sampler_names(void) {
    static const struct { const char *v; mst_sampler_kind k; } cases[] = {
        {"always_on", MST_SAMPLER_ALWAYS_ON},
        {"always_off", MST_SAMPLER_ALWAYS_OFF},
        {"traceidratio", MST_SAMPLER_TRACEIDRATIO},
        {"parentbased_always_on", MST_SAMPLER_PARENTBASED_ALWAYS_ON},
        {"parentbased_always_off", MST_SAMPLER_PARENTBASED_ALWAYS_OFF},
        {"parentbased_traceidratio", MST_SAMPLER_PARENTBASED_TRACEIDRATIO},
        {"ALWAYS_OFF", MST_SAMPLER_ALWAYS_OFF},          /* enum values: any case */
        {"ParentBased_TraceIdRatio", MST_SAMPLER_PARENTBASED_TRACEIDRATIO},
        {"  always_off\t", MST_SAMPLER_ALWAYS_OFF},      /* surrounding blanks */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int w = -1;
        mst_tracer_options o = env_opts(cases[i].v, NULL, &w);
        CHECK_EQ_INT(o.sampler, cases[i].k);
        CHECK_EQ_INT(w, 0);
        CHECK(o.sampler_ratio == 1.0);
        CHECK(!o.sdk_disabled);
    }
    int w = -1;
    mst_tracer_options o = env_opts(NULL, NULL, &w); /* unset: the default */
    CHECK_EQ_INT(o.sampler, MST_SAMPLER_PARENTBASED_ALWAYS_ON);
    CHECK_EQ_INT(w, 0);
    o = env_opts("", NULL, &w); /* empty = unset */
    CHECK_EQ_INT(o.sampler, MST_SAMPLER_PARENTBASED_ALWAYS_ON);
    CHECK_EQ_INT(w, 0);
}

static void test_env_sampler_unknown_and_unsupported(void) {
    static const char *const bad[] = {"jaeger_remote", "parentbased_jaeger_remote", "xray", "XRAY",
                                      "probability", "always-on", "always_on2", "parentbased"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int w = -1;
        mst_tracer_options o = env_opts(bad[i], "0.5", &w);
        CHECK_EQ_INT(o.sampler, MST_SAMPLER_PARENTBASED_ALWAYS_ON);
        CHECK_EQ_INT(w, 1);
        if (w != 1) fprintf(stderr, "  value \"%s\"\n", bad[i]);
    }
}

static void test_env_sampler_arg(void) {
    static const struct { const char *v; double want; int warnings; } cases[] = {
        {"0.25", 0.25, 0}, {"0", 0.0, 0},   {"1", 1.0, 0},      {"1.0", 1.0, 0},  {".5", 0.5, 0},
        {"5.", 1.0, 1},     {"1e-1", 0.1, 0}, {"+0.5", 0.5, 0}, {" 0.75 ", 0.75, 0},
        {"", 1.0, 0},       {"abc", 1.0, 1}, {"1.5", 1.0, 1},    {"-0.1", 1.0, 1}, {"nan", 1.0, 1},
        {"inf", 1.0, 1},    {"0,5", 1.0, 1}, {"0x1p-2", 1.0, 1}, {"0.5x", 1.0, 1}, {".", 1.0, 1},
        {"1e", 1.0, 1},     {"2e-1e", 1.0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double want = cases[i].want;
        int want_w = cases[i].warnings;
        int w = -1;
        mst_tracer_options o = env_opts("traceidratio", cases[i].v, &w);
        CHECK_EQ_INT(o.sampler, MST_SAMPLER_TRACEIDRATIO);
        CHECK(fabs(o.sampler_ratio - want) < 1e-12);
        CHECK_EQ_INT(w, want_w);
        if (w != want_w || fabs(o.sampler_ratio - want) >= 1e-12)
            fprintf(stderr, "  arg \"%s\": ratio %g, %d warning(s)\n", cases[i].v, o.sampler_ratio, w);
    }
    /* parentbased_traceidratio reads it too; unset means 1.0 */
    int w = -1;
    mst_tracer_options o = env_opts("parentbased_traceidratio", "0.125", &w);
    CHECK(o.sampler_ratio == 0.125);
    o = env_opts("parentbased_traceidratio", NULL, &w);
    CHECK(o.sampler_ratio == 1.0);
    CHECK_EQ_INT(w, 0);
    /* The other samplers ignore the argument, even a bad one. */
    o = env_opts("always_on", "bogus", &w);
    CHECK_EQ_INT(o.sampler, MST_SAMPLER_ALWAYS_ON);
    CHECK_EQ_INT(w, 0);
    o = env_opts(NULL, "0.1", &w);
    CHECK_EQ_INT(o.sampler, MST_SAMPLER_PARENTBASED_ALWAYS_ON);
    CHECK(o.sampler_ratio == 1.0);
    CHECK_EQ_INT(w, 0);
}

static void test_env_sdk_disabled_values(void) {
    static const struct { const char *v; bool disabled; int warnings; } cases[] = {
        {"true", true, 0},   {"TRUE", true, 0},  {"True", true, 0}, {" true ", true, 0},
        {"false", false, 0}, {"FALSE", false, 0}, {"", false, 0},    {"1", false, 1},
        {"yes", false, 1},   {"truee", false, 1}, {"on", false, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clear_env();
        setenv("OTEL_SDK_DISABLED", cases[i].v, 1);
        mst_tracer_options o;
        memset(&o, 0, sizeof o);
        capture_begin();
        mst_tracer_options_from_env(&o);
        int w = capture_end();
        CHECK_EQ_INT(o.sdk_disabled, cases[i].disabled);
        CHECK_EQ_INT(w, cases[i].warnings);
        if (o.sdk_disabled != cases[i].disabled || w != cases[i].warnings)
            fprintf(stderr, "  OTEL_SDK_DISABLED=\"%s\"\n", cases[i].v);
    }
    clear_env();
}

/* Options filled in by hand: an unknown kind or a ratio outside 0..1 gets
 * one warning and the default; zero options keep the old behaviour. */
static void test_programmatic_options(void) {
    mst_tracer_options o = {.sampler = (mst_sampler_kind)99};
    mst_tracer *t = NULL;
    capture_begin();
    CHECK_EQ_INT(mst_tracer_create(&o, &t), MST_OK);
    CHECK_EQ_INT(capture_end(), 1);
    CHECK_EQ_INT(t->opts.sampler, MST_SAMPLER_PARENTBASED_ALWAYS_ON);
    mst_tracer_shutdown(t, 1000);

    static const double bad[] = {-0.5, 1.5, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mst_tracer_options r = {.sampler = MST_SAMPLER_TRACEIDRATIO, .sampler_ratio = bad[i]};
        capture_begin();
        CHECK_EQ_INT(mst_tracer_create(&r, &t), MST_OK);
        CHECK_EQ_INT(capture_end(), 1);
        CHECK(t->opts.sampler_ratio == 1.0);
        CHECK(sampled_with_id(t, &(mst_trace_id){{[15] = 0xff, [8] = 0xff}}, NULL));
        mst_tracer_shutdown(t, 1000);
    }

    /* All zero: parentbased_always_on, enabled (the ratio is not read). */
    mst_tracer_options z;
    memset(&z, 0, sizeof z);
    CHECK_EQ_INT(mst_tracer_create(&z, &t), MST_OK);
    mst_span *s = mst_span_start(t, NULL, "root", MST_SPAN_KIND_INTERNAL, NULL, 0);
    CHECK(s != NULL);
    mst_span_end(s, 0);
    mst_span_context unsampled = remote_parent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
    CHECK(mst_span_start(t, NULL, "child", MST_SPAN_KIND_INTERNAL, &unsampled, 0) == NULL);
    mst_tracer_stats st = stats(t);
    CHECK_EQ_INT(st.spans_started, 1);
    CHECK_EQ_INT(st.spans_unsampled, 1);
    mst_tracer_shutdown(t, 1000);
}

/* The environment reaches the tracer when it is created with NULL options. */
static void test_env_applies_to_tracer(void) {
    clear_env();
    setenv("OTEL_TRACES_SAMPLER", "always_off", 1);
    mst_tracer *t = NULL;
    CHECK_EQ_INT(mst_tracer_create(NULL, &t), MST_OK);
    clear_env();
    CHECK(mst_span_start(t, NULL, "x", MST_SPAN_KIND_INTERNAL, NULL, 0) == NULL);
    CHECK_EQ_INT(stats(t).spans_unsampled, 1);
    mst_tracer_shutdown(t, 1000);
}

/* ------------------------------------------------------------- samplers */

static void test_always_on_and_off(void) {
    mst_span_context sampled = remote_parent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    mst_span_context unsampled = remote_parent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");

    mst_tracer *on = make_tracer(MST_SAMPLER_ALWAYS_ON, 0);
    mst_span *a = mst_span_start(on, NULL, "root", MST_SPAN_KIND_INTERNAL, NULL, 0);
    mst_span *b = mst_span_start(on, NULL, "child", MST_SPAN_KIND_INTERNAL, &unsampled, 0);
    CHECK(a != NULL);
    CHECK(b != NULL); /* always_on ignores the parent's flag */
    mst_span_context c;
    CHECK(mst_span_get_context(b, &c));
    CHECK_EQ_INT(c.trace_flags, MST_TRACE_FLAG_SAMPLED);
    CHECK(memcmp(c.trace_id.bytes, unsampled.trace_id.bytes, 16) == 0);
    mst_span_end(a, 0);
    mst_span_end(b, 0);
    CHECK_EQ_INT(stats(on).spans_unsampled, 0);
    mst_tracer_shutdown(on, 1000);

    mst_tracer *off = make_tracer(MST_SAMPLER_ALWAYS_OFF, 0);
    CHECK(mst_span_start(off, NULL, "root", MST_SPAN_KIND_INTERNAL, NULL, 0) == NULL);
    CHECK(mst_span_start(off, NULL, "child", MST_SPAN_KIND_INTERNAL, &sampled, 0) == NULL);
    CHECK(!sampled_with_id(off, &sampled.trace_id, NULL));
    mst_tracer_stats st = stats(off);
    CHECK_EQ_INT(st.spans_started, 0);
    CHECK_EQ_INT(st.spans_unsampled, 3);
    /* Nothing was recorded, so the exporter thread was never started. */
    CHECK_EQ_INT(atomic_load(&off->thread_state), MST_THREAD_NONE);
    mst_tracer_shutdown(off, 1000);
}

/* The ratio key is the last 8 bytes, big-endian, >> 1, against ratio*2^63:
 * at 0.5 the bound is 2^62, i.e. byte 8 below 0x80. */
static void test_ratio_exact_bounds(void) {
    mst_tracer *t = make_tracer(MST_SAMPLER_TRACEIDRATIO, 0.5);
    mst_trace_id lo = id_from_hex("ffffffffffffffff7fffffffffffffff");
    mst_trace_id hi = id_from_hex("00000000000000008000000000000000");
    mst_trace_id zero_low = id_from_hex("ffffffffffffffff0000000000000000");
    mst_trace_id max_low = id_from_hex("0000000000000001ffffffffffffffff");
    CHECK(sampled_with_id(t, &lo, NULL));
    CHECK(!sampled_with_id(t, &hi, NULL));
    CHECK(sampled_with_id(t, &zero_low, NULL));
    CHECK(!sampled_with_id(t, &max_low, NULL));
    /* The first 8 bytes do not matter. */
    mst_trace_id lo2 = id_from_hex("00000000000000017fffffffffffffff");
    CHECK(sampled_with_id(t, &lo2, NULL));
    mst_tracer_shutdown(t, 1000);

    /* 0.25: bound 2^61, so byte 8 below 0x40. */
    t = make_tracer(MST_SAMPLER_TRACEIDRATIO, 0.25);
    CHECK(sampled_with_id(t, &(mst_trace_id){{[0] = 1, [8] = 0x3f, [15] = 0xff}}, NULL));
    CHECK(!sampled_with_id(t, &(mst_trace_id){{[0] = 1, [8] = 0x40}}, NULL));
    mst_tracer_shutdown(t, 1000);

    /* Ratio 1 keeps even the largest key, ratio 0 drops even key 0. */
    t = make_tracer(MST_SAMPLER_TRACEIDRATIO, 1.0);
    CHECK(sampled_with_id(t, &max_low, NULL));
    mst_tracer_shutdown(t, 1000);
    t = make_tracer(MST_SAMPLER_TRACEIDRATIO, 0.0);
    CHECK(!sampled_with_id(t, &zero_low, NULL));
    mst_tracer_shutdown(t, 1000);
}

static void test_ratio_deterministic_and_monotonic(void) {
    mst_tracer *t10 = make_tracer(MST_SAMPLER_TRACEIDRATIO, 0.1);
    mst_tracer *t10b = make_tracer(MST_SAMPLER_TRACEIDRATIO, 0.1);
    mst_tracer *t50 = make_tracer(MST_SAMPLER_TRACEIDRATIO, 0.5);
    int n10 = 0, broken = 0, unstable = 0;
    for (int i = 0; i < 2000; i++) {
        mst_trace_id id = mst_trace_id_random();
        bool a = sampled_with_id(t10, &id, NULL);
        bool again = sampled_with_id(t10, &id, NULL);
        bool other = sampled_with_id(t10b, &id, NULL);
        bool b = sampled_with_id(t50, &id, NULL);
        if (a != again || a != other) unstable++;
        if (a && !b) broken++;
        n10 += a;
    }
    CHECK_EQ_INT(unstable, 0);
    CHECK_EQ_INT(broken, 0);
    CHECK(n10 > 0);
    mst_tracer_shutdown(t10, 1000);
    mst_tracer_shutdown(t10b, 1000);
    mst_tracer_shutdown(t50, 1000);
}

/* 100k roots with fresh random trace ids at 0.25: the sampled share lands
 * well inside 0.23..0.27 (that is ~14 standard deviations wide). */
static void test_ratio_statistics(void) {
    enum { N = 100000 };
    mst_tracer *t = make_tracer(MST_SAMPLER_TRACEIDRATIO, 0.25);
    int recorded = 0;
    for (int i = 0; i < N; i++) {
        mst_span *s = mst_span_start(t, NULL, "r", MST_SPAN_KIND_INTERNAL, NULL, 0);
        if (s) {
            recorded++;
            mst_span_context c;
            mst_span_get_context(s, &c);
            if (!(c.trace_flags & MST_TRACE_FLAG_SAMPLED)) CHECK(!"recorded span lacks the sampled flag");
            mst_span_end(s, 0);
        }
        if (i % 4096 == 0) mst_tracer_flush(t, 10000);
    }
    mst_tracer_flush(t, 10000);
    mst_tracer_stats st = stats(t);
    CHECK(recorded >= 23000 && recorded <= 27000);
    fprintf(stderr, "  ratio 0.25: %d of %d sampled\n", recorded, N);
    CHECK_EQ_INT(st.spans_started, recorded);
    CHECK_EQ_INT(st.spans_started + st.spans_unsampled, N);
    CHECK_EQ_INT(st.spans_exported + st.spans_dropped, recorded);
    mst_tracer_shutdown(t, 1000);
}

/* --------------------------------------------------------- parent based */

static void test_parent_based(void) {
    mst_span_context sampled = remote_parent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    mst_span_context unsampled = remote_parent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
    mst_span_context extra_bits = remote_parent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03");
    mst_span_context invalid;
    memset(&invalid, 0, sizeof invalid);

    /* parentbased_always_on: parents decide, roots recorded. */
    mst_tracer *t = make_tracer(MST_SAMPLER_PARENTBASED_ALWAYS_ON, 0);
    mst_span *s = mst_span_start(t, NULL, "c", MST_SPAN_KIND_SERVER, &sampled, 0);
    CHECK(s != NULL);
    mst_span_context c;
    CHECK(mst_span_get_context(s, &c));
    CHECK_EQ_INT(c.trace_flags, MST_TRACE_FLAG_SAMPLED);
    CHECK(memcmp(c.trace_id.bytes, sampled.trace_id.bytes, 16) == 0);
    CHECK(s->parent_is_remote);
    /* a local parent (our own span) decides the same way */
    mst_span *child = mst_span_start(t, NULL, "cc", MST_SPAN_KIND_INTERNAL, &c, 0);
    CHECK(child != NULL);
    CHECK(!child->parent_is_remote);
    mst_span_end(child, 0);
    mst_span_end(s, 0);
    mst_span_context local_unsampled = c;
    local_unsampled.trace_flags = 0;
    CHECK(mst_span_start(t, NULL, "x", MST_SPAN_KIND_INTERNAL, &local_unsampled, 0) == NULL);
    CHECK(mst_span_start(t, NULL, "x", MST_SPAN_KIND_INTERNAL, &unsampled, 0) == NULL);
    /* other W3C flag bits pass through */
    s = mst_span_start(t, NULL, "x", MST_SPAN_KIND_INTERNAL, &extra_bits, 0);
    CHECK(s && mst_span_get_context(s, &c) && c.trace_flags == 0x03);
    mst_span_end(s, 0);
    /* an invalid parent is no parent: a root, recorded */
    s = mst_span_start(t, NULL, "x", MST_SPAN_KIND_INTERNAL, &invalid, 0);
    CHECK(s != NULL && !s->has_parent);
    mst_span_end(s, 0);
    mst_tracer_stats st = stats(t);
    CHECK_EQ_INT(st.spans_started, 4);
    CHECK_EQ_INT(st.spans_unsampled, 2);
    mst_tracer_shutdown(t, 1000);

    /* parentbased_always_off: roots dropped, sampled parents still kept. */
    t = make_tracer(MST_SAMPLER_PARENTBASED_ALWAYS_OFF, 0);
    CHECK(mst_span_start(t, NULL, "r", MST_SPAN_KIND_INTERNAL, NULL, 0) == NULL);
    CHECK(mst_span_start(t, NULL, "r", MST_SPAN_KIND_INTERNAL, &invalid, 0) == NULL);
    s = mst_span_start(t, NULL, "c", MST_SPAN_KIND_INTERNAL, &sampled, 0);
    CHECK(s != NULL);
    mst_span_end(s, 0);
    CHECK(mst_span_start(t, NULL, "c", MST_SPAN_KIND_INTERNAL, &unsampled, 0) == NULL);
    st = stats(t);
    CHECK_EQ_INT(st.spans_started, 1);
    CHECK_EQ_INT(st.spans_unsampled, 3);
    mst_tracer_shutdown(t, 1000);

    /* parentbased_traceidratio: a parent wins over the ratio both ways. */
    mst_trace_id keep = id_from_hex("00000000000000010000000000000001");  /* key 0 */
    mst_trace_id drop = id_from_hex("0000000000000001ffffffffffffffff");  /* key max */
    t = make_tracer(MST_SAMPLER_PARENTBASED_TRACEIDRATIO, 0.5);
    CHECK(sampled_with_id(t, &keep, NULL));
    CHECK(!sampled_with_id(t, &drop, NULL));
    mst_span_context p_sampled_drop_id = sampled, p_unsampled_keep_id = unsampled;
    p_sampled_drop_id.trace_id = drop;
    p_unsampled_keep_id.trace_id = keep;
    s = mst_span_start(t, NULL, "c", MST_SPAN_KIND_INTERNAL, &p_sampled_drop_id, 0);
    CHECK(s != NULL);
    mst_span_end(s, 0);
    CHECK(mst_span_start(t, NULL, "c", MST_SPAN_KIND_INTERNAL, &p_unsampled_keep_id, 0) == NULL);
    mst_tracer_shutdown(t, 1000);

    /* plain traceidratio ignores the parent's flag: the trace id decides. */
    t = make_tracer(MST_SAMPLER_TRACEIDRATIO, 0.5);
    CHECK(mst_span_start(t, NULL, "c", MST_SPAN_KIND_INTERNAL, &p_sampled_drop_id, 0) == NULL);
    s = mst_span_start(t, NULL, "c", MST_SPAN_KIND_INTERNAL, &p_unsampled_keep_id, 0);
    CHECK(s && mst_span_get_context(s, &c) && (c.trace_flags & MST_TRACE_FLAG_SAMPLED));
    mst_span_end(s, 0);
    mst_tracer_shutdown(t, 1000);
}

/* ------------------------------------------------------- kill switch */

static void test_sdk_disabled(void) {
    clear_env();
    setenv("OTEL_SDK_DISABLED", "TRUE", 1);
    setenv("OTEL_TRACES_SAMPLER", "always_on", 1); /* the kill switch wins */
    mst_tracer *t = NULL;
    CHECK_EQ_INT(mst_tracer_create(NULL, &t), MST_OK);
    clear_env();
    CHECK(t != NULL);
    mst_tracer_add_exporter(t, mst_null_exporter_create());
    mst_span_context sampled = remote_parent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    int attempts = 0;
    for (int i = 0; i < 100; i++) {
        mst_span *a = mst_span_start(t, NULL, "r", MST_SPAN_KIND_INTERNAL, NULL, 0);
        mst_span *b = mst_span_start(t, NULL, "c", MST_SPAN_KIND_INTERNAL, &sampled, 0);
        attempts += 2;
        CHECK(a == NULL && b == NULL);
        mst_span_set_str(a, "k", "v"); /* NULL spans are accepted everywhere */
        mst_span_end(a, 0);
        mst_span_end(b, 0);
        attempts++;
        CHECK(!sampled_with_id(t, &sampled.trace_id, NULL));
    }
    mst_tracer_stats st = stats(t);
    CHECK_EQ_INT(st.spans_started, 0);
    CHECK_EQ_INT(st.spans_ended, 0);
    CHECK_EQ_INT(st.spans_unsampled, attempts);
    CHECK_EQ_INT(atomic_load(&t->thread_state), MST_THREAD_NONE);
    CHECK_EQ_INT(mst_tracer_flush(t, 1000), MST_OK);
    CHECK_EQ_INT(mst_tracer_shutdown(t, 1000), MST_OK);
}

/* ------------------------------------------------------------ counters */

typedef struct worker_arg {
    mst_tracer *t;
    int attempts;
    int recorded;
} worker_arg;

static void *worker(void *p) {
    worker_arg *w = p;
    mst_span_context sampled = remote_parent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    mst_span_context unsampled = remote_parent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
    for (int i = 0; i < w->attempts; i++) {
        const mst_span_context *parent = i % 3 == 0 ? NULL : i % 3 == 1 ? &sampled : &unsampled;
        mst_span *s = mst_span_start(w->t, NULL, "w", MST_SPAN_KIND_INTERNAL, parent, 0);
        if (s) {
            w->recorded++;
            mst_span_set_int(s, "i", i);
            mst_span_end(s, 0);
        }
    }
    return NULL;
}

static void test_counters_exact_threads(void) {
    enum { THREADS = 4, PER = 30000 };
    mst_tracer_options o = {.max_queue_size = 256, .max_export_batch_size = 64, .schedule_delay_ms = 1,
                            .sampler = MST_SAMPLER_PARENTBASED_TRACEIDRATIO, .sampler_ratio = 0.5};
    mst_tracer *t = NULL;
    CHECK_EQ_INT(mst_tracer_create(&o, &t), MST_OK);
    mst_tracer_add_exporter(t, mst_null_exporter_create());
    pthread_t th[THREADS];
    worker_arg w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker_arg){.t = t, .attempts = PER};
        pthread_create(&th[i], NULL, worker, &w[i]);
    }
    int recorded = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        recorded += w[i].recorded;
    }
    CHECK_EQ_INT(mst_tracer_flush(t, 30000), MST_OK);
    mst_tracer_stats st = stats(t);
    CHECK_EQ_INT(st.spans_started, recorded);
    CHECK_EQ_INT(st.spans_started + st.spans_unsampled, THREADS * PER);
    CHECK_EQ_INT(st.spans_ended, recorded);
    CHECK_EQ_INT(st.spans_exported + st.spans_dropped + st.spans_failed + st.spans_filtered, recorded);
    /* sampled parents: always; unsampled: never; roots: about half */
    int per_kind = THREADS * PER / 3;
    CHECK(recorded > per_kind + per_kind / 3 && recorded < 2 * per_kind - per_kind / 3);
    mst_tracer_shutdown(t, 1000);
}

static const mst_test_case tests[] = {
    {"env_sampler_names", test_env_sampler_names},
    {"env_sampler_unknown_and_unsupported", test_env_sampler_unknown_and_unsupported},
    {"env_sampler_arg", test_env_sampler_arg},
    {"env_sdk_disabled_values", test_env_sdk_disabled_values},
    {"programmatic_options", test_programmatic_options},
    {"env_applies_to_tracer", test_env_applies_to_tracer},
    {"always_on_and_off", test_always_on_and_off},
    {"ratio_exact_bounds", test_ratio_exact_bounds},
    {"ratio_deterministic_and_monotonic", test_ratio_deterministic_and_monotonic},
    {"ratio_statistics", test_ratio_statistics},
    {"parent_based", test_parent_based},
    {"sdk_disabled", test_sdk_disabled},
    {"counters_exact_threads", test_counters_exact_threads},
};
MST_TEST_MAIN(tests)
