/*
 * bench_packet.h — the one upstream hook-span packet both forwarder
 * benchmarks send (bench_forward: over the socket; bench_forward_cpu:
 * in-process), so their figures describe the same input: ~700 bytes,
 * 10 attributes, 1–2 links. Ids are placeholders (S…, L…, M…) that the
 * benchmarks overwrite per span, located by bench_packet_placeholders().
 */
#ifndef MST_BENCH_PACKET_H
#define MST_BENCH_PACKET_H

#include <stdio.h>
#include <string.h>

/* Writes magic + JSON for (thread, slot) into out; returns its length. */
static inline int bench_packet_format(char *out, size_t cap, int thread, int slot) {
    int two_links = slot % 2;
    return snprintf(out, cap,
        "MSPF_PERFETTO_V1\n"
        "{\"name\":\"vllm.scheduler.schedule\",\"category\":\"ms_service_profiler.hook.Schedule\","
        "\"trace_id\":\"%032x\",\"span_id\":\"SSSSSSSSSSSSSSSS\",\"parent_span_id\":\"\","
        "\"start_time_ns\":%llu,\"end_time_ns\":%llu,\"kind\":1,\"status\":1,"
        "\"attributes\":{\"process.pid\":%d,\"thread.id\":%d,\"request.id\":\"chatcmpl-%08x\","
        "\"hook.module\":\"vllm.v1.core.sched.scheduler\",\"hook.class\":\"Scheduler\","
        "\"hook.method\":\"schedule\",\"batch.size\":%d,\"input.len\":%d,\"output.len\":%d,"
        "\"model\":\"Qwen2.5-0.5B-Instruct\",\"is_prefill\":true,\"kv_cache.usage\":0.4375},"
        "\"resource_attributes\":{\"service.name\":\"vllm\",\"host.name\":\"node-1\"},"
        "\"links\":[{\"trace_id\":\"%032x\",\"span_id\":\"LLLLLLLLLLLLLLLL\"}%s]}",
        thread + 1, 1700000000000000000ull + (unsigned long long)slot * 1000,
        1700000000000500000ull + (unsigned long long)slot * 1000, 4000 + thread, 4100 + thread,
        (unsigned)slot, slot % 64 + 1, 100 + slot % 900, slot % 300, thread + 1,
        two_links ? ",{\"trace_id\":\"00000000000000000000000000000001\","
                    "\"span_id\":\"MMMMMMMMMMMMMMMM\"}" : "");
}

/* Offsets (from `base`) of the span id and link span id placeholders in a
 * formatted packet at `pkt`; *link2 is 0 when the packet has one link. */
static inline void bench_packet_placeholders(const char *base, const char *pkt, size_t *span,
                                             size_t *link1, size_t *link2) {
    *span = (size_t)(strstr(pkt, "SSSSSSSSSSSSSSSS") - base);
    *link1 = (size_t)(strstr(pkt, "LLLLLLLLLLLLLLLL") - base);
    const char *m = strstr(pkt, "MMMMMMMMMMMMMMMM");
    *link2 = m ? (size_t)(m - base) : 0;
}

#endif
