#define _POSIX_C_SOURCE 200809L
/* Decode context: backend selection, memory, weights, and the table-aware
 * entry points. */
#include "strata/decode.h"
#include "strata/reference.h"
#include "gpu.h"
#include "internal.h"
#include "reference_internal.h"
#include "ctx_internal.h"
#include "devinfo.h"
#include "st_build_info.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct st_ctx {
    st_backend backend;
    st_identity id;
    st_dispatch_config cfg;
    st_table *table;
    st_gpu *gpu;
    st_ctx_stats stats;
    double t0; /* CPU timer start */
    double test_slow; /* st_ctx_test_slow_variants */
    size_t test_llc;  /* st_ctx_test_set_llc */
};

struct st_matrix {
    st_ctx *ctx;
    st_qtype type;
    int64_t rows, cols;
    void *host;          /* CPU backend: ggml bytes */
    st_gpu_matrix gpu;   /* GPU backend: device layout */
};

st_status st_ctx_create(st_backend backend, int device, st_ctx **out)
{
    if (!out) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_create: NULL output");
    *out = NULL;
    st_ctx *c = calloc(1, sizeof *c);
    if (!c) return st_fail(ST_ERR_NOMEM, "st_ctx_create: out of memory");
    st_dispatch_config_from_env(&c->cfg);
    if (backend == ST_BACKEND_GPU || backend == ST_BACKEND_AUTO) {
        st_status s = st_gpu_open(device, &c->gpu, &c->id);
        if (s == ST_OK && !st_arch_built_for(c->id.arch, ST_GPU_ARCHS)) {
            /* refused before any launch: the auto backend then uses the CPU */
            char line[512];
            st_arch_refusal(line, sizeof line, device, c->id.arch, c->id.device_name, ST_GPU_ARCHS, ST_GPU_BACKEND_NAME);
            st_gpu_close(c->gpu);
            c->gpu = NULL;
            s = st_fail(ST_ERR_UNSUPPORTED, "%s", line);
        }
        if (s == ST_OK) {
            c->backend = ST_BACKEND_GPU;
            *out = c;
            return ST_OK;
        }
        if (backend == ST_BACKEND_GPU) {
            free(c);
            return s;
        }
    }
    c->backend = ST_BACKEND_CPU;
    st_identity_cpu(&c->id);
    st_clear_error();
    *out = c;
    return ST_OK;
}

void st_ctx_destroy(st_ctx *c)
{
    if (!c) return;
    st_table_destroy(c->table);
    if (c->gpu) st_gpu_close(c->gpu);
    free(c);
}

st_backend st_ctx_backend(const st_ctx *c) { return c->backend; }
const st_identity *st_ctx_identity(const st_ctx *c) { return &c->id; }
const st_dispatch_config *st_ctx_dispatch(const st_ctx *c) { return &c->cfg; }

void st_ctx_set_dispatch(st_ctx *c, const st_dispatch_config *cfg)
{
    c->cfg = *cfg;
    if (st_dispatch_config_first_active(cfg) >= 0) st_ctx_drop_table(c);
}

st_status st_ctx_load_table(st_ctx *c, const char *path)
{
    if (!c || !path) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_load_table: NULL argument");
    st_table *t = NULL;
    st_status s = st_table_load(path, &c->id, &c->cfg, &t);
    st_ctx_drop_table(c);
    c->table = t;
    return s;
}

st_status st_ctx_load_table_env(st_ctx *c)
{
    const char *p = getenv("STRATA_DECODE_TUNING");
    if (!p || !*p) return st_fail(ST_ERR_NOT_FOUND, "STRATA_DECODE_TUNING is not set");
    return st_ctx_load_table(c, p);
}

void st_ctx_drop_table(st_ctx *c)
{
    st_table_destroy(c->table);
    c->table = NULL;
}

const st_table *st_ctx_table(const st_ctx *c) { return c->table; }

