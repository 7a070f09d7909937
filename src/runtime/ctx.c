#define _POSIX_C_SOURCE 200809L
/* Decode context: parameters and limits, the table, and the table-aware
 * entry points. Everything backend-specific goes through the backend's
 * function table (backend.h); this file only checks, counts and chooses. */
#include "strata/decode.h"
#include "backend.h"
#include "ctx_internal.h"
#include "devinfo.h"
#include "layout.h"
#include "st_struct.h"
#include "table_internal.h"

#include <stdarg.h>
#include <stdbool.h>
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

int st_ctx_default_expert_mma_tokens(st_ctx *c, const st_experts *ex)
{
    if (!c || !ex || !ex->gate || !ex->down) return ST_MAX_TOKENS + 1;
    return c->ops->expert_mma_from(c->b, (int)ex->gate->m.type, (int)ex->down->m.type, &c->cfg);
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
    if (rows > INT32_MAX)
        return st_fail(ST_ERR_INVALID_ARG, "%s: %s matrix %lld x %lld: %lld rows is more than INT32_MAX (a shape "
                       "key's row count is an int)", what, st_qtype_name(type), (long long)rows, (long long)cols,
                       (long long)rows);
    if ((uint64_t)rows > SIZE_MAX / st_qtype_row_bytes(type, cols))
        return st_fail(ST_ERR_INVALID_ARG, "%s: matrix too large", what);
    return ST_OK;
}

/* A matrix serves every context of the backend and device it was made on. */
static bool usable_by(const st_matrix *m, const st_ctx *c)
{
    return m->ctx == c || (m->ctx->backend == c->backend && m->ctx->device == c->device);
}

