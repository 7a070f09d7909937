/* The CPU reference: canonical-order dot products (docs/DESIGN.md section 2).
 * Each row is computed by one thread from start to end, so the split of rows
 * over threads cannot change a bit. */
#include "strata/limits.h"
#include "strata/reference.h"
#include "strata/variants.h"
#include "cpu_pool.h"
#include "cpu_unit.h"
#include "internal.h"
#include "reference_internal.h"
#include "st_canon.h"

#include <stdlib.h>
#include <string.h>

#define MAX_TOK ST_MAX_PAIRS /* vectors sharing one row pass (expert pairs included) */

/* Adds unit U (decoded: UN) of a row to stream S of N vectors' accumulators
 * ACC[i * NS + S] with the q8_1 vectors XQ[i], in canonical order. */
static void unit_into_streams(const st_unit *un, int64_t u, const uint8_t *const *xq, int n, float *acc, int ns,
                              int s)
{
    for (int i = 0; i < n; i++) {
        const uint8_t *blk = xq[i] + u * ST_Q8_1_BLOCK_BYTES;
        const float da = st_half_to_float((uint16_t)(blk[0] | (blk[1] << 8)));
        const int8_t *q = (const int8_t *)(blk + 4);
        int32_t isum = 0;
        for (int j = 0; j < 32; j++) isum += (int32_t)un->w[j] * q[j];
        float a = st_canon_unit(un->W, da, isum, acc[i * ns + s]);
        if (un->has_min) {
            int32_t q0 = 0, q1 = 0;
            for (int j = 0; j < 16; j++) {
                q0 += q[j];
                q1 += q[j + 16];
            }
            a = st_canon_unit_min(un->M, da, un->mf[0] * q0 + un->mf[1] * q1, a);
        }
        acc[i * ns + s] = a;
    }
}

/* Dots of one row of type T (K values at ROW) with N q8_1 vectors XQ[i],
 * in canonical order with NG stream groups (1, or ST_CANON_WIDE_GROUPS for
 * a wide iq_mmvq row: then N <= ST_MAX_TOKENS); results in Y[i]. */
static void row_dot(st_qtype t, const uint8_t *row, int64_t k, const uint8_t *const *xq, int n, int ng, float *y)
{
    const int64_t nu = k / ST_CANON_UNIT;
    st_unit un;
    if (ng == 1) {
        float acc[MAX_TOK * ST_CANON_STREAMS];
        memset(acc, 0, sizeof(float) * ST_CANON_STREAMS * (size_t)n);
        for (int64_t u = 0; u < nu; u++) {
            st_unit_decode(t, row, u, &un);
            unit_into_streams(&un, u, xq, n, acc, ST_CANON_STREAMS, (int)(u % ST_CANON_STREAMS));
        }
        for (int i = 0; i < n; i++) y[i] = st_canon_combine32(acc + (size_t)i * ST_CANON_STREAMS);
        return;
    }
    enum { S = ST_CANON_STREAMS * ST_CANON_WIDE_GROUPS };
    float acc[ST_MAX_TOKENS * S];
    memset(acc, 0, sizeof(float) * S * (size_t)n);
    for (int64_t u = 0; u < nu; u++) {
        st_unit_decode(t, row, u, &un);
        unit_into_streams(&un, u, xq, n, acc, S, (int)(u % S));
    }
    for (int i = 0; i < n; i++) {
        float g[ST_CANON_WIDE_GROUPS];
        for (int q = 0; q < ST_CANON_WIDE_GROUPS; q++) g[q] = st_canon_combine32(acc + (size_t)i * S + ST_CANON_STREAMS * q);
        y[i] = st_canon_groups4(g[0], g[1], g[2], g[3]);
    }
}

static int64_t auto_chunk(int64_t rows, int threads)
{
    int64_t c = rows / ((int64_t)threads * 8);
    return c < 1 ? 1 : c;
}

static int split_threads(const st_cpu_split *s) { return s ? s->n_threads : 0; }

static int64_t split_chunk(const st_cpu_split *s, const st_cpu_pool *pool, int64_t rows)
{
    if (s && s->rows_per_chunk > 0) return s->rows_per_chunk;
    int th = split_threads(s) > 0 ? split_threads(s) : pool ? st_cpu_pool_threads(pool) : st_cpu_count();
    return auto_chunk(rows, th);
}