st_status st_ctx_alloc(st_ctx *c, size_t bytes, void **ptr)
{
    if (!c || !ptr) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_alloc: NULL argument");
    if (c->backend == ST_BACKEND_GPU) return st_gpu_alloc(c->gpu, bytes, ptr);
    *ptr = malloc(bytes ? bytes : 1);
    return *ptr ? ST_OK : st_fail(ST_ERR_NOMEM, "st_ctx_alloc: %zu bytes", bytes);
}

void st_ctx_free(st_ctx *c, void *ptr)
{
    if (!c || !ptr) return;
    if (c->backend == ST_BACKEND_GPU)
        st_gpu_free(c->gpu, ptr);
    else
        free(ptr);
}

st_status st_ctx_upload(st_ctx *c, void *dst, const void *src, size_t bytes)
{
    if (c->backend == ST_BACKEND_GPU) return st_gpu_upload(c->gpu, dst, src, bytes);
    memmove(dst, src, bytes);
    return ST_OK;
}

st_status st_ctx_download(st_ctx *c, void *dst, const void *src, size_t bytes)
{
    if (c->backend == ST_BACKEND_GPU) return st_gpu_download(c->gpu, dst, src, bytes);
    memmove(dst, src, bytes);
    return ST_OK;
}

st_status st_ctx_sync(st_ctx *c)
{
    return c->backend == ST_BACKEND_GPU ? st_gpu_sync(c->gpu) : ST_OK;
}

st_status st_matrix_create(st_ctx *c, st_qtype type, int64_t rows, int64_t cols,
                           const void *ggml_bytes, st_matrix **out)
{
    if (!c || !out || !ggml_bytes) return st_fail(ST_ERR_INVALID_ARG, "st_matrix_create: NULL argument");
    *out = NULL;
    if (!st_qtype_valid(type)) return st_fail(ST_ERR_INVALID_ARG, "st_matrix_create: unknown type %d", (int)type);
    size_t rb = st_qtype_row_bytes(type, cols);
    if (rows <= 0 || cols <= 0 || rb == 0)
        return st_fail(ST_ERR_INVALID_ARG, "st_matrix_create: %s matrix %lld x %lld: row length must be a positive multiple of %d",
                       st_qtype_name(type), (long long)rows, (long long)cols, st_qtype_block_values(type));
    if ((uint64_t)rows > SIZE_MAX / rb) return st_fail(ST_ERR_INVALID_ARG, "st_matrix_create: matrix too large");
    st_matrix *m = calloc(1, sizeof *m);
    if (!m) return st_fail(ST_ERR_NOMEM, "st_matrix_create: out of memory");
    m->ctx = c;
    m->type = type;
    m->rows = rows;
    m->cols = cols;
    size_t bytes = (size_t)rows * rb;
    if (c->backend == ST_BACKEND_GPU) {
        st_status s = st_gpu_matrix_upload(c->gpu, type, rows, cols, ggml_bytes, &m->gpu);
        if (s != ST_OK) {
            free(m);
            return s;
        }
    } else {
        m->host = malloc(bytes);
        if (!m->host) {
            free(m);
            return st_fail(ST_ERR_NOMEM, "st_matrix_create: %zu bytes", bytes);
        }
        memcpy(m->host, ggml_bytes, bytes);
    }
    *out = m;
    return ST_OK;
}

void st_matrix_destroy(st_matrix *m)
{
    if (!m) return;
    if (m->ctx->backend == ST_BACKEND_GPU)
        st_gpu_matrix_free(m->ctx->gpu, &m->gpu);
    free(m->host);
    free(m);
}

st_qtype st_matrix_type(const st_matrix *m) { return m->type; }
int64_t st_matrix_rows(const st_matrix *m) { return m->rows; }
int64_t st_matrix_cols(const st_matrix *m) { return m->cols; }

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void st_ctx_test_slow_variants(st_ctx *c, double extra) { c->test_slow = extra > 0 ? extra : 0; }
static double test_slow_start(const st_ctx *c) { return c->test_slow > 0 ? now_ms() : 0; }
static void test_slow_end(const st_ctx *c, double t0)
{
    if (c->test_slow <= 0) return;
    const double until = now_ms() + c->test_slow * (now_ms() - t0);
    while (now_ms() < until) {
    }
}

