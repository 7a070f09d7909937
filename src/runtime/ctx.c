#define _POSIX_C_SOURCE 200809L
/* Decode context: parameters and limits, the table, and the table-aware
 * entry points. Everything backend-specific goes through the backend's
 * function table (backend.h); this file only checks, counts and chooses. */
#include "strata/decode.h"
#include "backend.h"
#include "ctx_internal.h"
#include "devinfo.h"
#include "st_struct.h"
#include "table_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_MAX_DIM 32768

void st_ctx_params_init_size(st_ctx_params *p, size_t size)
{
    st_ctx_params d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.backend = ST_BACKEND_AUTO;
    st_struct_init(p, size, &d, sizeof d);
}

/* P as this build knows it: a caller's smaller struct (an older header)
 * reads as zeros past its end. */
static st_status read_params(const st_ctx_params *p, st_ctx_params *out)
{
    st_ctx_params_init(out);
    if (!p) return ST_OK;
    if (p->struct_size < offsetof(st_ctx_params, stream) || p->struct_size > ST_STRUCT_SIZE_MAX)
        return st_fail(ST_ERR_INVALID_ARG, "st_ctx_params: struct_size %zu is not a size this library knows "
                       "(call st_ctx_params_init first)", p->struct_size);
    memcpy(out, p, p->struct_size < sizeof *out ? p->struct_size : sizeof *out);
    out->struct_size = sizeof *out;
    return ST_OK;
}

static st_status resolve_limits(const st_ctx_params *p, st_ctx_limits *l)
{
#define LIMIT_(field, dflt, max, name)                                                                          \
    do {                                                                                                        \
        if (p->field < 0 || p->field > (max))                                                                   \
            return st_fail(ST_ERR_INVALID_ARG, "st_ctx_params: " #field " %lld is out of range 0..%lld (%s)",     \
                           (long long)p->field, (long long)(max), name);                                          \
        l->field = p->field ? p->field : (dflt);                                                                \
    } while (0)
    LIMIT_(max_tokens, ST_MAX_TOKENS, ST_MAX_TOKENS, "ST_MAX_TOKENS");
    LIMIT_(max_topk, ST_MAX_TOPK, ST_MAX_TOPK, "ST_MAX_TOPK");
    LIMIT_(max_experts, ST_MAX_EXPERTS, ST_MAX_EXPERTS, "ST_MAX_EXPERTS");
    LIMIT_(max_rows, DEFAULT_MAX_DIM, ST_TABLE_MAX_DIM, "the largest table dimension");
    LIMIT_(max_cols, DEFAULT_MAX_DIM, ST_TABLE_MAX_DIM, "the largest table dimension");
#undef LIMIT_
    if (l->max_cols % 256) l->max_cols += 256 - l->max_cols % 256; /* whole blocks of every type */
    return ST_OK;
}

static st_status open_backend(st_ctx *c, const st_ctx_params *p)
{
    if (p->backend == ST_BACKEND_GPU || p->backend == ST_BACKEND_AUTO) {
        st_status s = st_gpu_backend_open(p, &c->lim, &c->cfg, &c->ops, &c->b, &c->id);
        if (s == ST_OK) {
            c->backend = ST_BACKEND_GPU;
            c->device = p->device;
            return ST_OK;
        }
        /* the engine's stream or workspace belong to the GPU it asked for */
        if (p->backend == ST_BACKEND_GPU || p->stream || p->workspace) return s;
    } else if (p->backend != ST_BACKEND_CPU) {
        return st_fail(ST_ERR_INVALID_ARG, "st_ctx_params: unknown backend %d", (int)p->backend);
    } else if (p->stream) {
        return st_fail(ST_ERR_INVALID_ARG, "st_ctx_params: a stream was given for the CPU backend");
    }
    ST_TRY(st_cpu_backend_open(p, &c->lim, &c->cfg, &c->ops, &c->b, &c->id));
    c->backend = ST_BACKEND_CPU;
    st_clear_error();
    return ST_OK;
}

