/*
 * tracer.c — the span pipeline: options from the environment (the sampler
 * settings are read in sampler.c), the bounded queue hand-off, one exporter
 * thread per tracer, flush/shutdown, scopes, exact counters and fork safety.
 *
 * Producer side (mst_tracer_submit, called by mst_span_end): one lock-free
 * push and two uncontended counter increments per span; no lock, no
 * syscall. The exporter thread is only signalled when the queue depth
 * reaches a batch while the thread sleeps (one futex wake per batch at most).
 *
 * Exporter thread: sleeps until a batch is ready, the schedule delay passes,
 * a flush is requested or shutdown; exports full batches, or everything on a
 * timer/flush/stop; then returns the span records to the pool.
 *
 * Counting invariant: spans_started = exported + dropped + failed + filtered
 * + queued-or-in-flight (spans_queued is derived: ended - dropped - filtered);
 * a start the sampler refuses never becomes a span and is counted only in
 * spans_unsampled.
 *
 * Shutdown: flush within the timeout; if that fails, stop exporting further
 * batches (abandon), cancel the export in flight through the exporters'
 * cancel op, join the thread, count what is left as failed.
 *
 * Fork: pthread_atfork handlers hold every tracer's locks across fork(); in
 * the child they re-create locks/conds, drop the inherited queue (the parent
 * exports it), zero the counters (they describe this process), rebuild the
 * resource (new pid) and mark the exporters for after_fork_child, which the
 * child's exporter thread calls before its first export.
 *
 * Resource: one per tracer, built at create and rebuilt only here in a
 * forked child; the built-in exporters read it through the spans they are
 * handed (mst_span_resource), custom ones through mst_span_get_resource.
 *
 * A span open across fork() (a fork inside a traced call) exists in both
 * processes, and both may end it. It is exported once, by the process that
 * ends it first: each span records the fork epoch at its start; at its end, a
 * span whose epoch is older claims its span id in a table in memory shared
 * by every process forked from here (fork_claim.c); the first claim wins,
 * later ones free the record unexported. The number of forks between start
 * and end tells the table when a claim can be dropped (both copies done).
 */
#include "core/tracer.h"

#include "core/batch_block.h"
#include "core/span_links.h"

#include "core/clock.h"
#include "core/fork_claim.h"
#include "core/fork_record.h"
#include "core/log.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_SCHEDULE_DELAY_MS 5000u
#define DEFAULT_MAX_QUEUE_SIZE 2048u
#define DEFAULT_MAX_BATCH_SIZE 512u
#define DEFAULT_EXPORT_TIMEOUT_MS 30000u
/* How long shutdown waits for spans still open on other threads before it
 * frees the pipeline (if they stay open, the pipeline memory is kept). */
#define SHUTDOWN_OPEN_SPAN_GRACE_MS 200u

/* ------------------------------------------------------------- options */

/* Unset/empty: `def`. Digits only, 1..UINT32_MAX (0 allowed if allow_zero);
 * anything else: warning + default. */
static uint32_t env_u32(const char *name, uint32_t def, bool allow_zero) {
    const char *v = getenv(name);
    if (!v || !*v) return def;
    uint64_t x = 0;
    const char *p = v;
    for (; *p; p++) {
        if (*p < '0' || *p > '9' || x > UINT32_MAX) break;
        x = x * 10 + (uint64_t)(*p - '0');
    }
    if (*p || x > UINT32_MAX || (x == 0 && !allow_zero)) {
        MST_WARN("%s=\"%s\" is not a valid value, using the default %u", name, v, def);
        return def;
    }
    return (uint32_t)x;
}