static st_status check_matrix(st_qtype t, const void *w, int64_t rows, int64_t k)
{
    if (!st_qtype_valid(t)) return st_fail(ST_ERR_INVALID_ARG, "unknown weight type %d", (int)t);
    if (!w || rows <= 0 || k <= 0)
        return st_fail(ST_ERR_INVALID_ARG, "empty %s matrix (%lld x %lld)", st_qtype_name(t),
                       (long long)rows, (long long)k);
    if (k % st_qtype_block_values(t) != 0)
        return st_fail(ST_ERR_INVALID_ARG, "row length %lld is not a multiple of %d, the block of %s",
                       (long long)k, st_qtype_block_values(t), st_qtype_name(t));
    return ST_OK;
}

/* ---- iq_mmvq ---------------------------------------------------------- */
typedef struct {
    st_qtype t;
    const uint8_t *w;
    size_t row_bytes;
    int64_t rows, k;
    const uint8_t *xq[ST_MAX_TOKENS];
    int nt;
    float *y;
    int64_t y_stride; /* floats between tokens' outputs */
} mmvq_job;

static void mmvq_range(void *ctx, int64_t b, int64_t e)
{
    mmvq_job *j = ctx;
    float out[ST_MAX_TOKENS];
    for (int64_t r = b; r < e; r++) {
        row_dot(j->t, j->w + (size_t)r * j->row_bytes, j->k, j->xq, j->nt, st_canon_mmvq_groups(j->k / ST_CANON_UNIT), out);
        for (int i = 0; i < j->nt; i++) j->y[(size_t)i * (size_t)j->y_stride + (size_t)r] = out[i];
    }
}

st_status st_ref_mmvq(st_qtype t, const void *w, int64_t rows, int64_t k, const void *xq, int nt,
                      float *y, const st_cpu_split *split)
{
    return st_ref_mmvq_pool(t, w, rows, k, xq, nt, y, rows, split, NULL);
}

st_status st_ref_mmvq_pool(st_qtype t, const void *w, int64_t rows, int64_t k, const void *xq, int nt, float *y,
                           int64_t y_stride, const st_cpu_split *split, st_cpu_pool *pool)
{
    ST_TRY(check_matrix(t, w, rows, k));
    if (!xq || !y) return st_fail(ST_ERR_INVALID_ARG, "iq_mmvq: NULL activations or output");
    if (nt < 1 || nt > ST_MAX_TOKENS)
        return st_fail(ST_ERR_INVALID_ARG, "iq_mmvq: n_tokens %d is out of range 1..%d (ST_MAX_TOKENS)", nt, ST_MAX_TOKENS);
    mmvq_job j = {t, w, st_qtype_row_bytes(t, k), rows, k, {0}, nt, y, y_stride};
    for (int i = 0; i < nt; i++)
        j.xq[i] = (const uint8_t *)xq + (size_t)i * (size_t)(k / 32) * ST_Q8_1_BLOCK_BYTES;
    st_parallel_for(pool, rows, split_chunk(split, pool, rows), split_threads(split), mmvq_range, &j);
    return ST_OK;
}

/* ---- expert_grouped --------------------------------------------------- */
typedef struct {
    const st_expert_weights *ew;
    int n_used;             /* unique experts, first-seen order */
    int expert[ST_MAX_PAIRS];        /* expert id of group g */
    int first[ST_MAX_PAIRS + 1];     /* pairs of group g: pair_list[first[g] .. first[g+1]) */
    int pair_list[ST_MAX_PAIRS];     /* pair index p = t*topk + k */
    const uint8_t *xq_pair[ST_MAX_PAIRS];
    float *h;               /* [pairs][n_ff] */
    uint8_t *hq;            /* [pairs][n_ff/32 * 36] */
    float *y;               /* [pairs][n_embd] */
    size_t hq_stride;
    const st_ffn_options *o;    /* activation, biases, strides */
} expert_job;

