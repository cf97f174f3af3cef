/*
 * cli_args.c — the shared "--opt VALUE" matcher (cli_args.h).
 */
#include "cli/cli_args.h"

#include <string.h>

int mst_cli_take_value(int argc, char **argv, int *i, const char *opt, const char **value) {
    size_t n = strlen(opt);
    const char *a = argv[*i];
    if (strncmp(a, opt, n) != 0) return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0') return 0;
    if (*i + 1 >= argc) return -1;
    *value = argv[++*i];
    return 1;
}
