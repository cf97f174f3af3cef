/*
 * fuzz_flight_trigger.c — libFuzzer target for the flight recorder's
 * command-line parsers (forward/flight_trigger.h): the input is tried as a
 * --trigger expression, a --flight-recorder capacity, a duration and a
 * size. Whatever parses must be in range and parse again to the same value
 * from its own text; nothing may read past the input.
 */
#include <stdlib.h>
#include <string.h>

#include "forward/flight_trigger.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 256) return 0;
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    char err[200];
    mst_flight_trigger t, u;
    if (mst_flight_parse_trigger(s, &t, err, sizeof err) == MST_OK) {
        if (strcmp(t.text, s) != 0 || (unsigned)t.metric >= MST_FLIGHT_METRICS) abort();
        if (t.kind == MST_FLIGHT_ABOVE && t.threshold_ns <= 0) abort();
        if (t.kind == MST_FLIGHT_ABOVE_PCT &&
            (!(t.percentile > 0 && t.percentile < 100) || t.window_min < 1 ||
             t.window_min > MST_FLIGHT_PCT_MAX_MINUTES))
            abort();
        if (mst_flight_parse_trigger(t.text, &u, err, sizeof err) != MST_OK ||
            memcmp(&t, &u, sizeof t) != 0)
            abort();
        /* The rules built from it take any metric values. */
        mst_flight_rules *r = mst_flight_rules_new(&t, 1);
        if (!r) abort();
        mst_flight_metrics m;
        for (int k = 0; k < MST_FLIGHT_METRICS; k++) m.v[k] = size > (size_t)k ? (int64_t)data[k] << 40 : -1;
        char reason[160];
        for (int i = 0; i < 150; i++) mst_flight_rules_check(r, &m, i & 1, 60000u * (uint64_t)i, reason, sizeof reason);
        mst_flight_rules_free(r);
    } else if (!err[0]) {
        abort(); /* every refusal says why */
    }
    uint64_t bytes;
    int64_t ns;
    if (mst_flight_parse_capacity(s, &bytes, &ns, err, sizeof err) == MST_OK) {
        if (!bytes && ns <= 0) abort();
    }
    if (mst_flight_parse_duration((const char *)data, size, &ns, err, sizeof err) == MST_OK && ns <= 0)
        abort();
    if (mst_flight_parse_size((const char *)data, size, &bytes, err, sizeof err) == MST_OK && !bytes)
        abort();
    free(s);
    return 0;
}
