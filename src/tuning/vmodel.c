/* The decode-step model (vmodel.h): a GGUF model's expert layers and dense
 * matrices, or a synthetic one from shapes, uploaded with inputs and a
 * routing from the model's own router (or a random one), ready to run
 * whole steps. Shared by the gate (verify.c) and the benchmark. */
#include "vmodel.h"
#include "mem_fit.h"
#include "randgen.h"
#include "strata/probe.h"
#include "tools_internal.h"
#include "tuner_shapes.h"
#include "tune_mat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    st_shape_kind kind;
    st_matrix *m[3];
    int n_expert, topk, in, out;
    float *x, *y, *wts;
    int32_t *ids;
    char name[96];
    void *raw[3]; /* in place: the uploaded blocks m[k] reads (tune_mat.h) */
} vop;

typedef struct {
    vop *ops;
    int n, cap;
} vops;

static st_status add_op(vops *v, vop *op)
{
    if (v->n == v->cap) {
        int cap = v->cap ? 2 * v->cap : 16;
        vop *p = realloc(v->ops, sizeof *p * (size_t)cap);
        if (!p) return st_fail(ST_ERR_NOMEM, "verify: out of memory");
        v->ops = p;
        v->cap = cap;
    }
    v->ops[v->n++] = *op;
    return ST_OK;
}

/* Top-k of router logits (router rows are n_embd floats per expert), with
 * weights softmax-normalised over the chosen k, as qwen3moe routes. */
static void route_router(const float *router, int n_embd, int n_expert, int topk, const float *x, int32_t *ids, float *w)
{
    float logit[ST_MAX_EXPERTS];
    for (int e = 0; e < n_expert; e++) {
        double acc = 0;
        for (int k = 0; k < n_embd; k++) acc += (double)router[(size_t)e * n_embd + k] * x[k];
        logit[e] = (float)acc;
    }
    float mx = -INFINITY, sum = 0;
    for (int k = 0; k < topk; k++) {
        int best = -1;
        for (int e = 0; e < n_expert; e++) {
            int used = 0;
            for (int j = 0; j < k; j++) used |= ids[j] == e;
            if (!used && (best < 0 || logit[e] > logit[best])) best = e;
        }
        ids[k] = best;
        if (logit[best] > mx) mx = logit[best];
    }
    for (int k = 0; k < topk; k++) sum += (w[k] = expf(logit[ids[k]] - mx));
    for (int k = 0; k < topk; k++) w[k] /= sum;
}

static st_status upload_inputs(st_ctx *c, st_rng *r, vop *op, const float *router)
{
    float *hx = malloc(sizeof(float) * ST_MAX_TOKENS * (size_t)op->in);
    if (!hx) return st_fail(ST_ERR_NOMEM, "verify: out of memory");
    st_random_floats(r, hx, ST_MAX_TOKENS * (size_t)op->in, 1.0f);
    st_status s = st_ctx_alloc(c, sizeof(float) * ST_MAX_TOKENS * (size_t)op->in, (void **)&op->x);
    if (s == ST_OK) s = st_ctx_upload(c, op->x, hx, sizeof(float) * ST_MAX_TOKENS * (size_t)op->in);
    if (s == ST_OK) s = st_ctx_alloc(c, sizeof(float) * ST_MAX_TOKENS * (size_t)op->out, (void **)&op->y);
    if (s == ST_OK && op->kind == ST_SHAPE_EXPERT) {
        int32_t ids[ST_MAX_PAIRS];
        float w[ST_MAX_PAIRS];
        for (int t = 0; t < ST_MAX_TOKENS; t++) {
            if (router)
                route_router(router, op->in, op->n_expert, op->topk, hx + (size_t)t * op->in, ids + t * op->topk, w + t * op->topk);
            else
                st_random_routing(r, 1, op->topk, op->n_expert, ids + t * op->topk, w + t * op->topk);
        }
        const size_t n = (size_t)(ST_MAX_TOKENS * op->topk);
        s = st_ctx_alloc(c, n * sizeof(int32_t), (void **)&op->ids);
        if (s == ST_OK) s = st_ctx_upload(c, op->ids, ids, n * sizeof(int32_t));
        if (s == ST_OK) s = st_ctx_alloc(c, n * sizeof(float), (void **)&op->wts);
        if (s == ST_OK) s = st_ctx_upload(c, op->wts, w, n * sizeof(float));
    }
    free(hx);
    return s;
}

