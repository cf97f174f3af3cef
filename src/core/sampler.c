/*
 * sampler.c — reading the OTel sampler settings (docs/configuration.md) and turning them
 * into a tracer's sampling plan (sampler.h; applied in span.c).
 *
 * Environment rules, as the OTel SDK configuration spec gives them:
 *   OTEL_SDK_DISABLED   "true" (any case) disables the SDK: no span starts.
 *                       "false"/empty/unset: enabled; anything else: warning,
 *                       enabled.
 *   OTEL_TRACES_SAMPLER always_on, always_off, traceidratio,
 *                       parentbased_always_on (default),
 *                       parentbased_always_off, parentbased_traceidratio
 *                       (any case, surrounding blanks ignored). The known
 *                       but unsupported jaeger_remote,
 *                       parentbased_jaeger_remote and xray, or any other
 *                       name: one warning, default.
 *   OTEL_TRACES_SAMPLER_ARG  for the *traceidratio samplers only: a decimal
 *                       probability 0..1, default 1.0; anything else: one
 *                       warning, 1.0. Ignored by the other samplers.
 * The number is parsed in the "C" locale: a host process (Python) may have
 * set LC_NUMERIC to a locale whose decimal separator is a comma.
 */
#include "core/sampler.h"

#include "core/log.h"

#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_RATIO 1.0

typedef struct sampler_name {
    const char *name;
    int kind; /* mst_sampler_kind, or -1: known but unsupported */
} sampler_name;

static const sampler_name k_names[] = {
    {"parentbased_always_on", MST_SAMPLER_PARENTBASED_ALWAYS_ON},
    {"parentbased_always_off", MST_SAMPLER_PARENTBASED_ALWAYS_OFF},
    {"parentbased_traceidratio", MST_SAMPLER_PARENTBASED_TRACEIDRATIO},
    {"always_on", MST_SAMPLER_ALWAYS_ON},
    {"always_off", MST_SAMPLER_ALWAYS_OFF},
    {"traceidratio", MST_SAMPLER_TRACEIDRATIO},
    {"jaeger_remote", -1},
    {"parentbased_jaeger_remote", -1},
    {"xray", -1},
};

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

/* The value without surrounding blanks: *len gets its length. */
static const char *trimmed(const char *v, size_t *len) {
    while (is_blank(*v)) v++;
    size_t n = strlen(v);
    while (n && is_blank(v[n - 1])) n--;
    *len = n;
    return v;
}

static bool is_ratio_kind(mst_sampler_kind k) {
    return k == MST_SAMPLER_TRACEIDRATIO || k == MST_SAMPLER_PARENTBASED_TRACEIDRATIO;
}

static bool env_sdk_disabled(void) {
    const char *v = getenv("OTEL_SDK_DISABLED");
    if (!v) return false;
    size_t n;
    const char *p = trimmed(v, &n);
    if (n == 4 && strncasecmp(p, "true", 4) == 0) return true;
    if (n != 0 && !(n == 5 && strncasecmp(p, "false", 5) == 0))
        MST_WARN("OTEL_SDK_DISABLED=\"%s\" is not true or false, treating it as false", v);
    return false;
}

static mst_sampler_kind env_sampler_kind(void) {
    const char *v = getenv("OTEL_TRACES_SAMPLER");
    if (!v) return MST_SAMPLER_PARENTBASED_ALWAYS_ON;
    size_t n;
    const char *p = trimmed(v, &n);
    if (n == 0) return MST_SAMPLER_PARENTBASED_ALWAYS_ON;
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++) {
        if (strlen(k_names[i].name) != n || strncasecmp(p, k_names[i].name, n) != 0) continue;
        if (k_names[i].kind >= 0) return (mst_sampler_kind)k_names[i].kind;
        MST_WARN("OTEL_TRACES_SAMPLER=\"%s\" is unsupported by mstrace, using parentbased_always_on", v);
        return MST_SAMPLER_PARENTBASED_ALWAYS_ON;
    }
    MST_WARN("OTEL_TRACES_SAMPLER=\"%s\" is not a known sampler, using parentbased_always_on", v);
    return MST_SAMPLER_PARENTBASED_ALWAYS_ON;
}

/* Decimal only: [+]digits[.digits][(e|E)[+|-]digits], at least one digit
 * in the mantissa (so no "nan", "inf", hex floats or a lone "."). */
