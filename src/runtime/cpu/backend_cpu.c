#define _POSIX_C_SOURCE 200809L
/* The CPU backend: the exact reference (reference.c) on the context's own
 * worker pool, with all scratch reserved when the context is made. Memory
 * is ordinary host memory; calls are synchronous. */
#include "strata/probe.h"
#include "backend.h"
#include "cpu_pool.h"
#include "internal.h"
#include "reference_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    st_cpu_pool *pool;
    void *scratch;
    size_t scratch_bytes;
    bool own_scratch;
    double t0;
} cpu_backend;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* mmvq: the q8_1 activations of max_tokens rows of max_cols values;
 * expert_grouped: st_ref_expert_scratch_bytes for the largest expert
 * (n_embd and n_ff are each a row count and a row length there). The two
 * never run at once on one context, so they share the space. */
size_t st_cpu_workspace_bytes(const st_ctx_limits *l, const st_dispatch_config *cfg)
{
    (void)cfg;
    const size_t mmvq = (size_t)(l->max_cols / 32) * ST_Q8_1_BLOCK_BYTES * (size_t)l->max_tokens;
    const int d = (int)min64(l->max_rows, l->max_cols) / 32 * 32;
    const size_t ex = st_ref_expert_scratch_bytes(d, d, l->max_tokens, l->max_topk);
    return ST_ALIGN64(mmvq > ex ? mmvq : ex);
}

static void cpu_close(void *b)
{
    cpu_backend *c = b;
    if (!c) return;
    st_cpu_pool_destroy(c->pool);
    if (c->own_scratch) free(c->scratch);
    free(c);
}

static void *cpu_stream(void *b) { return NULL; }

static st_status cpu_alloc(void *b, size_t bytes, void **ptr)
{
    *ptr = malloc(bytes ? bytes : 1);
    return *ptr ? ST_OK : st_fail(ST_ERR_NOMEM, "st_ctx_alloc: %zu bytes", bytes);
}

static void cpu_free(void *b, void *ptr) { free(ptr); }

static st_status cpu_copy(void *b, void *dst, const void *src, size_t bytes)
{
    memmove(dst, src, bytes);
    return ST_OK;
}

static st_status cpu_sync(void *b) { return ST_OK; }

static st_status cpu_matrix_create(void *b, st_qtype t, int64_t rows, int64_t cols, const void *bytes, bool on_device,
                                   st_bmatrix *out)
{
    (void)on_device; /* host memory is the CPU backend's memory */
    const size_t n = (size_t)rows * st_qtype_row_bytes(t, cols);
    void *copy = malloc(n);
    if (!copy) return st_fail(ST_ERR_NOMEM, "st_matrix_create: %zu bytes", n);
    memcpy(copy, bytes, n);
    *out = (st_bmatrix){t, rows, cols, copy, n, false};
    return ST_OK;
}

static void cpu_matrix_free(void *b, st_bmatrix *m)
{
    free(m->data);
    m->data = NULL;
}

static st_status cpu_mmvq(void *b, const st_bmatrix *w, const float *x, int64_t xs, int nt, float *y, int64_t ys,
                          int rows, const st_dispatch_config *cfg)
{
    cpu_backend *c = b;
    const size_t stride = (size_t)(w->cols / 32) * ST_Q8_1_BLOCK_BYTES;
    uint8_t *xq = c->scratch; /* the context's limits bound nt and cols */
    for (int t = 0; t < nt; t++) ST_TRY(st_quantize_q8_1(x + (size_t)t * (size_t)xs, xq + (size_t)t * stride, w->cols));
    /* a variant's rows (per block, per lane group) = rows per work item;
     * the others chunk as the reference does by itself */
    const st_mmvq_variant v = st_mmvq_variant_of(rows);
    st_cpu_split split = {0, v.family == ST_MMVQ_ROWS || v.family == ST_MMVQ_WIDE ? v.rows : 0};
    return st_ref_mmvq_pool(w->type, w->data, w->rows, w->cols, xq, nt, y, ys, &split, c->pool);
}

static st_status cpu_expert_grouped(void *b, const st_bexperts *ex, const st_ffn_options *o, const float *x,
                                    const int32_t *ids, const float *wts, int nt, int topk, float *out, int gu_rows,
                                    int down_rows, const st_dispatch_config *cfg)
{
    cpu_backend *c = b;
    st_expert_weights ew = {ex->gate->type, ex->down->type, ex->n_embd, ex->n_ff, ex->n_expert,
                            ex->gate->data, ex->up->data, ex->down->data};
    st_cpu_split gs = {0, gu_rows}, ds = {0, down_rows};
    return st_ref_expert_grouped_ws(&ew, o, x, ids, wts, nt, topk, out, &gs, &ds, c->pool, c->scratch);
}

static st_status cpu_expert_mat(void *b, const st_bmatrix *w, int n_expert, const float *x, int x_slots,
                                int64_t x_slot_stride, int64_t x_token_stride, const int32_t *ids, int64_t ids_stride,
                                int nt, int topk, float *y, int64_t y_slot_stride, int64_t y_token_stride,
                                const st_dispatch_config *cfg)
{
    cpu_backend *c = b;
    return st_ref_expert_mat_pool(w->type, w->data, w->rows / n_expert, w->cols, n_expert, x, x_slots, x_slot_stride,
                                  x_token_stride, ids, ids_stride, nt, topk, y, y_slot_stride, y_token_stride, NULL,
                                  c->pool, c->scratch);
}

