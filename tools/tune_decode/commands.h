/* tune_decode: one function per subcommand. Each returns the process exit
 * status (0 success, 1 failure, 2 usage error). ARGV[0] is the subcommand. */
#ifndef TUNE_DECODE_COMMANDS_H
#define TUNE_DECODE_COMMANDS_H

#include <stdbool.h>
#include <stdio.h>

typedef struct {
    bool quiet;
    bool json;
    int backend; /* st_backend: --backend auto|cpu|gpu */
    int device;  /* --device N */
} td_global;

struct st_ctx;
/* Opens the decode context the global options ask for. On failure prints
 * one line and returns non-zero. */
int td_open_ctx(const td_global *g, struct st_ctx **out);

int cmd_table(int argc, char **argv, const td_global *g);     /* table check|show PATH */
int cmd_variants(int argc, char **argv, const td_global *g);  /* variants */
int cmd_identity(int argc, char **argv, const td_global *g);  /* identity */
int cmd_vectors(int argc, char **argv, const td_global *g);   /* vectors FILE... */
int cmd_shapes(int argc, char **argv, const td_global *g);    /* shapes MODEL.gguf */
int cmd_tune(int argc, char **argv, const td_global *g);      /* tune [MODEL.gguf] */
int cmd_verify(int argc, char **argv, const td_global *g);    /* verify MODEL.gguf TABLE */
int cmd_coverage(int argc, char **argv, const td_global *g);  /* coverage MODEL.gguf TABLE|DIR */
int cmd_bench(int argc, char **argv, const td_global *g);     /* bench */

/* Prints the last error as one line "CMD: message" to stderr (without
 * doubling a prefix the message already has) and returns CODE. S is the
 * status (its text when no message was recorded). */
int td_fail(const char *cmd, int s, int code);

/* Prints "tune_decode: " + message to stderr and returns 2 (usage) . */
int td_usage_error(const char *fmt, ...);

#endif
