#define _POSIX_C_SOURCE 200809L
/* tune_decode tune: candidates, byte compare, timing, decisions, the table
 * (written atomically, reloaded through the guarded loader, gated by the
 * end-to-end verify) and the report. */
#include "strata/tools/tuner.h"
#include "strata/tools/verify.h"
#include "strata/tools/report.h"
#include "strata/probe.h"
#include "gguf.h"
#include "file_write.h"
#include "tools_internal.h"
#include "randgen.h"
#include "strata/table.h"
#include "mem_fit.h"
#include "model_extra.h"
#include "tuner_decide.h"
#include "tuner_outputs.h"
#include "tuner_report.h"
#include "tuner_shapes.h"
#include "verify_internal.h"
#include "tune_out.h"
#include "strata/tools/tables.h"
#include "tmpfiles.h"
#include "tune_mat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(ST_TUNE_MAX_ROUNDS <= ST_MEASURE_MAX_ROUNDS, "the tuner keeps every round it measures");

void st_tune_options_init_size(st_tune_options *o, size_t size)
{
    st_tune_options d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.out_dir = ".";
    d.threshold = 0.01;
    d.do_expert = d.do_mmvq = true;
    d.n_expert = 64;
    d.topk = 8;
    st_struct_init(o, size, &d, sizeof d);
}

typedef struct {
    st_ctx *ctx;
    const st_tune_shape *s;
    int copies;
    st_tune_mat *m; /* mmvq: copies; expert: 3 per copy; in either layout (tune_mat.h) */
    float *x, *y;
    int32_t *ids;
    float *wts;
    int nt;
    const st_tune_cand *cand;
    size_t rotation_bytes;
} run_ctx;

static st_status launch(void *user, int c, long iter)
{
    run_ctx *r = user;
    const int k = (int)(iter % r->copies);
    if (r->s->kind == ST_SHAPE_MMVQ) return st_iq_mmvq_variant(r->ctx, r->m[k].m, r->x, r->nt, r->y, r->cand[c].rows);
    st_experts ex = {r->m[3 * k].m, r->m[3 * k + 1].m, r->m[3 * k + 2].m, r->s->n_expert};
    return st_expert_grouped_variant(r->ctx, &ex, r->x, r->ids, r->wts, r->nt, r->s->topk, r->y, r->cand[c].gu_rows,
                                     r->cand[c].dn_rows);
}

static void candidates(const st_tune_shape *s, bool in_place, st_tune_shape_result *res)
{
    st_tune_cand *c = res->cand;
    int n = 0;
    memset(&c[n], 0, sizeof c[n]);
    snprintf(c[n++].name, sizeof c[0].name, "default");
    if (s->kind == ST_SHAPE_MMVQ) {
        int ids[ST_TUNE_MAX_CAND];
        const int k = st_mmvq_variant_ids(ids, ST_TUNE_MAX_CAND);
        for (int i = 0; i < k && i < ST_TUNE_MAX_CAND && n < ST_TUNE_MAX_CAND; i++) {
            /* a variant that cannot run this row (a wide-row one on a
             * short row) is no candidate */
            if (!st_mmvq_variant_fits(ids[i], s->cols)) continue;
            /* in place: the variants that layout has kernels for */
            if (in_place && !st_mmvq_in_place_variant(ids[i])) continue;
            memset(&c[n], 0, sizeof c[n]);
            c[n].rows = ids[i];
            st_mmvq_choice_name(ids[i], c[n].name, sizeof c[n].name);
            n++;
        }
    } else {
        int pairs[ST_TUNE_MAX_CAND][2];
        const int k = st_expert_variant_ids(pairs, ST_TUNE_MAX_CAND);
        for (int i = 0; i < k && i < ST_TUNE_MAX_CAND && n < ST_TUNE_MAX_CAND; i++) {
            memset(&c[n], 0, sizeof c[n]);
            c[n].gu_rows = pairs[i][0];
            c[n].dn_rows = pairs[i][1];
            st_expert_choice_name(pairs[i][0], pairs[i][1], c[n].name, sizeof c[n].name);
            n++;
        }
    }
    for (int i = 0; i < n; i++) c[i].bytes_match = true;
    res->n_cand = n;
}

static void free_run(run_ctx *r)
{
    if (r->m)
        for (int i = 0; i < r->copies * (r->s->kind == ST_SHAPE_EXPERT ? 3 : 1); i++) st_tune_mat_free(r->ctx, &r->m[i]);
    free(r->m);
    st_ctx_free(r->ctx, r->x);
    st_ctx_free(r->ctx, r->y);
    st_ctx_free(r->ctx, r->ids);
    st_ctx_free(r->ctx, r->wts);
}

/* Bytes a timing rotation streams at least besides 4x the last-level
 * cache: on a GPU a floor (256 MiB, --quick 64 MiB) that also averages the
 * memory controllers; the CPU backend rotates nothing of its own. */
static size_t rotation_floor(st_ctx *ctx, const st_tune_options *o, size_t one)
{
    return st_ctx_backend(ctx) == ST_BACKEND_GPU ? (o->quick ? (size_t)64 << 20 : (size_t)256 << 20) : one;
}

/* Bytes of one copy of the weights a shape times. */
static size_t shape_bytes(const st_tune_shape *s)
{
    if (s->kind == ST_SHAPE_MMVQ) return (size_t)s->rows * st_qtype_row_bytes(s->type, s->cols);
    return 2 * (size_t)s->n_expert * (size_t)s->n_ff * st_qtype_row_bytes(s->type, s->n_embd) +
           (size_t)s->n_expert * (size_t)s->n_embd * st_qtype_row_bytes(s->down_type, s->n_ff);
}

