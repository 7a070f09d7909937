/* strata-tune: the decode entry points an inference engine calls.
 *
 * A context owns one backend (a GPU, or the CPU reference), its stream, the
 * dispatch configuration (knobs, read once at creation) and at most one
 * engaged tuning table. Memory passed to the operations is backend memory:
 * device memory from st_ctx_alloc (or the engine's own device pointers) on a
 * GPU, ordinary host memory on the CPU backend. Every backend, variant and
 * knob path produces the same output bytes (DESIGN.md section 2). */
#ifndef STRATA_DECODE_H
#define STRATA_DECODE_H

#include "strata/version.h"

#include "strata/formats.h"
#include "strata/identity.h"
#include "strata/knobs.h"
#include "strata/limits.h"
#include "strata/status.h"
#include "strata/table.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ST_BACKEND_AUTO = 0, /* the GPU when this build has one and a device is present, else CPU */
    ST_BACKEND_CPU = 1,  /* the exact CPU reference, multi-threaded */
    ST_BACKEND_GPU = 2   /* HIP (gfx1100) or CUDA, as built */
} st_backend;

typedef struct st_ctx st_ctx;
typedef struct st_matrix st_matrix;

/* Creates a context on BACKEND; DEVICE selects the GPU (ignored on CPU).
 * The dispatch knobs are read from the environment here, once. A GPU that
 * cannot be used gives ST_ERR_NO_DEVICE or ST_ERR_GPU with the runtime's
 * message in st_last_error(); ST_BACKEND_AUTO then falls back to the CPU. */
ST_API st_status st_ctx_create(st_backend backend, int device, st_ctx **out);
ST_API void st_ctx_destroy(st_ctx *ctx);

ST_API st_backend st_ctx_backend(const st_ctx *ctx);
/* The identity tables are made for and checked against. */
ST_API const st_identity *st_ctx_identity(const st_ctx *ctx);
/* Dispatch configuration. Setting it drops an engaged table when any knob
 * becomes active (a table measured the default dispatch). */
ST_API const st_dispatch_config *st_ctx_dispatch(const st_ctx *ctx);
ST_API void st_ctx_set_dispatch(st_ctx *ctx, const st_dispatch_config *cfg);

/* Engages the table at PATH (file, or tables directory: auto-selection).
 * Prints exactly one line (engagement or refusal) through the log sink. On
 * refusal the previously engaged table, if any, is dropped: the defaults are
 * in effect. */
ST_API st_status st_ctx_load_table(st_ctx *ctx, const char *path);
/* The same for $STRATA_DECODE_TUNING; ST_ERR_NOT_FOUND (and no line) when
 * the variable is unset or empty. */
ST_API st_status st_ctx_load_table_env(st_ctx *ctx);
ST_API void st_ctx_drop_table(st_ctx *ctx);
/* The engaged table or NULL. */
ST_API const st_table *st_ctx_table(const st_ctx *ctx);

/* Backend memory. */
ST_API st_status st_ctx_alloc(st_ctx *ctx, size_t bytes, void **ptr);
ST_API void st_ctx_free(st_ctx *ctx, void *ptr);
ST_API st_status st_ctx_upload(st_ctx *ctx, void *dst, const void *src, size_t bytes);
ST_API st_status st_ctx_download(st_ctx *ctx, void *dst, const void *src, size_t bytes);
/* Waits for the context's queued work. */
ST_API st_status st_ctx_sync(st_ctx *ctx);

/* Uploads a quantized matrix of ROWS rows of COLS values (ggml block bytes,
 * rows back to back) in the backend's layout. 3-D expert tensors are
 * matrices of n_expert * rows_per_expert rows. */
ST_API st_status st_matrix_create(st_ctx *ctx, st_qtype type, int64_t rows, int64_t cols,
                                  const void *ggml_bytes, st_matrix **out);
ST_API void st_matrix_destroy(st_matrix *m);
ST_API st_qtype st_matrix_type(const st_matrix *m);
ST_API int64_t st_matrix_rows(const st_matrix *m);
ST_API int64_t st_matrix_cols(const st_matrix *m);

/* y[t][r] = W[r] . q8_1(x[t]) for t < NT (1..8); X is [nt][cols] f32, Y is
 * [nt][rows] f32, both backend memory. Uses the engaged table's variant for
 * (type, rows, cols) on a hit, else the default chain. */
ST_API st_status st_iq_mmvq(st_ctx *ctx, const st_matrix *w, const float *x, int nt, float *y);
/* Forces a launch: ROWS = 0 is the default chain (never the table), else the
 * plain one-warp-per-row variant with ROWS rows per block (must be in
 * STRATA_MMVQ_ROWS_VARIANTS). For the tuner and the parity tests. */
ST_API st_status st_iq_mmvq_variant(st_ctx *ctx, const st_matrix *w, const float *x, int nt, float *y,
                                    int rows);

typedef struct {
    const st_matrix *gate; /* [n_expert * n_ff][n_embd] */
    const st_matrix *up;   /* same shape and type as gate */
    const st_matrix *down; /* [n_expert * n_embd][n_ff] */
    int n_expert;
} st_experts;

/* The MoE FFN of a decode step (see st_ref_expert_grouped for the maths):
 * X [nt][n_embd] f32, IDS [nt][topk] int32 expert ids, WTS [nt][topk] f32,
 * OUT [nt][n_embd] f32, all backend memory; NT 1..8, TOPK 1..8. Uses the
 * table's (gu_rows, down_rows) for the shape on a hit. */
ST_API st_status st_expert_grouped(st_ctx *ctx, const st_experts *ex, const float *x, const int32_t *ids,
                                   const float *wts, int nt, int topk, float *out);
/* Forces a launch: GU_ROWS = DOWN_ROWS = 0 is the default chain, else a pair
 * from STRATA_EXPERT_ROWS_VARIANTS. */
ST_API st_status st_expert_grouped_variant(st_ctx *ctx, const st_experts *ex, const float *x,
                                           const int32_t *ids, const float *wts, int nt, int topk,
                                           float *out, int gu_rows, int down_rows);

/* Counters of where launches came from, so callers and tests can prove a
 * table engaged. */
typedef struct {
    uint64_t table_hits;       /* entry-point calls that launched a table variant */
    uint64_t table_misses;     /* entry-point calls with a table that has nothing for the shape:
                                  no row and no tuned-default record (a gap: tune the model) */
    uint64_t default_launches; /* calls that ran the default chain */
    uint64_t variant_launches; /* calls that ran a rows variant (table or forced) */
    uint64_t table_defaults;   /* entry-point calls whose shape the tuner measured and kept the
                                  default for ("tuned default": covered, not a gap) */
} st_ctx_stats;
ST_API void st_ctx_get_stats(const st_ctx *ctx, st_ctx_stats *stats);
ST_API void st_ctx_reset_stats(st_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
