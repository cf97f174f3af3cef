/*
 * bench_span.c — cost of recording a span on the caller's thread.
 *
 * Each measured span is: mst_span_start + 3 attributes (string, int, bool)
 * + mst_span_end into a running pipeline (default OTEL_BSP options, null
 * exporter). Prints the median ns/span over repeated rounds on 1 thread and
 * on 2 threads; then the same calls when the span is sampled out (NULL
 * span: the always_off sampler, and a parent whose sampled flag is 0 under
 * the default parentbased_always_on), printed next to the sampled figure;
 * then an overload run where the exporter is deliberately
 * ~10x slower than the producers, printing VmRSS over time and the drop
 * counters to show that memory stays flat. Prints figures; asserts nothing.
 *
 * Usage: bench_span [rounds] [spans_per_round] [overload_seconds]
 */
#include "mstrace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_rounds = 21;
static int g_per_round = 200000;
static double g_overload_s = 3.0;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static inline void one_span(mst_tracer *t, const mst_scope *sc, const mst_span_context *parent, int64_t i) {
    mst_span *s = mst_span_start(t, sc, "vllm.scheduler.schedule", MST_SPAN_KIND_INTERNAL, parent, 0);
    mst_span_set_str(s, "request.id", "cmpl-1234567890abcdef-0");
    mst_span_set_int(s, "batch.request_count", i);
    mst_span_set_bool(s, "sampled", true);
    mst_span_end(s, 0);
}

typedef struct worker {
    mst_tracer *t;
    const mst_scope *sc;
    const mst_span_context *parent; /* NULL: root spans */
    pthread_barrier_t *barrier;
    double *ns_per_span; /* one per round */
    volatile int *stop;  /* overload mode: run until set */
    uint64_t spans;
} worker;

static void *run_rounds(void *arg) {
    worker *w = arg;
    for (int r = 0; r < g_rounds; r++) {
        pthread_barrier_wait(w->barrier);
        uint64_t t0 = now_ns();
        for (int i = 0; i < g_per_round; i++) one_span(w->t, w->sc, w->parent, i);
        w->ns_per_span[r] = (double)(now_ns() - t0) / g_per_round;
    }
    return NULL;
}

static void print_stats(const char *label, mst_tracer *t) {
    mst_tracer_stats st;
    mst_tracer_get_stats(t, &st);
    printf("  %-10s started=%llu unsampled=%llu exported=%llu dropped=%llu failed=%llu queue_depth=%u\n", label,
           (unsigned long long)st.spans_started, (unsigned long long)st.spans_unsampled,
           (unsigned long long)st.spans_exported, (unsigned long long)st.spans_dropped,
           (unsigned long long)st.spans_failed, st.queue_depth);
}

/* Runs the rounds on `nthreads` threads and returns the median ns/span.
 * `opts` NULL: default options (and the environment's sampler). */
static double bench_threads(int nthreads, const mst_tracer_options *opts, const mst_span_context *parent,
                            const char *label) {
    mst_tracer *t;
    mst_tracer_create(opts, &t);
    mst_tracer_add_exporter(t, mst_null_exporter_create());
    const mst_scope *sc = mst_tracer_scope(t, "ms_service_profiler.hook.Schedule", NULL);
    for (int i = 0; i < 10000; i++) one_span(t, sc, parent, i); /* warm the pool and the thread */
    mst_tracer_flush(t, 10000);
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
    worker w[8];
    pthread_t th[8];
    for (int i = 0; i < nthreads; i++) {
        w[i] = (worker){.t = t, .sc = sc, .parent = parent, .barrier = &barrier};
        w[i].ns_per_span = calloc((size_t)g_rounds, sizeof(double));
        pthread_create(&th[i], NULL, run_rounds, &w[i]);
    }
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    /* Median over every (thread, round) sample. */
    int n = nthreads * g_rounds;
    double *all = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < nthreads; i++) memcpy(all + i * g_rounds, w[i].ns_per_span, sizeof(double) * (size_t)g_rounds);
    qsort(all, (size_t)n, sizeof(double), cmp_double);
    double median = all[n / 2];
    printf("%d thread(s), %s: median %.1f ns/span per thread (min %.1f, max %.1f; %d rounds x %d spans per thread)\n",
           nthreads, label, median, all[0], all[n - 1], g_rounds, g_per_round);
    mst_tracer_flush(t, 30000);
    print_stats("pipeline", t);
    mst_tracer_shutdown(t, 30000);
    for (int i = 0; i < nthreads; i++) free(w[i].ns_per_span);
    free(all);
    pthread_barrier_destroy(&barrier);
    return median;
}

