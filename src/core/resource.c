/*
 * resource.c — the OTel resource of a tracer (resource.h).
 *
 * Owns: reading OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (W3C-baggage
 * style "k=v,k2=v2", optional whitespace trimmed, percent-decoded; a bad
 * entry is warned about and skipped) and adding the process and SDK facts
 * (process.pid, process.executable.name, telemetry.sdk.*). The process and
 * SDK attributes are set last so they always describe the real process
 * (a forked child rebuilds its resource to get its own pid); and the one
 * resource of spans no tracer recorded (mst_resource_untraced); the
 * process role's service names and attributes (mst_resource_set_role).
 */
#include "core/resource.h"

#include "core/log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Set after OTEL_RESOURCE_ATTRIBUTES: 5 process/SDK attributes, and up to
 * 4 of a role (service.namespace, service.instance.id, process.role, a
 * rank). */
#define RESERVED_ATTRS 9

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
    /* Keep room for the process/SDK and role attributes added after this. */
    if (!find_attr(res, kbuf, kl) && res->n_attrs >= MST_MAX_ATTRIBUTES - RESERVED_ATTRS) {
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
    res->role[0] = '\0';
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

/* ------------------------------------------------------- process role */

const char *const mst_resource_role_suffixes[] = {".engine_core", ".worker", NULL};

static bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* The number after `prefix` in `role` ("worker_3" -> 3), -1 when `role`
 * does not start with `prefix` or the rest is not all digits. */
static int64_t rank_after(const char *role, const char *prefix) {
    if (!starts_with(role, prefix)) return -1;
    const char *p = role + strlen(prefix);
    if (!*p) return -1;
    int64_t v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9' || v > INT32_MAX) return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

const char *mst_resource_role_service_suffix(const char *role) {
    if (!role) return "";
    if (strcmp(role, "engine_core") == 0 || rank_after(role, "engine_core_dp") >= 0) return mst_resource_role_suffixes[0];
    if (rank_after(role, "worker_") >= 0) return mst_resource_role_suffixes[1];
    return "";
}

/* MSTRACE_SERVICE_PER_ROLE=1: a service name per role. Off by default, so
 * OTEL_SERVICE_NAME names every process's spans as it says (what dashboards
 * and queries keyed on it expect); the role attributes are set either way. */
static bool per_role_services(void) {
    const char *v = getenv("MSTRACE_SERVICE_PER_ROLE");
    return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
                 strcasecmp(v, "on") == 0);
}

/* Copies `role` into dst[size], cut on a UTF-8 character boundary. */
static void copy_role(char *dst, size_t size, const char *role) {
    size_t n = role ? strlen(role) : 0;
    if (n > size - 1) {
        n = size - 1;
        while (n > 0 && ((unsigned char)role[n] & 0xC0) == 0x80) n--;
    }
    if (n) memcpy(dst, role, n);
    dst[n] = '\0';
}

/* The role's attributes on a resource just built from the environment.
 * What the user set in OTEL_RESOURCE_ATTRIBUTES for service.namespace and
 * service.instance.id stays; process.role and the rank are facts about the
 * process, like process.pid. */
static mst_status apply_role(mst_resource *res) {
    const char *role = res->role;
    char base[MST_MAX_VALUE_LEN + 1];
    size_t bl = res->service_name.len;
    memcpy(base, res->service_name.ptr, bl);
    base[bl] = '\0';
    mst_status st = MST_OK;
    if (!find_attr(res, "service.namespace", 17)) st = mst_resource_set_str(res, "service.namespace", base);
    if (st == MST_OK && !find_attr(res, "service.instance.id", 19)) {
        char host[256] = "";
        if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
        char id[sizeof res->role + 256 + 32];
        snprintf(id, sizeof id, "%s@%s:%ld", role, host, (long)getpid());
        st = mst_resource_set_str(res, "service.instance.id", id);
    }
    if (st == MST_OK) st = mst_resource_set_str(res, "process.role", role);
    int64_t dp = rank_after(role, "engine_core_dp"), wr = rank_after(role, "worker_");
    if (st == MST_OK && dp >= 0) st = set_int(res, "vllm.dp_rank", dp);
    if (st == MST_OK && wr >= 0) st = set_int(res, "vllm.worker.rank", wr);
    const char *suffix = mst_resource_role_service_suffix(role);
    if (st == MST_OK && *suffix && per_role_services()) {
        size_t sl = strlen(suffix);
        if (bl + sl > MST_MAX_VALUE_LEN) bl = MST_MAX_VALUE_LEN - sl;
        memcpy(base + bl, suffix, sl + 1);
        st = mst_resource_set_str(res, "service.name", base);
    }
    if (st != MST_OK) MST_WARN("resource: the process role's attributes were not all set (%s)", mst_strerror(st));
    return st;
}

mst_status mst_resource_set_role(mst_resource *res, const char *role) {
    if (!res) return MST_ERR_INVALID_ARG;
    char kept[sizeof res->role];
    copy_role(kept, sizeof kept, role);
    mst_resource_release(res);
    mst_status st = mst_resource_init_from_env(res);
    if (st != MST_OK || !kept[0]) return st;
    memcpy(res->role, kept, sizeof kept);
    return apply_role(res);
}

mst_status mst_resource_rebuild(mst_resource *res) {
    if (!res) return MST_ERR_INVALID_ARG;
    char kept[sizeof res->role];
    memcpy(kept, res->role, sizeof kept);
    return mst_resource_set_role(res, kept);
}

void mst_resource_release(mst_resource *res) {
    if (!res) return;
    mst_arena_release(&res->arena);
    res->n_attrs = 0;
    res->dropped_attrs = 0;
    res->service_name.ptr = "";
    res->service_name.len = 0;
    res->role[0] = '\0';
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