/* ---- iq_mmvq ---------------------------------------------------------- */
static st_status cpu_mmvq(const st_matrix *w, const float *x, int nt, float *y, int rows)
{
    size_t xq_stride = (size_t)(w->cols / 32) * ST_Q8_1_BLOCK_BYTES;
    uint8_t *xq = malloc(xq_stride * (size_t)nt);
    if (!xq) return st_fail(ST_ERR_NOMEM, "iq_mmvq: out of memory");
    st_status s = ST_OK;
    for (int t = 0; t < nt && s == ST_OK; t++)
        s = st_quantize_q8_1(x + (size_t)t * (size_t)w->cols, xq + (size_t)t * xq_stride, w->cols);
    st_cpu_split split = {0, rows}; /* a variant's rows = rows per work item */
    if (s == ST_OK) s = st_ref_mmvq(w->type, w->host, w->rows, w->cols, xq, nt, y, &split);
    free(xq);
    return s;
}

st_status st_iq_mmvq_variant(st_ctx *c, const st_matrix *w, const float *x, int nt, float *y, int rows)
{
    if (!c || !w || !x || !y) return st_fail(ST_ERR_INVALID_ARG, "iq_mmvq: NULL argument");
    if (w->ctx != c) return st_fail(ST_ERR_INVALID_ARG, "iq_mmvq: matrix belongs to another context");
    if (nt < 1 || nt > ST_MAX_TOKENS)
        return st_fail(ST_ERR_INVALID_ARG, "iq_mmvq: n_tokens %d is out of range 1..%d (ST_MAX_TOKENS)", nt, ST_MAX_TOKENS);
    if (rows != 0 && !st_mmvq_rows_valid(rows))
        return st_fail(ST_ERR_INVALID_ARG, "iq_mmvq: rows %d is not a compiled-in variant", rows);
    if (rows)
        c->stats.variant_launches++;
    else
        c->stats.default_launches++;
    if (c->backend == ST_BACKEND_GPU) return st_gpu_mmvq(c->gpu, &w->gpu, x, nt, y, rows, &c->cfg);
    const double t0 = rows ? test_slow_start(c) : 0;
    st_status s = cpu_mmvq(w, x, nt, y, rows);
    if (rows) test_slow_end(c, t0);
    return s;
}

st_status st_iq_mmvq(st_ctx *c, const st_matrix *w, const float *x, int nt, float *y)
{
    int rows = 0;
    if (c && w && c->table) {
        st_mmvq_key key = {w->type, (int)w->rows, (int)w->cols};
        if (st_table_lookup_mmvq(c->table, &key, &rows))
            c->stats.table_hits++;
        else if (st_table_tuned_default_mmvq(c->table, &key))
            c->stats.table_defaults++;
        else
            c->stats.table_misses++;
    }
    return st_iq_mmvq_variant(c, w, x, nt, y, rows);
}

/* ---- expert_grouped --------------------------------------------------- */
static st_status check_experts(const st_ctx *c, const st_experts *ex)
{
    if (!ex || !ex->gate || !ex->up || !ex->down) return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: NULL weights");
    if (ex->gate->ctx != c || ex->up->ctx != c || ex->down->ctx != c)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: weights belong to another context");
    if (ex->n_expert < 1 || ex->n_expert > ST_MAX_EXPERTS)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: n_expert %d is out of range 1..%d (ST_MAX_EXPERTS)", ex->n_expert,
                       ST_MAX_EXPERTS);
    const st_matrix *g = ex->gate, *u = ex->up, *d = ex->down;
    if (g->type != u->type || g->rows != u->rows || g->cols != u->cols)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: gate and up differ in type or shape");
    if (g->rows % ex->n_expert || d->rows % ex->n_expert)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: rows are not a multiple of n_expert %d", ex->n_expert);
    if (d->rows / ex->n_expert != g->cols || d->cols != g->rows / ex->n_expert)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: down is %lld x %lld, expected %lld x %lld per expert",
                       (long long)(d->rows / ex->n_expert), (long long)d->cols, (long long)g->cols,
                       (long long)(g->rows / ex->n_expert));
    return ST_OK;
}

