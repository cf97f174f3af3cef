/*
 * loss_report.c — encoder and strict decoder of the loss report packet
 * (loss_report.h).
 */
#include "wire/loss_report.h"

#include <string.h>

static void put_be64(uint8_t *p, uint64_t v) {
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static uint64_t get_be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
}

void mst_loss_report_encode(const mst_loss_report *r, uint8_t out[MST_LOSS_REPORT_BYTES]) {
    memcpy(out, MST_LOSS_REPORT_MAGIC, MST_LOSS_REPORT_MAGIC_LEN);
    put_be64(out + MST_LOSS_REPORT_MAGIC_LEN, r->spans_failed);
    put_be64(out + MST_LOSS_REPORT_MAGIC_LEN + 8, r->spans_dropped);
}

bool mst_loss_report_is(const uint8_t *data, size_t len) {
    return data && len >= MST_LOSS_REPORT_MAGIC_LEN &&
           memcmp(data, MST_LOSS_REPORT_MAGIC, MST_LOSS_REPORT_MAGIC_LEN) == 0;
}

bool mst_loss_report_decode(const uint8_t *data, size_t len, mst_loss_report *out) {
    if (len != MST_LOSS_REPORT_BYTES || !mst_loss_report_is(data, len)) return false;
    out->spans_failed = get_be64(data + MST_LOSS_REPORT_MAGIC_LEN);
    out->spans_dropped = get_be64(data + MST_LOSS_REPORT_MAGIC_LEN + 8);
    return true;
}
