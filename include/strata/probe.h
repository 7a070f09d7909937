/* strata-tune: measuring on a context. What tools built on the library (the
 * tools library's tuner, gate and benchmark, an engine's own profiler)
 * measure with: device timers, bandwidth probes, the memory and cache
 * facts a timing must respect, a matrix's device bytes, and stream capture
 * into a graph.
 *
 * None of these is a decode call: they may allocate and wait. Timers and
 * probes queue on the context's stream like the decode calls, so a timer
 * started before a call and stopped after it times exactly that call. The
 * threading rule of the context holds (one thread at a time). */
#ifndef STRATA_PROBE_H
#define STRATA_PROBE_H

#include "strata/version.h"

#include "strata/decode.h"
#include "strata/status.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Times the work queued between start and stop: device events on a GPU,
 * the wall clock on the CPU backend (whose calls are synchronous). Stop
 * waits for the work and gives the time in milliseconds in *MS. */
ST_API st_status st_ctx_timer_start(st_ctx *ctx);
ST_API st_status st_ctx_timer_stop(st_ctx *ctx, double *ms);

/* The last-level cache bytes a timing must rotate its weights past (0 on
 * the CPU backend, or when unknown), and in *SOURCE (may be NULL; never
 * NULL when given) where the figure comes from: the per-arch table of
 * caches the runtime does not report (a 7900 XTX's 96 MB Infinity Cache),
 * or the runtime's L2. */
ST_API size_t st_ctx_llc(st_ctx *ctx, const char **source);

/* Free and total backend memory (device memory on a GPU; the host's on
 * the CPU backend), and the host's available and total memory. */
ST_API st_status st_ctx_mem_info(st_ctx *ctx, size_t *free_bytes, size_t *total_bytes);
ST_API st_status st_host_mem_info(size_t *available_bytes, size_t *total_bytes);

/* Probes, queued on the context's stream (time them with the timer): a
 * streaming read of BYTES at SRC (SINK: 4096 floats of backend memory the
 * probe writes so the reads are not optimised away), a copy of BYTES, an
 * empty launch, and (GPU only; ST_ERR_UNSUPPORTED on the CPU) the weight
 * loads of the default iq_mmvq on W without the decode (an ablation). */
ST_API st_status st_ctx_probe_read(st_ctx *ctx, const void *src, size_t bytes, float *sink);
ST_API st_status st_ctx_probe_copy(st_ctx *ctx, void *dst, const void *src, size_t bytes);
ST_API st_status st_ctx_probe_empty(st_ctx *ctx);
ST_API st_status st_ctx_probe_loads(st_ctx *ctx, const st_matrix *w, float *sink);

/* A matrix's bytes in the backend's layout (what one pass over it streams)
 * and where they are (backend memory). */
ST_API size_t st_matrix_bytes(const st_matrix *m);
ST_API const void *st_matrix_data(const st_matrix *m);

/* Captures the work queued on the context's stream between begin and end
 * (global capture mode) into an instantiated graph that can be launched on
 * the stream again and again; GPU only (ST_ERR_UNSUPPORTED on the CPU
 * backend). An engine that captures its own step uses its runtime's calls
 * on its own stream instead: the decode calls are capturable either way. */
typedef struct st_ctx_graph st_ctx_graph;
ST_API st_status st_ctx_capture_begin(st_ctx *ctx);
ST_API st_status st_ctx_capture_end(st_ctx *ctx, st_ctx_graph **graph);
ST_API st_status st_ctx_graph_launch(st_ctx *ctx, st_ctx_graph *graph);
ST_API void st_ctx_graph_destroy(st_ctx *ctx, st_ctx_graph *graph);

/* The expert rows pair whose launches equal the default chain's for the
 * experts EX under the context's dispatch at fewer than
 * st_ctx_default_expert_mma_tokens tokens (from there on the default is a
 * kernel no pair names), or 0/0 when none does: a tuner
 * need not time that pair against the default (it is the same launch). */
ST_API void st_ctx_default_expert_equiv(st_ctx *ctx, const st_experts *ex, int *gu_rows, int *down_rows);

/* The token count from which the default expert_grouped chain (the fused
 * FFN: SiLU, no biases, dense output; st_expert_ffn's other options take
 * the composed path, never these kernels) runs the experts EX on the
 * integer matrix units under the context's dispatch:
 * STRATA_EXPERT_BLOCK_DECODE_MMA_TOKENS where the gate and the down format
 * both take the block decode on this device, else
 * STRATA_EXPERT_DEFAULT_MMA_TOKENS (strata/variants.h); 1 with the
 * STRATA_EXPERT_MMA knob; ST_MAX_TOKENS + 1 where it never does (the CPU
 * backend, another expert knob's path, a NULL argument). Below it, a pair of
 * st_ctx_default_expert_equiv is the default's launch. */
ST_API int st_ctx_default_expert_mma_tokens(st_ctx *ctx, const st_experts *ex);

/* One formatted line to the context's log (its st_ctx_params log_fn, else
 * the process's sink). CTX may be NULL: the process's sink. */
ST_API void st_ctx_log(const st_ctx *ctx, const char *fmt, ...) ST_PRINTF(2, 3);

#ifdef __cplusplus
}
#endif
#endif
