/* The backends behind a context: one table of functions, implemented by the
 * CPU reference (cpu/backend_cpu.c) and the GPU (gpu/host.hip; gpu_none.c in
 * builds without one). The context (ctx.c) checks arguments and limits,
 * counts and picks the variant, then calls through the table. Internal. */
#ifndef ST_BACKEND_H
#define ST_BACKEND_H

#include "strata/decode.h"
#include "strata/knobs.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The limits a context serves, resolved from st_ctx_params (no zeros). */
typedef struct {
    int max_tokens, max_topk, max_experts;
    int64_t max_rows, max_cols;
} st_ctx_limits;

/* A matrix as a backend holds it: ggml bytes (CPU) or the device layout
 * (GPU); IN_PLACE: ggml's blocks where the engine holds them
 * (st_matrix_wrap), rows back to back, not owned (never freed here). */
typedef struct {
    st_qtype type;
    int64_t rows, cols;
    void *data;
    size_t bytes;
    bool in_place;
} st_bmatrix;

typedef struct {
    const st_bmatrix *gate, *up, *down;
    int n_expert, n_embd, n_ff;
} st_bexperts;

/* The checking mode's answer for a call's expert ids (check_ids). */
typedef struct {
    bool found;   /* an id outside 0..n_expert-1 */
    bool earlier; /* it was a call captured into a graph and replayed before this one */
    int token, slot, value;
} st_bad_id;

typedef struct st_backend_ops {
    void (*close)(void *b);
    void *(*stream)(void *b);
    st_status (*alloc)(void *b, size_t bytes, void **ptr);
    void (*free)(void *b, void *ptr);
    st_status (*upload)(void *b, void *dst, const void *src, size_t bytes);
    st_status (*download)(void *b, void *dst, const void *src, size_t bytes);
    st_status (*sync)(void *b);
    /* BYTES in host memory, or in backend memory when ON_DEVICE. */
    st_status (*matrix_create)(void *b, st_qtype t, int64_t rows, int64_t cols, const void *bytes, bool on_device,
                               st_bmatrix *out);
    void (*matrix_free)(void *b, st_bmatrix *m);
    /* ROWS = 0: the default chain under CFG, else the rows variant. Token
     * t's activations at X + t * XS, its outputs at Y + t * YS. */
    st_status (*mmvq)(void *b, const st_bmatrix *w, const float *x, int64_t xs, int nt, float *y, int64_t ys, int rows,
                      const st_dispatch_config *cfg);
    /* O: the activation, biases and strides (never NULL: ctx.c fills the
     * defaults); a backend refuses what it cannot compute. */
    st_status (*expert_grouped)(void *b, const st_bexperts *ex, const st_ffn_options *o, const float *x,
                                const int32_t *ids, const float *wts, int nt, int topk, float *out, int gu_rows,
                                int down_rows, const st_dispatch_config *cfg);
    /* Timing of the work queued between start and stop. */
    st_status (*timer_start)(void *b);
    st_status (*timer_stop)(void *b, double *ms);
    /* Free and total backend memory. */
    st_status (*mem_info)(void *b, size_t *free_bytes, size_t *total_bytes);
    size_t (*llc_bytes)(void *b);
    /* The expert rows pair whose launches equal the default chain's, 0/0 if none. */
    void (*default_expert_equiv)(void *b, int n_embd, int n_ff, const st_dispatch_config *cfg, int *gu, int *dn);
    st_status (*probe_read)(void *b, const void *src, size_t bytes, float *sink);
    st_status (*probe_copy)(void *b, void *dst, const void *src, size_t bytes);
    st_status (*probe_empty)(void *b);
    st_status (*probe_loads)(void *b, const st_bmatrix *w, float *sink);
    /* Stream capture into a graph (GPU only; NULL on the CPU). */
    st_status (*capture_begin)(void *b);
    st_status (*capture_end)(void *b, void **graph);
    st_status (*graph_launch)(void *b, void *graph);
    void (*graph_destroy)(void *b, void *graph);
    /* The checking mode (STRATA_CHECK=1, ctx.c): ST_OK when P is memory of
     * this backend's device, else ST_ERR_INVALID_ARG with one line naming
     * CALL and ARG and what P is. NULL on the CPU (host memory is its own). */
    st_status (*check_ptr)(void *b, const void *p, const char *call, const char *arg);
    /* Whether the context's stream is being captured into a graph (a copy
     * to the host would end the capture). NULL: never. */
    bool (*capturing)(void *b);
    /* The stream of later calls (NULL: the backend's own). */
    st_status (*set_stream)(void *b, void *stream);
    /* The checking mode (ctx.c): the first (token, slot) of the NT x TOPK
     * ids (token rows STRIDE apart) outside 0..N_EXPERT-1, found where the
     * ids live (on the GPU by a kernel over them, so only the answer comes
     * back: a wait on the stream). CAPTURED: the stream is being captured
     * into a graph; the check is queued (into the graph) and nothing is
     * waited for; a replay that finds a bad id records it, and the next
     * uncaptured check answers it with EARLIER set. */
    st_status (*check_ids)(void *b, const int32_t *ids, int64_t stride, int nt, int topk, int n_expert, bool captured,
                           st_bad_id *bad);
    /* st_expert_mat (arguments checked); NULL where the backend has none. */
    st_status (*expert_mat)(void *b, const st_bmatrix *w, int n_expert, const float *x, int x_slots,
                            int64_t x_slot_stride, int64_t x_token_stride, const int32_t *ids, int64_t ids_stride,
                            int nt, int topk, float *y, int64_t y_slot_stride, int64_t y_token_stride,
                            const st_dispatch_config *cfg);
    /* st_ctx_default_expert_mma_tokens for a gate of format GATE and a down
     * of format DOWN (the default chain under CFG). */
    int (*expert_mma_from)(void *b, int gate, int down, const st_dispatch_config *cfg);
    /* Kernels launched on the integer matrix units since the backend
     * opened (counted where they are launched); NULL: none ever. */
    uint64_t (*mma_launches)(void *b);
} st_backend_ops;

/* Opens a backend for P (limits resolved in LIM, knobs in CFG): fills the
 * identity, reserves the scratch (or takes P->workspace). */
st_status st_cpu_backend_open(const st_ctx_params *p, const st_ctx_limits *lim, const st_dispatch_config *cfg,
                              const st_backend_ops **ops, void **b, st_identity *id);
st_status st_gpu_backend_open(const st_ctx_params *p, const st_ctx_limits *lim, const st_dispatch_config *cfg,
                              const st_backend_ops **ops, void **b, st_identity *id);
/* Scratch bytes each backend reserves for LIM under CFG. */
size_t st_cpu_workspace_bytes(const st_ctx_limits *lim, const st_dispatch_config *cfg);
size_t st_gpu_workspace_bytes(const st_ctx_limits *lim, const st_dispatch_config *cfg);
/* The device layout's bytes (0 when the shape has none). */
size_t st_gpu_layout_bytes(st_qtype t, int64_t rows, int64_t cols);
/* The GPUs the runtime reports (0 when none, on error, or without a GPU backend). */
int st_gpu_device_count(void);
/* Test hook (tests/gpu/gpu_faults_test.c): N >= 1 makes the Nth kernel
 * launch of the GPU backend from now on fail as the runtime fails a
 * launch: a launch with an invalid configuration is made in its place and
 * its error is what the call returns (the runtime's message); later
 * launches run as usual. 0 disables it. Process-wide, one thread; never
 * set in production. No-op without a GPU backend. */
void st_gpu_fail_launch_at(long n);

#ifdef __cplusplus
}
#endif
#endif
