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
#include "strata/probe.h"
#include "strata/tools/model.h"
#include "strata/tools/verify.h"
#include "file_write.h"
#include "tools_internal.h"
#include "tuner_decide.h"
#include "mem_fit.h"
#include "model_extra.h"
#include "verify_internal.h"
#include "vmodel.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void st_verify_options_init_size(st_verify_options *o, size_t size)
{
    st_verify_options d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.n_layers = 1;
    d.n_expert = 64;
    d.topk = 8;
    d.rounds = 21;
    d.max_slowdown = 0.02;
    d.budget_s = 60;
    st_struct_init(o, size, &d, sizeof d);
}

static st_status timed_step(st_ctx *c, const st_vmodel *v, int nt, double *us)
{
    double ms = 0;
    ST_TRY(st_ctx_timer_start(c));
    ST_TRY(st_vmodel_step(c, v, nt));
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
static st_status time_pairs(st_ctx *c, const st_vmodel *v, st_table *tab, int nt, int rounds, int *parity, double *base,
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
    const st_vmodel *v;
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
static void gate_message(const st_verify_options *o, const st_vmodel *v, const st_gate_step *g, const int *nts, int n_nts,
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
                 st_vmodel_op_count(v), res->table_launches, lim, worst + 1, 100 * g[worst].change, conf, 100 * g[worst].lo,
                 100 * g[worst].hi, g[worst].rounds);
    }
    res->passed = res->verdict == ST_GATE_PASS;
}

static st_status run_gate(st_ctx *c, const st_verify_options *o, const st_vmodel *v, st_table *tab, st_verify_result *res)
{
    size_t total = 0;
    for (int i = 0; i < st_vmodel_op_count(v); i++) total += ST_MAX_TOKENS * st_vmodel_op_out(v, i);
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
        st_file_step(); /* a test's signal lands here (file_write.h) */
        if (o->stop && *o->stop) {
            s = st_fail(ST_ERR_INTERRUPTED, "interrupted");
            break;
        }
        /* the context's own table (OLD) goes back in place below; TAB was
         * loaded for the context's identity, so the checked swaps hold */
        st_table *old = NULL, *back = NULL;
        s = st_ctx_swap_table(c, NULL, &old);
        if (s != ST_OK) break;
        s = st_vmodel_step(c, v, nt);
        if (s == ST_OK) s = st_vmodel_outputs(c, v, nt, a);
        const st_status sw = st_ctx_swap_table(c, tab, &back);
        if (s == ST_OK) s = sw; /* never a "with the table" step without it */
        st_ctx_reset_stats(c);
        if (s == ST_OK) s = st_vmodel_step(c, v, nt);
        if (s == ST_OK) s = st_vmodel_outputs(c, v, nt, b);
        {
            st_ctx_stats stt;
            st_ctx_stats_init(&stt);
            st_ctx_get_stats(c, &stt);
            res->table_launches += (int)stt.table_hits;
        }
        st_ctx_swap_table(c, old, &back);
        if (s != ST_OK) break;
        size_t off = 0;
        for (int i = 0; i < st_vmodel_op_count(v); i++) {
            const size_t n = (size_t)nt * st_vmodel_op_out(v, i);
            if (memcmp(a + off, b + off, n * sizeof(float)) != 0 && res->bytes_equal) {
                res->bytes_equal = false;
                snprintf(first_bad, sizeof first_bad, "%s at n_tokens %d", st_vmodel_op_name(v, i), nt);
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
    st_status s = o->model_path ? st_vmodel_open_gguf(o->model_path, &m) : ST_OK;
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
    st_vmodel *v = NULL;
    s = m ? st_vmodel_open_model(c, m, opt.in_place, &v) : st_vmodel_open(c, &opt, &v);
    if (s == ST_OK) {
        res->n_ops = st_vmodel_ops(v, &res->n_layers);
        s = run_gate(c, &opt, v, tab, res);
    }
    st_vmodel_close(c, v);
    st_model_close(m);
    st_table_destroy(tab);
    return s;
}

void st_verify_result_init_size(st_verify_result *r, size_t size) { st_struct_init_zeros(r, size); }

void st_verify_result_clear(st_verify_result *r)
{
    if (!st_struct_size_of(r)) return;
    if (st_struct_has(r, offsetof(st_verify_result, steps) + sizeof r->steps)) free(r->steps);
    st_struct_zero(r, sizeof *r);
}

st_status st_verify_run(st_ctx *c, const st_verify_options *opt, st_verify_result *res)
{
    if (!c) return st_fail(ST_ERR_INVALID_ARG, "verify: no context");
    ST_TRY(st_struct_ready(res, "verify"));
    st_verify_options o;
    st_verify_options_default(&o);
    ST_TRY(st_struct_in(&o, sizeof o, opt, "verify: the options"));
    st_verify_result r;
    st_verify_result_init(&r);
    const st_status s = verify_run(c, &o, &r, true);
    st_verify_result_clear(res);
    /* the steps go to the caller when its struct has room for them */
    if (!st_struct_has(res, offsetof(st_verify_result, n_steps) + sizeof r.n_steps)) {
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
    vo.in_place = o->in_place;
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
