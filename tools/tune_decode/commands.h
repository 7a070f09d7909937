/* tune_decode: one function per subcommand. Each returns the process exit
 * status (0 success, 1 failure, 2 usage error). ARGV[0] is the subcommand. */
#ifndef TUNE_DECODE_COMMANDS_H
#define TUNE_DECODE_COMMANDS_H

#include "strata/tools.h"

#include <stdbool.h>
#include <stdio.h>

#if defined(__GNUC__)
#define TD_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TD_PRINTF(a, b)
#endif

#define TD_MAX_DEVICES 64

typedef struct {
    bool quiet;
    bool json;
    int backend; /* st_backend: --backend auto|cpu|gpu */
    int device;  /* --device N (the first of a list) */
    /* --device LIST|all: tune, verify and coverage run on each (n_devices
     * > 1, or device_all); other commands take one device */
    int devices[TD_MAX_DEVICES];
    int n_devices;
    bool device_all;
} td_global;

/* The devices --device names (all: every device of the backend; a list on
 * the CPU backend is refused: it is one device, 0), with the backend they
 * are opened on in *BACKEND (auto resolved: the GPU when there is one).
 * Returns the count, or -1 after one line on stderr. */
int td_device_list(const td_global *g, int *out, int *backend);
/* Whether the command runs once per device (--device LIST|all). */
static inline bool td_many_devices(const td_global *g) { return g->device_all || g->n_devices > 1; }
/* tune --device LIST|all (cmd_tune_devices.c): O as cmd_tune parsed it. */
int td_tune_devices(st_tune_options *o, const td_global *g);
/* The library's lines during one device's part of a run start with PREFIX
 * ("[device 1] "); NULL: none. */
void td_log_prefix(const char *prefix);

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
int cmd_settings(int argc, char **argv, const td_global *g);  /* settings MODEL.gguf ..., settings apply */

/* The command line as reports record it: "tune_decode ARGS..." (malloc'd;
 * NULL when out of memory). */
char *td_command_line(int argc, char **argv);
/* S, or "" for NULL (a path a failed run never set). */
static inline const char *td_s(const char *s) { return s ? s : ""; }
/* A limit macro (strata/limits.h) as a string literal, for --help texts
 * that stay true when the limit changes. */
#define TD_STR_(x) #x
#define TD_STR(x) TD_STR_(x)
/* Prints the last error as one line "CMD: message" to stderr (without
 * doubling a prefix the message already has) and returns CODE. S is the
 * status (its text when no message was recorded). */
int td_fail(const char *cmd, int s, int code);

/* Prints "tune_decode: " + message to stderr (made terminal-safe) and
 * returns 2 (usage). */
int td_usage_error(const char *fmt, ...);

/* ---- option values (td_args.c) ---- */
/* The value of the option at ARGV[*I], advancing *I; NULL after a usage
 * error (*RC = 2): no value left, or the next argument is another option. */
const char *td_value(int argc, char **argv, int *i, const char *cmd, int *rc);
/* V as a decimal integer in LO..HI: digits only, no sign, nothing after. */
bool td_parse_int(const char *v, long lo, long hi, long *out);
/* A list of distinct token counts 1..ST_MAX_TOKENS ("1,2,4,8") into V (room
 * for MAX): their number, or -1 (an empty item, a repeat, more than MAX,
 * anything else). */
int td_ntok_list(const char *s, int *v, int max);
/* td_parse_int, or a usage error naming CMD, OPT and the range: returns 0
 * or 2. */
int td_int_option(const char *cmd, const char *opt, const char *v, long lo, long hi, int *out);
/* A finite percentage in LO..HI ("1%", "0.5") as a fraction; 0 or 2. */
int td_percent_option(const char *cmd, const char *opt, const char *v, double lo, double hi, double *frac);
/* A finite number of seconds ("20", "1.5s") in LO..HI (LO excluded when
 * LO_OPEN); 0 or 2. */
int td_seconds_option(const char *cmd, const char *opt, const char *v, double lo, double hi, bool lo_open, double *out);

/* ---- signals (td_signals.c) ---- */
/* From begin to end, a signal that would end the process sets *STOP (the
 * library's stop flag) instead, SIGPIPE and SIGXFSZ are ignored, and a
 * fault removes the library's temporary files before it ends the process
 * (td_signals.c says which signals). end restores what was there. */
void td_signals_begin(volatile int *stop);
/* For the whole process (main): outside begin..end a stop signal removes
 * the library's temporary files (and a folder lock held) before it ends
 * the process as it would have. */
void td_signals_guard(void);
void td_signals_end(void);
/* The first stop signal caught since begin, or 0. */
int td_signals_caught(void);
/* Every signal td_signals_begin handles, into SIG[0..CAP) with its KIND
 * (what it does between begin and end); returns the count. For the tests
 * that raise each one at every instant of a tune (tests/cli/signals_test.c). */
typedef enum { TD_SIG_STOP, TD_SIG_IGNORED, TD_SIG_FAULT } td_sig_kind;
size_t td_signals_all(int *sig, td_sig_kind *kind, size_t cap);

/* ---- output (td_text.c) ---- */
/* One line (no trailing newline in FMT) to stdout / stderr, with control
 * characters, bytes outside UTF-8 and invisible characters escaped. */
void td_print(const char *fmt, ...) TD_PRINTF(1, 2);
void td_eprint(const char *fmt, ...) TD_PRINTF(1, 2);
/* The library's log sink in tune_decode: td_eprint of each line. */
void td_log_sink(void *user, const char *line);
struct cJSON;
/* A JSON string of S made valid UTF-8 (NULL when out of memory), and the
 * same added to OBJ as NAME. */
struct cJSON *td_json_string(const char *s);
struct cJSON *td_json_add_string(struct cJSON *obj, const char *name, const char *s);
/* Adds "identity": the object every report gives an identity
 * (st_identity_json) to OBJ. */
void td_json_add_identity(struct cJSON *obj, const st_identity *id);
/* Prints J to stdout and deletes it (nothing is printed when it cannot be
 * rendered: out of memory). */
void td_json_put(struct cJSON *j);

#endif
