/*
 * context.c — W3C Trace Context: strict traceparent/tracestate parsing and
 * traceparent formatting (docs/reference/otlp.md "W3C trace context", mstrace.h).
 *
 * Owns: the validation rules of https://www.w3.org/TR/trace-context/ —
 * lowercase hex, all-zero ids and version ff rejected, the version-00 exact
 * length, the forward-compatibility rule for later versions, and the
 * tracestate list-member grammar (simple and multi-tenant keys, value
 * characters, at most 32 members, no duplicate keys). Surrounding optional
 * whitespace (space/tab) is tolerated as HTTP allows it. A tracestate is
 * stored normalised (members joined by ',' with no whitespace or empty
 * members) so that parse -> store -> parse is stable.
 */
#include "mstrace.h"

#include <string.h>

#define TP_V0_LEN 55
#define TS_MAX_MEMBERS 32

bool mst_ctx_is_valid(const mst_span_context *ctx) {
    return ctx && mst_trace_id_is_valid(&ctx->trace_id) && mst_span_id_is_valid(&ctx->span_id);
}

static bool is_ows(char c) { return c == ' ' || c == '\t'; }

static void trim_ows(const char **s, size_t *len) {
    while (*len && is_ows((*s)[0])) { (*s)++; (*len)--; }
    while (*len && is_ows((*s)[*len - 1])) (*len)--;
}

static int hex_val(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static int hex_byte(const char *p) {
    int hi = hex_val(p[0]), lo = hex_val(p[1]);
    return (hi < 0 || lo < 0) ? -1 : (hi << 4 | lo);
}

mst_status mst_ctx_parse_traceparent(const char *header, size_t len, mst_span_context *out) {
    if (!header || !out) return MST_ERR_INVALID_ARG;
    const char *s = header;
    trim_ows(&s, &len);
    if (len < TP_V0_LEN) return MST_ERR_PARSE;
    int version = hex_byte(s);
    if (version < 0 || version == 0xff) return MST_ERR_PARSE;
    /* Version 00 is exactly 55 chars; a later version may append "-...". */
    if (version == 0 ? len != TP_V0_LEN : (len > TP_V0_LEN && s[TP_V0_LEN] != '-'))
        return MST_ERR_PARSE;
    if (s[2] != '-' || s[35] != '-' || s[52] != '-') return MST_ERR_PARSE;
    mst_span_context ctx;
    if (mst_trace_id_from_hex(s + 3, 32, &ctx.trace_id) != MST_OK) return MST_ERR_PARSE;
    if (mst_span_id_from_hex(s + 36, 16, &ctx.span_id) != MST_OK) return MST_ERR_PARSE;
    int flags = hex_byte(s + 53);
    if (flags < 0) return MST_ERR_PARSE;
    ctx.trace_flags = (uint8_t)flags;
    ctx.is_remote = true;
    ctx.trace_state_len = 0;
    ctx.trace_state[0] = '\0';
    out->trace_id = ctx.trace_id;
    out->span_id = ctx.span_id;
    out->trace_flags = ctx.trace_flags;
    out->is_remote = true;
    out->trace_state_len = 0;
    out->trace_state[0] = '\0';
    return MST_OK;
}

mst_status mst_ctx_format_traceparent(const mst_span_context *ctx, char *out, size_t out_size) {
    if (!ctx || !out || out_size < TP_V0_LEN + 1 || !mst_ctx_is_valid(ctx)) return MST_ERR_INVALID_ARG;
    static const char digits[] = "0123456789abcdef";
    out[0] = '0';
    out[1] = '0';
    out[2] = '-';
    mst_trace_id_to_hex(&ctx->trace_id, out + 3);
    out[35] = '-';
    mst_span_id_to_hex(&ctx->span_id, out + 36);
    out[52] = '-';
    out[53] = digits[ctx->trace_flags >> 4];
    out[54] = digits[ctx->trace_flags & 15];
    out[55] = '\0';
    return MST_OK;
}

/* ------------------------------------------------------------ tracestate */

static bool is_lcalpha(char c) { return c >= 'a' && c <= 'z'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_key_char(char c) {
    return is_lcalpha(c) || is_digit(c) || c == '_' || c == '-' || c == '*' || c == '/';
}

/* key = simple-key / multi-tenant-key:
 *   simple-key   = lcalpha 0*255( lcalpha / DIGIT / "_" / "-"/ "*" / "/" )
 *   tenant-id    = ( lcalpha / DIGIT ) 0*240( same set )
 *   system-id    = lcalpha 0*13( same set ) */
static bool valid_key(const char *k, size_t n) {
    if (n == 0) return false;
    const char *at = memchr(k, '@', n);
    if (!at) {
        if (n > 256 || !is_lcalpha(k[0])) return false;
        for (size_t i = 1; i < n; i++)
            if (!is_key_char(k[i])) return false;
        return true;
    }
    size_t tn = (size_t)(at - k), sn = n - tn - 1;
    if (tn == 0 || tn > 241 || sn == 0 || sn > 14) return false;
    if (!is_lcalpha(k[0]) && !is_digit(k[0])) return false;
    for (size_t i = 1; i < tn; i++)
        if (!is_key_char(k[i])) return false;
    if (!is_lcalpha(at[1])) return false;
    for (size_t i = 1; i < sn; i++)
        if (!is_key_char(at[1 + i])) return false;
    return true;
}

/* value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr;
 * nblk-chr = %x21-2B / %x2D-3C / %x3E-7E (no ',' or '=') */
static bool valid_value(const char *v, size_t n) {
    if (n == 0 || n > 256) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c < 0x20 || c > 0x7e || c == ',' || c == '=') return false;
    }
    return v[n - 1] != ' ';
}

