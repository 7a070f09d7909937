/* Context services for the tuner and the benchmark (not public API). */
#ifndef ST_CTX_INTERNAL_H
#define ST_CTX_INTERNAL_H

#include "strata/decode.h"

/* Times the work queued between start and stop: device events on a GPU,
 * the wall clock on the CPU (whose calls are synchronous). */
st_status st_ctx_timer_start(st_ctx *c);
st_status st_ctx_timer_stop(st_ctx *c, double *ms);
/* Last-level cache bytes the rotation must cover (0 when unknown or not
 * applicable: the CPU backend) and, in *SOURCE, where the figure comes from
 * (the per-arch table of devinfo.c, the runtime, or a test). */
size_t st_ctx_llc(st_ctx *c, const char **source);
size_t st_ctx_llc_bytes(st_ctx *c);
/* Test hook: the context then reports BYTES of last-level cache (0: the
 * real figure again). */
void st_ctx_test_set_llc(st_ctx *c, size_t bytes);
/* Free and total bytes of the memory weights live in: the device's on a
 * GPU (hipMemGetInfo / cudaMemGetInfo), the host's on the CPU backend. */
st_status st_ctx_mem_info(st_ctx *c, size_t *free_b, size_t *total_b);
/* The rows variant (pair) whose launch equals the default chain's for the
 * shape under the context's dispatch, or 0 (0/0) when none does. */
void st_ctx_default_expert_equiv(st_ctx *c, const st_experts *ex, int *gu, int *dn);
/* Probes: streaming read, copy, empty launch (queued; time them with the
 * timer). */
st_status st_ctx_probe_read(st_ctx *c, const void *src, size_t bytes, float *sink);
st_status st_ctx_probe_copy(st_ctx *c, void *dst, const void *src, size_t bytes);
st_status st_ctx_probe_empty(st_ctx *c);
/* GPU only: the weight loads of iq_mmvq without the decode (ablation). */
st_status st_ctx_probe_loads(st_ctx *c, const st_matrix *w, float *sink);
/* Device layout bytes of a matrix (what one pass over it streams) and
 * where they are. */
size_t st_matrix_bytes(const st_matrix *m);
const void *st_matrix_data(const st_matrix *m);

/* Test hook: on the CPU backend every rows-variant launch (a table's or a
 * forced one) then spends EXTRA times its own duration again, busy, so a
 * test can make a table that is really slower by a known factor (the gate
 * measures it like any other). 0 (the default) turns it off. */
void st_ctx_test_slow_variants(st_ctx *c, double extra);

/* Replaces the engaged table with T (may be NULL) without any log line and
 * returns the previous one (the caller owns it). */
st_table *st_ctx_swap_table(st_ctx *c, st_table *t);

#endif