void mst_tracer_options_from_env(mst_tracer_options *opts) {
    if (!opts) return;
    opts->schedule_delay_ms = env_u32("OTEL_BSP_SCHEDULE_DELAY", DEFAULT_SCHEDULE_DELAY_MS, false);
    opts->max_queue_size = env_u32("OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_MAX_QUEUE_SIZE, false);
    opts->max_export_batch_size = env_u32("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", DEFAULT_MAX_BATCH_SIZE, false);
    opts->export_timeout_ms = env_u32("OTEL_BSP_EXPORT_TIMEOUT", DEFAULT_EXPORT_TIMEOUT_MS, false);
    opts->export_errors_only = false;
    const char *e = getenv("MS_PROFILER_SAMPLE_ERROR");
    if (e && strcmp(e, "1") == 0) {
        opts->export_errors_only = true;
    } else if (e && *e && strcmp(e, "0") != 0) {
        MST_WARN("MS_PROFILER_SAMPLE_ERROR=\"%s\" is not 0 or 1, treating it as unset", e);
    }
    mst_sampler_options_from_env(opts);
}

static void normalise_options(mst_tracer_options *o) {
    if (!o->schedule_delay_ms) o->schedule_delay_ms = DEFAULT_SCHEDULE_DELAY_MS;
    if (!o->max_queue_size) o->max_queue_size = DEFAULT_MAX_QUEUE_SIZE;
    if (!o->max_export_batch_size) o->max_export_batch_size = DEFAULT_MAX_BATCH_SIZE;
    if (!o->export_timeout_ms) o->export_timeout_ms = DEFAULT_EXPORT_TIMEOUT_MS;
    if (o->max_export_batch_size > o->max_queue_size) {
        MST_WARN("max export batch size %u exceeds the queue size %u, using %u", o->max_export_batch_size,
                 o->max_queue_size, o->max_queue_size);
        o->max_export_batch_size = o->max_queue_size;
    }
}

/* ---------------------------------------------------------------- time */

static struct timespec mono_deadline(uint64_t deadline_ms) {
    struct timespec ts = {.tv_sec = (time_t)(deadline_ms / 1000u),
                          .tv_nsec = (long)(deadline_ms % 1000u) * 1000000L};
    return ts;
}

static void init_sync(mst_tracer *t) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->wake, &ca);
    pthread_cond_init(&t->done, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&t->scope_mu, NULL);
}

/* ------------------------------------------- spans open across fork() */

/* Raised twice per fork() this process takes part in: before it (so a span
 * that ends on another thread while the fork is under way, or starts just
 * before the child's copy is taken, is seen as crossing it) and after it, in
 * the parent and in the child. Odd while a fork is under way in the parent. */
static _Atomic uint32_t g_fork_epoch;
static _Atomic uint32_t g_fork_lineage; /* how many fork()s made this process */

/* A span started before a fork this process took part in, now ending. The
 * winner exports it; in a fork child, whose counters were zeroed at the fork,
 * its start is counted now. A loser frees it: in the process that started
 * it, it counts as ended and filtered; in a child, as nothing (it was never
 * this process's). Returns true when the caller goes on to submit it. */
static bool fork_adopt(mst_tracer *t, mst_tracer_shard *sh, mst_span *s) {
    bool inherited = s->fork_lineage != atomic_load_explicit(&g_fork_lineage, memory_order_relaxed);
    /* One fork began here since the span started: a raise of at most 2 from
     * an even start; from an odd one (started while a fork was under way,
     * which it may have crossed), of 1. With the epoch even and unchanged
     * around the read, that fork is the last one the fork records know. */
    uint32_t epoch = atomic_load(&g_fork_epoch);
    uint64_t fork_ref = mst_fork_record_last();
    uint32_t raised = epoch - s->fork_epoch;
    bool one_fork = raised <= 2u - (s->fork_epoch & 1u);
    if (!one_fork || (epoch & 1u) || atomic_load(&g_fork_epoch) != epoch) fork_ref = 0;
    uint64_t key;
    memcpy(&key, s->span_id.bytes, sizeof key);
    if (mst_fork_claim(key, one_fork, fork_ref) != MST_FORK_CLAIM_LOST) {
        if (inherited) atomic_fetch_add_explicit(&sh->started, 1, memory_order_relaxed);
        return true;
    }
    if (!inherited) atomic_fetch_add_explicit(&sh->filtered, 1, memory_order_relaxed);
    mst_tracer_span_free(t, s);
    if (!inherited) atomic_fetch_add_explicit(&sh->ended, 1, memory_order_release);
    return false;
}

/* ------------------------------------------------------ fork registry */

static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static mst_tracer *g_reg_head;
static pthread_once_t g_reg_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void) {
    pthread_mutex_lock(&g_reg_mu);
    if (g_reg_head) mst_fork_claim_map();
    atomic_fetch_add(&g_fork_epoch, 1);
    mst_fork_record_before_fork();
    for (mst_tracer *t = g_reg_head; t; t = t->reg_next) {
        pthread_mutex_lock(&t->mu);
        pthread_mutex_lock(&t->scope_mu);
    }
}