static const float *find_router(const st_model *m, int layer, int n_embd, int n_expert)
{
    char want[64];
    snprintf(want, sizeof want, "blk.%d.ffn_gate_inp.weight", layer);
    for (size_t i = 0; i < st_model_skipped_count(m); i++) {
        const st_model_matrix *x = st_model_skipped_at(m, i);
        if (!strcmp(x->name, want) && x->ggml_type == 0 && x->n_cols == n_embd && x->n_rows == n_expert) return x->data;
    }
    return NULL;
}

/* What one operation holds on the context (also when half made). */
static void free_op(st_ctx *c, vop *op)
{
    for (int k = 0; k < 3; k++) {
        st_tune_mat t = {op->m[k], op->raw[k]};
        st_tune_mat_free(c, &t);
    }
    st_ctx_free(c, op->x);
    st_ctx_free(c, op->y);
    st_ctx_free(c, op->ids);
    st_ctx_free(c, op->wts);
}

/* OP's matrix K in the layout IN_PLACE picks (tune_mat.h). */
static st_status make_mat(st_ctx *c, bool in_place, vop *op, int k, st_qtype type, int64_t rows, int64_t cols,
                          const void *host)
{
    st_tune_mat t;
    const st_status s = st_tune_mat_make(c, type, rows, cols, host, in_place, &t);
    op->m[k] = t.m;
    op->raw[k] = t.raw;
    return s;
}

/* Adds OP when everything before succeeded (S), else frees what it holds. */
static st_status keep_op(st_ctx *c, vops *v, vop *op, st_status s)
{
    if (s == ST_OK) s = add_op(v, op);
    if (s != ST_OK) free_op(c, op);
    return s;
}

static st_status ops_from_model(st_ctx *c, const st_model *m, bool in_place, st_rng *r, vops *v)
{
    for (size_t i = 0; i < st_model_expert_layer_count(m); i++) {
        const st_model_expert_layer *l = st_model_expert_layer_at(m, i);
        vop op = {ST_SHAPE_EXPERT, {NULL, NULL, NULL}, l->n_expert, st_model_expert_used(m) > 0 ? st_model_expert_used(m) : 2,
                  l->n_embd, l->n_embd, NULL, NULL, NULL, NULL, "", {NULL, NULL, NULL}};
        if (op.topk > op.n_expert) op.topk = op.n_expert;
        snprintf(op.name, sizeof op.name, "blk.%d experts", l->layer);
        const int64_t gr = (int64_t)l->n_expert * l->n_ff, dr = (int64_t)l->n_expert * l->n_embd;
        st_status s = make_mat(c, in_place, &op, 0, l->gu_type, gr, l->n_embd, l->gate);
        if (s == ST_OK) s = make_mat(c, in_place, &op, 1, l->gu_type, gr, l->n_embd, l->up);
        if (s == ST_OK) s = make_mat(c, in_place, &op, 2, l->down_type, dr, l->n_ff, l->down);
        if (s == ST_OK) s = upload_inputs(c, r, &op, find_router(m, l->layer, l->n_embd, l->n_expert));
        ST_TRY(keep_op(c, v, &op, s));
    }
    for (size_t i = 0; i < st_model_matrix_count(m); i++) {
        const st_model_matrix *x = st_model_matrix_at(m, i);
        if (x->type == ST_QTYPE_NONE || !x->data) continue;
        vop op = {ST_SHAPE_MMVQ, {NULL, NULL, NULL}, 0, 0, x->n_cols, x->n_rows, NULL, NULL, NULL, NULL, "", {NULL, NULL, NULL}};
        snprintf(op.name, sizeof op.name, "%s", x->name);
        st_status s = make_mat(c, in_place, &op, 0, x->type, x->n_rows, x->n_cols, x->data);
        if (s == ST_OK) s = upload_inputs(c, r, &op, NULL);
        ST_TRY(keep_op(c, v, &op, s));
    }
    return ST_OK;
}

