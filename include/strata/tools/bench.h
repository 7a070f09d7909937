/* strata-tune tools library: the benchmark behind `tune_decode bench`.
 *
 * In one process: the read bandwidth (a streaming-read kernel over 1 GiB;
 * --quick 64 MiB), the device-to-device copy bandwidth (bytes read +
 * written), the launch overhead (back-to-back empty launches); then per
 * shape and token count the default chain (and the named variants)
 * round-robin with a streaming read of the same weight bytes: time per
 * call (median and spread), weight GB/s, and that rate as a fraction of the
 * big read and of the same-size read; on a GPU also, per mmvq shape, the
 * loads-only ablation and the default chain replayed from a captured graph
 * (its output checked against a rows variant's bytes); then whole decode
 * steps of a model and of a synthetic MoE model, eagerly and (GPU) from a
 * graph. The timing method is the tuner's: round-robin, device events,
 * weights rotated over at least 4x the last-level cache. */
#ifndef STRATA_TOOLS_BENCH_H
#define STRATA_TOOLS_BENCH_H

#include "strata/tools/base.h"

#include "strata/decode.h"
#include "strata/status.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How many shapes and variants one run may name. */
#define ST_BENCH_MAX_SHAPES 32
#define ST_BENCH_MAX_VARIANTS 8

/* Fill with st_bench_options_default (which sets struct_size), then change
 * what you need. The struct may grow: new members are appended and old
 * callers' smaller struct_size keeps its meaning. */
typedef struct {
    size_t struct_size;
    /* Shapes ("mmvq TYPE ROWS COLS": n_tokens 1 2 4 8 16 24 32 or NTOKS; "expert GU DN
     * N_EMBD N_FF N_TOKENS": its N_TOKENS), 64 experts and top-8. */
    const char *const *shapes;
    int n_shapes;
    /* Variants timed beside the default on every shape (names as a table
     * writes them: R, mmaW, splitW, wideTxR for mmvq shapes, G/D for
     * expert shapes), at most ST_BENCH_MAX_VARIANTS. */
    const char *const *variants;
    int n_variants;
    /* The suite (the dense and expert shapes of the bench suite, then the
     * decode steps of SUITE_MODEL_PATH when that file exists and of a
     * synthetic model of LAYERS MoE layers): run when true and no shapes
     * are given. */
    bool suite;
    const char *suite_model_path;
    int layers;             /* [48]; 0: no synthetic model */
    /* A model whose whole decode steps are measured (must open). */
    const char *model_path;
    bool quick;             /* fewer rounds, a 64 MiB floor for the rotation */
    /* Recorded in the document's header (NULL: no header: the --json form). */
    const char *command_line;
    /* Each human-readable line (the probes, the table's header and rows,
     * notes) as it is measured, without a newline; NULL: none. */
    void (*on_line)(void *user, const char *line);
    void *user;
    /* The token counts of the mmvq shapes given (distinct, each
     * 1..ST_MAX_TOKENS, at most ST_MAX_TOKENS of them; measured in
     * increasing order); NULL and 0: 1 2 4 8 16 24 32. Only with shapes, at
     * least one of them mmvq (an expert shape keeps its N_TOKENS). */
    const int *ntoks;
    int n_ntoks;
} st_bench_options;

ST_API void st_bench_options_init_size(st_bench_options *o, size_t size);
/* (sizeof *O is the caller's: the growth rule of docs/API.md) */
static inline void st_bench_options_default(st_bench_options *o) { st_bench_options_init_size(o, sizeof *o); }

/* Checks O without measuring: ST_ERR_PARSE when a shape does not parse,
 * ST_ERR_INVALID_ARG when a variant is not compiled in, is not of the
 * shapes' kind or does not fit their rows, or when the token counts are
 * out of range, repeated or given with no mmvq shape; one line in
 * st_last_error() (naming the variant, shape or token count, not an
 * option). */
ST_API st_status st_bench_check(const st_bench_options *o);

/* Set up with st_bench_result_init (struct_size and zeros); the library
 * writes only the members struct_size covers. */
typedef struct {
    size_t struct_size;
    double read_gbs, copy_gbs, launch_us;
    size_t llc;            /* the last-level cache the rotation covered */
    /* The whole document as JSON (identity, the probes, one object per
     * figure); malloc'd, freed by st_bench_result_clear. */
    char *json;
} st_bench_result;

ST_API void st_bench_result_init_size(st_bench_result *res, size_t size);
static inline void st_bench_result_init(st_bench_result *res) { st_bench_result_init_size(res, sizeof *res); }
/* Runs the benchmark on CTX (st_bench_check first; then a model and every
 * shape must fit the free memory: one line with the bytes otherwise).
 * RES is filled on ST_OK and, as far as the run got, on failure. */
ST_API st_status st_bench_run(st_ctx *ctx, const st_bench_options *o, st_bench_result *res);
/* Frees what the library allocated in RES (and zeroes it, struct_size kept). */
ST_API void st_bench_result_clear(st_bench_result *res);

#ifdef __cplusplus
}
#endif
#endif
