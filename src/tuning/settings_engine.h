/* The engine the settings layer drives (settings_engine.c): llama.cpp's
 * llama-server, started on a loopback port it picks, in a process group
 * of its own (a Ctrl-C at the terminal reaches us, and we end it), asked
 * for greedy completions over HTTP, and ended on every exit path. Its
 * output goes to a log file whose last words name why it failed.
 * Internal to the tools library. */
#ifndef ST_SETTINGS_ENGINE_H
#define ST_SETTINGS_ENGINE_H

#include "tools_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;       /* 0: not running */
    int port;
    char log[4200];  /* its stdout and stderr */
    char bin[4096];
} st_engine;

/* One completion's result. */
typedef struct {
    int *tokens;      /* caller's array of CAP ids */
    int cap;
    int n_tokens;     /* the generated token ids (up to CAP kept) */
    double decode_ms; /* timings.predicted_ms */
    int n_decoded;    /* timings.predicted_n */
    long draft_n, draft_accepted;
} st_engine_reply;

/* Starts BIN ARGS... --host 127.0.0.1 --port P (a free port), its output
 * into LOG_PATH, and waits until GET /health answers 200. On failure the
 * engine is ended and the one-line message carries its last words;
 * ST_ERR_INTERRUPTED when *STOP became non-zero. */
st_status st_engine_start(st_engine *e, const char *bin, const char *const *args, int n_args, const char *log_path,
                          double timeout_s, volatile int *stop);

/* POSTs /completion with PROMPT: temperature 0, top-k 1, seed 42,
 * N_PREDICT tokens, end-of-generation ignored, token ids returned, no
 * prompt cache. */
st_status st_engine_complete(st_engine *e, const char *prompt, int n_predict, double timeout_s, volatile int *stop,
                             st_engine_reply *r);

/* Ends the engine (SIGTERM, then SIGKILL after 5 s) and reaps it; safe to
 * call on one that is not running. */
void st_engine_stop(st_engine *e);

/* The line of the log that says why it stopped: of its last 40 lines the
 * first naming an error, else the last non-empty one ("" when none). */
void st_engine_last_words(const char *log_path, char *buf, size_t n);

/* The lines of the log holding NEEDLE (each cut to 300 bytes), joined
 * by " | " into OUT ("" when none): what an engine with strata-tune inside
 * said about its table ("decode tuning: ...", "ggml_strata: ..."). */
void st_engine_log_lines(const char *log_path, const char *needle, char *out, size_t n);

/* The engine build's identity: the lines `BIN --version` prints (version
 * and compiler, joined by "; ") and the sha256 of the binary and of every
 * lib*.so* beside it (one hash over their hashes in name order). */
st_status st_engine_identity(const char *bin, char *version, size_t vn, char sha[65]);

#endif