static void fork_parent(void) {
    mst_fork_record_after_fork(false); /* before the epoch turns even again */
    atomic_fetch_add(&g_fork_epoch, 1);
    for (mst_tracer *t = g_reg_head; t; t = t->reg_next) {
        pthread_mutex_unlock(&t->scope_mu);
        pthread_mutex_unlock(&t->mu);
    }
    pthread_mutex_unlock(&g_reg_mu);
}

static void free_span_record(void *item, void *ctx) {
    (void)ctx;
    mst_span *s = item;
    mst_batch_block_release(s->block);
    mst_arena_release(&s->arena);
    free(s);
}

static void reset_counters(mst_tracer *t) {
    for (int i = 0; i < MST_TRACER_SHARDS; i++) {
        atomic_store(&t->shards[i].started, 0);
        atomic_store(&t->shards[i].ended, 0);
        atomic_store(&t->shards[i].dropped, 0);
        atomic_store(&t->shards[i].filtered, 0);
        atomic_store(&t->shards[i].unsampled, 0);
    }
    atomic_store(&t->exported, 0);
    atomic_store(&t->failed, 0);
    atomic_store(&t->batches, 0);
    atomic_store(&t->completed, 0);
}

/* Only this thread exists in the child: no locking needed, and the
 * inherited locks (held by us since fork_prepare) are simply re-created. */
static void fork_child(void) {
    mst_fork_record_after_fork(true); /* before the epoch turns even again */
    atomic_fetch_add(&g_fork_epoch, 1);
    atomic_fetch_add(&g_fork_lineage, 1);
    for (mst_tracer *t = g_reg_head; t; t = t->reg_next) {
        init_sync(t);
        atomic_store(&t->thread_state, MST_THREAD_NONE);
        atomic_store(&t->sleeping, 0);
        atomic_store(&t->abandon, 0);
        t->stop = false;
        t->flush_req = t->flush_seen = 0;
        /* Queued spans belong to the parent, which exports them. */
        mst_queue_reset_after_fork(&t->queue, free_span_record, NULL);
        mst_queue_reset_after_fork(&t->pool, free_span_record, NULL);
        reset_counters(t);
        if (atomic_load(&t->n_exporters)) atomic_store(&t->fork_pending, 1);
        mst_resource_rebuild(&t->resource); /* new pid, same role */
    }
    pthread_mutex_init(&g_reg_mu, NULL);
}

