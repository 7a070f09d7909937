/* strata-tune: the CPU reference, the golden model of the exactness
 * contract (docs/DESIGN.md section 2). Every GPU variant and knob path must give
 * the same bytes as these functions. They also serve as the CPU backend. */
#ifndef STRATA_REFERENCE_H
#define STRATA_REFERENCE_H

#include "strata/version.h"

#include "strata/formats.h"
#include "strata/status.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How the CPU work is split. Any values give the same bytes (the row is the
 * unit of work and each row is computed in canonical order); a test sweeps
 * them. n_threads 0 = one per online core; rows_per_chunk 0 = automatic. */
typedef struct {
    int n_threads;
    int rows_per_chunk;
} st_cpu_split;

/* y[t][r] = row r of W (ROWS x K, ggml blocks of type T) . token t of XQ
 * (q8_1 blocks, [nt][K/32]) in canonical order, for t < NT (1..ST_MAX_TOKENS). */
ST_API st_status st_ref_mmvq(st_qtype t, const void *w, int64_t rows, int64_t k,
                             const void *xq, int nt, float *y, const st_cpu_split *split);

/* The MoE FFN of one decode step. Expert e's gate and up weights are rows
 * e*n_ff .. e*n_ff+n_ff-1 of [n_expert*n_ff][n_embd] matrices of type
 * gu_type; its down weights rows e*n_embd.. of [n_expert*n_embd][n_ff] of
 * type down_type (ggml's 3-D expert tensors, as stored in GGUF). */
typedef struct {
    st_qtype gu_type, down_type;
    int n_embd, n_ff, n_expert;
    const void *gate, *up, *down;
} st_expert_weights;

/* For each token t < NT and slot k < TOPK, with e = ids[t*topk+k]:
 *   h = silu(gate_e . q8_1(x_t)) * (up_e . q8_1(x_t)); hq = q8_1(h);
 *   y = down_e . hq;  out[t] = sum_k wts[t*topk+k] * y in k order (fma).
 * Tokens that chose the same expert share one pass over its weights.
 * NT 1..ST_MAX_TOKENS, TOPK 1..ST_MAX_TOPK, n_expert 1..ST_MAX_EXPERTS. */
ST_API st_status st_ref_expert_grouped(const st_expert_weights *ew, const float *x,
                                       const int32_t *ids, const float *wts, int nt,
                                       int topk, float *out, const st_cpu_split *split);

#ifdef __cplusplus
}
#endif
#endif
