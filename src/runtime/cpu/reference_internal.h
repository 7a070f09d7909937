/* Internal entry points of the CPU reference. */
#ifndef ST_REFERENCE_INTERNAL_H
#define ST_REFERENCE_INTERNAL_H

#include "strata/decode.h"
#include "strata/reference.h"

#include "cpu_pool.h"

#include <stddef.h>

#define ST_ALIGN64(n) (((n) + (size_t)63) & ~(size_t)63)

/* As st_ref_mmvq, token t's outputs at Y + t * Y_STRIDE, on POOL (NULL:
 * the process's default pool). */
st_status st_ref_mmvq_pool(st_qtype t, const void *w, int64_t rows, int64_t k, const void *xq, int nt, float *y,
                           int64_t y_stride, const st_cpu_split *split, st_cpu_pool *pool);

/* Scratch bytes st_ref_expert_grouped_ws needs for these dimensions. */
size_t st_ref_expert_scratch_bytes(int n_embd, int n_ff, int nt, int topk);

/* As st_ref_expert_grouped, with separate work splits for the gate-up and
 * the down phase (the CPU backend's rows variants), on POOL, with SCRATCH
 * of st_ref_expert_scratch_bytes (64-byte aligned): no allocation. O (NULL:
 * the defaults, st_ffn_options_init) gives the activation, the biases and
 * the strides of st_expert_ffn. */
st_status st_ref_expert_grouped_ws(const st_expert_weights *ew, const st_ffn_options *o, const float *x,
                                   const int32_t *ids, const float *wts, int nt, int topk, float *out,
                                   const st_cpu_split *gu_split, const st_cpu_split *down_split, st_cpu_pool *pool,
                                   void *scratch);

/* st_expert_mat on the CPU: W holds N_EXPERT experts of ROWS rows of K
 * values; XQ is scratch for one q8_1 vector of K values. The rows are the
 * expert kernels' (one group of 32 streams, any K). */
st_status st_ref_expert_mat_pool(st_qtype t, const void *w, int64_t rows, int64_t k, int n_expert, const float *x,
                                 int x_slots, int64_t x_slot_stride, int64_t x_token_stride, const int32_t *ids,
                                 int64_t ids_stride, int nt, int topk, float *y, int64_t y_slot_stride,
                                 int64_t y_token_stride, const st_cpu_split *split, st_cpu_pool *pool, void *xq);

#endif