/* The gate-up combine: the activation of O (st_canon.h) of G and U. */
static float combine(const st_ffn_options *o, float g, float u)
{
    switch (o->act) {
    case ST_ACT_GELU: return st_gelu_mul(g, u);
    case ST_ACT_SWIGLU_OAI: return st_swiglu_oai_mul(g, u, o->alpha, o->limit);
    default: return st_silu_mul(g, u);
    }
}

static void gate_up_range(void *ctx, int64_t b, int64_t e)
{
    expert_job *j = ctx;
    const st_expert_weights *ew = j->ew;
    const size_t rb = st_qtype_row_bytes(ew->gu_type, ew->n_embd);
    const uint8_t *xs[ST_MAX_PAIRS];
    float g[ST_MAX_PAIRS], u[ST_MAX_PAIRS];
    for (int64_t item = b; item < e; item++) {
        int grp = (int)(item / ew->n_ff);
        int r = (int)(item % ew->n_ff);
        int n = j->first[grp + 1] - j->first[grp];
        const int *pl = j->pair_list + j->first[grp];
        for (int i = 0; i < n; i++) xs[i] = j->xq_pair[pl[i]];
        size_t row = (size_t)j->expert[grp] * (size_t)ew->n_ff + (size_t)r;
        row_dot(ew->gu_type, (const uint8_t *)ew->gate + row * rb, ew->n_embd, xs, n, 1, g);
        row_dot(ew->gu_type, (const uint8_t *)ew->up + row * rb, ew->n_embd, xs, n, 1, u);
        const st_ffn_options *o = j->o;
        const size_t bi = (size_t)j->expert[grp] * (size_t)ew->n_ff + (size_t)r;
        for (int i = 0; i < n; i++) {
            /* a bias is added to the finished dot, once */
            const float gv = o->gate_bias ? st_fadd(g[i], o->gate_bias[bi]) : g[i];
            const float uv = o->up_bias ? st_fadd(u[i], o->up_bias[bi]) : u[i];
            j->h[(size_t)pl[i] * (size_t)ew->n_ff + (size_t)r] = combine(o, gv, uv);
        }
    }
}

static void down_range(void *ctx, int64_t b, int64_t e)
{
    expert_job *j = ctx;
    const st_expert_weights *ew = j->ew;
    const size_t rb = st_qtype_row_bytes(ew->down_type, ew->n_ff);
    const uint8_t *hs[ST_MAX_PAIRS];
    float y[ST_MAX_PAIRS];
    for (int64_t item = b; item < e; item++) {
        int grp = (int)(item / ew->n_embd);
        int r = (int)(item % ew->n_embd);
        int n = j->first[grp + 1] - j->first[grp];
        const int *pl = j->pair_list + j->first[grp];
        for (int i = 0; i < n; i++) hs[i] = j->hq + (size_t)pl[i] * j->hq_stride;
        size_t row = (size_t)j->expert[grp] * (size_t)ew->n_embd + (size_t)r;
        row_dot(ew->down_type, (const uint8_t *)ew->down + row * rb, ew->n_ff, hs, n, 1, y);
        const float *db = j->o->down_bias;
        const size_t bi = (size_t)j->expert[grp] * (size_t)ew->n_embd + (size_t)r;
        for (int i = 0; i < n; i++) j->y[(size_t)pl[i] * (size_t)ew->n_embd + (size_t)r] = db ? st_fadd(y[i], db[bi]) : y[i];
    }
}

static st_status check_experts(const st_expert_weights *ew, const float *x, const int32_t *ids,
                               const float *wts, int nt, int topk, const float *out)
{
    if (!ew || !x || !ids || !wts || !out) return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: NULL argument");
    if (nt < 1 || nt > ST_MAX_TOKENS)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: n_tokens %d is out of range 1..%d (ST_MAX_TOKENS)", nt, ST_MAX_TOKENS);
    if (topk < 1 || topk > ST_MAX_TOPK)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: top-k %d is out of range 1..%d (ST_MAX_TOPK)", topk, ST_MAX_TOPK);
    if (ew->n_expert < 1 || ew->n_expert > ST_MAX_EXPERTS)
        return st_fail(ST_ERR_INVALID_ARG, "expert_grouped: n_expert %d is out of range 1..%d (ST_MAX_EXPERTS)", ew->n_expert,
                       ST_MAX_EXPERTS);
    ST_TRY(check_matrix(ew->gu_type, ew->gate, (int64_t)ew->n_ff * ew->n_expert, ew->n_embd));
    ST_TRY(check_matrix(ew->gu_type, ew->up, (int64_t)ew->n_ff * ew->n_expert, ew->n_embd));
    ST_TRY(check_matrix(ew->down_type, ew->down, (int64_t)ew->n_embd * ew->n_expert, ew->n_ff));
    /* an id outside 0..n_expert-1 is no error: its slot's output is 0
     * (st_ref_expert_grouped), nothing is read for it */
    return ST_OK;
}

