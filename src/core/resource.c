/*
 * resource.c — the OTel resource of a tracer (resource.h).
 *
 * Owns: reading OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (W3C-baggage
 * style "k=v,k2=v2", optional whitespace trimmed, percent-decoded; a bad
 * entry is warned about and skipped) and adding the process and SDK facts
 * (process.pid, process.executable.name, telemetry.sdk.*). The process and
 * SDK attributes are set last so they always describe the real process
 * (a forked child rebuilds its resource to get its own pid); and the one
 * resource of spans no tracer recorded (mst_resource_untraced).
 */
#include "core/resource.h"

#include "core/log.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static mst_attr *find_attr(mst_resource *res, const char *key, size_t klen) {
    for (uint32_t i = 0; i < res->n_attrs; i++)
        if (res->attrs[i].key.len == klen && memcmp(res->attrs[i].key.ptr, key, klen) == 0)
            return &res->attrs[i];
    return NULL;
}

/* Finds or appends the slot for `key` (the key copied on append); NULL when
 * the table is full (counted) or malloc fails. */
static mst_attr *slot_for(mst_resource *res, const char *key, size_t klen) {
    mst_attr *a = find_attr(res, key, klen);
    if (a) return a;
    if (res->n_attrs == MST_MAX_ATTRIBUTES) {
        res->dropped_attrs++;
        return NULL;
    }
    size_t n;
    char *k = mst_arena_strndup(&res->arena, key, klen, MST_MAX_KEY_LEN, &n);
    if (!k) return NULL;
    a = &res->attrs[res->n_attrs++];
    a->key.ptr = k;
    a->key.len = (uint32_t)n;
    return a;
}

static mst_status set_strn(mst_resource *res, const char *key, size_t klen, const char *val,
                           size_t vlen) {
    mst_attr *a = slot_for(res, key, klen);
    if (!a) return res->n_attrs == MST_MAX_ATTRIBUTES ? MST_ERR_TOO_LARGE : MST_ERR_NOMEM;
    size_t n;
    char *v = mst_arena_strndup(&res->arena, val, vlen, MST_MAX_VALUE_LEN, &n);
    if (!v) return MST_ERR_NOMEM;
    a->type = MST_ATTR_STRING;
    a->v.s.ptr = v;
    a->v.s.len = (uint32_t)n;
    if (klen == 12 && memcmp(key, "service.name", 12) == 0) res->service_name = a->v.s;
    return MST_OK;
}

mst_status mst_resource_set_str(mst_resource *res, const char *key, const char *value) {
    if (!res || !key || !*key || !value) return MST_ERR_INVALID_ARG;
    return set_strn(res, key, strlen(key), value, strlen(value));
}

static mst_status set_int(mst_resource *res, const char *key, int64_t v) {
    mst_attr *a = slot_for(res, key, strlen(key));
    if (!a) return MST_ERR_TOO_LARGE;
    a->type = MST_ATTR_INT;
    a->v.i = v;
    return MST_OK;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decodes s[0..n) into out (at least n bytes); false on a bad escape. */
static bool pct_decode(const char *s, size_t n, char *out, size_t *out_len) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            if (i + 2 >= n) return false;
            int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
            if (hi < 0 || lo < 0) return false;
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    *out_len = o;
    return true;
}

static void trim(const char **s, size_t *n) {
    while (*n && ((*s)[0] == ' ' || (*s)[0] == '\t')) { (*s)++; (*n)--; }
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t')) (*n)--;
}

/* One "key=value" entry of OTEL_RESOURCE_ATTRIBUTES. */
static void parse_entry(mst_resource *res, const char *e, size_t n) {
    trim(&e, &n);
    if (n == 0) return;
    const char *eq = memchr(e, '=', n);
    const char *k = e, *v = eq ? eq + 1 : NULL;
    size_t kn = eq ? (size_t)(eq - e) : n, vn = eq ? n - kn - 1 : 0;
    trim(&k, &kn);
    if (v) trim(&v, &vn);
    char *kbuf = malloc(kn + 1), *vbuf = malloc(vn + 1);
    size_t kl = 0, vl = 0;
    if (!kbuf || !vbuf) goto out;
    if (!eq || kn == 0 || !pct_decode(k, kn, kbuf, &kl) || kl == 0 || !pct_decode(v, vn, vbuf, &vl)) {
        MST_WARN("OTEL_RESOURCE_ATTRIBUTES: ignoring invalid entry \"%.*s\"", (int)(n > 200 ? 200 : n), e);
        goto out;
    }
    /* Keep room for the 5 process/SDK attributes added after this. */
    if (!find_attr(res, kbuf, kl) && res->n_attrs >= MST_MAX_ATTRIBUTES - 5) {
        res->dropped_attrs++;
        MST_WARN("OTEL_RESOURCE_ATTRIBUTES: too many attributes (max %d with the process ones), \"%.*s\" dropped", MST_MAX_ATTRIBUTES,
                 (int)(kl > 128 ? 128 : kl), kbuf);
        goto out;
    }
    set_strn(res, kbuf, kl, vbuf, vl);
out:
    free(kbuf);
    free(vbuf);
}