/* Uploads the weights COPIES times (distinct buffers defeat the caches). */
static st_status setup(st_ctx *ctx, const st_tune_shape *s, const st_tune_options *o, run_ctx *r, st_tune_shape_result *res)
{
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    r->s = s;
    st_rng rng;
    st_rng_seed(&rng, 0x5eed + (uint64_t)s->type * 131 + (uint64_t)s->rows * 7 + (uint64_t)s->cols * 3 +
                          (uint64_t)s->n_embd * 5 + (uint64_t)s->n_ff * 11);
    const bool ex = s->kind == ST_SHAPE_EXPERT;
    const int64_t r0 = ex ? (int64_t)s->n_expert * s->n_ff : s->rows, c0 = ex ? s->n_embd : s->cols;
    const int64_t r2 = ex ? (int64_t)s->n_expert * s->n_embd : 0, c2 = ex ? s->n_ff : 0;
    const size_t b0 = (size_t)r0 * st_qtype_row_bytes(s->type, c0);
    const size_t b2 = ex ? (size_t)r2 * st_qtype_row_bytes(s->down_type, c2) : 0;
    const size_t one = ex ? 2 * b0 + b2 : b0;
    void *host[3] = {NULL, NULL, NULL};
    const void *w[3] = {s->w[0], s->w[1], s->w[2]};
    for (int i = 0; i < (ex ? 3 : 1); i++)
        if (!w[i]) {
            const size_t n = i == 2 ? b2 : b0;
            host[i] = malloc(n);
            if (!host[i]) return st_fail(ST_ERR_NOMEM, "tune: %zu bytes of weights", n);
            st_random_blocks(&rng, i == 2 ? s->down_type : s->type, i == 2 ? r2 : r0, i == 2 ? c2 : c0, host[i]);
            w[i] = host[i];
        }
    bool short_of_rule = false;
    int copies = st_rotation_copies(one, st_ctx_llc(ctx, NULL), rotation_floor(ctx, o, one), 1, &short_of_rule);
    size_t avail = 0, total = 0; /* and never more than half the free memory */
    if (st_ctx_mem_info(ctx, &avail, &total) == ST_OK)
        while (copies > 1 && (size_t)copies * one > avail / 2) {
            copies--;
            short_of_rule = true;
        }
    st_clear_error();
    res->rotation_short = short_of_rule;
    r->copies = copies;
    res->copies = copies;
    res->rotation_bytes = r->rotation_bytes = (size_t)copies * one;
    st_status st = ST_OK;
    r->m = calloc((size_t)copies * (ex ? 3 : 1), sizeof *r->m);
    if (!r->m) st = st_fail(ST_ERR_NOMEM, "tune: out of memory");
    for (int k = 0; k < copies && st == ST_OK; k++) {
        if (!ex) {
            st = st_tune_mat_make(ctx, s->type, r0, c0, w[0], o->in_place, &r->m[k]);
            continue;
        }
        st = st_tune_mat_make(ctx, s->type, r0, c0, w[0], o->in_place, &r->m[3 * k]);
        if (st == ST_OK) st = st_tune_mat_make(ctx, s->type, r0, c0, w[1], o->in_place, &r->m[3 * k + 1]);
        if (st == ST_OK) st = st_tune_mat_make(ctx, s->down_type, r2, c2, w[2], o->in_place, &r->m[3 * k + 2]);
    }
    for (int i = 0; i < 3; i++) free(host[i]);
    if (st != ST_OK) return st;
    /* inputs for up to 8 tokens */
    const int in = ex ? s->n_embd : s->cols, outn = ex ? s->n_embd : s->rows;
    float *hx = malloc(sizeof(float) * ST_MAX_TOKENS * (size_t)in);
    if (!hx) return st_fail(ST_ERR_NOMEM, "tune: out of memory");
    st_random_floats(&rng, hx, ST_MAX_TOKENS * (size_t)in, 1.0f);
    st = st_ctx_alloc(ctx, sizeof(float) * ST_MAX_TOKENS * (size_t)in, (void **)&r->x);
    if (st == ST_OK) st = st_ctx_upload(ctx, r->x, hx, sizeof(float) * ST_MAX_TOKENS * (size_t)in);
    if (st == ST_OK) st = st_ctx_alloc(ctx, sizeof(float) * ST_MAX_TOKENS * (size_t)outn, (void **)&r->y);
    free(hx);
    if (st == ST_OK && ex) {
        int32_t ids[ST_MAX_PAIRS];
        float wts[ST_MAX_PAIRS];
        st_random_routing(&rng, ST_MAX_TOKENS, s->topk, s->n_expert, ids, wts);
        st = st_ctx_alloc(ctx, sizeof ids, (void **)&r->ids);
        if (st == ST_OK) st = st_ctx_upload(ctx, r->ids, ids, sizeof ids);
        if (st == ST_OK) st = st_ctx_alloc(ctx, sizeof wts, (void **)&r->wts);
        if (st == ST_OK) st = st_ctx_upload(ctx, r->wts, wts, sizeof wts);
    }
    return st;
}

