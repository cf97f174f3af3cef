/*
 * analyze_cmd.h — `mstrace analyze` (docs/analyze.md): entry point called
 * by main.c's dispatch.
 */
#ifndef MST_CLI_ANALYZE_CMD_H
#define MST_CLI_ANALYZE_CMD_H

/* argv[0] is the first argument after "analyze". Exit codes: 0 ok, 1 an
 * output could not be written, 2 usage error or unreadable input. */
int mst_analyze_main(int argc, char **argv);

#endif /* MST_CLI_ANALYZE_CMD_H */