/* An exporter that costs ~1 us per span: about 10x slower than producers. */
typedef struct slow_exporter {
    mst_exporter base;
} slow_exporter;
static mst_status slow_export(mst_exporter *self, const mst_span *const *spans, size_t n) {
    (void)self;
    (void)spans;
    struct timespec ts = {0, (long)n * 1000L};
    nanosleep(&ts, NULL);
    return MST_OK;
}
static void slow_destroy(mst_exporter *self) { free(self); }
static const mst_exporter_ops slow_ops = {.name = "slow", .export_batch = slow_export, .destroy = slow_destroy};

static void *run_until_stop(void *arg) {
    worker *w = arg;
    int64_t i = 0;
    while (!*w->stop) {
        for (int k = 0; k < 1000; k++) one_span(w->t, w->sc, NULL, i++);
    }
    w->spans = (uint64_t)i;
    return NULL;
}

static void bench_overload(void) {
    mst_tracer *t;
    mst_tracer_create(NULL, &t);
    slow_exporter *e = calloc(1, sizeof *e);
    e->base.ops = &slow_ops;
    mst_tracer_add_exporter(t, &e->base);
    const mst_scope *sc = mst_tracer_scope(t, "ms_service_profiler.hook.Execute", NULL);
    volatile int stop = 0;
    worker w[2];
    pthread_t th[2];
    printf("overload: 2 producer threads, exporter ~1 us/span, %.1f s; VmRSS sampled:\n", g_overload_s);
    long rss0 = rss_kb();
    uint64_t t0 = now_ns();
    for (int i = 0; i < 2; i++) {
        w[i] = (worker){.t = t, .sc = sc, .stop = &stop};
        pthread_create(&th[i], NULL, run_until_stop, &w[i]);
    }
    int samples = 6;
    for (int s = 1; s <= samples; s++) {
        usleep((useconds_t)(g_overload_s * 1e6 / samples));
        mst_tracer_stats st;
        mst_tracer_get_stats(t, &st);
        printf("  t=%.2fs VmRSS=%ld kB started=%llu exported=%llu dropped=%llu\n", (double)(now_ns() - t0) / 1e9,
               rss_kb(), (unsigned long long)st.spans_started, (unsigned long long)st.spans_exported,
               (unsigned long long)st.spans_dropped);
    }
    stop = 1;
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    double secs = (double)(now_ns() - t0) / 1e9;
    mst_tracer_stats st;
    mst_tracer_get_stats(t, &st);
    printf("  producers: %.1f M spans/s total; exported %.1f%%, dropped %.1f%%; VmRSS before %ld kB, end %ld kB\n",
           (double)(w[0].spans + w[1].spans) / secs / 1e6, 100.0 * (double)st.spans_exported / (double)st.spans_started,
           100.0 * (double)st.spans_dropped / (double)st.spans_started, rss0, rss_kb());
    mst_tracer_shutdown(t, 1000);
}

int main(int argc, char **argv) {
    if (argc > 1) g_rounds = atoi(argv[1]);
    if (argc > 2) g_per_round = atoi(argv[2]);
    if (argc > 3) g_overload_s = atof(argv[3]);
    if (g_rounds < 1) g_rounds = 1;
    if (g_per_round < 1) g_per_round = 1;
    printf("bench_span: start + 3 attributes + end, null exporter, default OTEL_BSP options\n");
    double sampled1 = bench_threads(1, NULL, NULL, "sampled");
    double sampled2 = bench_threads(2, NULL, NULL, "sampled");
    mst_tracer_options off = {.sampler = MST_SAMPLER_ALWAYS_OFF};
    double off1 = bench_threads(1, &off, NULL, "unsampled (always_off)");
    mst_span_context unsampled_parent;
    const char *tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    mst_ctx_parse_traceparent(tp, strlen(tp), &unsampled_parent);
    mst_tracer_options dflt = {0}; /* parentbased_always_on */
    double parent1 = bench_threads(1, &dflt, &unsampled_parent, "unsampled (parent flag 0)");
    printf("summary, 1 thread, start + 3 attrs + end: sampled %.1f ns | unsampled always_off %.1f ns | "
           "unsampled parent %.1f ns (2 threads sampled %.1f ns)\n",
           sampled1, off1, parent1, sampled2);
    if (g_overload_s > 0) bench_overload();
    return 0;
}