/* Byte compare of every candidate with the default at token count NT. */
static st_status compare(run_ctx *r, st_tune_shape_result *res, int nt)
{
    const st_tune_shape *s = r->s;
    const size_t n = (size_t)nt * (size_t)(s->kind == ST_SHAPE_EXPERT ? s->n_embd : s->rows);
    float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    st_status st = (ref && got) ? ST_OK : st_fail(ST_ERR_NOMEM, "tune: out of memory");
    r->nt = nt;
    r->cand = res->cand;
    for (int c = 0; c < res->n_cand && st == ST_OK; c++) {
        st = launch(r, c, 0);
        if (st == ST_OK) st = st_ctx_sync(r->ctx);
        if (st == ST_OK) st = st_ctx_download(r->ctx, c == 0 ? ref : got, r->y, n * sizeof(float));
        if (st != ST_OK || c == 0 || memcmp(ref, got, n * sizeof(float)) == 0) continue;
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < n; i++)
            if (memcmp(&ref[i], &got[i], 4)) {
                if (!bad) first = i;
                bad++;
            }
        res->cand[c].bytes_match = false;
        snprintf(res->cand[c].mismatch, sizeof res->cand[c].mismatch,
                 "n_tokens %d: %zu of %zu outputs differ, first at %zu (%.9g vs default %.9g)", nt, bad, n, first,
                 (double)got[first], (double)ref[first]);
    }
    free(ref);
    free(got);
    return st;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool same_weights(const st_tune_shape *a, const st_tune_shape *b)
{
    return a->kind == b->kind && a->type == b->type && a->down_type == b->down_type && a->rows == b->rows &&
           a->cols == b->cols && a->n_embd == b->n_embd && a->n_ff == b->n_ff && a->n_expert == b->n_expert &&
           a->topk == b->topk && a->w[0] == b->w[0] && a->w[1] == b->w[1] && a->w[2] == b->w[2];
}

/* R holds the uploaded weights of the previous shape (r->s NULL if none);
 * they are reused when only n_tokens differs. */
static st_status tune_shape(st_ctx *ctx, const st_tune_options *o, const st_tune_shape *s, st_tune_shape_result *res,
                            int idx, int total, double t_start, run_ctx *rp)
{
    memset(res, 0, sizeof *res);
    res->shape = *s;
    candidates(s, o->in_place, res);
    if (s->kind == ST_SHAPE_MMVQ) {
        if (o->n_ntok_mix > 0) {
            memcpy(res->nts, o->ntok_mix, sizeof(int) * (size_t)o->n_ntok_mix);
            res->n_nts = o->n_ntok_mix;
        } else {
            for (int i = 0; i < ST_DECODE_TOKENS; i++) res->nts[i] = i + 1;
            res->n_nts = ST_DECODE_TOKENS;
        }
    } else {
        res->nts[0] = s->n_tokens;
        res->n_nts = 1;
    }
    st_status st = ST_OK;
    if (rp->s && same_weights(rp->s, s)) {
        res->copies = rp->copies;
        res->rotation_bytes = rp->rotation_bytes;
    } else {
        if (rp->s) free_run(rp);
        st = setup(ctx, s, o, rp, res);
    }
    rp->s = s;
    run_ctx r = *rp;
    /* which variant is the default's own launch. iq_mmvq has none over a
     * whole mix: on the GPU its default pipelines the weight loads at 1-2
     * tokens (the rows variants do not) or is a sub-warp kernel, and on a
     * wide row it changes its geometry with the token count, so a wide-row
     * variant is its launch at some token counts only (it is timed like any
     * other: the keep threshold decides); on the CPU it splits rows by core
     * count. */
    if (st == ST_OK && s->kind == ST_SHAPE_EXPERT) {
        int gu, dn;
        st_experts ex = {r.m[0].m, r.m[1].m, r.m[2].m, s->n_expert};
        st_ctx_default_expert_equiv(ctx, &ex, &gu, &dn);
        /* the pair is the default's launch only below the matrix-unit
         * token count */
        const int mma_from = st_ctx_default_expert_mma_tokens(ctx, &ex);
        for (int k = 0; k < res->n_nts; k++)
            if (res->nts[k] >= mma_from) gu = dn = 0;
        for (int c = 1; c < res->n_cand; c++)
            res->cand[c].same_launch = gu && res->cand[c].gu_rows == gu && res->cand[c].dn_rows == dn;
    }
    char key[128];
    st_tune_shape_key(s, key, sizeof key);
    /* 9 rounds: the fewest whose [min, max] covers the median at the
     * confidence the keep rule asks of each of 6 candidates */
    int rounds = o->rounds > 0 ? o->rounds : o->quick ? 9 : 15;
    if (rounds < 6) rounds = 6; /* fewer cannot give a 95% interval */
    if (rounds > ST_TUNE_MAX_ROUNDS) rounds = ST_TUNE_MAX_ROUNDS;
    res->n_rounds = rounds;
    double *samples = calloc((size_t)ST_TUNE_MAX_CAND * (size_t)rounds, sizeof *samples);
    if (st == ST_OK && !samples) st = st_fail(ST_ERR_NOMEM, "tune: out of memory");
    for (int k = 0; k < res->n_nts && st == ST_OK; k++) {
        st = compare(&r, res, res->nts[k]);
        if (st != ST_OK) break;
        st_timing t[ST_TUNE_MAX_CAND];
        st_measure_spec spec = {res->n_cand, rounds, 0, o->quick ? 1 : 3, launch, &r, o->stop, samples};
        r.nt = res->nts[k];
        st = st_measure(ctx, &spec, t);
        for (int c = 0; c < res->n_cand && st == ST_OK; c++) {
            res->cand[c].t[k] = t[c];
            res->cand[c].blended_us += t[c].median_us;
            res->cand[c].blended_p25 += t[c].p25_us;
            res->cand[c].blended_p75 += t[c].p75_us;
            for (int i = 0; i < rounds; i++) res->cand[c].round_us[i] += samples[(size_t)c * rounds + i];
        }
        if (!o->quiet && st == ST_OK) {
            const double el = now_s() - t_start;
            const double per = el / ((idx) + (double)(k + 1) / res->n_nts);
            st_log("tune: [%d/%d] %s n_tokens %d: default %.2f us, %d candidates; %.0f s elapsed, ~%.0f s left", idx + 1,
                   total, key, res->nts[k], t[0].median_us, res->n_cand, el, per * total - el);
        }
    }
    free(samples);
    if (st == ST_OK) {
        st_tune_decide(res, o->threshold);
        for (int c = 1; c < res->n_cand; c++)
            if (!res->cand[c].bytes_match)
                st_log("tune: BUG: %s %s differs from the default: %s (disqualified)", key, res->cand[c].name,
                       res->cand[c].mismatch);
        if (!o->quiet) st_log("tune: [%d/%d] %s: %s%s", idx + 1, total, key, res->reason, res->noisy ? " [noise]" : "");
    }
    return st;
}

