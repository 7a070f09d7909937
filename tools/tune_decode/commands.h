/* tune_decode: one function per subcommand. Each returns the process exit
 * status (0 success, 1 failure, 2 usage error). ARGV[0] is the subcommand. */
#ifndef TUNE_DECODE_COMMANDS_H
#define TUNE_DECODE_COMMANDS_H

#include "strata/identity.h"

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

int cmd_table(int argc, char **argv, const td_global *g);     /* table check|show PATH, table list DIR */
int td_table_list(int argc, char **argv, const td_global *g); /* table list DIR [--prune] (ARGV: after "list") */
int cmd_report(int argc, char **argv, const td_global *g);    /* report FILE.json [-o FILE.html] */
int cmd_variants(int argc, char **argv, const td_global *g);  /* variants */
int cmd_identity(int argc, char **argv, const td_global *g);  /* identity */
int cmd_vectors(int argc, char **argv, const td_global *g);   /* vectors FILE... */
int cmd_shapes(int argc, char **argv, const td_global *g);    /* shapes MODEL.gguf */
int cmd_tune(int argc, char **argv, const td_global *g);      /* tune [MODEL.gguf] */
int cmd_verify(int argc, char **argv, const td_global *g);    /* verify MODEL.gguf TABLE */
int cmd_coverage(int argc, char **argv, const td_global *g);  /* coverage MODEL.gguf TABLE|DIR */
int cmd_bench(int argc, char **argv, const td_global *g);     /* bench */

struct cJSON;
/* verify --html / bench --html (td_report.c): adds "report": KIND, the tool,
 * version, source commit, date, command line and identity to ROOT. */
void td_report_header(struct cJSON *root, const char *kind, const st_identity *id, int argc, char **argv);
/* Writes ROOT as HTML_PATH minus ".html" plus ".json", then the page
 * rendered from it as HTML_PATH. 0, or 1 after one line on stderr. */
int td_write_report(const struct cJSON *root, const char *html_path, const char *cmd, bool quiet);
/* A limit macro (strata/limits.h) as a string literal, for --help texts
 * that stay true when the limit changes. */
#define TD_STR_(x) #x
#define TD_STR(x) TD_STR_(x)
/* Prints the last error as one line "CMD: message" to stderr (without
 * doubling a prefix the message already has) and returns CODE. S is the
 * status (its text when no message was recorded). */
int td_fail(const char *cmd, int s, int code);

/* Prints "tune_decode: " + message to stderr and returns 2 (usage) . */
int td_usage_error(const char *fmt, ...);

#endif