static void register_atfork(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

static void registry_add(mst_tracer *t) {
    pthread_once(&g_reg_once, register_atfork);
    pthread_mutex_lock(&g_reg_mu);
    t->reg_next = g_reg_head;
    g_reg_head = t;
    pthread_mutex_unlock(&g_reg_mu);
}

static void registry_remove(mst_tracer *t) {
    pthread_mutex_lock(&g_reg_mu);
    for (mst_tracer **pp = &g_reg_head; *pp; pp = &(*pp)->reg_next) {
        if (*pp == t) {
            *pp = t->reg_next;
            break;
        }
    }
    pthread_mutex_unlock(&g_reg_mu);
}

/* -------------------------------------------------------------- create */

mst_status mst_tracer_create(const mst_tracer_options *opts, mst_tracer **out) {
    if (!out) return MST_ERR_INVALID_ARG;
    *out = NULL;
    mst_tracer *t = aligned_alloc(64, (sizeof(*t) + 63) & ~(size_t)63);
    if (!t) return MST_ERR_NOMEM;
    memset(t, 0, sizeof(*t));
    if (opts) t->opts = *opts;
    else mst_tracer_options_from_env(&t->opts);
    normalise_options(&t->opts);
    mst_sampler_init(&t->sampler, &t->opts);
    t->batch = malloc(sizeof(*t->batch) * t->opts.max_export_batch_size);
    bool q_ok = mst_queue_init(&t->queue, t->opts.max_queue_size);
    bool p_ok = q_ok && mst_queue_init(&t->pool, t->opts.max_queue_size);
    if (!t->batch || !q_ok || !p_ok) {
        if (q_ok) mst_queue_destroy(&t->queue);
        free(t->batch);
        free(t);
        return MST_ERR_NOMEM;
    }
    init_sync(t);
    mst_status st = mst_resource_init_from_env(&t->resource);
    if (st != MST_OK) {
        mst_resource_release(&t->resource);
        mst_queue_destroy(&t->queue);
        mst_queue_destroy(&t->pool);
        free(t->batch);
        free(t);
        return st;
    }
    /* The clock calibrates on first use (reads sysfs, sleeps 0.2 ms): do it
     * here, at set-up, not inside the first traced call. */
    (void)mst_clock_now_ns();
    registry_add(t);
    *out = t;
    return MST_OK;
}

mst_status mst_tracer_add_exporter(mst_tracer *t, mst_exporter *e) {
    if (!e) return MST_ERR_INVALID_ARG;
    if (!t || !e->ops || !e->ops->export_batch) {
        if (e->ops && e->ops->destroy) e->ops->destroy(e);
        return MST_ERR_INVALID_ARG;
    }
    pthread_mutex_lock(&t->mu);
    size_t n = atomic_load(&t->n_exporters);
    mst_status st = MST_OK;
    if (mst_tracer_is_closed(t)) st = MST_ERR_CLOSED;
    else if (n == MST_TRACER_MAX_EXPORTERS) st = MST_ERR_TOO_LARGE;
    if (st == MST_OK) {
        t->exporters[n] = e;
        atomic_store_explicit(&t->n_exporters, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&t->mu);
    if (st != MST_OK) {
        MST_ERROR("cannot add exporter %s: %s", e->ops->name ? e->ops->name : "?", mst_strerror(st));
        if (e->ops->destroy) e->ops->destroy(e);
    }
    return st;
}

const mst_resource *mst_tracer_resource(const struct mst_tracer *t) { return t ? &t->resource : NULL; }

const char *mst_tracer_service_name(const mst_tracer *t) { return t ? t->resource.service_name.ptr : NULL; }

/* Under t->mu with no exporter thread yet, no exporter reads the resource
 * (start_thread takes t->mu and publishes what is written here). */
mst_status mst_tracer_set_process_role(mst_tracer *t, const char *role) {
    if (!t) return MST_ERR_INVALID_ARG;
    pthread_mutex_lock(&t->mu);
    mst_status st = MST_ERR_UNSUPPORTED;
    if (strcmp(t->resource.role, role ? role : "") == 0)
        st = MST_OK; /* built for it already */
    else if (atomic_load(&t->thread_state) == MST_THREAD_NONE)
        st = mst_resource_set_role(&t->resource, role);
    pthread_mutex_unlock(&t->mu);
    return st;
}

const mst_resource *mst_span_resource(const mst_span *span) {
    if (span && span->tracer) return &span->tracer->resource;
    return mst_resource_untraced();
}

uint64_t mst_span_tracer_dropped(const mst_span *span) {
    if (!span || !span->tracer) return 0;
    uint64_t dropped = 0;
    for (int i = 0; i < MST_TRACER_SHARDS; i++)
        dropped += atomic_load_explicit(&span->tracer->shards[i].dropped, memory_order_relaxed);
    return dropped;
}

/* --------------------------------------------------------------- scopes */

const mst_scope *mst_tracer_scope(mst_tracer *t, const char *name, const char *version) {
    if (!t || !name) return NULL;
    if (!version) version = "";
    size_t nl = strlen(name), vl = strlen(version);
    if (nl > MST_MAX_VALUE_LEN) nl = MST_MAX_VALUE_LEN;
    if (vl > MST_MAX_VALUE_LEN) vl = MST_MAX_VALUE_LEN;
    pthread_mutex_lock(&t->scope_mu);
    mst_scope *s;
    for (s = t->scopes; s; s = s->next) {
        if (s->name.len == nl && s->version.len == vl && memcmp(s->name.ptr, name, nl) == 0 &&
            memcmp(s->version.ptr, version, vl) == 0)
            break;
    }
    if (!s && (s = malloc(sizeof(*s) + nl + vl + 2)) != NULL) {
        char *p = (char *)(s + 1);
        memcpy(p, name, nl);
        p[nl] = '\0';
        memcpy(p + nl + 1, version, vl);
        p[nl + 1 + vl] = '\0';
        s->name.ptr = p;
        s->name.len = (uint32_t)nl;
        s->version.ptr = p + nl + 1;
        s->version.len = (uint32_t)vl;
        s->next = t->scopes;
        t->scopes = s;
    }
    pthread_mutex_unlock(&t->scope_mu);
    return s;
}

/* ------------------------------------------------------ producer side */

static _Atomic unsigned g_next_shard;
static __thread unsigned t_shard_plus1;

mst_tracer_shard *mst_tracer_my_shard(mst_tracer *t) {
    unsigned i = t_shard_plus1;
    if (__builtin_expect(i == 0, 0)) {
        i = atomic_fetch_add_explicit(&g_next_shard, 1, memory_order_relaxed) % MST_TRACER_SHARDS + 1;
        t_shard_plus1 = i;
    }
    return &t->shards[i - 1];
}

/* A pooled span record keeps its arena's first chunk (at most
 * SPAN_KEPT_CHUNK_BYTES), emptied: most spans outgrow the inline buffer, and
 * without it each would malloc a chunk on the hooked thread that the exporter
 * thread frees. Bounded: pool capacity (max_queue_size) x the chunk. */
#define SPAN_KEPT_CHUNK_BYTES 4096u

mst_span *mst_tracer_span_alloc(mst_tracer *t) {
    mst_span *s = mst_queue_pop(&t->pool);
    if (!s && (s = malloc(sizeof(mst_span)))) mst_arena_init(&s->arena);
    if (s) {
        s->fork_epoch = atomic_load_explicit(&g_fork_epoch, memory_order_relaxed);
        s->fork_lineage = atomic_load_explicit(&g_fork_lineage, memory_order_relaxed);
    }
    return s;
}

void mst_tracer_span_free(mst_tracer *t, mst_span *s) {
    mst_batch_block_release(s->block); /* its list/links read it until now */
    s->block = NULL;
    if (s->arena.chunks) mst_arena_reset_keep(&s->arena, SPAN_KEPT_CHUNK_BYTES);
    else s->arena.inline_used = 0;
    if (!mst_queue_push(&t->pool, s, NULL)) free_span_record(s, NULL);
}

static void *exporter_main(void *arg);

/* Slow path of the first span (and of the first span in a forked child). */
static __attribute__((noinline)) void start_thread(mst_tracer *t) {
    pthread_mutex_lock(&t->mu);
    if (atomic_load(&t->thread_state) == MST_THREAD_NONE && !t->stop) {
        sigset_t all, old;
        sigfillset(&all);
        /* The exporter thread must not take the application's signals. */
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int rc = pthread_create(&t->thread, NULL, exporter_main, t);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc == 0) {
            atomic_store(&t->thread_state, MST_THREAD_RUNNING);
        } else {
            atomic_store(&t->thread_state, MST_THREAD_FAILED);
            MST_ERROR("cannot start the exporter thread (%s): spans will be dropped", strerror(rc));
        }
    }
    pthread_mutex_unlock(&t->mu);
}

/* Counts the start before the span touches the pipeline, then re-checks
 * `closed`: shutdown sets `closed` before it reads the counters (both
 * seq_cst), so either it sees this start as an open span and keeps the
 * pipeline alive, or this thread sees `closed` and backs out. */
bool mst_tracer_span_enter(mst_tracer *t) {
    mst_tracer_shard *sh = mst_tracer_my_shard(t);
    atomic_fetch_add_explicit(&sh->started, 1, memory_order_seq_cst);
    if (__builtin_expect(atomic_load_explicit(&t->closed, memory_order_seq_cst) != 0, 0)) {
        atomic_fetch_sub_explicit(&sh->started, 1, memory_order_release);
        return false;
    }
    return true;
}

void mst_tracer_span_enter_failed(mst_tracer *t) {
    atomic_fetch_sub_explicit(&mst_tracer_my_shard(t)->started, 1, memory_order_release);
}

void mst_tracer_span_started(mst_tracer *t) {
    if (__builtin_expect(atomic_load_explicit(&t->thread_state, memory_order_relaxed) == MST_THREAD_NONE, 0))
        start_thread(t);
}

/* Wakes the exporter thread if it sleeps. Only the producer that flips the
 * flag takes the lock, so a burst costs one wake-up. */
static void wake_exporter(mst_tracer *t) {
    if (atomic_load(&t->sleeping) && atomic_exchange(&t->sleeping, 0)) {
        pthread_mutex_lock(&t->mu);
        pthread_cond_signal(&t->wake);
        pthread_mutex_unlock(&t->mu);
    }
}

void mst_tracer_count_unsampled(mst_tracer *t) {
    atomic_fetch_add_explicit(&mst_tracer_my_shard(t)->unsampled, 1, memory_order_relaxed);
}

/* `ended` is counted last, with release: once shutdown sees every started
 * span ended, no mst_span_end is still pushing into the queue or the pool
 * it is about to drain and free. */
void mst_tracer_submit(mst_tracer *t, mst_span *s) {
    mst_tracer_shard *sh = mst_tracer_my_shard(t);
    uint64_t depth = 0;
    if (__builtin_expect(s->fork_epoch != atomic_load_explicit(&g_fork_epoch, memory_order_relaxed), 0) &&
        !fork_adopt(t, sh, s))
        return;
    if (t->opts.export_errors_only && s->status_code != MST_STATUS_ERROR) {
        atomic_fetch_add_explicit(&sh->filtered, 1, memory_order_relaxed);
        mst_tracer_span_free(t, s);
    } else if (__builtin_expect(mst_tracer_is_closed(t) || !mst_queue_push(&t->queue, s, &depth), 0)) {
        atomic_fetch_add_explicit(&sh->dropped, 1, memory_order_relaxed);
        mst_tracer_span_free(t, s);
    } else if (__builtin_expect(depth >= t->opts.max_export_batch_size, 0)) {
        wake_exporter(t);
    }
    atomic_fetch_add_explicit(&sh->ended, 1, memory_order_release);
}

void mst_tracer_discard(mst_tracer *t, mst_span *s) {
    mst_tracer_shard *sh = mst_tracer_my_shard(t);
    if (__builtin_expect(s->fork_lineage != atomic_load_explicit(&g_fork_lineage, memory_order_relaxed), 0)) {
        mst_tracer_span_free(t, s); /* inherited from the parent: never counted here */
        return;
    }
    atomic_fetch_add_explicit(&sh->filtered, 1, memory_order_relaxed);
    mst_tracer_span_free(t, s);
    atomic_fetch_add_explicit(&sh->ended, 1, memory_order_release);
}

/* ------------------------------------------------------ exporter thread */

/* A batch counts as exported when at least one exporter delivered it (or
 * there is none): sinks are independent (docs/reference/behaviour.md: "Perfetto forwarder not
 * running → Jaeger unaffected"), so an absent forwarder must not make
 * spans that reached Jaeger look lost. It counts as failed only when no
 * exporter delivered it. Per-sink truth is in each exporter's stats. */
static void export_batch(mst_tracer *t, size_t n) {
    size_t ne = atomic_load_explicit(&t->n_exporters, memory_order_acquire);
    bool ok = ne == 0;
    for (size_t i = 0; i < n; i++) mst_span_expand_links((mst_span *)t->batch[i]);
    for (size_t i = 0; i < ne; i++) {
        mst_exporter *e = t->exporters[i];
        mst_status st = e->ops->export_batch(e, (const mst_span *const *)t->batch, n);
        if (st == MST_OK) ok = true;
    }
    atomic_fetch_add_explicit(ok ? &t->exported : &t->failed, n, memory_order_relaxed);
    if (ok) atomic_fetch_add_explicit(&t->batches, 1, memory_order_relaxed);
    for (size_t i = 0; i < n; i++) mst_tracer_span_free(t, (mst_span *)t->batch[i]);
    atomic_fetch_add_explicit(&t->completed, n, memory_order_release);
}

/* Pops up to one batch; waits (yielding) for items claimed but not yet
 * published when `upto` says they must be taken. */
static size_t pop_batch(mst_tracer *t, uint64_t upto) {
    size_t n = 0, max = t->opts.max_export_batch_size;
    while (n < max && mst_queue_deq_pos(&t->queue) < upto) {
        void *p = mst_queue_pop(&t->queue);
        if (p) t->batch[n++] = p;
        else if (n) break;               /* export what we have first */
        else sched_yield();              /* a producer is mid-push */
    }
    return n;
}

/* Exports full batches; when drain_all, everything queued before now. */
static void export_ready(mst_tracer *t, bool drain_all) {
    uint64_t target = mst_queue_enq_pos(&t->queue);
    for (;;) {
        if (atomic_load_explicit(&t->abandon, memory_order_relaxed)) return;
        uint64_t size = mst_queue_size(&t->queue);
        if (!drain_all && size < t->opts.max_export_batch_size) return;
        uint64_t upto = drain_all ? target : mst_queue_enq_pos(&t->queue);
        if (mst_queue_deq_pos(&t->queue) >= upto) return;
        size_t n = pop_batch(t, upto);
        if (n) export_batch(t, n);
    }
}

static void exporters_after_fork(mst_tracer *t) {
    size_t ne = atomic_load_explicit(&t->n_exporters, memory_order_acquire);
    for (size_t i = 0; i < ne; i++)
        if (t->exporters[i]->ops->after_fork_child) t->exporters[i]->ops->after_fork_child(t->exporters[i]);
}

/* Shutdown ran out of time: the export in flight must not hold the join for
 * a whole export timeout (the abandon flag only stops the batches after it). */
static void exporters_cancel(mst_tracer *t) {
    size_t ne = atomic_load_explicit(&t->n_exporters, memory_order_acquire);
    for (size_t i = 0; i < ne; i++)
        if (t->exporters[i]->ops->cancel) t->exporters[i]->ops->cancel(t->exporters[i]);
}

static void exporters_flush(mst_tracer *t, uint32_t timeout_ms) {
    size_t ne = atomic_load_explicit(&t->n_exporters, memory_order_acquire);
    for (size_t i = 0; i < ne; i++)
        if (t->exporters[i]->ops->flush) t->exporters[i]->ops->flush(t->exporters[i], timeout_ms);
}

static void *exporter_main(void *arg) {
    mst_tracer *t = arg;
    pthread_setname_np(pthread_self(), "mstrace-export");
    if (atomic_exchange(&t->fork_pending, 0)) exporters_after_fork(t);
    uint64_t batch = t->opts.max_export_batch_size;
    pthread_mutex_lock(&t->mu);
    uint64_t deadline = mst_clock_monotonic_ms() + t->opts.schedule_delay_ms;
    for (;;) {
        while (!t->stop && t->flush_seen == t->flush_req && mst_queue_size(&t->queue) < batch &&
               mst_clock_monotonic_ms() < deadline) {
            atomic_store(&t->sleeping, 1);
            /* Re-check after announcing sleep: a producer that pushed before
             * seeing the flag is visible here (seq_cst on both sides). */
            if (mst_queue_size(&t->queue) >= batch) {
                atomic_store(&t->sleeping, 0);
                break;
            }
            struct timespec ts = mono_deadline(deadline);
            pthread_cond_timedwait(&t->wake, &t->mu, &ts);
            atomic_store(&t->sleeping, 0);
        }
        uint64_t req = t->flush_req;
        bool flushing = req != t->flush_seen;
        bool timer = mst_clock_monotonic_ms() >= deadline;
        bool stop = t->stop;
        uint32_t ftimeout = t->flush_timeout_ms;
        pthread_mutex_unlock(&t->mu);

        export_ready(t, flushing || timer || stop);
        if (flushing) exporters_flush(t, ftimeout);

        pthread_mutex_lock(&t->mu);
        if (timer || flushing) deadline = mst_clock_monotonic_ms() + t->opts.schedule_delay_ms;
        t->flush_seen = req;
        pthread_cond_broadcast(&t->done);
        if (stop) break;
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* ---------------------------------------------------- flush / shutdown */

static mst_status flush_impl(mst_tracer *t, uint32_t timeout_ms) {
    if (!timeout_ms) timeout_ms = t->opts.export_timeout_ms;
    if (atomic_load(&t->thread_state) == MST_THREAD_NONE && mst_queue_size(&t->queue) > 0) start_thread(t);
    if (atomic_load(&t->thread_state) != MST_THREAD_RUNNING)
        return mst_queue_size(&t->queue) ? MST_ERR_UNAVAILABLE : MST_OK;
    uint64_t deadline = mst_clock_monotonic_ms() + timeout_ms;
    pthread_mutex_lock(&t->mu);
    uint64_t target = mst_queue_enq_pos(&t->queue);
    uint64_t my_req = ++t->flush_req;
    t->flush_timeout_ms = timeout_ms;
    pthread_cond_signal(&t->wake);
    mst_status st = MST_OK;
    while (atomic_load(&t->completed) < target || t->flush_seen < my_req) {
        struct timespec ts = mono_deadline(deadline);
        if (pthread_cond_timedwait(&t->done, &t->mu, &ts) == ETIMEDOUT &&
            (atomic_load(&t->completed) < target || t->flush_seen < my_req)) {
            st = MST_ERR_TIMEOUT;
            break;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

mst_status mst_tracer_flush(mst_tracer *t, uint32_t timeout_ms) {
    if (!t) return MST_ERR_INVALID_ARG;
    if (mst_tracer_is_closed(t)) return MST_ERR_CLOSED;
    return flush_impl(t, timeout_ms);
}

static uint64_t open_spans(mst_tracer *t) {
    uint64_t started = 0, ended = 0;
    for (int i = 0; i < MST_TRACER_SHARDS; i++) {
        started += atomic_load(&t->shards[i].started);
        ended += atomic_load(&t->shards[i].ended);
    }
    return started > ended ? started - ended : 0;
}

mst_status mst_tracer_shutdown(mst_tracer *t, uint32_t timeout_ms) {
    if (!t) return MST_ERR_INVALID_ARG;
    if (atomic_exchange(&t->closed, 1)) return MST_ERR_CLOSED;
    mst_status st = flush_impl(t, timeout_ms);
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    if (st != MST_OK) atomic_store(&t->abandon, 1);
    pthread_cond_signal(&t->wake);
    pthread_mutex_unlock(&t->mu);
    /* The timeout is spent: cancel the export in flight rather than wait
     * for it (up to a whole export timeout) in the join. */
    if (st != MST_OK) exporters_cancel(t);
    if (atomic_load(&t->thread_state) == MST_THREAD_RUNNING) pthread_join(t->thread, NULL);
    atomic_store(&t->thread_state, MST_THREAD_FAILED);

    /* Spans still open on other threads will end into this tracer: give
     * them a moment, and never free memory they could still touch. */
    uint64_t grace_end = mst_clock_monotonic_ms() + SHUTDOWN_OPEN_SPAN_GRACE_MS;
    uint64_t open;
    while ((open = open_spans(t)) > 0 && mst_clock_monotonic_ms() < grace_end) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    /* What the exporter thread did not take counts as failed. */
    void *p;
    while ((p = mst_queue_pop(&t->queue)) != NULL) {
        atomic_fetch_add(&t->failed, 1);
        mst_tracer_span_free(t, p);
    }
    if (st != MST_OK) MST_WARN("tracer shutdown: flush did not finish (%s)", mst_strerror(st));

    registry_remove(t);
    if (atomic_exchange(&t->fork_pending, 0)) exporters_after_fork(t);
    size_t ne = atomic_load(&t->n_exporters);
    for (size_t i = 0; i < ne; i++)
        if (t->exporters[i]->ops->destroy) t->exporters[i]->ops->destroy(t->exporters[i]);
    atomic_store(&t->n_exporters, 0);
    if (open > 0) {
        /* Keep queue, pool and counters alive for the late mst_span_end
         * calls (they are counted as dropped); only this pipeline leaks. */
        MST_WARN("tracer shutdown: %llu span(s) still open; keeping the pipeline memory",
                 (unsigned long long)open);
        return st;
    }
    while ((p = mst_queue_pop(&t->pool)) != NULL) free_span_record(p, NULL);
    mst_queue_destroy(&t->queue);
    mst_queue_destroy(&t->pool);
    while (t->scopes) {
        mst_scope *n = t->scopes->next;
        free(t->scopes);
        t->scopes = n;
    }
    mst_resource_release(&t->resource);
    pthread_mutex_destroy(&t->mu);
    pthread_mutex_destroy(&t->scope_mu);
    pthread_cond_destroy(&t->wake);
    pthread_cond_destroy(&t->done);
    free(t->batch);
    free(t);
    return st;
}

/* ---------------------------------------------------------------- stats */

void mst_tracer_get_stats(mst_tracer *t, mst_tracer_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof(*out));
    if (!t) return;
    uint64_t started = 0, ended = 0, dropped = 0, filtered = 0, unsampled = 0;
    for (int i = 0; i < MST_TRACER_SHARDS; i++) {
        unsampled += atomic_load_explicit(&t->shards[i].unsampled, memory_order_relaxed);
        started += atomic_load_explicit(&t->shards[i].started, memory_order_relaxed);
        ended += atomic_load_explicit(&t->shards[i].ended, memory_order_relaxed);
        dropped += atomic_load_explicit(&t->shards[i].dropped, memory_order_relaxed);
        filtered += atomic_load_explicit(&t->shards[i].filtered, memory_order_relaxed);
    }
    out->spans_started = started;
    out->spans_ended = ended;
    out->spans_dropped = dropped;
    out->spans_filtered = filtered;
    out->spans_unsampled = unsampled;
    out->spans_queued = ended >= dropped + filtered ? ended - dropped - filtered : 0;
    out->spans_exported = atomic_load(&t->exported);
    out->spans_failed = atomic_load(&t->failed);
    out->batches_exported = atomic_load(&t->batches);
    uint64_t depth = t->queue.cells ? mst_queue_size(&t->queue) : 0;
    out->queue_depth = depth > UINT32_MAX ? UINT32_MAX : (uint32_t)depth;
}