static st_status build_table(st_ctx *ctx, const st_tune_shape_result *r, int n, const st_provenance *prov, st_table **out,
                             int *kept)
{
    st_table *t = NULL;
    ST_TRY(st_table_create(st_ctx_identity(ctx), &t));
    st_status s = st_provenance_to_table(t, prov);
    /* the token counts tuned (the expert shapes', else the mmvq blend's):
     * `coverage` asks a model's expert shapes for these */
    bool any_expert = false;
    for (int k = 0; k < n; k++) any_expert |= r[k].shape.kind == ST_SHAPE_EXPERT;
    int mix[ST_MAX_TOKENS], n_mix = 0;
    for (int i = 0; i < ST_MAX_TOKENS; i++) {
        bool in = false;
        for (int k = 0; k < n; k++)
            if ((r[k].shape.kind == ST_SHAPE_EXPERT) == any_expert)
                for (int j = 0; j < r[k].n_nts; j++) in |= r[k].nts[j] == i + 1;
        if (in) mix[n_mix++] = i + 1;
    }
    if (s == ST_OK) s = st_table_set_ntok_mix(t, mix, n_mix);
    *kept = 0;
    for (int i = 0; i < n && s == ST_OK; i++) {
        const st_tune_shape *sh = &r[i].shape;
        const st_tune_cand *c = &r[i].cand[r[i].best];
        const st_mmvq_key mk = {sh->type, sh->rows, sh->cols};
        const st_expert_key ek = {sh->type, sh->down_type, sh->n_embd, sh->n_ff, sh->n_tokens};
        const bool mmvq = sh->kind == ST_SHAPE_MMVQ;
        if (r[i].best == 0) {
            s = mmvq ? st_table_add_tuned_default_mmvq(t, &mk) : st_table_add_tuned_default_expert(t, &ek);
            continue;
        }
        (*kept)++;
        s = mmvq ? st_table_add_mmvq(t, &mk, c->rows) : st_table_add_expert(t, &ek, c->gu_rows, c->dn_rows);
    }
    if (s != ST_OK) {
        st_table_destroy(t);
        return s;
    }
    *out = t;
    return ST_OK;
}

/* The re-tune rule against OLD, this identity's table this run merges
 * into (NULL: none): each shape's previous choice stays unless this run's
 * choice is faster than it beyond the threshold and the noise
 * (st_tune_keep_previous); each change and each kept choice that this run
 * alone would have changed is logged. Returns the number of changed shapes
 * (-1 when there is no previous table for this identity). */
static int apply_previous(const st_table *old, st_tune_shape_result *r, int n, double thr, bool quiet)
{
    for (int i = 0; i < n; i++) r[i].previous = -1;
    if (!old) return -1;
    int changed = 0, compared = 0, kept_old = 0;
    for (int i = 0; i < n; i++) {
        const st_tune_shape *sh = &r[i].shape;
        int a = 0, b = 0;
        bool hit, dflt;
        if (sh->kind == ST_SHAPE_MMVQ) {
            st_mmvq_key k = {sh->type, sh->rows, sh->cols};
            hit = st_table_lookup_mmvq(old, &k, &a);
            dflt = !hit && st_table_tuned_default_mmvq(old, &k);
        } else {
            st_expert_key k = {sh->type, sh->down_type, sh->n_embd, sh->n_ff, sh->n_tokens};
            hit = st_table_lookup_expert(old, &k, &a, &b);
            dflt = !hit && st_table_tuned_default_expert(old, &k);
        }
        if (!hit && !dflt) continue; /* not measured before: this run decides alone */
        int prev = 0;
        for (int c = 1; hit && c < r[i].n_cand; c++) {
            const st_tune_cand *x = &r[i].cand[c];
            if (sh->kind == ST_SHAPE_MMVQ ? x->rows == a : (x->gu_rows == a && x->dn_rows == b)) prev = c;
        }
        r[i].previous = prev;
        compared++;
        const int mine = r[i].best;
        const bool differs = st_tune_keep_previous(&r[i], thr);
        changed += differs;
        kept_old += !differs && mine != prev;
        char key[128];
        st_tune_shape_key(sh, key, sizeof key);
        if (!quiet && (differs || mine != prev))
            st_log("tune: %s: %s", key, r[i].reason);
    }
    if (!quiet)
        st_log("tune: %d of %d choices changed since the previous table for this identity (%d kept against this run's "
               "choice: not beyond the threshold and the noise)",
               changed, compared, kept_old);
    return changed;
}