size_t st_ref_expert_scratch_bytes(int n_embd, int n_ff, int nt, int topk)
{
    const size_t np = (size_t)nt * (size_t)topk;
    const size_t xq = (size_t)(n_embd / 32) * ST_Q8_1_BLOCK_BYTES * (size_t)nt;
    const size_t h = sizeof(float) * np * (size_t)n_ff, hq = (size_t)(n_ff / 32) * ST_Q8_1_BLOCK_BYTES * np;
    const size_t y = sizeof(float) * np * (size_t)n_embd;
    return ST_ALIGN64(xq) + ST_ALIGN64(h) + ST_ALIGN64(hq) + ST_ALIGN64(y);
}

st_status st_ref_expert_grouped(const st_expert_weights *ew, const float *x, const int32_t *ids,
                                const float *wts, int nt, int topk, float *out,
                                const st_cpu_split *split)
{
    ST_TRY(check_experts(ew, x, ids, wts, nt, topk, out));
    const size_t n = st_ref_expert_scratch_bytes(ew->n_embd, ew->n_ff, nt, topk);
    void *scratch = malloc(n);
    if (!scratch) return st_fail(ST_ERR_NOMEM, "expert_grouped: out of memory for %zu bytes of scratch", n);
    st_status s = st_ref_expert_grouped_ws(ew, NULL, x, ids, wts, nt, topk, out, split, split, NULL, scratch);
    free(scratch);
    return s;
}

st_status st_ref_expert_grouped_ws(const st_expert_weights *ew, const st_ffn_options *opt, const float *x,
                                   const int32_t *ids, const float *wts, int nt, int topk, float *out,
                                   const st_cpu_split *split, const st_cpu_split *down_split, st_cpu_pool *pool,
                                   void *scratch)
{
    ST_TRY(check_experts(ew, x, ids, wts, nt, topk, out));
    st_ffn_options dflt;
    st_ffn_options_init(&dflt);
    const st_ffn_options *o = opt ? opt : &dflt;
    const int64_t xs = o->x_stride ? o->x_stride : ew->n_embd, is = o->ids_stride ? o->ids_stride : topk;
    const int64_t ws = o->wts_stride ? o->wts_stride : topk, os = o->out_stride ? o->out_stride : ew->n_embd;
    const int np = nt * topk;
    expert_job j;
    memset(&j, 0, sizeof j);
    j.ew = ew;
    j.o = o;
    /* the routing, pair p = t*topk + k; an id out of range takes no group */
    int32_t id[ST_MAX_PAIRS];
    for (int p = 0; p < np; p++) id[p] = ids[(int64_t)(p / topk) * is + p % topk];
    /* Group pairs by expert, experts in first-seen order, pairs in p order. */
    for (int p = 0; p < np; p++) {
        if (id[p] < 0 || id[p] >= ew->n_expert) continue;
        int g = 0;
        while (g < j.n_used && j.expert[g] != id[p]) g++;
        if (g == j.n_used) j.expert[j.n_used++] = id[p];
    }
    int n = 0;
    for (int g = 0; g < j.n_used; g++) {
        j.first[g] = n;
        for (int p = 0; p < np; p++)
            if (id[p] == j.expert[g]) j.pair_list[n++] = p;
    }
    j.first[j.n_used] = n;

    const size_t xq_stride = (size_t)(ew->n_embd / 32) * ST_Q8_1_BLOCK_BYTES;
    j.hq_stride = (size_t)(ew->n_ff / 32) * ST_Q8_1_BLOCK_BYTES;
    /* the scratch, as st_ref_expert_scratch_bytes lays it out */
    uint8_t *at = scratch, *xq = at;
    at += ST_ALIGN64(xq_stride * (size_t)nt);
    j.h = (float *)at;
    at += ST_ALIGN64(sizeof(float) * (size_t)np * (size_t)ew->n_ff);
    j.hq = at;
    at += ST_ALIGN64(j.hq_stride * (size_t)np);
    j.y = (float *)at;
    st_status s = ST_OK;
    for (int t = 0; t < nt && s == ST_OK; t++)
        s = st_quantize_q8_1(x + (size_t)t * (size_t)xs, xq + (size_t)t * xq_stride, ew->n_embd);
    if (s != ST_OK) goto done;
    for (int p = 0; p < np; p++) j.xq_pair[p] = xq + (size_t)(p / topk) * xq_stride;

    int64_t items = (int64_t)j.n_used * ew->n_ff;
    st_parallel_for(pool, items, split_chunk(split, pool, items), split_threads(split), gate_up_range, &j);
    for (int p = 0; p < np && s == ST_OK; p++)
        if (id[p] >= 0 && id[p] < ew->n_expert)
            s = st_quantize_q8_1(j.h + (size_t)p * (size_t)ew->n_ff, j.hq + (size_t)p * j.hq_stride, ew->n_ff);
    if (s != ST_OK) goto done;
    items = (int64_t)j.n_used * ew->n_embd;
    st_parallel_for(pool, items, split_chunk(down_split, pool, items), split_threads(down_split), down_range, &j);

    /* the top-k sum in k order; a slot routed out of range adds w * 0 */
    for (int t = 0; t < nt; t++)
        for (int i = 0; i < ew->n_embd; i++) {
            float acc = 0.0f;
            for (int k = 0; k < topk; k++) {
                const int p = t * topk + k;
                const float y = id[p] >= 0 && id[p] < ew->n_expert ? j.y[(size_t)p * (size_t)ew->n_embd + (size_t)i] : 0.0f;
                acc = st_fma(wts[(int64_t)t * ws + k], y, acc);
            }
            out[(size_t)t * (size_t)os + (size_t)i] = acc;
        }
done:
    return s;
}

