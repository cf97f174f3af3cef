/*
 * flight_dump.h — one flight-recorder dump: which records of the ring go
 * into it, and writing them as a .pftrace or .json file through the
 * output interface (writer_sinks.h), atomically, within a disk budget.
 *
 * Selection (for the requests of a plan): every span that names one of
 * them (`request.id`, or an entry of `request.ids`: the schedule, executor,
 * worker and output spans of every step that carried it, and its
 * vllm.request span); then every span of the traces those spans belong to
 * (a step's child spans, the request's own trace); then, with a margin,
 * every span within +- margin of what was selected. Counter samples over
 * the selected window are added (those whose span is not in the dump), and
 * a `mstrace.flight_recorder.trigger` span on the forwarder's process that
 * says why the dump was written, with the recorder's own counters as
 * counter tracks.
 *
 * Files: the template `DIR/NAME.EXT` (the --perfetto-output path) gives
 * dumps `DIR/NAME.<UTC yyyymmddThhmmssZ>-<n>.EXT`, written first under
 * `DIR/.NAME.tmp-<pid>-<n>.EXT` and renamed, so no reader ever sees a
 * partial dump under a dump's name (a SIGKILL leaves at most a temporary
 * file, removed at the next start). After each dump, the oldest dumps of
 * the template are deleted until they fit the disk budget.
 *
 * Threads: one (the formatting thread); a dump runs on it.
 */
#ifndef MST_FORWARD_FLIGHT_DUMP_H
#define MST_FORWARD_FLIGHT_DUMP_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "forward/flight_ring.h"
#include "forward/output_sink.h"

#define MST_FLIGHT_DUMP_MAX_IDS 64
#define MST_FLIGHT_DUMP_MAX_TRACES 64
#define MST_FLIGHT_ID_MAX 256

typedef struct mst_flight_dump_plan {
    bool whole_ring;                /* on demand: every record held */
    size_t n_ids;
    char ids[MST_FLIGHT_DUMP_MAX_IDS][MST_FLIGHT_ID_MAX]; /* request ids */
    size_t n_traces;
    uint8_t traces[MST_FLIGHT_DUMP_MAX_TRACES][16];       /* seeds without a request */
    int64_t margin_ns;
    char reason[1024];              /* "e2e=2.31s>2s request cmpl-7; ..." */
} mst_flight_dump_plan;

typedef struct mst_flight_dump_result {
    char path[PATH_MAX];
    uint64_t bytes, spans, counters;
    uint64_t exported;              /* spans handed to the export output */
    int64_t start_ns, end_ns;       /* the window written */
    uint64_t deleted, deleted_bytes; /* older dumps removed for the budget */
    bool over_budget;               /* this dump alone exceeded the budget: removed too */
} mst_flight_dump_result;

typedef struct mst_flight_dumper mst_flight_dumper;

/* Checks the template against the output path rules' syntax, creates its
 * directory (by opening and removing a temporary file, so a bad directory
 * fails at start) and removes temporary files left by a killed run. */
mst_status mst_flight_dumper_new(const char *template_path, mst_perfetto_format format,
                                 uint64_t disk_budget, mst_flight_dumper **out, char *err,
                                 size_t err_size);
void mst_flight_dumper_free(mst_flight_dumper *d);

/* Also hands the spans of every dump that is not on demand to `to`
 * (flight_otlp.h), each span once over the ring's life (a step shared by
 * two kept requests is sent once). NULL: none. */
void mst_flight_dumper_set_export(mst_flight_dumper *d, const mst_output_sink *to);

/* Selects and writes one dump; `own` (n_own samples, static names) are the
 * recorder's counters at the time. On failure (disk full, I/O) the
 * temporary file is removed and nothing else changes: MST_ERR_IO with a
 * one-line reason. Marks of the ring's records are left set. */
mst_status mst_flight_dump_write(mst_flight_dumper *d, mst_flight_ring *ring,
                                 const mst_flight_dump_plan *plan, const mst_tl_counter *own,
                                 size_t n_own, mst_flight_dump_result *res, char *err,
                                 size_t err_size);

/* Selects as a dump would and hands the spans to the export output only
 * (no file): the baseline of ordinary requests. Returns the spans sent
 * (each span once over the ring's life); 0 without an export output. */
uint64_t mst_flight_dump_export(mst_flight_dumper *d, mst_flight_ring *ring,
                                const mst_flight_dump_plan *plan);

#endif /* MST_FORWARD_FLIGHT_DUMP_H */
