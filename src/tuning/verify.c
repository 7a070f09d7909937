#define _POSIX_C_SOURCE 200809L
/* The end-to-end gate: a whole synthetic decode step of the model (every
 * expert layer through expert_grouped with a realistic routing, every dense
 * matrix through iq_mmvq), for n_tokens 1..8, 16, 24, 32, without and with the table,
 * interleaved in one process. It decides only what the measurement can
 * tell: per token count, the interval of the median paired change of the
 * step time must lie within the limit (PASS) or beyond it (FAIL); when the
 * noise is wider, it measures more rounds within a time budget, and when
 * that runs out it says it cannot decide (noisy machines: the CPU backend
 * on 2 shared cores). */
#include "strata/tools/model.h"
#include "strata/tools/verify.h"
#include "strata/probe.h"
#include "gguf.h"
#include "tools_internal.h"
#include "randgen.h"
#include "tuner_internal.h"
#include "verify_internal.h"
#include "vmodel.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void st_verify_options_default(st_verify_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->n_layers = 1;
    o->n_expert = 64;
    o->topk = 8;
    o->rounds = 21;
    o->max_slowdown = 0.02;
    o->budget_s = 60;
}

typedef struct {
    st_shape_kind kind;
    st_matrix *m[3];
    int n_expert, topk, in, out;
    float *x, *y, *wts;
    int32_t *ids;
    char name[96];
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
    for (int k = 0; k < 3; k++) st_matrix_destroy(op->m[k]);
    st_ctx_free(c, op->x);
    st_ctx_free(c, op->y);
    st_ctx_free(c, op->ids);
    st_ctx_free(c, op->wts);
}

/* Adds OP when everything before succeeded (S), else frees what it holds. */
static st_status keep_op(st_ctx *c, vops *v, vop *op, st_status s)
{
    if (s == ST_OK) s = add_op(v, op);
    if (s != ST_OK) free_op(c, op);
    return s;
}