st_status st_ctx_create_ex(const st_ctx_params *params, st_ctx **out)
{
    if (!out) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_create: NULL output");
    *out = NULL;
    st_ctx_params p;
    ST_TRY(read_params(params, &p));
    st_ctx *c = calloc(1, sizeof *c);
    if (!c) return st_fail(ST_ERR_NOMEM, "st_ctx_create: out of memory");
    st_status s = resolve_limits(&p, &c->lim);
    st_dispatch_config_from_env(&c->cfg);
    const char *chk = getenv("STRATA_CHECK");
    c->check = chk && !strcmp(chk, "1");
    c->log_fn = p.log_fn;
    c->log_user = p.log_user;
    if (s == ST_OK) s = open_backend(c, &p);
    if (s != ST_OK) {
        free(c);
        return s;
    }
    *out = c;
    return ST_OK;
}

st_status st_ctx_create(st_backend backend, int device, st_ctx **out)
{
    st_ctx_params p;
    st_ctx_params_init(&p);
    p.backend = backend;
    p.device = device;
    return st_ctx_create_ex(&p, out);
}

st_status st_ctx_workspace_bytes(const st_ctx_params *params, size_t *bytes)
{
    if (!bytes) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_workspace_bytes: NULL output");
    *bytes = 0;
    st_ctx_params p;
    ST_TRY(read_params(params, &p));
    st_ctx_limits l;
    ST_TRY(resolve_limits(&p, &l));
    st_dispatch_config cfg;
    st_dispatch_config_from_env(&cfg);
    const bool gpu = p.backend == ST_BACKEND_GPU || (p.backend == ST_BACKEND_AUTO && strcmp(st_gpu_backend_name(), "none"));
    *bytes = gpu ? st_gpu_workspace_bytes(&l, &cfg) : st_cpu_workspace_bytes(&l, &cfg);
    return ST_OK;
}

void st_ctx_destroy(st_ctx *c)
{
    if (!c) return;
    st_table_destroy(c->table);
    c->ops->close(c->b);
    free(c);
}

st_backend st_ctx_backend(const st_ctx *c) { return c->backend; }
int st_ctx_device(const st_ctx *c) { return c->device; }

st_status st_device_count(st_backend backend, int *count)
{
    if (!count) return st_fail(ST_ERR_INVALID_ARG, "st_device_count: NULL output");
    *count = 0;
    if (backend != ST_BACKEND_AUTO && backend != ST_BACKEND_CPU && backend != ST_BACKEND_GPU)
        return st_fail(ST_ERR_INVALID_ARG, "st_device_count: unknown backend %d", (int)backend);
    const int gpus = backend == ST_BACKEND_CPU ? 0 : st_gpu_device_count();
    *count = backend == ST_BACKEND_GPU ? gpus : backend == ST_BACKEND_CPU ? 1 : gpus > 0 ? gpus : 1;
    return ST_OK;
}
void *st_ctx_stream(const st_ctx *c) { return c->ops->stream(c->b); }
const st_identity *st_ctx_identity(const st_ctx *c) { return &c->id; }
const st_dispatch_config *st_ctx_dispatch(const st_ctx *c) { return &c->cfg; }

void st_ctx_set_dispatch(st_ctx *c, const st_dispatch_config *cfg)
{
    c->cfg = *cfg;
    if (st_dispatch_config_first_active(cfg) >= 0) st_ctx_drop_table(c);
}