static bool decimal_syntax(const char *p, size_t n) {
    size_t i = 0, digits = 0;
    if (i < n && p[i] == '+') i++;
    for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) digits++;
    if (i < n && p[i] == '.')
        for (i++; i < n && p[i] >= '0' && p[i] <= '9'; i++) digits++;
    if (!digits) return false;
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        size_t exp_digits = 0;
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-')) i++;
        for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) exp_digits++;
        if (!exp_digits) return false;
    }
    return i == n;
}

static bool parse_c_double(const char *p, size_t n, double *out) {
    char buf[64];
    if (n >= sizeof buf || !decimal_syntax(p, n)) return false;
    memcpy(buf, p, n);
    buf[n] = '\0';
    char *end = NULL;
    locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    double d = c ? strtod_l(buf, &end, c) : strtod(buf, &end);
    if (c) freelocale(c);
    if (end != buf + n) return false;
    *out = d;
    return true;
}

static double env_ratio(void) {
    const char *v = getenv("OTEL_TRACES_SAMPLER_ARG");
    if (!v) return DEFAULT_RATIO;
    size_t n;
    const char *p = trimmed(v, &n);
    if (n == 0) return DEFAULT_RATIO;
    double d = 0;
    if (!parse_c_double(p, n, &d) || !(d >= 0.0 && d <= 1.0)) {
        MST_WARN("OTEL_TRACES_SAMPLER_ARG=\"%s\" is not a probability between 0 and 1, using %.1f", v,
                 DEFAULT_RATIO);
        return DEFAULT_RATIO;
    }
    return d;
}

void mst_sampler_options_from_env(mst_tracer_options *opts) {
    opts->sdk_disabled = env_sdk_disabled();
    opts->sampler = env_sampler_kind();
    opts->sampler_ratio = is_ratio_kind(opts->sampler) ? env_ratio() : DEFAULT_RATIO;
}

/* The root rule of a ratio: 1 keeps all and 0 none without reading the
 * trace id; otherwise key < ratio * 2^63 (exact: ratio < 1 keeps the
 * product below 2^63, and key <= 2^63 - 1). */
static void plan_ratio(mst_sampler *s, double ratio) {
    if (ratio >= 1.0) {
        s->root = MST_ROOT_ALL;
    } else if (ratio <= 0.0) {
        s->root = MST_ROOT_NONE;
    } else {
        s->root = MST_ROOT_RATIO;
        s->bound = (uint64_t)ldexp(ratio, 63);
    }
}

void mst_sampler_init(mst_sampler *s, mst_tracer_options *opts) {
    s->root = MST_ROOT_ALL;
    s->parent_based = true;
    s->bound = 0;
    if ((unsigned)opts->sampler > MST_SAMPLER_TRACEIDRATIO) {
        MST_WARN("unknown sampler kind %d, using parentbased_always_on", (int)opts->sampler);
        opts->sampler = MST_SAMPLER_PARENTBASED_ALWAYS_ON;
    }
    if (is_ratio_kind(opts->sampler) && !(opts->sampler_ratio >= 0.0 && opts->sampler_ratio <= 1.0)) {
        MST_WARN("sampler ratio %g is not a probability between 0 and 1, using %.1f", opts->sampler_ratio,
                 DEFAULT_RATIO);
        opts->sampler_ratio = DEFAULT_RATIO;
    }
    if (opts->sdk_disabled) {
        /* The kill switch wins over any sampler and any parent. */
        s->parent_based = false;
        s->root = MST_ROOT_NONE;
        return;
    }
    switch (opts->sampler) {
    case MST_SAMPLER_PARENTBASED_ALWAYS_ON: break;
    case MST_SAMPLER_PARENTBASED_ALWAYS_OFF: s->root = MST_ROOT_NONE; break;
    case MST_SAMPLER_PARENTBASED_TRACEIDRATIO: plan_ratio(s, opts->sampler_ratio); break;
    case MST_SAMPLER_ALWAYS_ON: s->parent_based = false; break;
    case MST_SAMPLER_ALWAYS_OFF:
        s->parent_based = false;
        s->root = MST_ROOT_NONE;
        break;
    case MST_SAMPLER_TRACEIDRATIO:
        s->parent_based = false;
        plan_ratio(s, opts->sampler_ratio);
        break;
    }
}