st_status st_expert_grouped_variant(st_ctx *c, const st_experts *ex, const float *x,
                                    const int32_t *ids, const float *wts, int nt, int topk,
                                    float *out, int gu_rows, int down_rows)
{
    if (!c) return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: NULL context");
    ST_TRY(check_experts(c, ex));
    if (nt < 1 || nt > ST_MAX_TOKENS)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: n_tokens %d is out of range 1..%d (ST_MAX_TOKENS)", nt, ST_MAX_TOKENS);
    if (topk < 1 || topk > ST_MAX_TOPK)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: top-k %d is out of range 1..%d (ST_MAX_TOPK)", topk, ST_MAX_TOPK);
    bool dflt = gu_rows == 0 && down_rows == 0;
    if (!dflt && !st_expert_rows_valid(gu_rows, down_rows))
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: rows %d/%d is not a compiled-in variant", gu_rows, down_rows);
    if (dflt)
        c->stats.default_launches++;
    else
        c->stats.variant_launches++;
    int n_embd = (int)ex->gate->cols, n_ff = (int)(ex->gate->rows / ex->n_expert);
    if (c->backend == ST_BACKEND_GPU) {
        st_gpu_experts ge = {&ex->gate->gpu, &ex->up->gpu, &ex->down->gpu, ex->n_expert, n_embd, n_ff};
        return st_gpu_expert_grouped(c->gpu, &ge, x, ids, wts, nt, topk, out, gu_rows, down_rows, &c->cfg);
    }
    st_expert_weights ew = {ex->gate->type, ex->down->type, n_embd, n_ff, ex->n_expert,
                            ex->gate->host, ex->up->host, ex->down->host};
    st_cpu_split gs = {0, gu_rows}, ds = {0, down_rows};
    const double t0 = dflt ? 0 : test_slow_start(c);
    st_status s = st_ref_expert_grouped_split(&ew, x, ids, wts, nt, topk, out, &gs, &ds);
    if (!dflt) test_slow_end(c, t0);
    return s;
}

st_status st_expert_grouped(st_ctx *c, const st_experts *ex, const float *x, const int32_t *ids,
                            const float *wts, int nt, int topk, float *out)
{
    int gu = 0, dn = 0;
    if (c && c->table && ex && ex->gate && ex->down && ex->n_expert > 0) {
        st_expert_key key = {ex->gate->type, ex->down->type, (int)ex->gate->cols,
                             (int)(ex->gate->rows / ex->n_expert), nt};
        if (st_table_lookup_expert(c->table, &key, &gu, &dn))
            c->stats.table_hits++;
        else if (st_table_tuned_default_expert(c->table, &key))
            c->stats.table_defaults++;
        else
            c->stats.table_misses++;
    }
    return st_expert_grouped_variant(c, ex, x, ids, wts, nt, topk, out, gu, dn);
}

void st_ctx_get_stats(const st_ctx *c, st_ctx_stats *s) { *s = c->stats; }
void st_ctx_reset_stats(st_ctx *c) { memset(&c->stats, 0, sizeof c->stats); }

/* ---- services for the tuner and the benchmark ------------------------- */

st_status st_ctx_timer_start(st_ctx *c)
{
    if (c->backend == ST_BACKEND_GPU) return st_gpu_timer_start(c->gpu);
    c->t0 = now_ms();
    return ST_OK;
}