static st_status check_usable(const st_matrix *m, const st_ctx *c, const char *what)
{
    if (!usable_by(m, c))
        return st_fail(ST_ERR_INVALID_ARG, "%s: the matrix was made on %s device %d, this context is %s device %d", what,
                       m->ctx->backend == ST_BACKEND_GPU ? "GPU" : "CPU", m->ctx->device,
                       c->backend == ST_BACKEND_GPU ? "GPU" : "CPU", c->device);
    /* the scratch is sized by the calling context's limits, which may be
     * smaller than those of the context that made the matrix */
    if (m->m.cols > c->lim.max_cols)
        return st_fail(ST_ERR_INVALID_ARG, "%s: the matrix's rows of %lld values are more than this context's max_cols "
                       "%lld (it was made on a context with larger limits)", what, (long long)m->m.cols,
                       (long long)c->lim.max_cols);
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

st_status st_matrix_wrap(st_ctx *c, st_qtype type, int64_t rows, int64_t cols, const void *bytes, st_matrix **out)
{
    const char *what = "st_matrix_wrap";
    if (!c || !out || !bytes) return st_fail(ST_ERR_INVALID_ARG, "%s: NULL argument", what);
    *out = NULL;
    ST_TRY(check_shape(c, type, rows, cols, what));
    const size_t a = (size_t)ST_BLK_ALIGN(st_qtype_block_bytes(type));
    if ((uintptr_t)bytes % a)
        return st_fail(ST_ERR_INVALID_ARG, "%s: %s blocks at %p are not on a %zu-byte boundary (the in-place kernels "
                       "load them %zu bytes at a time)", what, st_qtype_name(type), bytes, a, a);
    /* not a decode call: the pointer is checked whatever STRATA_CHECK says */
    if (c->ops->check_ptr) ST_TRY(c->ops->check_ptr(c->b, bytes, what, "bytes"));
    st_matrix *m = calloc(1, sizeof *m);
    if (!m) return st_fail(ST_ERR_NOMEM, "%s: out of memory", what);
    m->ctx = c;
    m->m.type = type;
    m->m.rows = rows;
    m->m.cols = cols;
    m->m.data = (void *)(uintptr_t)bytes;
    m->m.bytes = (size_t)rows * st_qtype_row_bytes(type, cols);
    m->m.in_place = true;
    *out = m;
    return ST_OK;
}

int st_matrix_in_place(const st_matrix *m) { return m && m->m.in_place; }

size_t st_matrix_layout_bytes(st_qtype type, int64_t rows, int64_t cols)
{
    if (!st_qtype_valid(type) || rows <= 0 || st_qtype_row_bytes(type, cols) == 0) return 0;
    if (strcmp(st_gpu_backend_name(), "none")) return st_gpu_layout_bytes(type, rows, cols);
    return (uint64_t)rows > SIZE_MAX / st_qtype_row_bytes(type, cols) ? 0 : (size_t)rows * st_qtype_row_bytes(type, cols);
}

void st_matrix_destroy(st_matrix *m)
{
    if (!m) return;
    if (!m->m.in_place) m->ctx->ops->matrix_free(m->ctx->b, &m->m);
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
 * expert ids to be in 0..n_expert-1, before the call's kernels are queued,
 * so a wrong argument is one line naming it and the context stays usable (a
 * host pointer given to a kernel ends in an illegal-address fault that
 * poisons the whole GPU context). The ids are range-checked where they
 * live: on the GPU by a kernel over them, whose answer (a few bytes) is
 * copied back, a wait on the stream; while the stream is being captured the
 * check goes into the graph and the next uncaptured call reports what a
 * replay found. Off by default: a decode call then neither queries nor
 * waits. */
static st_status check_ptr(st_ctx *c, const void *p, const char *call, const char *arg)
{
    return c->check && c->ops->check_ptr ? c->ops->check_ptr(c->b, p, call, arg) : ST_OK;
}

/* The NT rows of TOPK ids, STRIDE apart (0 or TOPK: dense), of CALL. */
static st_status check_ids(st_ctx *c, const char *call, const int32_t *ids, int64_t stride, int nt, int topk,
                           int n_expert)
{
    if (!c->check || !c->ops->check_ids) return ST_OK;
    const bool captured = c->ops->capturing && c->ops->capturing(c->b);
    st_bad_id bad;
    memset(&bad, 0, sizeof bad);
    ST_TRY(c->ops->check_ids(c->b, ids, stride ? stride : topk, nt, topk, n_expert, captured, &bad));
    if (!bad.found) return ST_OK;
    if (bad.earlier)
        return st_fail(ST_ERR_INVALID_ARG, "%s: a call captured into a graph and replayed before this one had ids[%d][%d] "
                       "= %d, outside its experts (STRATA_CHECK; that slot added 0); this call was not run",
                       call, bad.token, bad.slot, bad.value);
    return st_fail(ST_ERR_INVALID_ARG, "%s: ids[%d][%d] = %d is outside 0..%d (n_expert %d; STRATA_CHECK)", call,
                   bad.token, bad.slot, bad.value, n_expert - 1, n_expert);
}

/* The one dense call behind st_iq_mmvq, _variant and _strided. */
static st_status mmvq_call(st_ctx *c, const st_matrix *w, const float *x, int64_t xs, int nt, float *y, int64_t ys,
                           int rows, const char *what)
{
    if (!c || !w || !x || !y) return st_fail(ST_ERR_INVALID_ARG, "%s: NULL argument", what);
    ST_TRY(check_usable(w, c, what));
    ST_TRY(check_tokens(c, nt, what));
    if (xs < w->m.cols || ys < w->m.rows)
        return st_fail(ST_ERR_INVALID_ARG, "%s: strides %lld (x) and %lld (y) must be at least the matrix's %lld columns "
                       "and %lld rows", what, (long long)xs, (long long)ys, (long long)w->m.cols, (long long)w->m.rows);
    if (rows != 0 && !st_mmvq_rows_valid(rows))
        return st_fail(ST_ERR_INVALID_ARG, "%s: rows %d is not a compiled-in variant", what, rows);
    if (rows != 0 && !st_mmvq_variant_fits(rows, w->m.cols)) {
        char vn[24];
        return st_fail(ST_ERR_INVALID_ARG, "%s: %s needs rows of at least %d values (128 streams); this matrix has %lld",
                       what, st_mmvq_variant_name(rows, vn, sizeof vn), st_mmvq_variant_min_cols(rows), (long long)w->m.cols);
    }
    if (w->m.in_place && !st_mmvq_in_place_variant(rows)) {
        char vn[24];
        return st_fail(ST_ERR_UNSUPPORTED, "%s: %s is not a kernel of the in-place layout (an st_matrix_wrap matrix "
                       "runs the default chain and the matrix-unit variants)", what, st_mmvq_variant_name(rows, vn, sizeof vn));
    }
    if (w->m.in_place && c->cfg.active[ST_KNOB_OLD_IQ_MMVQ])
        return st_fail(ST_ERR_UNSUPPORTED, "%s: the knob of the old iq_mmvq path has no kernel in the in-place layout",
                       what);
    ST_TRY(check_ptr(c, x, "iq_mmvq", "x"));
    ST_TRY(check_ptr(c, y, "iq_mmvq", "y"));
    if (rows)
        c->stats.variant_launches++;
    else
        c->stats.default_launches++;
    const double slow = rows ? c->test_slow : c->test_slow_default;
    if (slow > 0 && c->backend == ST_BACKEND_CPU) {
        const double t0 = now_ms(); /* before the call: argument order is unspecified */
        return test_slow_end(slow, t0, c->ops->mmvq(c->b, &w->m, x, xs, nt, y, ys, rows, &c->cfg));
    }
    return c->ops->mmvq(c->b, &w->m, x, xs, nt, y, ys, rows, &c->cfg);
}

st_status st_iq_mmvq_variant(st_ctx *c, const st_matrix *w, const float *x, int nt, float *y, int rows)
{
    return mmvq_call(c, w, x, w ? w->m.cols : 0, nt, y, w ? w->m.rows : 0, rows, "iq_mmvq");
}

/* The table's variant for W's shape (0: the default), counted. */
static int table_mmvq(st_ctx *c, const st_matrix *w)
{
    int rows = 0;
    if (c && w && c->table) {
        st_mmvq_key key = {w->m.type, (int)w->m.rows, (int)w->m.cols};
        if (st_table_lookup_mmvq(c->table, &key, &rows) && w->m.in_place && !st_mmvq_in_place_variant(rows)) {
            rows = 0;
            c->stats.table_layout++;
        } else if (rows)
            c->stats.table_hits++;
        else if (st_table_tuned_default_mmvq(c->table, &key))
            c->stats.table_defaults++;
        else
            c->stats.table_misses++;
    }
    return rows;
}

st_status st_iq_mmvq(st_ctx *c, const st_matrix *w, const float *x, int nt, float *y)
{
    const int rows = table_mmvq(c, w);
    return st_iq_mmvq_variant(c, w, x, nt, y, rows);
}

st_status st_iq_mmvq_strided(st_ctx *c, const st_matrix *w, const float *x, int64_t x_stride, int nt, float *y,
                             int64_t y_stride)
{
    const int rows = table_mmvq(c, w);
    return mmvq_call(c, w, x, x_stride, nt, y, y_stride, rows, "iq_mmvq_strided");
}

/* ---- expert_grouped --------------------------------------------------- */
static st_status check_experts(const st_ctx *c, const st_experts *ex)
{
    if (!ex || !ex->gate || !ex->up || !ex->down) return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: NULL weights");
    ST_TRY(check_usable(ex->gate, c, "expert_grouped"));
    ST_TRY(check_usable(ex->up, c, "expert_grouped"));
    ST_TRY(check_usable(ex->down, c, "expert_grouped"));
    if (ex->n_expert < 1 || ex->n_expert > c->lim.max_experts)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: n_expert %d is out of range 1..%d (the context's "
                       "max_experts; ST_MAX_EXPERTS is %d)", ex->n_expert, c->lim.max_experts, ST_MAX_EXPERTS);
    const st_bmatrix *g = &ex->gate->m, *u = &ex->up->m, *d = &ex->down->m;
    if (g->type != u->type || g->rows != u->rows || g->cols != u->cols)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: gate and up differ in type or shape");
    if (g->in_place != u->in_place)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: one of gate and up is in place (st_matrix_wrap), the other "
                       "repacked; the fused kernel reads both in one layout");
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

st_status st_experts_make(st_ctx *c, const st_matrix *gate, const st_matrix *up, const st_matrix *down, int n_expert,
                          st_experts *out)
{
    if (!c || !out) return st_fail(ST_ERR_INVALID_ARG, "st_experts_make: NULL argument");
    const st_experts ex = {gate, up, down, n_expert};
    ST_TRY(check_experts(c, &ex));
    *out = ex;
    return ST_OK;
}

void st_ffn_options_init_size(st_ffn_options *o, size_t size)
{
    st_ffn_options d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.act = ST_ACT_SILU;
    d.alpha = 1.702f;
    d.limit = 7.0f;
    st_struct_init(o, size, &d, sizeof d);
}

/* The one FFN call behind st_expert_grouped, _variant and st_expert_ffn;
 * O is complete (read_ffn_options). */
static st_status ffn_call(st_ctx *c, const st_experts *ex, const st_ffn_options *o, const float *x, const int32_t *ids,
                          const float *wts, int nt, int topk, float *out, int gu_rows, int down_rows)
{
    if (!c) return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: NULL context");
    ST_TRY(check_experts(c, ex));
    if (!x || !ids || !wts || !out) return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: NULL argument");
    ST_TRY(check_tokens(c, nt, "expert_grouped"));
    if (topk < 1 || topk > c->lim.max_topk || topk > ex->n_expert)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: top-k %d is out of range 1..%d (the context's max_topk, "
                       "at most n_expert; ST_MAX_TOPK is %d)", topk, c->lim.max_topk, ST_MAX_TOPK);
    const int n_embd = (int)ex->gate->m.cols, n_ff = (int)(ex->gate->m.rows / ex->n_expert);
    if ((o->x_stride && o->x_stride < n_embd) || (o->out_stride && o->out_stride < n_embd) ||
        (o->ids_stride && o->ids_stride < topk) || (o->wts_stride && o->wts_stride < topk))
        return st_fail(ST_ERR_INVALID_ARG, "expert_ffn: a stride is shorter than its row (x %lld, out %lld: n_embd %d; "
                       "ids %lld, wts %lld: top-k %d)", (long long)o->x_stride, (long long)o->out_stride, n_embd,
                       (long long)o->ids_stride, (long long)o->wts_stride, topk);
    if (o->act != ST_ACT_SILU && o->act != ST_ACT_GELU && o->act != ST_ACT_SWIGLU_OAI)
        return st_fail(ST_ERR_INVALID_ARG, "expert_ffn: unknown activation %d", (int)o->act);
    const bool dflt = gu_rows == 0 && down_rows == 0;
    if (!dflt && !st_expert_rows_valid(gu_rows, down_rows))
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: rows %d/%d is not a compiled-in variant", gu_rows, down_rows);
    if (ex->gate->m.in_place || ex->down->m.in_place) {
        if (!dflt)
            return st_fail(ST_ERR_UNSUPPORTED, "expert_grouped: rows %d/%d is not a kernel of the in-place layout (an "
                           "st_matrix_wrap expert set runs the default chain)", gu_rows, down_rows);
        static const int knobs[] = {ST_KNOB_EXPERT_V2, ST_KNOB_EXPERT_V2K, ST_KNOB_TSUM, ST_KNOB_GROUPED_V1};
        for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++)
            if (c->cfg.active[knobs[i]])
                return st_fail(ST_ERR_UNSUPPORTED, "expert_grouped: the knob %s has no kernel in the in-place layout",
                               st_knob_env((st_knob)knobs[i]));
    }
    ST_TRY(check_ptr(c, x, "expert_grouped", "x"));
    ST_TRY(check_ptr(c, ids, "expert_grouped", "ids"));
    ST_TRY(check_ptr(c, wts, "expert_grouped", "wts"));
    ST_TRY(check_ptr(c, out, "expert_grouped", "out"));
    ST_TRY(check_ids(c, "expert_grouped", ids, o->ids_stride, nt, topk, ex->n_expert));
    if (dflt)
        c->stats.default_launches++;
    else
        c->stats.variant_launches++;
    st_bexperts be = {&ex->gate->m, &ex->up->m, &ex->down->m, ex->n_expert, n_embd, n_ff};
    const double slow = dflt ? c->test_slow_default : c->test_slow;
    if (slow > 0 && c->backend == ST_BACKEND_CPU) {
        const double t0 = now_ms();
        return test_slow_end(slow, t0, c->ops->expert_grouped(c->b, &be, o, x, ids, wts, nt, topk, out, gu_rows,
                                                           down_rows, &c->cfg));
    }
    return c->ops->expert_grouped(c->b, &be, o, x, ids, wts, nt, topk, out, gu_rows, down_rows, &c->cfg);
}

st_status st_expert_grouped_variant(st_ctx *c, const st_experts *ex, const float *x, const int32_t *ids,
                                    const float *wts, int nt, int topk, float *out, int gu_rows, int down_rows)
{
    st_ffn_options o;
    st_ffn_options_init(&o);
    return ffn_call(c, ex, &o, x, ids, wts, nt, topk, out, gu_rows, down_rows);
}

/* The table's pair for the shape (0/0: the default), counted. */
static void table_expert(st_ctx *c, const st_experts *ex, int nt, int *gu, int *dn)
{
    *gu = *dn = 0;
    if (c && c->table && ex && ex->gate && ex->down && ex->n_expert > 0) {
        st_expert_key key = {ex->gate->m.type, ex->down->m.type, (int)ex->gate->m.cols,
                             (int)(ex->gate->m.rows / ex->n_expert), nt};
        if (st_table_lookup_expert(c->table, &key, gu, dn) && (ex->gate->m.in_place || ex->down->m.in_place)) {
            *gu = *dn = 0; /* the rows pairs are the row-planar layout's kernels */
            c->stats.table_layout++;
        } else if (*gu || *dn)
            c->stats.table_hits++;
        else if (st_table_tuned_default_expert(c->table, &key))
            c->stats.table_defaults++;
        else
            c->stats.table_misses++;
    }
}

st_status st_expert_grouped(st_ctx *c, const st_experts *ex, const float *x, const int32_t *ids, const float *wts,
                            int nt, int topk, float *out)
{
    int gu, dn;
    table_expert(c, ex, nt, &gu, &dn);
    return st_expert_grouped_variant(c, ex, x, ids, wts, nt, topk, out, gu, dn);
}

st_status st_expert_ffn(st_ctx *c, const st_experts *ex, const st_ffn_options *opt, const float *x, const int32_t *ids,
                        const float *wts, int nt, int topk, float *out)
{
    st_ffn_options o;
    st_ffn_options_init(&o);
    if (opt) {
        if (opt->struct_size < offsetof(st_ffn_options, act) + sizeof opt->act || opt->struct_size > ST_STRUCT_SIZE_MAX)
            return st_fail(ST_ERR_INVALID_ARG, "st_ffn_options: struct_size %zu is not a size this library knows "
                           "(call st_ffn_options_init first)", opt->struct_size);
        memcpy(&o, opt, opt->struct_size < sizeof o ? opt->struct_size : sizeof o);
        o.struct_size = sizeof o;
    }
    int gu, dn;
    table_expert(c, ex, nt, &gu, &dn);
    return ffn_call(c, ex, &o, x, ids, wts, nt, topk, out, gu, dn);
}

st_status st_expert_mat(st_ctx *c, const st_matrix *w, int n_expert, const float *x, int x_slots, int64_t x_slot_stride,
                        int64_t x_token_stride, const int32_t *ids, int64_t ids_stride, int nt, int topk, float *y,
                        int64_t y_slot_stride, int64_t y_token_stride)
{
    static const char what[] = "expert_mat";
    if (!c || !w || !x || !ids || !y) return st_fail(ST_ERR_INVALID_ARG, "%s: NULL argument", what);
    ST_TRY(check_usable(w, c, what));
    ST_TRY(check_tokens(c, nt, what));
    if (n_expert < 1 || n_expert > c->lim.max_experts)
        return st_fail(ST_ERR_INVALID_ARG, "%s: n_expert %d is out of range 1..%d (the context's max_experts; "
                       "ST_MAX_EXPERTS is %d)", what, n_expert, c->lim.max_experts, ST_MAX_EXPERTS);
    if (w->m.rows % n_expert)
        return st_fail(ST_ERR_INVALID_ARG, "%s: %lld rows are not a multiple of n_expert %d", what, (long long)w->m.rows,
                       n_expert);
    const int64_t r = w->m.rows / n_expert;
    ST_TRY(check_rows(c, r, what));
    if (topk < 1 || topk > c->lim.max_topk)
        return st_fail(ST_ERR_INVALID_ARG, "%s: top-k %d is out of range 1..%d (the context's max_topk; ST_MAX_TOPK is "
                       "%d)", what, topk, c->lim.max_topk, ST_MAX_TOPK);
    if (x_slots != 1 && x_slots != topk)
        return st_fail(ST_ERR_INVALID_ARG, "%s: x_slots %d must be 1 or top-k %d", what, x_slots, topk);
    /* a vector per slot takes the scratch of the FFN's h, sized by max_rows */
    if (x_slots > 1 && w->m.cols > c->lim.max_rows)
        return st_fail(ST_ERR_INVALID_ARG, "%s: a vector per slot of %lld values is more than the context's max_rows "
                       "%lld", what, (long long)w->m.cols, (long long)c->lim.max_rows);
    /* no two outputs in one place, no vector shorter than its row */
    const bool xs_ok = x_slots == 1 ? x_token_stride >= w->m.cols || nt == 1
                                    : x_slot_stride >= w->m.cols && (nt == 1 || x_token_stride >= x_slot_stride * topk);
    const bool ys_ok = y_slot_stride >= r && (nt == 1 || y_token_stride >= y_slot_stride * topk);
    if (!xs_ok || !ys_ok || ids_stride < (nt == 1 ? 0 : topk) || x_slot_stride < 0 || x_token_stride < 0)
        return st_fail(ST_ERR_INVALID_ARG, "%s: strides x %lld/%lld, ids %lld, y %lld/%lld (slot/token) overlap or are "
                       "shorter than a row (%lld values in, %lld out, top-k %d)", what, (long long)x_slot_stride,
                       (long long)x_token_stride, (long long)ids_stride, (long long)y_slot_stride,
                       (long long)y_token_stride, (long long)w->m.cols, (long long)r, topk);
    if (!c->ops->expert_mat)
        return st_fail(ST_ERR_UNSUPPORTED, "%s: this backend has no expert matrix call yet", what);
    ST_TRY(check_ptr(c, x, what, "x"));
    ST_TRY(check_ptr(c, ids, what, "ids"));
    ST_TRY(check_ptr(c, y, what, "y"));
    ST_TRY(check_ids(c, what, ids, nt == 1 ? topk : ids_stride, nt, topk, n_expert));
    c->stats.default_launches++;
    return c->ops->expert_mat(c->b, &w->m, n_expert, x, x_slots, x_slot_stride, x_token_stride, ids, ids_stride, nt,
                              topk, y, y_slot_stride, y_token_stride, &c->cfg);
}

st_status st_ctx_set_stream(st_ctx *c, void *stream)
{
    if (!c) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_set_stream: NULL context");
    return c->ops->set_stream(c->b, stream);
}

void st_ctx_stats_init_size(st_ctx_stats *s, size_t size) { st_struct_init_zeros(s, size); }

/* the backend's matrix-unit launches since it opened */
static uint64_t mma_now(const st_ctx *c) { return c->ops->mma_launches ? c->ops->mma_launches(c->b) : 0; }

void st_ctx_get_stats(const st_ctx *c, st_ctx_stats *s)
{
    if (!c || !s) return;
    st_ctx_stats all = c->stats;
    all.mma_launches = mma_now(c) - c->mma_base;
    /* the members the caller's struct has room for (it may be older) */
    st_struct_out(s, &all, sizeof all);
}
void st_ctx_reset_stats(st_ctx *c)
{
    st_ctx_stats_init(&c->stats);
    c->mma_base = mma_now(c);
}