static st_status ops_from_model(st_ctx *c, const st_model *m, st_rng *r, vops *v)
{
    for (size_t i = 0; i < st_model_expert_layer_count(m); i++) {
        const st_model_expert_layer *l = st_model_expert_layer_at(m, i);
        vop op = {ST_SHAPE_EXPERT, {NULL, NULL, NULL}, l->n_expert, st_model_expert_used(m) > 0 ? st_model_expert_used(m) : 2,
                  l->n_embd, l->n_embd, NULL, NULL, NULL, NULL, ""};
        if (op.topk > op.n_expert) op.topk = op.n_expert;
        snprintf(op.name, sizeof op.name, "blk.%d experts", l->layer);
        const int64_t gr = (int64_t)l->n_expert * l->n_ff, dr = (int64_t)l->n_expert * l->n_embd;
        st_status s = st_matrix_create(c, l->gu_type, gr, l->n_embd, l->gate, &op.m[0]);
        if (s == ST_OK) s = st_matrix_create(c, l->gu_type, gr, l->n_embd, l->up, &op.m[1]);
        if (s == ST_OK) s = st_matrix_create(c, l->down_type, dr, l->n_ff, l->down, &op.m[2]);
        if (s == ST_OK) s = upload_inputs(c, r, &op, find_router(m, l->layer, l->n_embd, l->n_expert));
        ST_TRY(keep_op(c, v, &op, s));
    }
    for (size_t i = 0; i < st_model_matrix_count(m); i++) {
        const st_model_matrix *x = st_model_matrix_at(m, i);
        if (x->type == ST_QTYPE_NONE || !x->data) continue;
        vop op = {ST_SHAPE_MMVQ, {NULL, NULL, NULL}, 0, 0, x->n_cols, x->n_rows, NULL, NULL, NULL, NULL, ""};
        snprintf(op.name, sizeof op.name, "%s", x->name);
        st_status s = st_matrix_create(c, x->type, x->n_rows, x->n_cols, x->data, &op.m[0]);
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
            vop op = {s.kind, {NULL, NULL, NULL}, s.n_expert, s.topk, 0, 0, NULL, NULL, NULL, NULL, ""};
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
                st = st_matrix_create(c, ty[k], rows[k], cols[k], host[i][k], &op.m[k]);
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

/* st_model_open with the path in the message. */
static st_status open_model(const char *path, st_model **m)
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

st_status st_vmodel_open(st_ctx *c, const st_verify_options *o, st_vmodel **out)
{
    *out = NULL;
    st_vmodel *vm = calloc(1, sizeof *vm);
    if (!vm) return st_fail(ST_ERR_NOMEM, "decode model: out of memory");
    st_rng r;
    st_rng_seed(&r, 20261129);
    st_model *m = NULL;
    st_status s = o->model_path ? open_model(o->model_path, &m) : ST_OK;
    if (s == ST_OK) s = st_vmodel_fit(c, o, m);
    if (s == ST_OK) s = m ? ops_from_model(c, m, &r, &vm->v) : ops_synthetic(c, o, &r, &vm->v);
    st_model_close(m);
    if (s == ST_OK && vm->v.n == 0) s = st_fail(ST_ERR_NOT_FOUND, "decode model: no operation our kernels run");
    if (s != ST_OK) {
        free_ops(c, &vm->v);
        free(vm);
        return s;
    }
    *out = vm;
    return ST_OK;
}

st_status st_vmodel_open_model(st_ctx *c, const st_model *m, st_vmodel **out)
{
    *out = NULL;
    st_vmodel *vm = calloc(1, sizeof *vm);
    if (!vm) return st_fail(ST_ERR_NOMEM, "decode model: out of memory");
    st_rng r;
    st_rng_seed(&r, 20261129);
    st_status s = st_vmodel_fit(c, NULL, m);
    if (s == ST_OK) s = ops_from_model(c, m, &r, &vm->v);
    if (s == ST_OK && vm->v.n == 0) s = st_fail(ST_ERR_NOT_FOUND, "decode model: no operation our kernels run");
    if (s != ST_OK) {
        free_ops(c, &vm->v);
        free(vm);
        return s;
    }
    *out = vm;
    return ST_OK;
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

static st_status timed_step(st_ctx *c, const vops *v, int nt, double *us)
{
    double ms = 0;
    ST_TRY(st_ctx_timer_start(c));
    ST_TRY(step(c, v, nt));
    ST_TRY(st_ctx_timer_stop(c, &ms));
    *us = ms * 1000.0;
    return ST_OK;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ROUNDS interleaved rounds of one step without (BASE) and with (WITH) the
 * table; the order within a round alternates (*PARITY carries it from one
 * batch to the next) so that drift and the position in the pair hit both
 * alike. */
static st_status time_pairs(st_ctx *c, const vops *v, st_table *tab, int nt, int rounds, int *parity, double *base,
                            double *with)
{
    st_status s = ST_OK;
    for (int r = 0; r < rounds && s == ST_OK; r++, (*parity)++) {
        for (int k = 0; k < 2 && s == ST_OK; k++) {
            const bool w = (k == 0) == (*parity % 2 == 0);
            st_table *prev = NULL, *back = NULL;
            s = st_ctx_swap_table(c, w ? tab : NULL, &prev);
            if (s != ST_OK) break;
            s = timed_step(c, v, nt, w ? &with[r] : &base[r]);
            st_ctx_swap_table(c, prev, &back); /* back is TAB or NULL: ours */
        }
    }
    return s;
}

static void judge_interval(const st_gate_rule *rule, double conf, const double *base, const double *with, int n,
                           double *ratio, st_gate_step *out)
{
    for (int i = 0; i < n; i++) ratio[i] = base[i] > 0 ? with[i] / base[i] - 1 : 0;
    out->confidence = st_median_ci(ratio, n, conf, &out->change, &out->lo, &out->hi);
    out->rounds = n;
    if (out->confidence >= conf && out->hi <= rule->max_slowdown)
        out->verdict = ST_STEP_WITHIN;
    else if (out->confidence >= conf && out->lo > rule->max_slowdown)
        out->verdict = ST_STEP_SLOWER;
    else
        out->verdict = ST_STEP_UNDECIDED;
}

st_status st_gate_judge(st_gate_measure_fn measure, void *user, const st_gate_rule *rule, int nt, bool quiet,
                        st_gate_step *out)
{
    memset(out, 0, sizeof *out);
    const int cap = rule->max_rounds < 1 || rule->max_rounds > ST_GATE_MAX_ROUNDS ? ST_GATE_MAX_ROUNDS : rule->max_rounds;
    double *base = malloc(sizeof(double) * (size_t)cap), *with = malloc(sizeof(double) * (size_t)cap);
    double *tmp = malloc(sizeof(double) * (size_t)cap);
    st_status s = base && with && tmp ? ST_OK : st_fail(ST_ERR_NOMEM, "verify: out of memory");
    int n = 0, batch = rule->rounds < 6 ? 6 : rule->rounds;
    if (batch > cap) batch = cap;
    /* Every look at the data may decide, so the error RULE->confidence
     * allows is split over the looks there can be (Bonferroni): measuring
     * more rounds cannot make a wrong verdict likelier. */
    int looks = 1;
    for (int m = batch; m < cap; m = m > cap / 4 ? cap : 4 * m) looks++;
    const double conf = 1 - (1 - rule->confidence) / looks;
    /* fewer rounds than the interval needs to reach CONF at all (its widest,
     * [min, max], covers 1 - 2^(1-n)) could decide nothing */
    const int need = 1 + (int)ceil(log2(1 / (1 - conf)));
    if (batch < need) batch = need < cap ? need : cap;
    while (s == ST_OK) {
        double sec = 0;
        s = measure(user, batch, base + n, with + n, &sec);
        if (s != ST_OK) break;
        n += batch;
        out->seconds += sec;
        judge_interval(rule, conf, base, with, n, tmp, out);
        if (out->verdict != ST_STEP_UNDECIDED || n >= cap || out->seconds >= rule->budget_s) break;
        /* the noise is wider than what is to be told: four times the rounds
         * halve the interval's width */
        batch = 3 * n <= cap - n ? 3 * n : cap - n;
        if (!quiet)
            st_log("verify: n_tokens %d: %+.1f%% step time with the table, %.4g%% interval %+.1f%%..%+.1f%% after %d "
                   "rounds: cannot tell against the %.1f%% limit yet; measuring %d rounds more",
                   nt, 100 * out->change, 100 * out->confidence, 100 * out->lo, 100 * out->hi, n,
                   100 * rule->max_slowdown, batch);
    }
    if (s == ST_OK) {
        memcpy(tmp, base, sizeof(double) * (size_t)n);
        st_timing_from_samples(tmp, n, &out->base);
        memcpy(tmp, with, sizeof(double) * (size_t)n);
        st_timing_from_samples(tmp, n, &out->with);
    }
    free(base);
    free(with);
    free(tmp);
    return s;
}

typedef struct {
    st_ctx *c;
    const vops *v;
    st_table *tab;
    int nt, parity;
    volatile int *stop;
} pair_job;

static st_status measure_pairs(void *user, int rounds, double *base, double *with, double *seconds)
{
    pair_job *j = user;
    if (j->stop && *j->stop) return st_fail(ST_ERR_INTERRUPTED, "interrupted");
    const double t0 = now_s();
    st_status s = time_pairs(j->c, j->v, j->tab, j->nt, rounds, &j->parity, base, with);
    *seconds = now_s() - t0;
    return s;
}

static const char *verdict_text(st_step_verdict v)
{
    return v == ST_STEP_WITHIN ? "within the limit" : v == ST_STEP_SLOWER ? "SLOWER" : "cannot tell within the budget";
}

/* The verdict line of a measured gate (bytes equal or not). */
static void gate_message(const st_verify_options *o, const vops *v, const st_gate_step *g, const int *nts, int n_nts,
                         const char *first_bad, st_verify_result *res)
{
    int worst = nts[0] - 1, slow = -1, undecided = 0, first_und = -1;
    for (int k = 0; k < n_nts; k++) {
        const int i = nts[k] - 1;
        if (g[i].hi > g[worst].hi) worst = i;
        if (g[i].verdict == ST_STEP_SLOWER && (slow < 0 || g[i].lo > g[slow].lo)) slow = i;
        if (g[i].verdict == ST_STEP_UNDECIDED && undecided++ == 0) first_und = i;
    }
    const double lim = 100 * o->max_slowdown, conf = 100 * g[worst].confidence;
    if (!res->bytes_equal) {
        res->verdict = ST_GATE_FAIL_BYTES;
        snprintf(res->message, sizeof res->message, "FAIL: output bytes differ with the table (%s)", first_bad);
    } else if (slow >= 0) {
        res->verdict = ST_GATE_FAIL_SLOWER;
        snprintf(res->message, sizeof res->message,
                 "FAIL: the step is %+.1f%% slower with the table at n_tokens %d (%.4g%% interval %+.1f%%..%+.1f%%, %d "
                 "rounds: all of it beyond the %.1f%% limit)",
                 100 * g[slow].change, slow + 1, 100 * g[slow].confidence, 100 * g[slow].lo, 100 * g[slow].hi,
                 g[slow].rounds, lim);
    } else if (undecided) {
        const st_gate_step *u = &g[first_und];
        res->verdict = ST_GATE_UNDECIDED;
        snprintf(res->message, sizeof res->message,
                 "cannot decide: at n_tokens %d the step time changed %+.1f%% with the table, but its %.4g%% interval "
                 "%+.1f%%..%+.1f%% (%d rounds in %.1f s) reaches both sides of the %.1f%% limit (%d of %d token counts "
                 "undecided; %.1f s budget): the step times vary more than the limit allows to tell; what would help: "
                 "an idle machine, a larger --budget, or a larger --max-slowdown",
                 first_und + 1, 100 * u->change, 100 * u->confidence, 100 * u->lo, 100 * u->hi, u->rounds, u->seconds,
                 lim, undecided, n_nts, o->budget_s);
    } else {
        res->verdict = ST_GATE_PASS;
        snprintf(res->message, sizeof res->message,
                 "PASS: %d operations x n_tokens 1..8, 16, 24, 32 byte-identical with the table (%d launches from it "
                 "over those steps); every step within the %.1f%% limit (95%% confidence for the whole verdict): the highest, "
                 "n_tokens %d, %+.1f%% (%.4g%% interval %+.1f%%..%+.1f%%, %d rounds)",
                 v->n, res->table_launches, lim, worst + 1, 100 * g[worst].change, conf, 100 * g[worst].lo,
                 100 * g[worst].hi, g[worst].rounds);
    }
    res->passed = res->verdict == ST_GATE_PASS;
}

static st_status run_gate(st_ctx *c, const st_verify_options *o, const vops *v, st_table *tab, st_verify_result *res)
{
    size_t total = 0;
    for (int i = 0; i < v->n; i++) total += ST_MAX_TOKENS * (size_t)v->ops[i].out;
    float *a = malloc(total * sizeof(float)), *b = malloc(total * sizeof(float));
    st_status s = (a && b) ? ST_OK : st_fail(ST_ERR_NOMEM, "verify: out of memory");
    res->bytes_equal = true;
    char first_bad[200] = "";
    st_gate_step g[ST_MAX_TOKENS];
    memset(g, 0, sizeof g);
    bool slower = false;
    const double t_start = now_s();
    int step_nts[ST_MAX_TOKENS];
    const int n_step_nts = st_step_token_counts(step_nts);
    res->steps = calloc((size_t)n_step_nts, sizeof *res->steps);
    if (!res->steps && s == ST_OK) s = st_fail(ST_ERR_NOMEM, "verify: out of memory");
    for (int si = 0; si < n_step_nts && s == ST_OK; si++) {
        const int nt = step_nts[si];
        if (o->stop && *o->stop) {
            s = st_fail(ST_ERR_INTERRUPTED, "interrupted");
            break;
        }
        /* the context's own table (OLD) goes back in place below; TAB was
         * loaded for the context's identity, so the checked swaps hold */
        st_table *old = NULL, *back = NULL;
        s = st_ctx_swap_table(c, NULL, &old);
        if (s != ST_OK) break;
        s = step(c, v, nt);
        if (s == ST_OK) s = outputs(c, v, nt, a);
        st_ctx_swap_table(c, tab, &back);
        st_ctx_reset_stats(c);
        if (s == ST_OK) s = step(c, v, nt);
        if (s == ST_OK) s = outputs(c, v, nt, b);
        {
            st_ctx_stats stt;
            st_ctx_get_stats(c, &stt);
            res->table_launches += (int)stt.table_hits;
        }
        st_ctx_swap_table(c, old, &back);
        if (s != ST_OK) break;
        size_t off = 0;
        for (int i = 0; i < v->n; i++) {
            const size_t n = (size_t)nt * (size_t)v->ops[i].out;
            if (memcmp(a + off, b + off, n * sizeof(float)) != 0 && res->bytes_equal) {
                res->bytes_equal = false;
                snprintf(first_bad, sizeof first_bad, "%s at n_tokens %d", v->ops[i].name, nt);
            }
            off += n;
        }
        /* The budget left is shared by the token counts still to measure;
         * once a slowdown is confirmed (or the bytes differ) the table is
         * refused anyway, so the rest get one batch. */
        const double left = o->budget_s - (now_s() - t_start);
        /* 95% for the whole verdict: Bonferroni over the token counts (and,
         * inside the judge, over its looks) */
        st_gate_rule rule = {o->max_slowdown, o->rounds, ST_GATE_MAX_ROUNDS,
                             (slower || !res->bytes_equal) ? 0 : left / (n_step_nts - si),
                             1 - 0.05 / n_step_nts};
        pair_job job = {c, v, tab, nt, 0, o->stop};
        s = st_gate_judge(measure_pairs, &job, &rule, nt, o->quiet, &g[nt - 1]);
        if (s != ST_OK) break;
        const st_gate_step *x = &g[nt - 1];
        slower |= x->verdict == ST_STEP_SLOWER;
        res->steps[res->n_steps++] = (st_verify_step){nt, x->base.median_us, x->with.median_us, x->base.spread,
                                                       x->with.spread, x->change, x->lo, x->hi, x->rounds};
        if (nt == 1 || x->confidence < res->confidence) res->confidence = x->confidence;
        if (!o->quiet)
            st_log("verify: n_tokens %d: step %.1f us without the table, %.1f us with it; paired change %+.1f%% (%.4g%% "
                   "interval %+.1f%%..%+.1f%%, %d rounds): %s%s",
                   nt, x->base.median_us, x->with.median_us, 100 * x->change, 100 * x->confidence, 100 * x->lo,
                   100 * x->hi, x->rounds, verdict_text(x->verdict), res->bytes_equal ? "; bytes identical" : "");
    }
    res->seconds = now_s() - t_start;
    if (s == ST_OK) {
        gate_message(o, v, g, step_nts, n_step_nts, first_bad, res);
        res->not_slower = !slower && res->verdict != ST_GATE_UNDECIDED;
    }
    free(a);
    free(b);
    return s;
}

/* LOG_SKIPS: one line per part of the model the step leaves out (not for
 * the tuner's gate: the tuner said so already). */
static st_status verify_run(st_ctx *c, const st_verify_options *o, st_verify_result *res, bool log_skips)
{
    st_verify_result_clear(res);
    if (!o->table_path) return st_fail(ST_ERR_INVALID_ARG, "verify: no table given");
    st_verify_options opt = *o;
    if (opt.rounds < 6) opt.rounds = 6;
    if (opt.rounds > ST_GATE_MAX_ROUNDS) opt.rounds = ST_GATE_MAX_ROUNDS;
    if (!(opt.budget_s >= 0)) opt.budget_s = 0;
    /* the model first: one that cannot run here is the one line to say */
    st_model *m = NULL;
    st_status s = o->model_path ? open_model(o->model_path, &m) : ST_OK;
    if (s == ST_OK) s = st_vmodel_fit(c, &opt, m);
    if (s != ST_OK) {
        st_model_close(m);
        return s;
    }
    char line[ST_TABLE_MSG_MAX] = "";
    st_table *tab = NULL;
    s = st_table_load_msg(o->table_path, st_ctx_identity(c), st_ctx_dispatch(c), &tab, line, sizeof line);
    if (s != ST_OK) {
        st_model_close(m);
        return st_fail(s, "verify: the table does not engage here: %s", line);
    }
    if (!o->quiet) st_log("%s", line);
    if (m && log_skips && !o->quiet) st_model_log_skips(m, "verify");
    vops v = {NULL, 0, 0};
    st_rng r;
    st_rng_seed(&r, 20261129);
    if (s == ST_OK) s = m ? ops_from_model(c, m, &r, &v) : ops_synthetic(c, &opt, &r, &v);
    if (s == ST_OK && v.n == 0) s = st_fail(ST_ERR_NOT_FOUND, "verify: the model has no decode operation our kernels run");
    if (s == ST_OK) {
        for (int i = 0; i < v.n; i++) res->n_layers += v.ops[i].kind == ST_SHAPE_EXPERT;
        res->n_ops = v.n;
        s = run_gate(c, &opt, &v, tab, res);
    }
    free_ops(c, &v);
    st_model_close(m);
    st_table_destroy(tab);
    return s;
}

void st_verify_result_init(st_verify_result *r)
{
    memset(r, 0, sizeof *r);
    r->struct_size = sizeof *r;
}

void st_verify_result_clear(st_verify_result *r)
{
    if (!r) return;
    const size_t n = r->struct_size;
    if (n >= offsetof(st_verify_result, steps) + sizeof r->steps) free(r->steps);
    memset(r, 0, n < sizeof *r ? n : sizeof *r);
    r->struct_size = n;
}

st_status st_verify_run(st_ctx *c, const st_verify_options *opt, st_verify_result *res)
{
    if (!c || !res || res->struct_size < sizeof res->struct_size)
        return st_fail(ST_ERR_INVALID_ARG, "verify: no context, or the result is not set up (st_verify_result_init)");
    st_verify_options o;
    st_verify_options_default(&o);
    ST_TRY(st_struct_in(&o, sizeof o, opt, "verify: the options"));
    st_verify_result r;
    st_verify_result_init(&r);
    const st_status s = verify_run(c, &o, &r, true);
    st_verify_result_clear(res);
    /* the steps go to the caller when its struct has room for them */
    if (res->struct_size < offsetof(st_verify_result, n_steps) + sizeof r.n_steps) {
        free(r.steps);
        r.steps = NULL;
        r.n_steps = 0;
    }
    st_struct_out(res, &r, sizeof r);
    return s;
}

/* The tuner's gate: the model when one was given, else the tuned shapes as a
 * synthetic one-layer model. */
st_status st_tune_gate(st_ctx *ctx, const st_tune_options *o, const st_tune_shape_result *r, int n, const char *table_path,
                       st_verify_result *vr)
{
    st_verify_options vo;
    st_verify_options_default(&vo);
    vo.table_path = table_path;
    vo.quiet = o->quiet;
    vo.stop = o->stop;
    vo.n_expert = o->n_expert;
    vo.topk = o->topk;
    if (o->quick) vo.rounds = 7;
    vo.budget_s = o->gate_budget_s > 0 ? o->gate_budget_s : o->quick ? 20 : 60;
    char (*texts)[128] = NULL;
    const char **ptrs = NULL;
    if (o->model_path && o->n_shapes == 0) {
        vo.model_path = o->model_path;
    } else {
        texts = calloc((size_t)n, sizeof *texts);
        ptrs = calloc((size_t)n, sizeof *ptrs);
        if (!texts || !ptrs) {
            free(texts);
            free(ptrs);
            return st_fail(ST_ERR_NOMEM, "gate: out of memory");
        }
        int k = 0;
        for (int i = 0; i < n; i++) {
            const st_tune_shape *s = &r[i].shape;
            if (s->kind == ST_SHAPE_EXPERT) {
                bool dup = false; /* one layer per expert shape; the gate runs n_tokens 1..8 itself */
                for (int j = 0; j < i; j++)
                    dup |= r[j].shape.kind == ST_SHAPE_EXPERT && r[j].shape.type == s->type &&
                           r[j].shape.down_type == s->down_type && r[j].shape.n_embd == s->n_embd && r[j].shape.n_ff == s->n_ff;
                if (dup) continue;
                snprintf(texts[k], 128, "expert %s %s %d %d 1", st_qtype_name(s->type), st_qtype_name(s->down_type), s->n_embd,
                         s->n_ff);
            } else {
                snprintf(texts[k], 128, "mmvq %s %d %d", st_qtype_name(s->type), s->rows, s->cols);
            }
            ptrs[k] = texts[k];
            k++;
        }
        vo.shapes = ptrs;
        vo.n_shapes = k;
        if (n > 0) {
            vo.n_expert = r[0].shape.kind == ST_SHAPE_EXPERT ? r[0].shape.n_expert : o->n_expert;
            vo.topk = r[0].shape.kind == ST_SHAPE_EXPERT ? r[0].shape.topk : o->topk;
        }
    }
    st_status s = verify_run(ctx, &vo, vr, false);
    free(texts);
    free(ptrs);
    return s;
}