st_status st_tune_gate(st_ctx *ctx, const st_tune_options *o, const st_tune_shape_result *r, int n, const char *table_path,
                       st_verify_result *vr);

/* Device memory the run needs at its peak: the largest weight rotation of
 * the sweep, or the gate's model with its buffers (the rotation is freed
 * before the gate runs), plus scratch. */
static size_t memory_need(st_ctx *ctx, const st_tune_options *o, const st_model *m, const st_tune_shape *sh, int n,
                          size_t *rot_max, size_t *gate)
{
    const size_t llc = st_ctx_llc(ctx, NULL);
    *rot_max = *gate = 0;
    for (int i = 0; i < n; i++) {
        const size_t one = shape_bytes(&sh[i]);
        const size_t rot = (size_t)st_rotation_copies(one, llc, rotation_floor(ctx, o, one), 1, NULL) * one;
        if (rot > *rot_max) *rot_max = rot;
    }
    if (m && o->n_shapes == 0) {
        for (size_t i = 0; i < st_model_expert_layer_count(m); i++) {
            const st_model_expert_layer *l = st_model_expert_layer_at(m, i);
            *gate += 2 * l->gu_bytes + l->down_bytes + sizeof(float) * ST_MAX_TOKENS * 2 * (size_t)l->n_embd;
        }
        for (size_t i = 0; i < st_model_matrix_count(m); i++) {
            const st_model_matrix *x = st_model_matrix_at(m, i);
            if (x->type != ST_QTYPE_NONE && x->data)
                *gate += x->bytes + sizeof(float) * ST_MAX_TOKENS * (size_t)(x->n_rows + x->n_cols);
        }
    } else {
        for (int i = 0; i < n; i++) {
            bool dup = false; /* the gate runs one layer per expert shape (st_tune_gate) */
            for (int j = 0; j < i && sh[i].kind == ST_SHAPE_EXPERT; j++)
                dup |= sh[j].kind == ST_SHAPE_EXPERT && sh[j].type == sh[i].type && sh[j].down_type == sh[i].down_type &&
                       sh[j].n_embd == sh[i].n_embd && sh[j].n_ff == sh[i].n_ff;
            if (!dup) *gate += shape_bytes(&sh[i]) + sizeof(float) * ST_MAX_TOKENS * 2 * (size_t)(sh[i].rows + sh[i].cols + sh[i].n_embd);
        }
    }
    return (*rot_max > *gate ? *rot_max : *gate) + ((size_t)64 << 20);
}

/* What the outputs take, reserved before the sweep (the probe): the
 * report grows with the points it records, one per shape and token count
 * (an mmvq shape is tuned at each count of the mix, an expert shape at its
 * own). Measured on one mmvq shape (CPU): JSON 36 KB and page 14 KB at the
 * default 1..8, 121 KB and 23 KB at 1..32, so about 4.5 KB a point for
 * both; an expert shape at one count, 8 KB and 10 KB with the fixed parts.
 * Reserved: 6 KiB a point, 2 KiB a shape (the table's line, the index's
 * entry), 32 KiB for the fixed parts (page header, the journal, the
 * manifest); the index and the merged table (what the folder's files make
 * them) are added where the folder is opened (tune_out.c folder_bytes).
 * The old files stay while the new ones are written (links for
 * the roll back), so this is what the install adds at its peak. Each of
 * the files (table, gate candidate, JSON, page, manifest, journal, index
 * and its temporary copy) takes whole blocks of the file system: one
 * block more each for the rounding (a tmpfs of 100 KiB took the sweep of
 * a 96 KiB reservation and then failed at the journal). */
static size_t output_bytes(const st_tune_options *o, const st_tune_shape *s, int n)
{
    const size_t per_point = (size_t)6 << 10, per_shape = (size_t)2 << 10;
    const int mix = o->n_ntok_mix > 0 ? o->n_ntok_mix : ST_DECODE_TOKENS;
    size_t bytes = (size_t)32 << 10;
    bytes += 8 * st_out_blocks(o->out_dir ? o->out_dir : ".", 1); /* one block a file */
    for (int i = 0; i < n; i++) bytes += per_shape + per_point * (size_t)(s[i].kind == ST_SHAPE_MMVQ ? mix : 1);
    return bytes;
}

/* A failure's message, kept across later work (the report) that may fail
 * and record its own. */
static st_status keep_error(st_status s, char *buf, size_t n)
{
    snprintf(buf, n, "%s", st_last_error());
    return s;
}

/* Whether the table T to install can change the gate's decode step: a
 * variant this run kept, or a row merged from an earlier run for a shape of
 * the model M (the gate runs the whole model). */
