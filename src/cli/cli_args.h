/*
 * cli_args.h — the one matcher of "--opt VALUE" / "--opt=VALUE" that the
 * `mstrace` subcommands share (forward's flags and the flight recorder's).
 */
#ifndef MST_CLI_ARGS_H
#define MST_CLI_ARGS_H

/* Matches argv[*i] as "--opt VALUE" or "--opt=VALUE"; advances *i past a
 * separate value. Returns 1 matched (*value set), 0 not this option, -1 the
 * value is missing. */
int mst_cli_take_value(int argc, char **argv, int *i, const char *opt, const char **value);

#endif /* MST_CLI_ARGS_H */