static st_status ops_synthetic(st_ctx *c, const st_verify_options *o, st_rng *r, vops *v)
{
    /* One set of random weights per shape, uploaded once per layer: every
     * layer streams its own device buffers, as a real model does. */
    void *host[32][3];
    memset(host, 0, sizeof host);
    st_status st = o->n_shapes > 32 ? st_fail(ST_ERR_INVALID_ARG, "verify: at most 32 synthetic shapes") : ST_OK;
    for (int layer = 0; layer < (o->n_layers > 0 ? o->n_layers : 1) && st == ST_OK; layer++)
        for (int i = 0; i < o->n_shapes && st == ST_OK; i++) {
            st_tune_shape s;
            st = st_tune_parse_shape(o->shapes[i], o->n_expert, o->topk, &s);
            if (st != ST_OK) break;
            vop op = {s.kind, {NULL, NULL, NULL}, s.n_expert, s.topk, 0, 0, NULL, NULL, NULL, NULL, "", {NULL, NULL, NULL}};
            snprintf(op.name, sizeof op.name, "layer %d: %s", layer, o->shapes[i]);
            const bool ex = s.kind == ST_SHAPE_EXPERT;
            const int64_t rows[3] = {ex ? (int64_t)s.n_expert * s.n_ff : s.rows, ex ? (int64_t)s.n_expert * s.n_ff : 0,
                                     ex ? (int64_t)s.n_expert * s.n_embd : 0};
            const int64_t cols[3] = {ex ? s.n_embd : s.cols, s.n_embd, s.n_ff};
            const st_qtype ty[3] = {s.type, s.type, s.down_type};
            for (int k = 0; k < (ex ? 3 : 1) && st == ST_OK; k++) {
                if (!host[i][k]) {
                    host[i][k] = malloc((size_t)rows[k] * st_qtype_row_bytes(ty[k], cols[k]));
                    if (!host[i][k]) {
                        st = st_fail(ST_ERR_NOMEM, "verify: out of memory");
                        break;
                    }
                    st_random_blocks(r, ty[k], rows[k], cols[k], host[i][k]);
                }
                st = make_mat(c, o->in_place, &op, k, ty[k], rows[k], cols[k], host[i][k]);
            }
            op.in = ex ? s.n_embd : s.cols;
            op.out = ex ? s.n_embd : s.rows;
            if (st == ST_OK) st = upload_inputs(c, r, &op, NULL);
            st = keep_op(c, v, &op, st);
        }
    for (int i = 0; i < 32; i++)
        for (int k = 0; k < 3; k++) free(host[i][k]);
    return st;
}

static st_status step(st_ctx *c, const vops *v, int nt)
{
    for (int i = 0; i < v->n; i++) {
        const vop *op = &v->ops[i];
        if (op->kind == ST_SHAPE_MMVQ)
            ST_TRY(st_iq_mmvq(c, op->m[0], op->x, nt, op->y));
        else {
            st_experts ex = {op->m[0], op->m[1], op->m[2], op->n_expert};
            ST_TRY(st_expert_grouped(c, &ex, op->x, op->ids, op->wts, nt, op->topk, op->y));
        }
    }
    return ST_OK;
}

static st_status outputs(st_ctx *c, const vops *v, int nt, float *dst)
{
    ST_TRY(st_ctx_sync(c));
    for (int i = 0; i < v->n; i++) {
        const size_t n = (size_t)nt * (size_t)v->ops[i].out;
        ST_TRY(st_ctx_download(c, dst, v->ops[i].y, n * sizeof(float)));
        dst += n;
    }
    return ST_OK;
}

static void free_ops(st_ctx *c, vops *v)
{
    for (int i = 0; i < v->n; i++) free_op(c, &v->ops[i]);
    free(v->ops);
}

st_status st_vmodel_open_gguf(const char *path, st_model **m)
{
    st_status s = st_model_open(path, m);
    if (s == ST_OK) return s;
    char why[4096];
    snprintf(why, sizeof why, "%s", st_last_error());
    return st_fail(s, "%s: %s", path, why);
}

struct st_vmodel {
    vops v;
};

/* The decode model of M (a model's layers) or, M NULL, of O's synthetic
 * shapes: fitted to the memory, uploaded with the inputs of one seed. */
static st_status build(st_ctx *c, const st_verify_options *o, const st_model *m, bool in_place, st_vmodel **out)
{
    *out = NULL;
    st_vmodel *vm = calloc(1, sizeof *vm);
    if (!vm) return st_fail(ST_ERR_NOMEM, "decode model: out of memory");
    st_rng r;
    st_rng_seed(&r, 20261129);
    st_status s = st_vmodel_fit(c, o, m);
    if (s == ST_OK) s = m ? ops_from_model(c, m, in_place, &r, &vm->v) : ops_synthetic(c, o, &r, &vm->v);
    if (s == ST_OK && vm->v.n == 0) s = st_fail(ST_ERR_NOT_FOUND, "decode model: no operation our kernels run");
    if (s != ST_OK) {
        free_ops(c, &vm->v);
        free(vm);
        return s;
    }
    *out = vm;
    return ST_OK;
}

