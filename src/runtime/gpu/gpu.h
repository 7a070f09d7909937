/* The GPU backend's host side, as the C library sees it. Implemented in
 * src/runtime/gpu/host.hip (HIP or CUDA builds) or gpu_none.c (builds
 * without a GPU backend). Pointers are device pointers. Internal. */
#ifndef ST_GPU_H
#define ST_GPU_H

#include "strata/formats.h"
#include "strata/identity.h"
#include "strata/knobs.h"
#include "strata/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct st_gpu st_gpu;

/* A weight matrix in device layout (row-planar, see kernels/layout.h). */
typedef struct {
    st_qtype type;
    int64_t rows, cols;
    void *data;      /* device memory */
    size_t bytes;
} st_gpu_matrix;

typedef struct {
    const st_gpu_matrix *gate, *up, *down;
    int n_expert, n_embd, n_ff;
} st_gpu_experts;

st_status st_gpu_open(int device, st_gpu **out, st_identity *id);
void st_gpu_close(st_gpu *g);
st_status st_gpu_alloc(st_gpu *g, size_t bytes, void **ptr);
void st_gpu_free(st_gpu *g, void *ptr);
st_status st_gpu_upload(st_gpu *g, void *dst, const void *src, size_t bytes);
st_status st_gpu_download(st_gpu *g, void *dst, const void *src, size_t bytes);
st_status st_gpu_sync(st_gpu *g);

/* Repacks ggml rows into the device layout and uploads them. */
st_status st_gpu_matrix_upload(st_gpu *g, st_qtype t, int64_t rows, int64_t cols,
                               const void *ggml_bytes, st_gpu_matrix *out);
void st_gpu_matrix_free(st_gpu *g, st_gpu_matrix *m);

/* ROWS = 0: default chain (with the knobs of CFG), else the rows variant. */
st_status st_gpu_mmvq(st_gpu *g, const st_gpu_matrix *w, const float *x, int nt, float *y,
                      int rows, const st_dispatch_config *cfg);
st_status st_gpu_expert_grouped(st_gpu *g, const st_gpu_experts *ex, const float *x,
                                const int32_t *ids, const float *wts, int nt, int topk,
                                float *out, int gu_rows, int down_rows,
                                const st_dispatch_config *cfg);

/* Timing with device events on the context's stream: mark the start, mark
 * the stop, then read the elapsed time (waits for the stop event). */
st_status st_gpu_timer_start(st_gpu *g);
st_status st_gpu_timer_stop(st_gpu *g, double *ms);
/* Last-level cache size of the device (L2; a MALL/Infinity Cache where the
 * runtime reports it), 0 when unknown. */
size_t st_gpu_llc_bytes(st_gpu *g);
/* Free and total bytes of the device's memory. */
st_status st_gpu_mem_info(st_gpu *g, size_t *free_b, size_t *total_b);
/* The expert rows pair (GU, DN) whose launches are identical to the default
 * chain's for this shape under CFG, or 0/0 when there is none. */
void st_gpu_default_expert_equiv(int n_embd, int n_ff, const st_dispatch_config *cfg, int *gu, int *dn);
/* Bandwidth probes for the benchmark: a streaming read of BYTES at SRC (the
 * result lands in SINK so the reads cannot be optimised away), a
 * device-to-device copy, and an empty kernel (launch overhead). Queued on
 * the context's stream. */
st_status st_gpu_probe_read(st_gpu *g, const void *src, size_t bytes, float *sink);
st_status st_gpu_probe_copy(st_gpu *g, void *dst, const void *src, size_t bytes);
st_status st_gpu_probe_empty(st_gpu *g);
/* Ablation: the iq_mmvq default geometry making only the weight loads (no
 * decode); IQ3_S, IQ4_XS, IQ4_NL. */
st_status st_gpu_probe_loads(st_gpu *g, const st_gpu_matrix *w, float *sink);

#ifdef __cplusplus
}
#endif
#endif