static void parse_resource_attributes(mst_resource *res, const char *env) {
    size_t len = strlen(env), pos = 0;
    while (pos <= len) {
        const char *comma = memchr(env + pos, ',', len - pos);
        size_t end = comma ? (size_t)(comma - env) : len;
        parse_entry(res, env + pos, end - pos);
        if (!comma) break;
        pos = end + 1;
    }
}

static void executable_name(char *out, size_t size) {
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    const char *name = program_invocation_short_name;
    if (n > 0) {
        path[n] = '\0';
        const char *slash = strrchr(path, '/');
        name = slash ? slash + 1 : path;
    }
    if (!name) name = "";
    size_t len = strlen(name);
    if (len >= size) len = size - 1;
    memcpy(out, name, len);
    out[len] = '\0';
}

mst_status mst_resource_init_from_env(mst_resource *res) {
    if (!res) return MST_ERR_INVALID_ARG;
    res->n_attrs = 0;
    res->dropped_attrs = 0;
    res->service_name.ptr = "";
    res->service_name.len = 0;
    mst_arena_init(&res->arena);
    /* service.name first so it leads the list; its value is fixed below. */
    mst_status st = mst_resource_set_str(res, "service.name", "unknown_service");
    if (st != MST_OK) return st;
    const char *attrs = getenv("OTEL_RESOURCE_ATTRIBUTES");
    if (attrs && *attrs) parse_resource_attributes(res, attrs);
    const char *svc = getenv("OTEL_SERVICE_NAME");
    if (svc && *svc) mst_resource_set_str(res, "service.name", svc);
    char exe[256];
    executable_name(exe, sizeof exe);
    if (set_int(res, "process.pid", (int64_t)getpid()) != MST_OK ||
        mst_resource_set_str(res, "process.executable.name", exe) != MST_OK ||
        mst_resource_set_str(res, "telemetry.sdk.name", "mstrace") != MST_OK ||
        mst_resource_set_str(res, "telemetry.sdk.language", "c") != MST_OK ||
        mst_resource_set_str(res, "telemetry.sdk.version", mst_version()) != MST_OK)
        MST_WARN("resource: too many attributes, some process/SDK attributes were dropped");
    return MST_OK;
}

void mst_resource_release(mst_resource *res) {
    if (!res) return;
    mst_arena_release(&res->arena);
    res->n_attrs = 0;
    res->dropped_attrs = 0;
    res->service_name.ptr = "";
    res->service_name.len = 0;
}

/* ------------------------------------------- spans no tracer recorded */

static pthread_mutex_t g_untraced_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_untraced_once = PTHREAD_ONCE_INIT;
static mst_resource g_untraced;
static bool g_untraced_built;

/* fork() child: the only thread left; the pid changed, so the next use
 * builds the resource again (the lock may have been held by a thread that
 * does not exist here). */
static void untraced_after_fork_child(void) {
    pthread_mutex_init(&g_untraced_mu, NULL);
    if (g_untraced_built) mst_resource_release(&g_untraced);
    g_untraced_built = false;
}

static void untraced_register_atfork(void) { pthread_atfork(NULL, NULL, untraced_after_fork_child); }

const mst_resource *mst_resource_untraced(void) {
    pthread_once(&g_untraced_once, untraced_register_atfork);
    pthread_mutex_lock(&g_untraced_mu);
    if (!g_untraced_built) {
        g_untraced_built = mst_resource_init_from_env(&g_untraced) == MST_OK;
        if (!g_untraced_built) mst_resource_release(&g_untraced);
    }
    const mst_resource *res = g_untraced_built ? &g_untraced : NULL;
    pthread_mutex_unlock(&g_untraced_mu);
    return res;
}
