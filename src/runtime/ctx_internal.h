/* Context services for the tuner and the benchmark (not public API). */
#ifndef ST_CTX_INTERNAL_H
#define ST_CTX_INTERNAL_H

#include "strata/decode.h"
#include "backend.h"
#include "internal.h"

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
/* Test hook: the device index st_ctx_device reports (what the context runs
 * on is unchanged), so the several-devices run can be tested with CPU
 * contexts that stand for devices 0 and 1. */
void st_ctx_test_set_device(st_ctx *c, int device);
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
/* Test hook: the same for the default chain's calls (a table's variants
 * then measure faster). */
void st_ctx_test_slow_default(st_ctx *c, double extra);

/* Replaces the engaged table with T (may be NULL) without any log line and
 * returns the previous one (the caller owns it). */
st_table *st_ctx_swap_table(st_ctx *c, st_table *t);

/* A line to the context's log (its st_ctx_params log_fn, else the
 * process's sink). C may be NULL. */
void st_ctx_log(const st_ctx *c, const char *fmt, ...) ST_PRINTF(2, 3);
/* Free and total backend memory (device memory; host memory on the CPU). */
st_status st_ctx_mem_info(st_ctx *c, size_t *free_bytes, size_t *total_bytes);
/* The limits the context was made for. */
const st_ctx_limits *st_ctx_limits_of(const st_ctx *c);

/* Captures the work queued on the context's stream between begin and end
 * (global capture mode) into an instantiated graph that can be launched on
 * the stream again and again. GPU only (ST_ERR_UNSUPPORTED on the CPU). For
 * the tests, the benchmark and the example; an engine captures on its own
 * stream with its own runtime calls. */
typedef struct st_ctx_graph st_ctx_graph;
st_status st_ctx_capture_begin(st_ctx *c);
st_status st_ctx_capture_end(st_ctx *c, st_ctx_graph **g);
st_status st_ctx_graph_launch(st_ctx *c, st_ctx_graph *g);
void st_ctx_graph_destroy(st_ctx *c, st_ctx_graph *g);

#endif
