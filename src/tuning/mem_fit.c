/* Sizes of what the tuner, the gate and the benchmark set up, checked
 * against the memory available before anything is allocated: a shape the
 * parser accepts (up to 2^20 x 2^20) can need a terabyte, and on Linux a
 * large malloc succeeds and the process is killed later, when the pages are
 * touched. Every size is computed with overflow checks. */
#include "strata/probe.h"
#include "tools_internal.h"
#include "mem_fit.h"
#include "vmodel.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static size_t mul(size_t a, size_t b)
{
    size_t r;
    return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

static size_t add(size_t a, size_t b)
{
    size_t r;
    return __builtin_add_overflow(a, b, &r) ? SIZE_MAX : r;
}

static size_t matrix_bytes(st_qtype t, int64_t rows, int64_t cols)
{
    if (rows < 0 || cols < 0) return SIZE_MAX;
    return mul((size_t)rows, st_qtype_row_bytes(t, cols));
}

size_t st_tune_shape_weight_bytes(const st_tune_shape *s)
{
    if (s->kind == ST_SHAPE_MMVQ) return matrix_bytes(s->type, s->rows, s->cols);
    const int64_t e = s->n_expert;
    const size_t gu = matrix_bytes(s->type, e * s->n_ff, s->n_embd);
    return add(mul(2, gu), matrix_bytes(s->down_type, e * s->n_embd, s->n_ff));
}

size_t st_tune_shape_io_bytes(const st_tune_shape *s)
{
    const size_t in = (size_t)(s->kind == ST_SHAPE_EXPERT ? s->n_embd : s->cols);
    const size_t out = (size_t)(s->kind == ST_SHAPE_EXPERT ? s->n_embd : s->rows);
    return add(mul(mul(ST_MAX_TOKENS, sizeof(float)), add(in, out)), 2 * ST_MAX_PAIRS * sizeof(float));
}

st_status st_mem_fit(st_ctx *c, const char *what, size_t host, size_t dev)
{
    size_t avail = 0, total = 0;
    if (st_ctx_mem_info(c, &avail, &total) != ST_OK) {
        st_clear_error();
        return ST_OK; /* nothing to compare with: the allocations say it */
    }
    const bool cpu = st_ctx_backend(c) == ST_BACKEND_CPU;
    const size_t need = cpu ? add(host, dev) : dev;
    if (need > avail || need == SIZE_MAX)
        return st_fail(ST_ERR_NOMEM,
                       "%s needs %zu bytes of %s memory (%zu of weights and buffers%s), more than the %zu bytes available "
                       "now (of %zu)",
                       what, need, cpu ? "host" : "device", dev, cpu ? " plus their host copy" : "", avail, total);
    if (!cpu && host > 0) {
        size_t havail = 0, htotal = 0;
        if (st_host_mem_info(&havail, &htotal) == ST_OK && host > havail)
            return st_fail(ST_ERR_NOMEM, "%s needs %zu bytes of host memory, more than the %zu bytes available now (of %zu)",
                           what, host, havail, htotal);
        st_clear_error();
    }
    return ST_OK;
}

static void shape_name(const st_tune_shape *s, char *buf, size_t n)
{
    if (s->kind == ST_SHAPE_MMVQ)
        snprintf(buf, n, "mmvq %s %d x %d", st_qtype_name(s->type), s->rows, s->cols);
    else
        snprintf(buf, n, "expert %s/%s %d x %d, %d experts", st_qtype_name(s->type), st_qtype_name(s->down_type),
                 s->n_embd, s->n_ff, s->n_expert);
}

st_status st_tune_shapes_fit(st_ctx *c, const st_tune_shape *s, int n, const st_tune_options *o)
{
    (void)o;
    for (int i = 0; i < n; i++) {
        const size_t w = st_tune_shape_weight_bytes(&s[i]);
        /* random weights are made on the host, then one copy goes to the
         * backend; the model's own weights are mapped from the file */
        const size_t host = s[i].w[0] ? 0 : w;
        char what[160];
        snprintf(what, sizeof what, "tune: ");
        shape_name(&s[i], what + 6, sizeof what - 6);
        ST_TRY(st_mem_fit(c, what, host, add(w, st_tune_shape_io_bytes(&s[i]))));
    }
    return ST_OK;
}

st_status st_vmodel_fit(st_ctx *c, const st_verify_options *o, const st_model *m)
{
    size_t host = 0, dev = 0;
    if (m) { /* the model's weights are mapped; each gets a backend copy */
        /* and each operation's inputs and outputs for ST_MAX_TOKENS */
        const size_t per_value = ST_MAX_TOKENS * sizeof(float);
        for (size_t i = 0; i < st_model_expert_layer_count(m); i++) {
            const st_model_expert_layer *l = st_model_expert_layer_at(m, i);
            dev = add(dev, add(add(mul(2, l->gu_bytes), l->down_bytes), mul(per_value, mul(2, (size_t)l->n_embd))));
        }
        for (size_t i = 0; i < st_model_matrix_count(m); i++) {
            const st_model_matrix *x = st_model_matrix_at(m, i);
            if (x->type != ST_QTYPE_NONE && x->data)
                dev = add(dev, add(x->bytes, mul(per_value, add((size_t)x->n_rows, (size_t)x->n_cols))));
        }
        return st_mem_fit(c, "decode model: the model's weights", 0, dev);
    }
    const size_t layers = (size_t)(o->n_layers > 0 ? o->n_layers : 1);
    for (int i = 0; i < o->n_shapes; i++) {
        st_tune_shape s;
        ST_TRY(st_tune_parse_shape(o->shapes[i], o->n_expert, o->topk, &s));
        const size_t w = st_tune_shape_weight_bytes(&s);
        host = add(host, w); /* one random set per shape, shared by the layers */
        dev = add(dev, mul(layers, add(w, st_tune_shape_io_bytes(&s))));
    }
    return st_mem_fit(c, "decode model: the synthetic layers", host, dev);
}

st_status st_tune_check_memory(size_t need, size_t rot_max, size_t gate, size_t free_b, size_t total_b, bool gpu)
{
    if (need <= free_b) return ST_OK;
    return st_fail(ST_ERR_NOMEM,
                   "tune: needs %.2f GB of %s memory (the gate's model and buffers %.2f GB, the largest weight rotation "
                   "%.2f GB, 64 MiB scratch) but %.2f GB of %.2f GB are free: free memory, tune fewer or smaller shapes "
                   "(--shape), or use a larger device",
                   need / 1e9, gpu ? "device" : "host", gate / 1e9, rot_max / 1e9, free_b / 1e9, total_b / 1e9);
}
