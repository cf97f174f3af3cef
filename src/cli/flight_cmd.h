/*
 * flight_cmd.h — the flight recorder's command line (docs/forwarder.md
 * "Flight recorder"): the `mstrace forward` flags that configure it and the
 * `mstrace trigger` command that asks a running recorder for a dump.
 * main.c dispatches to these so its own edits stay small.
 */
#ifndef MST_CLI_FLIGHT_CMD_H
#define MST_CLI_FLIGHT_CMD_H

#include <stdbool.h>
#include <stdio.h>

#include "forward/flight_sink.h"

/* The flags as given (validated by mst_flight_cli_options). */
typedef struct mst_flight_cli {
    const char *recorder;            /* --flight-recorder SIZE|DURATION[,...] */
    const char *triggers[MST_FLIGHT_MAX_TRIGGERS + 1]; /* --trigger EXPR, repeatable */
    size_t n_triggers;
    const char *max_dumps_per_min;   /* --max-dumps-per-minute K */
    const char *disk_budget;         /* --dump-disk-budget SIZE */
    const char *margin;              /* --dump-margin DURATION */
    bool otlp;                       /* --flight-otlp: also to the collector */
    const char *baseline;            /* --flight-otlp-baseline N */
} mst_flight_cli;

/* Takes argv[*i] (and its value) if it is one of the flight flags.
 * Returns 1 taken, 0 not a flight flag, -1 value missing (*flag names it). */
int mst_flight_cli_take(int argc, char **argv, int *i, mst_flight_cli *fc, const char **flag);

/* True when any flight flag was given. */
bool mst_flight_cli_given(const mst_flight_cli *fc);

/* Validates the flags into *out. False with a one-line reason in err. */
bool mst_flight_cli_options(const mst_flight_cli *fc, mst_flight_options *out, char *err,
                            size_t err_size);

/* With --flight-otlp: opens the collector output (flight_otlp.h) into *out
 * and points opts->export_to at it. False with a one-line reason (the
 * OTEL_EXPORTER_OTLP_* environment) in err; true and nothing done without
 * the flag. */
bool mst_flight_cli_start_export(const mst_flight_cli *fc, mst_flight_options *opts,
                                 mst_output_sink *out, char *err, size_t err_size);
/* Flushes (bounded) and closes what start_export opened. */
void mst_flight_cli_stop_export(mst_flight_options *opts, mst_output_sink *out);

/* The flight flags' part of `mstrace forward --help`. */
void mst_flight_cli_usage(FILE *f);

/* `mstrace trigger [--socket-name NAME]`; argv[0] is the first argument
 * after "trigger". Exit codes: 0 asked, 1 no recorder reachable, 2 usage. */
int mst_trigger_main(int argc, char **argv);

#endif /* MST_CLI_FLIGHT_CMD_H */