static bool gate_needed(const st_tune_options *o, const st_model *m, const st_table *t, int kept)
{
    if (kept > 0) return true;
    if (!m || o->n_shapes) return false; /* the gate runs this run's shapes only */
    int a, b;
    for (size_t i = 0; i < st_model_mmvq_shape_count(m); i++) {
        const st_model_mmvq_shape *s = st_model_mmvq_shape_at(m, i);
        const st_mmvq_key k = {s->type, s->n_rows, s->n_cols};
        if (st_table_lookup_mmvq(t, &k, &a)) return true;
    }
    for (size_t i = 0; i < st_model_expert_shape_count(m); i++)
        for (int nt = 1; nt <= ST_MAX_TOKENS; nt++) {
            const st_model_expert_shape *s = st_model_expert_shape_at(m, i);
            const st_expert_key k = {s->gu_type, s->down_type, s->n_embd, s->n_ff, nt};
            if (st_table_lookup_expert(t, &k, &a, &b)) return true;
        }
    return false;
}

/* Gate verdict -> what the run returns and the one line why nothing was
 * installed. */
static st_status gate_outcome(const st_verify_result *vr)
{
    switch (vr->verdict) {
    case ST_GATE_PASS: return ST_OK;
    case ST_GATE_FAIL_BYTES:
        return st_fail(ST_ERR_MISMATCH, "the table was NOT installed: the end-to-end gate found different bytes (a bug): %s",
                       vr->message);
    case ST_GATE_UNDECIDED:
        return st_fail(ST_ERR_UNDECIDED, "the table was NOT installed: the end-to-end gate %s", vr->message);
    default:
        return st_fail(ST_ERR_REFUSED, "the table was NOT installed: the end-to-end gate refused it: %s", vr->message);
    }
}

/* Builds, gates and installs the table of R[0..N) into OUT with the
 * report; fills RES, VERDICT, X (the report's extra: the gate when it ran)
 * and *GATE_REFUSED when the gate refused the table (nothing installed). */
static st_status install(st_ctx *ctx, const st_tune_options *o, const st_model *model, const st_tune_shape_result *r,
                         int n, st_tune_out *out, st_tune_result *res, char *verdict, size_t vn, st_verify_result *vr,
                         st_tune_report_extra *x, bool *gate_refused)
{
    const st_identity *id = st_ctx_identity(ctx);
    st_table *t = NULL;
    st_status st = build_table(ctx, r, n, x->prov, &t, &res->kept_variants);
    if (st == ST_OK) st = st_tune_out_merge(out, t, r, n);
    char *text = NULL;
    size_t len = 0;
    if (st == ST_OK) st = st_table_format(t, &text, &len);
    /* The gate runs on a candidate file beside the table; only a passing
     * table is installed. The table as it will be installed: merged rows
     * from an earlier run can reach this model's step too. */
    char *cand = NULL;
    if (st == ST_OK && !o->no_verify && gate_needed(o, model, t, res->kept_variants)) {
        const size_t cn = strlen(out->table_path) + 16;
        cand = malloc(cn);
        if (!cand) st = st_fail(ST_ERR_NOMEM, "tune: out of memory");
        else snprintf(cand, cn, "%s.candidate", out->table_path);
    }
    const int slot = cand ? st_tmpfile_track(cand) : -1;
    if (cand) {
        st = st_table_write_atomic(t, cand);
        if (st == ST_OK) st = st_tune_gate(ctx, o, r, n, cand, vr);
        unlink(cand);
        st_tmpfile_untrack(slot);
        if (st == ST_OK) {
            res->gate = vr->verdict;
            x->gate = vr;
            snprintf(verdict, vn, "%s", vr->message);
            /* a refusal's one line is the run's error (nothing installed) */
            if (!o->quiet && vr->verdict == ST_GATE_PASS) st_log("tune: gate: %s", vr->message);
            st = gate_outcome(vr);
            *gate_refused = st != ST_OK;
        }
    } else if (st == ST_OK) {
        snprintf(verdict, vn, "%s",
                 o->no_verify ? "gate skipped (--no-verify)"
                              : "gate not needed: no row of the table reaches this run's decode step (every shape kept the default)");
    }
    free(cand);
    /* What loading it will say, from the very bytes: the report records it
     * and is written before the table is put in place. */
    char engage[ST_TABLE_MSG_MAX] = "";
    if (st == ST_OK) {
        st_table *back = NULL;
        res->table_written = true;
        res->engaged = st_table_parse(text, len, out->table_path, id, st_ctx_dispatch(ctx), &back, engage,
                                      sizeof engage) == ST_OK;
        st_table_destroy(back);
        st_clear_error();
        x->engage_line = engage;
        x->verify_line = verdict;
        char *report = st_tune_report_text(ctx, o, r, n, res, x), *page = NULL;
        size_t page_len = 0;
        st = report ? st_report_html_render(report, strlen(report), strrchr(out->report_path, '/') + 1, &page, &page_len)
                    : st_fail(ST_ERR_NOMEM, "report: out of memory");
        if (st == ST_OK)
            st = st_tune_out_install(out, id, st_ctx_dispatch(ctx), text, len, report, strlen(report), page, page_len);
        free(report);
        free(page);
        x->engage_line = "";
        if (st != ST_OK) res->table_written = res->engaged = false;
    }
    if (st == ST_OK) { /* the table as any process finds it */
        char line[ST_TABLE_MSG_MAX];
        st_table *back = NULL;
        res->engaged = st_table_load_msg(out->table_path, id, st_ctx_dispatch(ctx), &back, line, sizeof line) == ST_OK &&
                       back != NULL;
        st_table_destroy(back);
        st_log("%s", line);
    }
    free(text);
    st_table_destroy(t);
    return st;
}

static void result_defaults(st_tune_result *d)
{
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->changed_vs_previous = -1;
}

