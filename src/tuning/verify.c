/* The end-to-end gate: a whole synthetic decode step of the model (every
 * expert layer through expert_grouped with a realistic routing, every dense
 * matrix through iq_mmvq), for n_tokens 1..8, 16, 24, 32, without and with the table,
 * interleaved in one process. Passes only when every output byte is equal
 * and the step is not slower than the limit; a step measured slower is
 * measured again, and only a confirmed slowdown refuses the table (noisy
 * machines: the CPU backend on 2 shared cores). */
#include "strata/model.h"
#include "strata/verify.h"
#include "ctx_internal.h"
#include "gguf.h"
#include "internal.h"
#include "randgen.h"
#include "tuner_internal.h"
#include "verify_internal.h"
#include "vmodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void st_verify_options_default(st_verify_options *o)
{
    memset(o, 0, sizeof *o);
    o->n_layers = 1;
    o->n_expert = 64;
    o->topk = 8;
    o->rounds = 21;
    o->max_slowdown = 0.02;
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

static st_status ops_from_model(st_ctx *c, const st_model *m, st_rng *r, vops *v)
{
    for (size_t i = 0; i < st_model_expert_layer_count(m); i++) {
        const st_model_expert_layer *l = st_model_expert_layer_at(m, i);
        vop op = {ST_SHAPE_EXPERT, {NULL, NULL, NULL}, l->n_expert, st_model_expert_used(m) > 0 ? st_model_expert_used(m) : 2,
                  l->n_embd, l->n_embd, NULL, NULL, NULL, NULL, ""};
        if (op.topk > op.n_expert) op.topk = op.n_expert;
        snprintf(op.name, sizeof op.name, "blk.%d experts", l->layer);
        const int64_t gr = (int64_t)l->n_expert * l->n_ff, dr = (int64_t)l->n_expert * l->n_embd;
        ST_TRY(st_matrix_create(c, l->gu_type, gr, l->n_embd, l->gate, &op.m[0]));
        ST_TRY(st_matrix_create(c, l->gu_type, gr, l->n_embd, l->up, &op.m[1]));
        ST_TRY(st_matrix_create(c, l->down_type, dr, l->n_ff, l->down, &op.m[2]));
        ST_TRY(upload_inputs(c, r, &op, find_router(m, l->layer, l->n_embd, l->n_expert)));
        ST_TRY(add_op(v, &op));
    }
    for (size_t i = 0; i < st_model_matrix_count(m); i++) {
        const st_model_matrix *x = st_model_matrix_at(m, i);
        if (x->type == ST_QTYPE_NONE || !x->data) continue;
        vop op = {ST_SHAPE_MMVQ, {NULL, NULL, NULL}, 0, 0, x->n_cols, x->n_rows, NULL, NULL, NULL, NULL, ""};
        snprintf(op.name, sizeof op.name, "%s", x->name);
        ST_TRY(st_matrix_create(c, x->type, x->n_rows, x->n_cols, x->data, &op.m[0]));
        ST_TRY(upload_inputs(c, r, &op, NULL));
        ST_TRY(add_op(v, &op));
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
            if (st == ST_OK) st = add_op(v, &op);
            else
                for (int k = 0; k < 3; k++) st_matrix_destroy(op.m[k]);
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
    for (int i = 0; i < v->n; i++) {
        for (int k = 0; k < 3; k++) st_matrix_destroy(v->ops[i].m[k]);
        st_ctx_free(c, v->ops[i].x);
        st_ctx_free(c, v->ops[i].y);
        st_ctx_free(c, v->ops[i].ids);
        st_ctx_free(c, v->ops[i].wts);
    }
    free(v->ops);
}

/* st_model_open with the path in the message. */
static st_status open_model(const char *path, st_model **m)
{
    st_status s = st_model_open(path, m);
    if (s == ST_OK) return s;
    char why[400];
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

/* Interleaved timing of one step without (SA, TA) and with (SB, TB) the
 * table: ABAB..., the order flipped every round. */
static st_status time_pair(st_ctx *c, const st_verify_options *o, const vops *v, st_table *tab, int nt, double *sa,
                           double *sb, st_timing *ta, st_timing *tb)
{
    st_status s = ST_OK;
    for (int r = 0; r < o->rounds && s == ST_OK; r++) {
        for (int k = 0; k < 2 && s == ST_OK; k++) {
            const bool with = (k == 0) == (r % 2 == 0);
            st_table *prev = st_ctx_swap_table(c, with ? tab : NULL);
            s = timed_step(c, v, nt, with ? &sb[r] : &sa[r]);
            st_ctx_swap_table(c, prev);
        }
    }
    if (s == ST_OK) {
        st_timing_from_samples(sa, o->rounds, ta);
        st_timing_from_samples(sb, o->rounds, tb);
    }
    return s;
}

static bool beyond_noise(double max_slowdown, const st_timing *base, const st_timing *with)
{
    return with->median_us / base->median_us - 1 > max_slowdown && with->p25_us > base->p75_us;
}

st_status st_gate_judge(st_gate_measure_fn measure, void *user, double max_slowdown, int nt, bool quiet,
                        st_timing *base, st_timing *with, bool *slower)
{
    *slower = false;
    ST_TRY(measure(user, base, with));
    if (!beyond_noise(max_slowdown, base, with)) return ST_OK;
    /* one slow measurement on a noisy machine is not yet evidence: a table
     * is refused only when a second, independent interleaved measurement
     * says the same */
    if (!quiet)
        st_log("verify: n_tokens %d: %+.1f%% with the table, beyond the noise; measuring again to confirm", nt,
               100 * (with->median_us / base->median_us - 1));
    ST_TRY(measure(user, base, with));
    *slower = beyond_noise(max_slowdown, base, with);
    return ST_OK;
}

typedef struct {
    st_ctx *c;
    const st_verify_options *o;
    const vops *v;
    st_table *tab;
    int nt;
    double *sa, *sb;
} pair_job;

static st_status measure_pair(void *user, st_timing *base, st_timing *with)
{
    pair_job *j = user;
    return time_pair(j->c, j->o, j->v, j->tab, j->nt, j->sa, j->sb, base, with);
}

static st_status run_gate(st_ctx *c, const st_verify_options *o, const vops *v, st_table *tab, st_verify_result *res)
{
    size_t total = 0;
    for (int i = 0; i < v->n; i++) total += ST_MAX_TOKENS * (size_t)v->ops[i].out;
    float *a = malloc(total * sizeof(float)), *b = malloc(total * sizeof(float));
    double *sa = malloc(sizeof(double) * (size_t)(o->rounds + 1)), *sb = malloc(sizeof(double) * (size_t)(o->rounds + 1));
    st_status s = (a && b && sa && sb) ? ST_OK : st_fail(ST_ERR_NOMEM, "verify: out of memory");
    res->bytes_equal = res->not_slower = true;
    char first_bad[200] = "";
    double worst = -1;
    int worst_nt = 0;
    int step_nts[ST_MAX_TOKENS];
    const int n_step_nts = st_step_token_counts(step_nts);
    for (int si = 0; si < n_step_nts && s == ST_OK; si++) {
        const int nt = step_nts[si];
        if (o->stop && *o->stop) {
            s = st_fail(ST_ERR_INTERRUPTED, "interrupted");
            break;
        }
        st_table *old = st_ctx_swap_table(c, NULL);
        s = step(c, v, nt);
        if (s == ST_OK) s = outputs(c, v, nt, a);
        st_ctx_swap_table(c, tab);
        st_ctx_reset_stats(c);
        if (s == ST_OK) s = step(c, v, nt);
        if (s == ST_OK) s = outputs(c, v, nt, b);
        {
            st_ctx_stats stt;
            st_ctx_get_stats(c, &stt);
            res->table_launches += (int)stt.table_hits;
        }
        st_ctx_swap_table(c, old);
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
        st_timing ta, tb;
        bool slower = false;
        pair_job job = {c, o, v, tab, nt, sa, sb};
        s = st_gate_judge(measure_pair, &job, o->max_slowdown, nt, o->quiet, &ta, &tb, &slower);
        if (s != ST_OK) break;
        res->base_us[nt - 1] = ta.median_us;
        res->table_us[nt - 1] = tb.median_us;
        res->base_spread[nt - 1] = ta.spread;
        res->table_spread[nt - 1] = tb.spread;
        const double slow = tb.median_us / ta.median_us - 1;
        if (slow > worst) {
            worst = slow;
            worst_nt = nt;
        }
        if (slower) res->not_slower = false;
        if (!o->quiet)
            st_log("verify: n_tokens %d: step %.1f us without the table, %.1f us with it (%+.1f%%; spreads %.1f%% / %.1f%%)%s",
                   nt, ta.median_us, tb.median_us, 100 * slow, 100 * ta.spread, 100 * tb.spread,
                   res->bytes_equal ? ", bytes identical" : "");
    }
    if (s == ST_OK) {
        res->passed = res->bytes_equal && res->not_slower;
        if (!res->bytes_equal)
            snprintf(res->message, sizeof res->message, "FAIL: output bytes differ with the table (%s)", first_bad);
        else if (!res->not_slower)
            snprintf(res->message, sizeof res->message,
                     "FAIL: the step is %.1f%% slower with the table at n_tokens %d (limit %.1f%%)", 100 * worst, worst_nt,
                     100 * o->max_slowdown);
        else
            snprintf(res->message, sizeof res->message,
                     "PASS: %d operations x n_tokens 1..8, 16, 24, 32 byte-identical with the table (%d launches from it over "
                     "those steps); "
                     "worst step time %+.1f%% (n_tokens %d; limit %.1f%% beyond the interquartile noise)",
                     v->n, res->table_launches, 100 * worst, worst_nt, 100 * o->max_slowdown);
    }
    free(a);
    free(b);
    free(sa);
    free(sb);
    return s;
}

/* LOG_SKIPS: one line per part of the model the step leaves out (not for
 * the tuner's gate: the tuner said so already). */
static st_status verify_run(st_ctx *c, const st_verify_options *o, st_verify_result *res, bool log_skips)
{
    memset(res, 0, sizeof *res);
    if (!o->table_path) return st_fail(ST_ERR_INVALID_ARG, "verify: no table given");
    st_verify_options opt = *o;
    if (opt.rounds < 3) opt.rounds = 3;
    if (opt.rounds > 255) opt.rounds = 255;
    char line[ST_TABLE_MSG_MAX] = "";
    st_table *tab = NULL;
    st_status s = st_table_load_msg(o->table_path, st_ctx_identity(c), st_ctx_dispatch(c), &tab, line, sizeof line);
    if (s != ST_OK) return st_fail(s, "verify: the table does not engage here: %s", line);
    if (!o->quiet) st_log("%s", line);
    st_model *m = NULL;
    if (o->model_path) s = open_model(o->model_path, &m);
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

st_status st_verify_run(st_ctx *c, const st_verify_options *o, st_verify_result *res)
{
    return verify_run(c, o, res, true);
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