/* ---- the expert matrix call (MUL_MAT_ID) --------------------------------- */
typedef struct {
    st_qtype t;
    const uint8_t *w; /* the expert's first row */
    size_t row_bytes;
    int64_t k;
    const uint8_t *xq;
    float *y;
} emat_job;

static void emat_range(void *ctx, int64_t b, int64_t e)
{
    emat_job *j = ctx;
    for (int64_t r = b; r < e; r++) row_dot(j->t, j->w + (size_t)r * j->row_bytes, j->k, &j->xq, 1, 1, j->y + r);
}

st_status st_ref_expert_mat_pool(st_qtype t, const void *w, int64_t rows, int64_t k, int n_expert, const float *x,
                                 int x_slots, int64_t x_slot_stride, int64_t x_token_stride, const int32_t *ids,
                                 int64_t ids_stride, int nt, int topk, float *y, int64_t y_slot_stride,
                                 int64_t y_token_stride, const st_cpu_split *split, st_cpu_pool *pool, void *xq)
{
    ST_TRY(check_matrix(t, w, rows * n_expert, k));
    emat_job j = {t, NULL, st_qtype_row_bytes(t, k), k, xq, NULL};
    const float *last = NULL;
    for (int tk = 0; tk < nt; tk++)
        for (int s = 0; s < topk; s++) {
            const int32_t e = ids[(int64_t)tk * ids_stride + s];
            float *dst = y + (int64_t)tk * y_token_stride + (int64_t)s * y_slot_stride;
            if (e < 0 || e >= n_expert) { /* defined: zeros, nothing read */
                for (int64_t r = 0; r < rows; r++) dst[r] = 0.0f;
                continue;
            }
            const float *src = x + (int64_t)tk * x_token_stride + (int64_t)(s % x_slots) * x_slot_stride;
            if (src != last) ST_TRY(st_quantize_q8_1(src, xq, k));
            last = src;
            j.w = (const uint8_t *)w + (size_t)e * (size_t)rows * j.row_bytes;
            j.y = dst;
            st_parallel_for(pool, rows, split_chunk(split, pool, rows), split_threads(split), emat_range, &j);
        }
    return ST_OK;
}