void st_tune_result_init_size(st_tune_result *r, size_t size)
{
    st_tune_result d;
    result_defaults(&d);
    st_struct_init(r, size, &d, sizeof d);
}

void st_tune_result_clear(st_tune_result *r)
{
    if (!st_struct_size_of(r)) return;
    if (st_struct_has(r, offsetof(st_tune_result, report_path) + sizeof r->report_path)) {
        free(r->table_path);
        free(r->report_path);
    }
    st_tune_result d;
    result_defaults(&d);
    st_struct_out(r, &d, sizeof d);
}

static st_status tune_run(st_ctx *ctx, const st_tune_options *o, st_tune_result *res);

st_status st_tune_run(st_ctx *ctx, const st_tune_options *opt, st_tune_result *res)
{
    if (!ctx) return st_fail(ST_ERR_INVALID_ARG, "tune: no context");
    ST_TRY(st_struct_ready(res, "tune"));
    st_tune_options o;
    st_tune_options_default(&o);
    ST_TRY(st_struct_in(&o, sizeof o, opt, "tune: the options"));
    if (o.n_ntok_mix < 0 || o.n_ntok_mix > ST_MAX_TOKENS || (o.n_ntok_mix && !o.ntok_mix) || o.n_expert_ntok < 0 ||
        o.n_expert_ntok > ST_MAX_TOKENS || (o.n_expert_ntok && !o.expert_ntok))
        return st_fail(ST_ERR_INVALID_ARG, "tune: a token mix names 1..%d token counts", ST_MAX_TOKENS);
    bool expert_given = false;
    for (int i = 0; i < o.n_shapes && o.shapes; i++) {
        st_tune_shape sh;
        if (o.shapes[i] && st_tune_parse_shape(o.shapes[i], o.n_expert, o.topk, &sh) == ST_OK)
            expert_given |= sh.kind == ST_SHAPE_EXPERT;
    }
    st_clear_error();
    if (o.in_place && (o.n_shapes ? expert_given : o.do_expert))
        return st_fail(ST_ERR_INVALID_ARG, "tune: the in-place layout tunes iq_mmvq shapes only (its MoE calls run the "
                       "default): tune the expert shapes without in_place, or set do_expert false");
    st_tune_result r;
    st_tune_result_init(&r);
    const st_status s = tune_run(ctx, &o, &r);
    st_tune_result_clear(res);
    /* the paths go to the caller when its struct has room for them */
    if (!st_struct_has(res, offsetof(st_tune_result, report_path) + sizeof r.report_path)) {
        free(r.table_path);
        free(r.report_path);
        r.table_path = r.report_path = NULL;
    }
    st_struct_out(res, &r, sizeof r);
    return s;
}