st_status st_ctx_timer_stop(st_ctx *c, double *ms)
{
    if (c->backend == ST_BACKEND_GPU) return st_gpu_timer_stop(c->gpu, ms);
    *ms = now_ms() - c->t0;
    return ST_OK;
}

size_t st_ctx_llc(st_ctx *c, const char **source)
{
    static const char cpu[] = "none: the CPU backend has no card's cache to rotate past (its timings are the reference's)";
    static const char fake[] = "set by a test (st_ctx_test_set_llc)";
    if (c->test_llc) {
        *source = fake;
        return c->test_llc;
    }
    if (c->backend != ST_BACKEND_GPU) {
        *source = cpu;
        return 0;
    }
    return st_llc_lookup(c->id.arch, c->id.device_name, c->id.compute_units, st_gpu_llc_bytes(c->gpu), source);
}

size_t st_ctx_llc_bytes(st_ctx *c)
{
    const char *src;
    return st_ctx_llc(c, &src);
}

void st_ctx_test_set_llc(st_ctx *c, size_t bytes) { c->test_llc = bytes; }

st_status st_ctx_mem_info(st_ctx *c, size_t *free_b, size_t *total_b)
{
    *free_b = *total_b = 0;
    if (c->backend == ST_BACKEND_GPU) return st_gpu_mem_info(c->gpu, free_b, total_b);
    const long page = sysconf(_SC_PAGESIZE), avail = sysconf(_SC_AVPHYS_PAGES), phys = sysconf(_SC_PHYS_PAGES);
    if (page <= 0 || avail < 0 || phys <= 0) return st_fail(ST_ERR_UNSUPPORTED, "host memory size unknown");
    *free_b = (size_t)avail * (size_t)page;
    *total_b = (size_t)phys * (size_t)page;
    return ST_OK;
}

void st_ctx_default_expert_equiv(st_ctx *c, const st_experts *ex, int *gu, int *dn)
{
    *gu = *dn = 0;
    if (c->backend == ST_BACKEND_GPU)
        st_gpu_default_expert_equiv((int)ex->gate->cols, (int)(ex->gate->rows / ex->n_expert), &c->cfg, gu, dn);
}

st_status st_ctx_probe_read(st_ctx *c, const void *src, size_t bytes, float *sink)
{
    if (c->backend == ST_BACKEND_GPU) return st_gpu_probe_read(c->gpu, src, bytes, sink);
    const uint64_t *p = src;
    uint64_t acc = 0;
    for (size_t i = 0; i < bytes / 8; i++) acc ^= p[i];
    *sink = (float)(acc & 1);
    return ST_OK;
}

st_status st_ctx_probe_copy(st_ctx *c, void *dst, const void *src, size_t bytes)
{
    if (c->backend == ST_BACKEND_GPU) return st_gpu_probe_copy(c->gpu, dst, src, bytes);
    memcpy(dst, src, bytes);
    return ST_OK;
}

st_status st_ctx_probe_empty(st_ctx *c)
{
    return c->backend == ST_BACKEND_GPU ? st_gpu_probe_empty(c->gpu) : ST_OK;
}

size_t st_matrix_bytes(const st_matrix *m)
{
    return m->ctx->backend == ST_BACKEND_GPU ? m->gpu.bytes : (size_t)m->rows * st_qtype_row_bytes(m->type, m->cols);
}

st_table *st_ctx_swap_table(st_ctx *c, st_table *t)
{
    st_table *old = c->table;
    c->table = t;
    return old;
}

const void *st_matrix_data(const st_matrix *m) { return m->ctx->backend == ST_BACKEND_GPU ? m->gpu.data : m->host; }

st_status st_ctx_probe_loads(st_ctx *c, const st_matrix *w, float *sink)
{
    if (c->backend != ST_BACKEND_GPU) return st_fail(ST_ERR_UNSUPPORTED, "loads-only probe: GPU backend only");
    return st_gpu_probe_loads(c->gpu, &w->gpu, sink);
}