mst_status mst_ctx_parse_tracestate(const char *header, size_t len, mst_span_context *ctx) {
    if (!ctx) return MST_ERR_INVALID_ARG;
    ctx->trace_state_len = 0;
    ctx->trace_state[0] = '\0';
    if (!header) return MST_ERR_INVALID_ARG;
    char norm[MST_TRACESTATE_MAX + 1];
    size_t out_len = 0;
    struct { const char *k; size_t n; } keys[TS_MAX_MEMBERS];
    size_t n_members = 0;
    size_t pos = 0;
    while (pos <= len) {
        const char *comma = memchr(header + pos, ',', len - pos);
        size_t end = comma ? (size_t)(comma - header) : len;
        const char *m = header + pos;
        size_t mn = end - pos;
        trim_ows(&m, &mn);
        pos = end + 1;
        if (mn == 0) {  /* empty list-members are allowed and skipped */
            if (!comma) break;
            continue;
        }
        const char *eq = memchr(m, '=', mn);
        if (!eq) return MST_ERR_PARSE;
        size_t kn = (size_t)(eq - m);
        if (!valid_key(m, kn) || !valid_value(eq + 1, mn - kn - 1)) return MST_ERR_PARSE;
        if (n_members == TS_MAX_MEMBERS) return MST_ERR_PARSE;
        for (size_t i = 0; i < n_members; i++)
            if (keys[i].n == kn && memcmp(keys[i].k, m, kn) == 0) return MST_ERR_PARSE;
        keys[n_members].k = m;
        keys[n_members].n = kn;
        n_members++;
        size_t need = mn + (out_len ? 1 : 0);
        if (out_len + need > MST_TRACESTATE_MAX) return MST_ERR_PARSE;
        if (out_len) norm[out_len++] = ',';
        memcpy(norm + out_len, m, mn);
        out_len += mn;
        if (!comma) break;
    }
    memcpy(ctx->trace_state, norm, out_len);
    ctx->trace_state[out_len] = '\0';
    ctx->trace_state_len = (uint16_t)out_len;
    return MST_OK;
}