static st_status tune_run(st_ctx *ctx, const st_tune_options *o, st_tune_result *res)
{
    /* A knob reroutes the default dispatch: the tuner would time that path
     * as "the default", and the table (which records no knob) would then
     * engage in a clean environment. The loader refuses tables while a knob
     * is set; the tuner refuses to make them. */
    const int knob = st_dispatch_config_first_active(st_ctx_dispatch(ctx));
    if (knob >= 0)
        return st_fail(ST_ERR_REFUSED,
                       "tune: %s is set: it reroutes the decode dispatch, so the tuner would time that path as the default; "
                       "unset it to tune",
                       st_knob_label((st_knob)knob));
    st_model *model = NULL;
    if (o->model_path && o->n_shapes == 0) {
        st_status ms = st_model_open(o->model_path, &model);
        if (ms != ST_OK) {
            char why[4096];
            snprintf(why, sizeof why, "%s", st_last_error());
            return st_fail(ms, "%s: %s", o->model_path, why);
        }
        if (!o->quiet) st_model_log_skips(model, "tune");
    }
    st_tune_shape *shapes = NULL;
    int n = 0;
    st_status st = st_tune_shapes(o, model, &shapes, &n);
    st_tune_shape_result *r = st == ST_OK ? calloc((size_t)n, sizeof *r) : NULL;
    if (st == ST_OK && !r) st = st_fail(ST_ERR_NOMEM, "tune: out of memory");
    if (st == ST_OK) st = st_tune_shapes_fit(ctx, shapes, n, o);
    char name[128];
    st_tune_file_name(model ? st_model_name(model) : o->n_shapes ? "shapes" : "demo", name, sizeof name);
    const st_identity *id = st_ctx_identity(ctx);
    st_tune_report_extra x;
    memset(&x, 0, sizeof x);
    x.llc = st_ctx_llc(ctx, &x.llc_source);
    size_t rot_max = 0, gate_bytes = 0;
    if (st == ST_OK) {
        x.need_bytes = memory_need(ctx, o, model, shapes, n, &rot_max, &gate_bytes);
        st = st_ctx_mem_info(ctx, &x.free_bytes, &x.total_bytes);
        if (st == ST_OK)
            st = st_tune_check_memory(x.need_bytes, rot_max, gate_bytes, x.free_bytes, x.total_bytes,
                                      st_ctx_backend(ctx) == ST_BACKEND_GPU);
    }
    st_tune_out out;
    memset(&out, 0, sizeof out);
    out.lock_fd = out.lock_slot = -1;
    if (st == ST_OK)
        st = st_tune_out_open_input(&out, o->out_dir ? o->out_dir : ".", name, o->report_per_device ? st_ctx_device(ctx) : -1,
                                    id, o->force, output_bytes(o, shapes, n), model ? o->model_path : NULL);
    out.stop = o->stop;
    if (st == ST_OK) {
        res->table_path = strdup(out.table_path);
        res->report_path = strdup(out.report_path);
        if (!res->table_path || !res->report_path) st = st_fail(ST_ERR_NOMEM, "tune: out of memory");
    }
    if (st == ST_OK) {
        if (!o->quiet && out.existing)
            st_log("tune: %s is this process's table in %s: this run's shapes are merged into it (its other %zu rows "
                   "stay)",
                   out.table_path, out.dir, st_table_count(out.existing));
    }
    st_provenance prov;
    memset(&prov, 0, sizeof prov);
    if (st == ST_OK) st = st_tune_provenance(ctx, o, name, out.report_path, &prov);
    if (st == ST_OK && !o->quiet) {
        char devno[32] = "";
        if (st_ctx_backend(ctx) == ST_BACKEND_GPU) snprintf(devno, sizeof devno, "device %d, ", st_ctx_device(ctx));
        st_log("tune: %d shapes on %s%s (%s%s%s), threshold %.1f%%%s", n, devno, id->device_name, id->arch,
               id->model[0] ? ", " : "", id->model, 100 * o->threshold, o->quick ? ", quick" : "");
        if (x.llc)
            st_log("tune: last-level cache %.0f MB (%s): every matrix rotates over at least %.0f MB", x.llc / 1048576.0,
                   x.llc_source, 4 * x.llc / 1048576.0);
        else
            st_log("tune: last-level cache: %s; weights are not rotated", x.llc_source);
        st_log("tune: memory: the run needs %.2f GB, %.2f GB of %.2f GB are free", x.need_bytes / 1e9,
               x.free_bytes / 1e9, x.total_bytes / 1e9);
    }
    const double t0 = now_s();
    run_ctx cache[1];
    memset(cache, 0, sizeof cache);
    for (int i = 0; i < n && st == ST_OK; i++) {
        st_file_step(); /* a test's signal lands here (file_write.h) */
        if (o->stop && *o->stop) st = st_fail(ST_ERR_INTERRUPTED, "interrupted");
        if (st == ST_OK) st = tune_shape(ctx, o, &shapes[i], &r[i], i, n, t0, cache);
        if (st == ST_OK) {
            res->shapes++;
            for (int c = 1; c < r[i].n_cand; c++) res->mismatches += !r[i].cand[c].bytes_match;
            if (r[i].rotation_short && !o->quiet)
                st_log("tune: [%d/%d] note: %d copies (the cap) of this shape rotate %.1f MB, less than 4x the "
                       "last-level cache: its timings may partly come from the cache",
                       i + 1, n, r[i].copies, r[i].rotation_bytes / 1048576.0);
        }
    }
    if (cache[0].s) free_run(&cache[0]);
    if (st == ST_OK) res->changed_vs_previous = apply_previous(out.existing, r, n, o->threshold, o->quiet);
    for (int i = 0; i < res->shapes; i++) res->noisy += r[i].noisy;
    char campaign[2][400] = {"", ""};
    for (int k = 0; k < 2 && st == ST_OK; k++)
        if (st_tune_campaign(r, n, k ? ST_SHAPE_MMVQ : ST_SHAPE_EXPERT, o->threshold, campaign[k], sizeof campaign[k])) {
            x.campaign[k] = campaign[k];
            if (!o->quiet) st_log("tune: %s", campaign[k]);
        }
    char verdict[700] = "", why[4096] = "";
    st_verify_result vr;
    st_verify_result_init(&vr);
    x.prov = &prov;
    x.engage_line = "";
    x.verify_line = verdict;
    bool gate_refused = false;
    const bool swept = st == ST_OK;
    if (st == ST_OK) st = install(ctx, o, model, r, n, &out, res, verdict, sizeof verdict, &vr, &x, &gate_refused);
    /* the report's page and the folder's tables.json, beside them */
    if (st == ST_OK) st = st_tune_outputs(ctx, o, out.dir, out.report_path, out.table_path, false);
    /* a run that installed nothing still reports what it measured (the
     * report records a refused run too, with the reason), unless it was
     * interrupted or its outputs are what failed */
    if (st != ST_OK && r && res->shapes > 0 && st != ST_ERR_INTERRUPTED && out.report_path && (!swept || gate_refused)) {
        keep_error(st, why, sizeof why);
        /* the installed table's report stays its own: a run that installed
         * nothing over it reports beside it (tune_out.h) */
        const char *rp = out.existing_text ? out.refused_path : out.report_path;
        if (rp != out.report_path && res->report_path) {
            free(res->report_path);
            res->report_path = strdup(rp);
        }
        if (st_tune_write_report(rp, ctx, o, r, res->shapes, res, &x) != ST_OK ||
            st_tune_outputs(ctx, o, out.dir, rp, out.table_path, true) != ST_OK)
            st_log("tune: %s", st_last_error());
        st_fail(st, "%s", why);
    } else if (st != ST_OK && st != ST_ERR_INTERRUPTED && swept && !gate_refused && !res->table_written && res->report_path) {
        /* the install failed on its outputs and rolled them back: no report
         * stands for this run (what stands at the path is an older run's) */
        free(res->report_path);
        res->report_path = NULL;
    }
    st_tune_out_close(&out);
    st_verify_result_clear(&vr);
    if (st == ST_OK && res->mismatches) st = st_fail(ST_ERR_MISMATCH, "%d candidates differed from the default", res->mismatches);
    free(r);
    free(shapes);
    st_model_close(model);
    return st;
}