void st_ctx_log(const st_ctx *c, const char *fmt, ...)
{
    char line[ST_TABLE_MSG_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (c && c->log_fn)
        c->log_fn(c->log_user, line);
    else
        st_log("%s", line);
}

st_status st_ctx_load_table(st_ctx *c, const char *path)
{
    if (!c || !path) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_load_table: NULL argument");
    char msg[ST_TABLE_MSG_MAX];
    st_table *t = NULL;
    st_status s = st_table_load_msg(path, &c->id, &c->cfg, &t, msg, sizeof msg);
    st_ctx_log(c, "%s", msg);
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

st_status st_ctx_swap_table(st_ctx *c, st_table *t, st_table **previous)
{
    if (!c || !previous) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_swap_table: NULL argument");
    *previous = NULL;
    if (t) {
        const st_identity *id = st_table_identity(t);
        if (!st_identity_same_device(id, &c->id)) {
            char a[4 * ST_TOKEN_MAX + 16], b[4 * ST_TOKEN_MAX + 16];
            st_identity_header(id, a, sizeof a);
            st_identity_header(&c->id, b, sizeof b);
            return st_fail(ST_ERR_REFUSED, "st_ctx_swap_table: the table is made for %s%s%s, this context is %s%s%s", a,
                           id->model[0] ? ", device " : "", id->model, b, c->id.model[0] ? ", device " : "", c->id.model);
        }
        const int k = st_dispatch_config_first_active(&c->cfg);
        if (k >= 0)
            return st_fail(ST_ERR_REFUSED, "st_ctx_swap_table: %s reroutes the decode dispatch away from what the table measured",
                           st_knob_label((st_knob)k));
    }
    *previous = c->table;
    c->table = t;
    return ST_OK;
}

st_table *st_ctx_test_swap_table(st_ctx *c, st_table *t)
{
    st_table *old = c->table;
    c->table = t;
    return old;
}

void st_ctx_default_expert_equiv(st_ctx *c, const st_experts *ex, int *gu, int *dn)
{
    *gu = *dn = 0;
    if (!c || !ex || !ex->gate || ex->n_expert <= 0) return;
    c->ops->default_expert_equiv(c->b, (int)ex->gate->m.cols, (int)(ex->gate->m.rows / ex->n_expert), &c->cfg, gu, dn);
}

st_status st_ctx_alloc(st_ctx *c, size_t bytes, void **ptr)
{
    if (!c || !ptr) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_alloc: NULL argument");
    return c->ops->alloc(c->b, bytes, ptr);
}

void st_ctx_free(st_ctx *c, void *ptr)
{
    if (c && ptr) c->ops->free(c->b, ptr);
}

st_status st_ctx_upload(st_ctx *c, void *dst, const void *src, size_t bytes)
{
    if (!c || ((!dst || !src) && bytes)) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_upload: NULL argument");
    return bytes ? c->ops->upload(c->b, dst, src, bytes) : ST_OK;
}

st_status st_ctx_download(st_ctx *c, void *dst, const void *src, size_t bytes)
{
    if (!c || ((!dst || !src) && bytes)) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_download: NULL argument");
    return bytes ? c->ops->download(c->b, dst, src, bytes) : ST_OK;
}

st_status st_ctx_sync(st_ctx *c)
{
    if (!c) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_sync: NULL context");
    return c->ops->sync(c->b);
}

/* ---- matrices ---------------------------------------------------------- */
static st_status check_shape(const st_ctx *c, st_qtype type, int64_t rows, int64_t cols, const char *what)
{
    if (!st_qtype_valid(type)) return st_fail(ST_ERR_INVALID_ARG, "%s: unknown type %d", what, (int)type);
    if (rows <= 0 || cols <= 0 || st_qtype_row_bytes(type, cols) == 0)
        return st_fail(ST_ERR_INVALID_ARG, "%s: %s matrix %lld x %lld: row length must be a positive multiple of %d",
                       what, st_qtype_name(type), (long long)rows, (long long)cols, st_qtype_block_values(type));
    if (cols > c->lim.max_cols)
        return st_fail(ST_ERR_INVALID_ARG, "%s: %s matrix %lld x %lld: %lld values per row is more than the context's "
                       "max_cols %lld", what, st_qtype_name(type), (long long)rows, (long long)cols, (long long)cols,
                       (long long)c->lim.max_cols);
    if ((uint64_t)rows > SIZE_MAX / st_qtype_row_bytes(type, cols))
        return st_fail(ST_ERR_INVALID_ARG, "%s: matrix too large", what);
    return ST_OK;
}

static st_status matrix_new(st_ctx *c, st_qtype type, int64_t rows, int64_t cols, const void *bytes, bool on_device,
                            st_matrix **out)
{
    const char *what = on_device ? "st_matrix_create_from_device" : "st_matrix_create";
    if (!c || !out || !bytes) return st_fail(ST_ERR_INVALID_ARG, "%s: NULL argument", what);
    *out = NULL;
    ST_TRY(check_shape(c, type, rows, cols, what));
    st_matrix *m = calloc(1, sizeof *m);
    if (!m) return st_fail(ST_ERR_NOMEM, "%s: out of memory", what);
    m->ctx = c;
    st_status s = c->ops->matrix_create(c->b, type, rows, cols, bytes, on_device, &m->m);
    if (s != ST_OK) {
        free(m);
        return s;
    }
    *out = m;
    return ST_OK;
}

st_status st_matrix_create(st_ctx *c, st_qtype type, int64_t rows, int64_t cols, const void *ggml_bytes,
                           st_matrix **out)
{
    return matrix_new(c, type, rows, cols, ggml_bytes, false, out);
}

st_status st_matrix_create_from_device(st_ctx *c, st_qtype type, int64_t rows, int64_t cols, const void *bytes,
                                       st_matrix **out)
{
    return matrix_new(c, type, rows, cols, bytes, true, out);
}

size_t st_matrix_layout_bytes(st_qtype type, int64_t rows, int64_t cols)
{
    if (!st_qtype_valid(type) || rows <= 0 || st_qtype_row_bytes(type, cols) == 0) return 0;
    if (strcmp(st_gpu_backend_name(), "none")) return st_gpu_layout_bytes(type, rows, cols);
    return (uint64_t)rows > SIZE_MAX / st_qtype_row_bytes(type, cols) ? 0 : (size_t)rows * st_qtype_row_bytes(type, cols);
}

void st_matrix_destroy(st_matrix *m)
{
    if (!m) return;
    m->ctx->ops->matrix_free(m->ctx->b, &m->m);
    free(m);
}

st_qtype st_matrix_type(const st_matrix *m) { return m->m.type; }
int64_t st_matrix_rows(const st_matrix *m) { return m->m.rows; }
int64_t st_matrix_cols(const st_matrix *m) { return m->m.cols; }

/* ---- iq_mmvq ---------------------------------------------------------- */
static st_status check_tokens(const st_ctx *c, int nt, const char *what)
{
    if (nt < 1 || nt > c->lim.max_tokens)
        return st_fail(ST_ERR_INVALID_ARG, "%s: n_tokens %d is out of range 1..%d (the context's max_tokens; "
                       "ST_MAX_TOKENS is %d)", what, nt, c->lim.max_tokens, ST_MAX_TOKENS);
    return ST_OK;
}

static st_status check_rows(const st_ctx *c, int64_t rows, const char *what)
{
    if (rows > c->lim.max_rows)
        return st_fail(ST_ERR_INVALID_ARG, "%s: %lld rows is more than the context's max_rows %lld", what,
                       (long long)rows, (long long)c->lim.max_rows);
    return ST_OK;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void st_ctx_test_slow_variants(st_ctx *c, double extra) { c->test_slow = extra > 0 ? extra : 0; }
void st_ctx_test_slow_default(st_ctx *c, double extra) { c->test_slow_default = extra > 0 ? extra : 0; }
void st_ctx_test_set_device(st_ctx *c, int device) { c->device = device; }

/* The test hooks' spin after a CPU launch that began at T0: EXTRA times
 * what it took. */
static st_status test_slow_end(double extra, double t0, st_status s)
{
    const double until = now_ms() + extra * (now_ms() - t0);
    while (now_ms() < until) {
    }
    return s;
}

/* ---- the checking mode ------------------------------------------------- */
/* STRATA_CHECK=1 when the context is created, for engines under
 * development: every pointer a decode call is given is checked to be
 * memory of the context's device (the runtime's pointer attributes) and the
 * expert ids to be in 0..n_expert-1, before anything is queued, so a wrong
 * argument is one line naming it and the context stays usable (a host
 * pointer given to a kernel ends in an illegal-address fault that poisons
 * the whole GPU context). The ids are copied to the host for the check (a
 * wait on the stream), except while the stream is being captured. Off by
 * default: a decode call then neither queries nor waits. */
static st_status check_ptr(st_ctx *c, const void *p, const char *call, const char *arg)
{
    return c->check && c->ops->check_ptr ? c->ops->check_ptr(c->b, p, call, arg) : ST_OK;
}

static st_status check_ids(st_ctx *c, const int32_t *ids, int n, int n_expert)
{
    if (!c->check || (c->ops->capturing && c->ops->capturing(c->b))) return ST_OK;
    int32_t v[ST_MAX_PAIRS];
    if (n > ST_MAX_PAIRS) return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: %d pairs, more than ST_MAX_PAIRS", n);
    ST_TRY(c->ops->download(c->b, v, ids, sizeof *v * (size_t)n));
    for (int i = 0; i < n; i++)
        if (v[i] < 0 || v[i] >= n_expert)
            return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: ids[%d] = %d is outside 0..%d (n_expert %d; STRATA_CHECK)",
                           i, v[i], n_expert - 1, n_expert);
    return ST_OK;
}

st_status st_iq_mmvq_variant(st_ctx *c, const st_matrix *w, const float *x, int nt, float *y, int rows)
{
    if (!c || !w || !x || !y) return st_fail(ST_ERR_INVALID_ARG, "iq_mmvq: NULL argument");
    if (w->ctx != c) return st_fail(ST_ERR_INVALID_ARG, "iq_mmvq: matrix belongs to another context");
    ST_TRY(check_tokens(c, nt, "iq_mmvq"));
    ST_TRY(check_rows(c, w->m.rows, "iq_mmvq"));
    if (rows != 0 && !st_mmvq_rows_valid(rows))
        return st_fail(ST_ERR_INVALID_ARG, "iq_mmvq: rows %d is not a compiled-in variant", rows);
    if (rows != 0 && !st_mmvq_variant_fits(rows, w->m.cols)) {
        char vn[24];
        return st_fail(ST_ERR_INVALID_ARG, "iq_mmvq: %s needs rows of at least %d values (128 streams); this matrix has %lld",
                       st_mmvq_variant_name(rows, vn, sizeof vn), st_mmvq_variant_min_cols(rows), (long long)w->m.cols);
    }
    ST_TRY(check_ptr(c, x, "iq_mmvq", "x"));
    ST_TRY(check_ptr(c, y, "iq_mmvq", "y"));
    if (rows)
        c->stats.variant_launches++;
    else
        c->stats.default_launches++;
    const double slow = rows ? c->test_slow : c->test_slow_default;
    if (slow > 0 && c->backend == ST_BACKEND_CPU) {
        const double t0 = now_ms(); /* before the call: argument order is unspecified */
        return test_slow_end(slow, t0, c->ops->mmvq(c->b, &w->m, x, nt, y, rows, &c->cfg));
    }
    return c->ops->mmvq(c->b, &w->m, x, nt, y, rows, &c->cfg);
}

st_status st_iq_mmvq(st_ctx *c, const st_matrix *w, const float *x, int nt, float *y)
{
    int rows = 0;
    if (c && w && c->table) {
        st_mmvq_key key = {w->m.type, (int)w->m.rows, (int)w->m.cols};
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
    if (ex->n_expert < 1 || ex->n_expert > c->lim.max_experts)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: n_expert %d is out of range 1..%d (the context's "
                       "max_experts; ST_MAX_EXPERTS is %d)", ex->n_expert, c->lim.max_experts, ST_MAX_EXPERTS);
    const st_bmatrix *g = &ex->gate->m, *u = &ex->up->m, *d = &ex->down->m;
    if (g->type != u->type || g->rows != u->rows || g->cols != u->cols)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: gate and up differ in type or shape");
    if (g->rows % ex->n_expert || d->rows % ex->n_expert)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: rows are not a multiple of n_expert %d", ex->n_expert);
    if (d->rows / ex->n_expert != g->cols || d->cols != g->rows / ex->n_expert)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: down is %lld x %lld, expected %lld x %lld per expert",
                       (long long)(d->rows / ex->n_expert), (long long)d->cols, (long long)g->cols,
                       (long long)(g->rows / ex->n_expert));
    ST_TRY(check_rows(c, g->rows / ex->n_expert, "expert_grouped"));
    ST_TRY(check_rows(c, d->rows / ex->n_expert, "expert_grouped"));
    return ST_OK;
}

st_status st_expert_grouped_variant(st_ctx *c, const st_experts *ex, const float *x, const int32_t *ids,
                                    const float *wts, int nt, int topk, float *out, int gu_rows, int down_rows)
{
    if (!c) return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: NULL context");
    ST_TRY(check_experts(c, ex));
    if (!x || !ids || !wts || !out) return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: NULL argument");
    ST_TRY(check_tokens(c, nt, "expert_grouped"));
    if (topk < 1 || topk > c->lim.max_topk || topk > ex->n_expert)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: top-k %d is out of range 1..%d (the context's max_topk, "
                       "at most n_expert; ST_MAX_TOPK is %d)", topk, c->lim.max_topk, ST_MAX_TOPK);
    const bool dflt = gu_rows == 0 && down_rows == 0;
    if (!dflt && !st_expert_rows_valid(gu_rows, down_rows))
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: rows %d/%d is not a compiled-in variant", gu_rows, down_rows);
    ST_TRY(check_ptr(c, x, "expert_grouped", "x"));
    ST_TRY(check_ptr(c, ids, "expert_grouped", "ids"));
    ST_TRY(check_ptr(c, wts, "expert_grouped", "wts"));
    ST_TRY(check_ptr(c, out, "expert_grouped", "out"));
    ST_TRY(check_ids(c, ids, nt * topk, ex->n_expert));
    if (dflt)
        c->stats.default_launches++;
    else
        c->stats.variant_launches++;
    const int n_embd = (int)ex->gate->m.cols, n_ff = (int)(ex->gate->m.rows / ex->n_expert);
    st_bexperts be = {&ex->gate->m, &ex->up->m, &ex->down->m, ex->n_expert, n_embd, n_ff};
    const double slow = dflt ? c->test_slow_default : c->test_slow;
    if (slow > 0 && c->backend == ST_BACKEND_CPU) {
        const double t0 = now_ms();
        return test_slow_end(slow, t0, c->ops->expert_grouped(c->b, &be, x, ids, wts, nt, topk, out, gu_rows, down_rows,
                                                           &c->cfg));
    }
    return c->ops->expert_grouped(c->b, &be, x, ids, wts, nt, topk, out, gu_rows, down_rows, &c->cfg);
}

st_status st_expert_grouped(st_ctx *c, const st_experts *ex, const float *x, const int32_t *ids, const float *wts,
                            int nt, int topk, float *out)
{
    int gu = 0, dn = 0;
    if (c && c->table && ex && ex->gate && ex->down && ex->n_expert > 0) {
        st_expert_key key = {ex->gate->m.type, ex->down->m.type, (int)ex->gate->m.cols,
                             (int)(ex->gate->m.rows / ex->n_expert), nt};
        if (st_table_lookup_expert(c->table, &key, &gu, &dn))
            c->stats.table_hits++;
        else if (st_table_tuned_default_expert(c->table, &key))
            c->stats.table_defaults++;
        else
            c->stats.table_misses++;
    }
    return st_expert_grouped_variant(c, ex, x, ids, wts, nt, topk, out, gu, dn);
}

void st_ctx_stats_init_size(st_ctx_stats *s, size_t size) { st_struct_init_zeros(s, size); }

void st_ctx_get_stats(const st_ctx *c, st_ctx_stats *s)
{
    /* the members the caller's struct has room for (it may be older) */
    if (c && s) st_struct_out(s, &c->stats, sizeof c->stats);
}
void st_ctx_reset_stats(st_ctx *c) { st_ctx_stats_init(&c->stats); }