/* The checking mode: the ids are host memory here. */
static st_status cpu_check_ids(void *b, const int32_t *ids, int64_t stride, int nt, int topk, int n_expert,
                               bool captured, st_bad_id *bad)
{
    (void)b;
    (void)captured;
    for (int t = 0; t < nt; t++)
        for (int k = 0; k < topk; k++) {
            const int32_t v = ids[t * stride + k];
            if (v < 0 || v >= n_expert) {
                *bad = (st_bad_id){true, false, t, k, v};
                return ST_OK;
            }
        }
    return ST_OK;
}

/* Host memory has no streams: NULL only (ctx.c refuses the rest). */
static st_status cpu_set_stream(void *b, void *stream)
{
    (void)b;
    return stream ? st_fail(ST_ERR_INVALID_ARG, "st_ctx_set_stream: the CPU backend has no streams (NULL only)") : ST_OK;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static st_status cpu_timer_start(void *b)
{
    ((cpu_backend *)b)->t0 = now_ms();
    return ST_OK;
}

static st_status cpu_timer_stop(void *b, double *ms)
{
    *ms = now_ms() - ((cpu_backend *)b)->t0;
    return ST_OK;
}

/* MemAvailable of /proc/meminfo (what can be had without swapping), else
 * the free pages sysconf reports. */
/* The CPU backend's memory is the host's (cpu/host_mem.c). */
static st_status cpu_mem_info(void *b, size_t *free_bytes, size_t *total_bytes)
{
    (void)b;
    return st_host_mem_info(free_bytes, total_bytes);
}

static size_t cpu_llc_bytes(void *b) { return 0; }

static void cpu_default_expert_equiv(void *b, int n_embd, int n_ff, const st_dispatch_config *cfg, int *gu, int *dn)
{
    *gu = *dn = 0;
}

/* the CPU backend has no matrix-unit path */
static int cpu_expert_mma_from(void *b, int gate, int down, const st_dispatch_config *cfg) { return ST_MAX_TOKENS + 1; }

static st_status cpu_probe_read(void *b, const void *src, size_t bytes, float *sink)
{
    const uint64_t *p = src;
    uint64_t acc = 0;
    for (size_t i = 0; i < bytes / 8; i++) acc ^= p[i];
    *sink = (float)(acc & 1);
    return ST_OK;
}

static st_status cpu_probe_empty(void *b) { return ST_OK; }

static st_status cpu_probe_loads(void *b, const st_bmatrix *w, float *sink)
{
    return st_fail(ST_ERR_UNSUPPORTED, "loads-only probe: GPU backend only");
}

static const st_backend_ops CPU_OPS = {
    .check_ids = cpu_check_ids,
    .close = cpu_close,
    .stream = cpu_stream,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .sync = cpu_sync,
    .matrix_create = cpu_matrix_create,
    .matrix_free = cpu_matrix_free,
    .mmvq = cpu_mmvq,
    .expert_grouped = cpu_expert_grouped,
    .timer_start = cpu_timer_start,
    .timer_stop = cpu_timer_stop,
    .mem_info = cpu_mem_info,
    .llc_bytes = cpu_llc_bytes,
    .default_expert_equiv = cpu_default_expert_equiv,
    .probe_read = cpu_probe_read,
    .probe_copy = cpu_copy,
    .probe_empty = cpu_probe_empty,
    .probe_loads = cpu_probe_loads,
    .set_stream = cpu_set_stream,
    .expert_mat = cpu_expert_mat,
    .expert_mma_from = cpu_expert_mma_from,
};

st_status st_cpu_backend_open(const st_ctx_params *p, const st_ctx_limits *lim, const st_dispatch_config *cfg,
                              const st_backend_ops **ops, void **out, st_identity *id)
{
    *out = NULL;
    cpu_backend *c = calloc(1, sizeof *c);
    if (!c) return st_fail(ST_ERR_NOMEM, "CPU backend: out of memory");
    const size_t need = st_cpu_workspace_bytes(lim, cfg);
    if (p->workspace) {
        if (p->workspace_bytes < need || ((uintptr_t)p->workspace & 63)) {
            free(c);
            return st_fail(ST_ERR_INVALID_ARG, "st_ctx_params: the workspace has %zu bytes at %p, the CPU backend needs "
                           "%zu, 64-byte aligned (st_ctx_workspace_bytes)", p->workspace_bytes, p->workspace, need);
        }
        c->scratch = p->workspace;
    } else {
        /* touched now, so the first decode call does not fault the pages in */
        c->scratch = calloc(1, need);
        c->own_scratch = true;
        if (!c->scratch) {
            free(c);
            return st_fail(ST_ERR_NOMEM, "CPU backend: %zu bytes of scratch", need);
        }
    }
    c->scratch_bytes = need;
    st_status s = st_cpu_pool_create(0, &c->pool);
    if (s != ST_OK) {
        cpu_close(c);
        return s;
    }
    st_identity_cpu(id);
    *ops = &CPU_OPS;
    *out = c;
    return ST_OK;
}