st_status st_vmodel_open(st_ctx *c, const st_verify_options *o, st_vmodel **out)
{
    *out = NULL;
    st_model *m = NULL;
    st_status s = o->model_path ? st_vmodel_open_gguf(o->model_path, &m) : ST_OK;
    if (s == ST_OK) s = build(c, o, m, o->in_place, out);
    st_model_close(m);
    return s;
}

st_status st_vmodel_open_model(st_ctx *c, const st_model *m, bool in_place, st_vmodel **out)
{
    return build(c, NULL, m, in_place, out);
}

void st_vmodel_close(st_ctx *c, st_vmodel *vm)
{
    if (!vm) return;
    free_ops(c, &vm->v);
    free(vm);
}

st_status st_vmodel_step(st_ctx *c, const st_vmodel *vm, int nt) { return step(c, &vm->v, nt); }

st_status st_vmodel_outputs(st_ctx *c, const st_vmodel *vm, int nt, float *dst) { return outputs(c, &vm->v, nt, dst); }

st_status st_vmodel_poison_outputs(st_ctx *c, const st_vmodel *vm, int nt)
{
    size_t most = 0;
    for (int i = 0; i < vm->v.n; i++)
        if ((size_t)vm->v.ops[i].out > most) most = (size_t)vm->v.ops[i].out;
    const size_t bytes = sizeof(float) * (size_t)nt * most;
    void *pat = malloc(bytes ? bytes : 1);
    if (!pat) return st_fail(ST_ERR_NOMEM, "decode model: out of memory");
    memset(pat, 0xff, bytes);
    st_status s = ST_OK;
    for (int i = 0; i < vm->v.n && s == ST_OK; i++)
        s = st_ctx_upload(c, vm->v.ops[i].y, pat, sizeof(float) * (size_t)nt * (size_t)vm->v.ops[i].out);
    free(pat);
    return s;
}

size_t st_vmodel_output_floats(const st_vmodel *vm, int nt)
{
    size_t n = 0;
    for (int i = 0; i < vm->v.n; i++) n += (size_t)nt * (size_t)vm->v.ops[i].out;
    return n;
}

int st_vmodel_ops(const st_vmodel *vm, int *expert_layers)
{
    int e = 0;
    for (int i = 0; i < vm->v.n; i++) e += vm->v.ops[i].kind == ST_SHAPE_EXPERT;
    if (expert_layers) *expert_layers = e;
    return vm->v.n;
}

size_t st_vmodel_weight_bytes(st_ctx *c, const st_vmodel *vm, int nt)
{
    size_t total = 0;
    for (int i = 0; i < vm->v.n; i++) {
        const vop *op = &vm->v.ops[i];
        if (op->kind == ST_SHAPE_MMVQ) {
            total += (size_t)st_matrix_rows(op->m[0]) * st_qtype_row_bytes(st_matrix_type(op->m[0]), st_matrix_cols(op->m[0]));
            continue;
        }
        int32_t ids[ST_MAX_PAIRS];
        if (st_ctx_download(c, ids, op->ids, sizeof(int32_t) * (size_t)(nt * op->topk)) != ST_OK) continue;
        int used = 0;
        for (int p = 0; p < nt * op->topk; p++) {
            int dup = 0;
            for (int q = 0; q < p; q++) dup |= ids[q] == ids[p];
            used += !dup;
        }
        for (int k = 0; k < 3; k++)
            total += (size_t)used * (size_t)(st_matrix_rows(op->m[k]) / op->n_expert) *
                     st_qtype_row_bytes(st_matrix_type(op->m[k]), st_matrix_cols(op->m[k]));
    }
    return total;
}

int st_vmodel_op_count(const st_vmodel *vm) { return vm ? vm->v.n : 0; }

const char *st_vmodel_op_name(const st_vmodel *vm, int i) { return vm && i >= 0 && i < vm->v.n ? vm->v.ops[i].name : ""; }

size_t st_vmodel_op_out(const st_vmodel *vm, int i) { return vm && i >= 0 && i < vm->v.n ? (size_t)vm->v.ops[i].out : 0; }
