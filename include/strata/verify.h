/* strata-tune: the end-to-end gate. A table may be installed only if a whole
 * decode step with it gives the same output bytes as without it, for every
 * layer and token count, and is not slower than the limit (2%) in two
 * independent interleaved measurements (a slowdown is confirmed before it
 * refuses). */
#ifndef STRATA_VERIFY_H
#define STRATA_VERIFY_H

#include "strata/version.h"

#include "strata/decode.h"
#include "strata/limits.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *model_path;   /* GGUF model; NULL = a synthetic model from SHAPES */
    const char *table_path;   /* the table under test */
    const char *const *shapes;/* synthetic model: "expert GU DN N_EMBD N_FF N_TOKENS" / "mmvq TYPE ROWS COLS" */
    int n_shapes;
    int n_layers;             /* synthetic model: repeat the shapes this many times (default 1) */
    int n_expert, topk;       /* synthetic expert layers (default 64, 8) */
    int rounds;               /* timed rounds per token count (default 21) */
    double max_slowdown;      /* fraction, default 0.02 */
    bool quiet;
    volatile int *stop;
} st_verify_options;

ST_API void st_verify_options_default(st_verify_options *o);

typedef struct {
    bool bytes_equal;         /* every layer, every token count */
    bool not_slower;          /* every token count within max_slowdown */
    bool passed;
    int n_layers, n_ops;      /* expert layers, operations per step */
    double base_us[ST_MAX_TOKENS], table_us[ST_MAX_TOKENS], base_spread[ST_MAX_TOKENS], table_spread[ST_MAX_TOKENS];
    int table_launches;       /* launches that came from the table over the 8 compared steps */
    char message[512];        /* the verdict, one line */
} st_verify_result;

/* Runs the gate on CTX (whose own engaged table, if any, is left as it was).
 * ST_OK with res->passed true or false; other statuses for errors (bad
 * model, table that does not engage here, ...). */
ST_API st_status st_verify_run(st_ctx *ctx, const st_verify_options *opt, st_verify_result *res);

#ifdef __cplusplus
}
#endif
#endif
