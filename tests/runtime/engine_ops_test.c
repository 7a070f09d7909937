/* ggml's operations as calls (issue 24), on the CPU backend, each
 * byte-compared with the CPU reference: the dense call with row strides
 * (MUL_MAT), the expert matrix call (MUL_MAT_ID), the fused FFN with the
 * silu, gelu and swiglu-oai combines and biases; the limits checked when a
 * matrix or an expert set is made; expert ids out of range; a matrix used by
 * another context; the stream setter. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "strata/decode.h"
#include "strata/reference.h"
#include "strata/table.h"
#include "randgen.h"
#include "st_canon.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EMBD = 256, FF = 96, NEXP = 6, TOPK = 3, ROWS = 80, COLS = 512 };
static const uint32_t CANARY = 0x7fc01234u; /* a NaN no call writes */

static void *rand_rows(st_rng *r, st_qtype t, int64_t rows, int64_t cols)
{
    void *w = malloc((size_t)rows * st_qtype_row_bytes(t, cols));
    assert_non_null(w);
    st_random_blocks(r, t, rows, cols, w);
    return w;
}

static st_ctx *cpu_ctx(void)
{
    st_ctx_params p;
    st_ctx_params_init(&p);
    p.backend = ST_BACKEND_CPU;
    p.max_topk = TOPK + 1;
    p.max_experts = 64;
    p.max_rows = 1024;
    p.max_cols = 1024;
    st_ctx *c = NULL;
    assert_int_equal(st_ctx_create_ex(&p, &c), ST_OK);
    return c;
}

static float *canaries(size_t n)
{
    float *f = malloc(n * sizeof *f);
    assert_non_null(f);
    for (size_t i = 0; i < n; i++) memcpy(f + i, &CANARY, 4);
    return f;
}

static bool is_canary(const float *f)
{
    uint32_t u;
    memcpy(&u, f, 4);
    return u == CANARY;
}

/* y[t][r] of the reference for W (rows x cols) and the float tokens X (stride XS). */
static void ref_dense(st_qtype t, const void *w, int64_t rows, int64_t cols, const float *x, int64_t xs, int nt, float *y)
{
    const size_t qb = (size_t)(cols / 32) * 36;
    uint8_t *xq = malloc(qb * (size_t)nt);
    for (int i = 0; i < nt; i++) assert_int_equal(st_quantize_q8_1(x + (size_t)i * (size_t)xs, xq + qb * (size_t)i, cols), ST_OK);
    assert_int_equal(st_ref_mmvq(t, w, rows, cols, xq, nt, y, NULL), ST_OK);
    free(xq);
}

/* ---- MUL_MAT: row strides ------------------------------------------------- */
static void strided_dense_is_the_reference(void **state)
{
    (void)state;
    st_ctx *c = cpu_ctx();
    st_rng r;
    st_rng_seed(&r, 11);
    void *wb = rand_rows(&r, ST_IQ4_XS, ROWS, COLS);
    st_matrix *w = NULL;
    assert_int_equal(st_matrix_create(c, ST_IQ4_XS, ROWS, COLS, wb, &w), ST_OK);
    const int64_t xs = COLS + 40, ys = ROWS + 7;
    float *x = malloc(sizeof(float) * ST_MAX_TOKENS * (size_t)xs);
    st_random_floats(&r, x, (size_t)ST_MAX_TOKENS * (size_t)xs, 1.0f);
    float *y = canaries((size_t)ST_MAX_TOKENS * (size_t)ys), *want = malloc(sizeof(float) * ST_MAX_TOKENS * ROWS);
    float *dense = malloc(sizeof(float) * ST_MAX_TOKENS * ROWS), *xd = malloc(sizeof(float) * ST_MAX_TOKENS * COLS);
    for (int t = 0; t < ST_MAX_TOKENS; t++) memcpy(xd + (size_t)t * COLS, x + (size_t)t * xs, sizeof(float) * COLS);
    const int nts[] = {1, 2, 5, 8, 16, 32};
    for (size_t i = 0; i < sizeof nts / sizeof nts[0]; i++) {
        const int nt = nts[i];
        ref_dense(ST_IQ4_XS, wb, ROWS, COLS, x, xs, nt, want);
        assert_int_equal(st_iq_mmvq_strided(c, w, x, xs, nt, y, ys), ST_OK);
        for (int t = 0; t < nt; t++) {
            assert_memory_equal(y + (size_t)t * ys, want + (size_t)t * ROWS, sizeof(float) * ROWS);
            for (int64_t g = ROWS; g < ys; g++) assert_true(is_canary(y + (size_t)t * ys + g)); /* gaps untouched */
        }
        /* and the dense call on the same vectors gives the same bytes */
        assert_int_equal(st_iq_mmvq(c, w, xd, nt, dense), ST_OK);
        assert_memory_equal(dense, want, sizeof(float) * (size_t)nt * ROWS);
    }
    /* strides shorter than a row are refused, nothing written */
    assert_int_equal(st_iq_mmvq_strided(c, w, x, COLS - 1, 2, y, ys), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "stride"));
    assert_int_equal(st_iq_mmvq_strided(c, w, x, xs, 2, y, ROWS - 1), ST_ERR_INVALID_ARG);
    st_matrix_destroy(w);
    st_ctx_destroy(c);
    free(wb);
    free(x);
    free(y);
    free(want);
    free(dense);
    free(xd);
}

/* ---- limits when a matrix or an expert set is made ----------------------- */
static void a_vocabulary_sized_output_matrix_works(void **state)
{
    (void)state;
    st_ctx *c = cpu_ctx(); /* max_rows 1024: experts only */
    enum { VOCAB = 151936, K = 64 };
    st_rng r;
    st_rng_seed(&r, 3);
    void *wb = rand_rows(&r, ST_Q8_0, VOCAB, K);
    st_matrix *w = NULL;
    assert_int_equal(st_matrix_create(c, ST_Q8_0, VOCAB, K, wb, &w), ST_OK);
    float x[2 * K];
    st_random_floats(&r, x, 2 * K, 1.0f);
    float *y = malloc(sizeof(float) * 2 * VOCAB), *want = malloc(sizeof(float) * 2 * VOCAB);
    ref_dense(ST_Q8_0, wb, VOCAB, K, x, K, 2, want);
    assert_int_equal(st_iq_mmvq(c, w, x, 2, y), ST_OK);
    assert_memory_equal(y, want, sizeof(float) * 2 * VOCAB);
    st_matrix_destroy(w);
    /* beyond what a table key names: refused when made, before the bytes are read */
    const uint8_t one[34] = {0};
    st_matrix *big = NULL;
    assert_int_equal(st_matrix_create(c, ST_Q8_0, (int64_t)INT32_MAX + 1, 32, one, &big), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "INT32_MAX"));
    assert_non_null(strstr(st_last_error(), "2147483648 rows"));
    assert_null(big);
    st_ctx_destroy(c);
    free(wb);
    free(y);
    free(want);
}

typedef struct {
    st_matrix *gate, *up, *down;
    void *hg, *hu, *hd; /* the ggml bytes */
} layer;

static void make_layer(st_ctx *c, st_rng *r, int n_expert, int n_embd, int n_ff, layer *l)
{
    l->hg = rand_rows(r, ST_IQ3_S, (int64_t)n_expert * n_ff, n_embd);
    l->hu = rand_rows(r, ST_IQ3_S, (int64_t)n_expert * n_ff, n_embd);
    l->hd = rand_rows(r, ST_IQ4_NL, (int64_t)n_expert * n_embd, n_ff);
    assert_int_equal(st_matrix_create(c, ST_IQ3_S, (int64_t)n_expert * n_ff, n_embd, l->hg, &l->gate), ST_OK);
    assert_int_equal(st_matrix_create(c, ST_IQ3_S, (int64_t)n_expert * n_ff, n_embd, l->hu, &l->up), ST_OK);
    assert_int_equal(st_matrix_create(c, ST_IQ4_NL, (int64_t)n_expert * n_embd, n_ff, l->hd, &l->down), ST_OK);
}

static void drop_layer(layer *l)
{
    st_matrix_destroy(l->gate);
    st_matrix_destroy(l->up);
    st_matrix_destroy(l->down);
    free(l->hg);
    free(l->hu);
    free(l->hd);
}

static void expert_sets_are_checked_when_made(void **state)
{
    (void)state;
    st_ctx *c = cpu_ctx();
    st_rng r;
    st_rng_seed(&r, 5);
    layer l;
    make_layer(c, &r, NEXP, EMBD, FF, &l);
    st_experts ex = {0}, before;
    assert_int_equal(st_experts_make(c, l.gate, l.up, l.down, NEXP, &ex), ST_OK);
    assert_ptr_equal(ex.gate, l.gate);
    assert_int_equal(ex.n_expert, NEXP);
    before = ex;
    /* 3 experts of 192 rows: the shapes disagree */
    assert_int_equal(st_experts_make(c, l.gate, l.up, l.down, 3, &ex), ST_ERR_INVALID_ARG);
    assert_memory_equal(&ex, &before, sizeof ex);
    assert_int_equal(st_experts_make(c, l.gate, l.down, l.down, NEXP, &ex), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "gate and up"));
    drop_layer(&l);
    st_ctx_destroy(c);
    /* a context for fewer experts and shorter experts refuses the layer, naming the limit and the value */
    st_ctx_params p;
    st_ctx_params_init(&p);
    p.backend = ST_BACKEND_CPU;
    p.max_experts = 4;
    p.max_rows = 1024;
    p.max_cols = 1024;
    assert_int_equal(st_ctx_create_ex(&p, &c), ST_OK);
    make_layer(c, &r, NEXP, EMBD, FF, &l);
    assert_int_equal(st_experts_make(c, l.gate, l.up, l.down, NEXP, &ex), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "n_expert 6"));
    assert_non_null(strstr(st_last_error(), "max_experts"));
    drop_layer(&l);
    st_ctx_destroy(c);
    p.max_experts = 0;
    p.max_rows = 128;
    assert_int_equal(st_ctx_create_ex(&p, &c), ST_OK);
    make_layer(c, &r, 2, EMBD, FF, &l);
    assert_int_equal(st_experts_make(c, l.gate, l.up, l.down, 2, &ex), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "256 rows"));
    assert_non_null(strstr(st_last_error(), "max_rows 128"));
    drop_layer(&l);
    st_ctx_destroy(c);
}

/* ---- expert ids out of range --------------------------------------------- */
/* A slot routed outside 0..n_expert-1 adds w * 0: the bytes of the call
 * without that slot (finite weights), and no weight is read for it. */
static void out_of_range_ids_add_nothing(void **state)
{
    (void)state;
    st_ctx *c = cpu_ctx();
    st_rng r;
    st_rng_seed(&r, 8);
    layer l;
    make_layer(c, &r, NEXP, EMBD, FF, &l);
    st_experts ex;
    assert_int_equal(st_experts_make(c, l.gate, l.up, l.down, NEXP, &ex), ST_OK);
    enum { NT = 4 };
    float x[NT * EMBD];
    st_random_floats(&r, x, NT * EMBD, 1.0f);
    /* TOPK slots, the middle one of each token out of range */
    const int32_t bad[] = {-1, NEXP, INT32_MIN, INT32_MAX};
    int32_t ids[NT * TOPK], ids2[NT * (TOPK - 1)];
    float wts[NT * TOPK], wts2[NT * (TOPK - 1)];
    for (int t = 0; t < NT; t++)
        for (int k = 0; k < TOPK; k++) {
            ids[t * TOPK + k] = k == 1 ? bad[t] : (t + 2 * k) % NEXP;
            wts[t * TOPK + k] = 0.25f + 0.125f * (float)k - 0.5f * (float)t;
        }
    for (int t = 0, n = 0; t < NT; t++)
        for (int k = 0; k < TOPK; k++)
            if (k != 1) {
                ids2[n] = ids[t * TOPK + k];
                wts2[n++] = wts[t * TOPK + k];
            }
    float out[NT * EMBD], want[NT * EMBD];
    assert_int_equal(st_expert_grouped(c, &ex, x, ids, wts, NT, TOPK, out), ST_OK);
    assert_int_equal(st_expert_grouped(c, &ex, x, ids2, wts2, NT, TOPK - 1, want), ST_OK);
    assert_memory_equal(out, want, sizeof out);
    /* the reference agrees */
    st_expert_weights ew = {ST_IQ3_S, ST_IQ4_NL, EMBD, FF, NEXP, l.hg, l.hu, l.hd};
    assert_int_equal(st_ref_expert_grouped(&ew, x, ids, wts, NT, TOPK, want, NULL), ST_OK);
    assert_memory_equal(out, want, sizeof out);
    /* every variant pair too */
    assert_int_equal(st_expert_grouped_variant(c, &ex, x, ids, wts, NT, TOPK, want, 8, 4), ST_OK);
    assert_memory_equal(out, want, sizeof out);
    drop_layer(&l);
    st_ctx_destroy(c);
}

/* ---- MUL_MAT_ID ------------------------------------------------------------ */
static void expert_mat_is_the_reference(void **state)
{
    (void)state;
    st_ctx *c = cpu_ctx();
    st_rng r;
    st_rng_seed(&r, 21);
    layer l;
    make_layer(c, &r, NEXP, EMBD, FF, &l);
    enum { NT = 5 };
    /* ggml's layout: ids [NT][ids_stride], x [NT][slots][K] with gaps, y [NT][TOPK][R] with gaps */
    const int64_t is = TOPK + 2;
    int32_t ids[NT * (TOPK + 2)];
    for (int i = 0; i < NT * (int)is; i++) ids[i] = (int32_t)(st_rng_u32(&r) % NEXP);
    ids[1 * is + 2] = -3; /* out of range: a row of zeros */
    const int64_t xss = FF + 32, xts = xss * TOPK + 64, xts1 = EMBD + 32;
    float *x = malloc(sizeof(float) * NT * (size_t)xts), *x1 = malloc(sizeof(float) * NT * (size_t)xts1);
    st_random_floats(&r, x, (size_t)(NT * xts), 1.0f);
    st_random_floats(&r, x1, (size_t)(NT * xts1), 1.0f);
    const int64_t yss = EMBD + 16, yts = yss * TOPK + 8, yss1 = FF + 4, yts1 = yss1 * TOPK + 4;
    float *y = canaries((size_t)(NT * yts)), *y1 = canaries((size_t)(NT * yts1));
    float want[EMBD];
    /* gate: every slot reads the token's one vector (x_slots 1) */
    assert_int_equal(st_expert_mat(c, l.gate, NEXP, x1, 1, 0, xts1, ids, is, NT, TOPK, y1, yss1, yts1), ST_OK);
    /* down: a vector per slot */
    assert_int_equal(st_expert_mat(c, l.down, NEXP, x, TOPK, xss, xts, ids, is, NT, TOPK, y, yss, yts), ST_OK);
    for (int t = 0; t < NT; t++)
        for (int k = 0; k < TOPK; k++) {
            const int e = ids[t * is + k];
            const float *got1 = y1 + t * yts1 + k * yss1, *got = y + t * yts + k * yss;
            if (e < 0) {
                for (int i = 0; i < FF; i++) assert_true(got1[i] == 0.0f && !signbit(got1[i]));
                for (int i = 0; i < EMBD; i++) assert_true(got[i] == 0.0f && !signbit(got[i]));
            } else {
                const size_t gb = st_qtype_row_bytes(ST_IQ3_S, EMBD) * FF, db = st_qtype_row_bytes(ST_IQ4_NL, FF) * EMBD;
                ref_dense(ST_IQ3_S, (const uint8_t *)l.hg + (size_t)e * gb, FF, EMBD, x1 + t * xts1, 0, 1, want);
                assert_memory_equal(got1, want, sizeof(float) * FF);
                ref_dense(ST_IQ4_NL, (const uint8_t *)l.hd + (size_t)e * db, EMBD, FF, x + t * xts + k * xss, 0, 1, want);
                assert_memory_equal(got, want, sizeof(float) * EMBD);
            }
            for (int64_t g = FF; g < yss1; g++) assert_true(is_canary(got1 + g));
            for (int64_t g = EMBD; g < yss; g++) assert_true(is_canary(got + g));
        }
    /* overlapping outputs and a bad slot count are refused */
    assert_int_equal(st_expert_mat(c, l.down, NEXP, x, TOPK, xss, xts, ids, is, NT, TOPK, y, EMBD - 1, yts), ST_ERR_INVALID_ARG);
    assert_int_equal(st_expert_mat(c, l.down, NEXP, x, 2, xss, xts, ids, is, NT, TOPK, y, yss, yts), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "x_slots"));
    assert_int_equal(st_expert_mat(c, l.down, 7, x, TOPK, xss, xts, ids, is, NT, TOPK, y, yss, yts), ST_ERR_INVALID_ARG);
    drop_layer(&l);
    st_ctx_destroy(c);
    free(x);
    free(x1);
    free(y);
    free(y1);
}

/* ---- the fused FFN ---------------------------------------------------------- */
/* The FFN composed as ggml's graph does it, from st_expert_mat and the
 * canonical combines: gate and up (MUL_MAT_ID), + bias, the combine, down
 * (MUL_MAT_ID on the slots' vectors), + bias, the weighted sum in k order. */
static void ffn_by_parts(st_ctx *c, const layer *l, const st_ffn_options *o, const float *x, const int32_t *ids,
                         const float *wts, int nt, int topk, float *out)
{
    const int np = nt * topk;
    float *g = malloc(sizeof(float) * (size_t)np * FF), *u = malloc(sizeof(float) * (size_t)np * FF);
    float *y = malloc(sizeof(float) * (size_t)np * EMBD);
    assert_int_equal(st_expert_mat(c, l->gate, NEXP, x, 1, 0, EMBD, ids, topk, nt, topk, g, FF, (int64_t)FF * topk), ST_OK);
    assert_int_equal(st_expert_mat(c, l->up, NEXP, x, 1, 0, EMBD, ids, topk, nt, topk, u, FF, (int64_t)FF * topk), ST_OK);
    for (int p = 0; p < np; p++)
        for (int i = 0; i < FF; i++) {
            const int e = ids[p];
            float gv = g[p * FF + i], uv = u[p * FF + i];
            if (o->gate_bias) gv = st_fadd(gv, o->gate_bias[e * FF + i]);
            if (o->up_bias) uv = st_fadd(uv, o->up_bias[e * FF + i]);
            g[p * FF + i] = o->act == ST_ACT_GELU         ? st_gelu_mul(gv, uv)
                            : o->act == ST_ACT_SWIGLU_OAI ? st_swiglu_oai_mul(gv, uv, o->alpha, o->limit)
                                                          : st_silu_mul(gv, uv);
        }
    assert_int_equal(st_expert_mat(c, l->down, NEXP, g, topk, FF, (int64_t)FF * topk, ids, topk, nt, topk, y, EMBD,
                                   (int64_t)EMBD * topk), ST_OK);
    for (int t = 0; t < nt; t++)
        for (int i = 0; i < EMBD; i++) {
            float acc = 0.0f;
            for (int k = 0; k < topk; k++) {
                const int p = t * topk + k;
                const float v = o->down_bias ? st_fadd(y[p * EMBD + i], o->down_bias[ids[p] * EMBD + i]) : y[p * EMBD + i];
                acc = st_fma(wts[p], v, acc);
            }
            out[t * EMBD + i] = acc;
        }
    free(g);
    free(u);
    free(y);
}

static void ffn_is_the_composition(void **state)
{
    (void)state;
    st_ctx *c = cpu_ctx();
    st_rng r;
    st_rng_seed(&r, 33);
    layer l;
    make_layer(c, &r, NEXP, EMBD, FF, &l);
    st_experts ex;
    assert_int_equal(st_experts_make(c, l.gate, l.up, l.down, NEXP, &ex), ST_OK);
    enum { NT = 3 };
    float x[NT * EMBD], wts[NT * TOPK], gb[NEXP * FF], ub[NEXP * FF], db[NEXP * EMBD];
    int32_t ids[NT * TOPK];
    st_random_floats(&r, x, NT * EMBD, 2.0f);
    st_random_routing(&r, NT, TOPK, NEXP, ids, wts);
    st_random_floats(&r, gb, NEXP * FF, 1.0f);
    st_random_floats(&r, ub, NEXP * FF, 1.0f);
    st_random_floats(&r, db, NEXP * EMBD, 0.5f);
    float out[NT * EMBD], want[NT * EMBD];
    st_ffn_options o;
    /* the defaults are st_expert_grouped */
    st_ffn_options_init(&o);
    assert_int_equal(o.act, ST_ACT_SILU);
    assert_true(o.alpha == 1.702f && o.limit == 7.0f);
    assert_int_equal(st_expert_ffn(c, &ex, &o, x, ids, wts, NT, TOPK, out), ST_OK);
    assert_int_equal(st_expert_grouped(c, &ex, x, ids, wts, NT, TOPK, want), ST_OK);
    assert_memory_equal(out, want, sizeof out);
    ffn_by_parts(c, &l, &o, x, ids, wts, NT, TOPK, want);
    assert_memory_equal(out, want, sizeof out);
    const st_activation acts[] = {ST_ACT_SILU, ST_ACT_GELU, ST_ACT_SWIGLU_OAI};
    for (int a = 0; a < 3; a++)
        for (int bias = 0; bias < 2; bias++) {
            st_ffn_options_init(&o);
            o.act = acts[a];
            o.limit = 0.02f; /* the dots are about 1e-2 here: the clamp bites */
            if (bias) {
                o.gate_bias = gb;
                o.up_bias = ub;
                o.down_bias = db;
            }
            assert_int_equal(st_expert_ffn(c, &ex, &o, x, ids, wts, NT, TOPK, out), ST_OK);
            ffn_by_parts(c, &l, &o, x, ids, wts, NT, TOPK, want);
            assert_memory_equal(out, want, sizeof out);
            if (a || bias) { /* another combine or a bias changes the bytes */
                assert_int_equal(st_expert_grouped(c, &ex, x, ids, wts, NT, TOPK, want), ST_OK);
                assert_memory_not_equal(out, want, sizeof out);
            }
        }
    /* strides: the same bytes from spaced rows */
    st_ffn_options_init(&o);
    o.act = ST_ACT_GELU;
    o.x_stride = EMBD + 8;
    o.ids_stride = TOPK + 1;
    o.wts_stride = TOPK + 2;
    o.out_stride = EMBD + 3;
    float xs[NT * (EMBD + 8)], ws[NT * (TOPK + 2)];
    int32_t is[NT * (TOPK + 1)];
    float *os = canaries(NT * (EMBD + 3));
    for (int t = 0; t < NT; t++) {
        memcpy(xs + t * (EMBD + 8), x + t * EMBD, sizeof(float) * EMBD);
        memcpy(is + t * (TOPK + 1), ids + t * TOPK, sizeof(int32_t) * TOPK);
        memcpy(ws + t * (TOPK + 2), wts + t * TOPK, sizeof(float) * TOPK);
    }
    assert_int_equal(st_expert_ffn(c, &ex, &o, xs, is, ws, NT, TOPK, os), ST_OK);
    st_ffn_options dense;
    st_ffn_options_init(&dense);
    dense.act = ST_ACT_GELU;
    assert_int_equal(st_expert_ffn(c, &ex, &dense, x, ids, wts, NT, TOPK, want), ST_OK);
    for (int t = 0; t < NT; t++) {
        assert_memory_equal(os + t * (EMBD + 3), want + t * EMBD, sizeof(float) * EMBD);
        for (int g = EMBD; g < EMBD + 3; g++) assert_true(is_canary(os + t * (EMBD + 3) + g));
    }
    o.out_stride = EMBD - 1;
    assert_int_equal(st_expert_ffn(c, &ex, &o, xs, is, ws, NT, TOPK, os), ST_ERR_INVALID_ARG);
    st_ffn_options_init(&o);
    o.act = (st_activation)7;
    assert_int_equal(st_expert_ffn(c, &ex, &o, x, ids, wts, NT, TOPK, out), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "activation 7"));
    o.struct_size = 0;
    assert_int_equal(st_expert_ffn(c, &ex, &o, x, ids, wts, NT, TOPK, out), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "st_ffn_options_init"));
    free(os);
    drop_layer(&l);
    st_ctx_destroy(c);
}

/* The canonical combines are the functions they are named after (to float
 * accuracy: they are exact sequences of IEEE operations, not libm). */
static void combines_follow_their_definitions(void **state)
{
    (void)state;
    for (int i = -400; i <= 400; i++) {
        const float g = (float)i / 37.0f, u = 0.75f - (float)i / 300.0f;
        const double gd = g, ud = u;
        const double gelu = 0.5 * gd * (1.0 + tanh(0.7978845608028654 * (gd + 0.044715 * gd * gd * gd))) * ud;
        assert_true(fabs(st_gelu_mul(g, u) - gelu) <= 1e-5 * (1.0 + fabs(gelu)));
        const double silu = gd / (1.0 + exp(-gd)) * ud;
        assert_true(fabs(st_silu_mul(g, u) - silu) <= 1e-5 * (1.0 + fabs(silu)));
        const double alpha = 1.702, limit = 7.0;
        const double gc = gd < limit ? gd : limit, uc = ud > limit ? limit : ud < -limit ? -limit : ud;
        const double oai = gc / (1.0 + exp(-alpha * gc)) * (uc + 1.0);
        assert_true(fabs(st_swiglu_oai_mul(g, u, 1.702f, 7.0f) - oai) <= 1e-5 * (1.0 + fabs(oai)));
    }
    /* the clamps: the gate from above only, the up value both ways */
    assert_true(st_swiglu_oai_mul(100.0f, 0.0f, 1.702f, 7.0f) == st_swiglu_oai_mul(7.0f, 0.0f, 1.702f, 7.0f));
    assert_true(st_swiglu_oai_mul(1.0f, -50.0f, 1.702f, 7.0f) == st_swiglu_oai_mul(1.0f, -7.0f, 1.702f, 7.0f));
    assert_true(st_swiglu_oai_mul(-100.0f, 1.0f, 1.702f, 7.0f) != st_swiglu_oai_mul(-7.0f, 1.0f, 1.702f, 7.0f));
}

/* ---- sharing and streams ---------------------------------------------------- */
static void a_matrix_serves_every_context_of_its_device(void **state)
{
    (void)state;
    st_ctx *a = cpu_ctx(), *b = cpu_ctx();
    st_rng r;
    st_rng_seed(&r, 44);
    void *wb = rand_rows(&r, ST_Q5_K, ROWS, COLS);
    st_matrix *w = NULL;
    assert_int_equal(st_matrix_create(a, ST_Q5_K, ROWS, COLS, wb, &w), ST_OK);
    float x[4 * COLS], ya[4 * ROWS], yb[4 * ROWS];
    st_random_floats(&r, x, 4 * COLS, 1.0f);
    assert_int_equal(st_iq_mmvq(a, w, x, 4, ya), ST_OK);
    assert_int_equal(st_iq_mmvq(b, w, x, 4, yb), ST_OK);
    assert_memory_equal(ya, yb, sizeof ya);
    layer l;
    make_layer(a, &r, NEXP, EMBD, FF, &l);
    st_experts ex;
    assert_int_equal(st_experts_make(b, l.gate, l.up, l.down, NEXP, &ex), ST_OK);
    float xe[2 * EMBD], wts[2 * TOPK], oa[2 * EMBD], ob[2 * EMBD];
    int32_t ids[2 * TOPK];
    st_random_floats(&r, xe, 2 * EMBD, 1.0f);
    st_random_routing(&r, 2, TOPK, NEXP, ids, wts);
    assert_int_equal(st_expert_grouped(a, &ex, xe, ids, wts, 2, TOPK, oa), ST_OK);
    assert_int_equal(st_expert_grouped(b, &ex, xe, ids, wts, 2, TOPK, ob), ST_OK);
    assert_memory_equal(oa, ob, sizeof oa);
    drop_layer(&l);
    st_matrix_destroy(w);
    st_ctx_destroy(b);
    st_ctx_destroy(a);
    free(wb);
}

static void the_cpu_backend_has_no_streams(void **state)
{
    (void)state;
    st_ctx *c = cpu_ctx();
    int s = 0;
    assert_int_equal(st_ctx_set_stream(c, &s), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "no streams"));
    assert_int_equal(st_ctx_set_stream(c, NULL), ST_OK);
    assert_null(st_ctx_stream(c));
    st_ctx_destroy(c);
}

/* ---- the in-place layout (st_matrix_wrap) ---------------------------------- */
/* Every format: a matrix wrapping the engine's own bytes gives the bytes of
 * the repacked matrix of the same blocks at every token count, the expert
 * calls too; nothing is copied (the matrix reads the engine's buffer: a
 * change there shows in the next call) or freed (ASan: the engine frees it);
 * misaligned bytes, variants and knobs of other paths are refused with one
 * line; a table row naming a row-planar variant runs the default chain and
 * is counted. */
static void in_place_matrices_are_the_repacked_ones(void **state)
{
    (void)state;
    st_ctx *c = cpu_ctx();
    st_rng r;
    st_rng_seed(&r, 99);
    const int nts[] = {1, 3, 8, 9, 17, 32};
    float *x = malloc(sizeof(float) * ST_MAX_TOKENS * COLS);
    st_random_floats(&r, x, (size_t)ST_MAX_TOKENS * COLS, 1.0f);
    float *ya = malloc(sizeof(float) * ST_MAX_TOKENS * ROWS), *yb = malloc(sizeof(float) * ST_MAX_TOKENS * ROWS);
    int formats = 0;
    for (int t = 0; t < 64; t++) {
        if (!st_qtype_valid(t)) continue;
        const st_qtype q = (st_qtype)t;
        const int64_t cols = COLS % st_qtype_block_values(q) ? st_qtype_block_values(q) * 2 : COLS;
        void *wb = rand_rows(&r, q, ROWS, cols);
        st_matrix *w = NULL, *in = NULL;
        assert_int_equal(st_matrix_create(c, q, ROWS, cols, wb, &w), ST_OK);
        assert_int_equal(st_matrix_wrap(c, q, ROWS, cols, wb, &in), ST_OK);
        assert_int_equal(st_matrix_in_place(in), 1);
        assert_int_equal(st_matrix_in_place(w), 0);
        assert_int_equal(st_matrix_rows(in), ROWS);
        assert_int_equal(st_matrix_cols(in), cols);
        for (size_t i = 0; i < sizeof nts / sizeof nts[0]; i++) {
            assert_int_equal(st_iq_mmvq(c, w, x, nts[i], ya), ST_OK);
            assert_int_equal(st_iq_mmvq(c, in, x, nts[i], yb), ST_OK);
            assert_memory_equal(ya, yb, sizeof(float) * (size_t)nts[i] * ROWS);
        }
        /* in place: the engine's bytes are what the matrix reads */
        uint8_t *b = wb;
        const size_t rb = st_qtype_row_bytes(q, cols);
        for (size_t i = 0; i < rb; i++) b[i] = b[rb + i];
        assert_int_equal(st_iq_mmvq(c, in, x, 1, yb), ST_OK);
        assert_memory_equal(yb, yb + 1, sizeof(float)); /* rows 0 and 1 are the same blocks now */
        /* a boundary the in-place kernels cannot load from */
        if (st_qtype_block_bytes(q) % 2 == 0) {
            st_matrix *bad = (st_matrix *)&r;
            assert_int_equal(st_matrix_wrap(c, q, ROWS - 1, cols, b + 1, &bad), ST_ERR_INVALID_ARG);
            assert_non_null(strstr(st_last_error(), "boundary"));
            assert_null(bad);
        }
        st_matrix_destroy(in);
        st_matrix_destroy(w);
        free(wb);
        formats++;
    }
    assert_int_equal(formats, 20);

    /* variants: the matrix-unit family runs, a rows variant is refused */
    void *wb = rand_rows(&r, ST_IQ3_S, ROWS, COLS);
    st_matrix *w = NULL, *in = NULL;
    assert_int_equal(st_matrix_create(c, ST_IQ3_S, ROWS, COLS, wb, &w), ST_OK);
    assert_int_equal(st_matrix_wrap(c, ST_IQ3_S, ROWS, COLS, wb, &in), ST_OK);
    int ids[64];
    const int nv = st_mmvq_variant_ids(ids, 64);
    int refused = 0, ran = 0;
    for (int i = 0; i < nv; i++) {
        if (!st_mmvq_variant_fits(ids[i], COLS)) continue;
        const st_status s = st_iq_mmvq_variant(c, in, x, 9, yb, ids[i]);
        if (st_mmvq_in_place_variant(ids[i])) {
            assert_int_equal(s, ST_OK);
            assert_int_equal(st_iq_mmvq_variant(c, w, x, 9, ya, ids[i]), ST_OK);
            assert_memory_equal(ya, yb, sizeof(float) * 9 * ROWS);
            ran++;
        } else {
            assert_int_equal(s, ST_ERR_UNSUPPORTED);
            assert_non_null(strstr(st_last_error(), "in-place layout"));
            refused++;
        }
    }
    assert_true(ran > 0 && refused > 0);
    /* a table row naming a row-planar variant: the default chain, counted */
    int rowsv = 0;
    for (int i = 0; i < nv && !rowsv; i++)
        if (!st_mmvq_in_place_variant(ids[i]) && st_mmvq_variant_fits(ids[i], COLS)) rowsv = ids[i];
    st_table *t = NULL, *prev = NULL;
    assert_int_equal(st_table_create(st_ctx_identity(c), &t), ST_OK);
    const st_mmvq_key key = {ST_IQ3_S, ROWS, COLS};
    assert_int_equal(st_table_add_mmvq(t, &key, rowsv), ST_OK);
    assert_int_equal(st_ctx_swap_table(c, t, &prev), ST_OK);
    st_ctx_reset_stats(c);
    assert_int_equal(st_iq_mmvq(c, in, x, 2, yb), ST_OK);
    assert_int_equal(st_iq_mmvq_variant(c, w, x, 2, ya, 0), ST_OK);
    assert_memory_equal(ya, yb, sizeof(float) * 2 * ROWS);
    st_ctx_stats st;
    st_ctx_stats_init(&st);
    st_ctx_get_stats(c, &st);
    assert_int_equal(st.table_layout, 1);
    assert_int_equal(st.table_hits, 0);
    assert_int_equal(st.default_launches, 2);
    assert_int_equal(st_iq_mmvq(c, w, x, 2, ya), ST_OK); /* the repacked matrix takes the row */
    st_ctx_get_stats(c, &st);
    assert_int_equal(st.table_hits, 1);
    assert_int_equal(st_ctx_swap_table(c, prev, &t), ST_OK);
    st_table_destroy(t);
    st_matrix_destroy(in);
    st_matrix_destroy(w);
    free(wb);

    /* an expert set in place (gate, up, down), and mixed with a repacked down */
    layer l;
    make_layer(c, &r, NEXP, EMBD, FF, &l);
    st_matrix *ig = NULL, *iu = NULL, *id = NULL;
    assert_int_equal(st_matrix_wrap(c, ST_IQ3_S, (int64_t)NEXP * FF, EMBD, l.hg, &ig), ST_OK);
    assert_int_equal(st_matrix_wrap(c, ST_IQ3_S, (int64_t)NEXP * FF, EMBD, l.hu, &iu), ST_OK);
    assert_int_equal(st_matrix_wrap(c, ST_IQ4_NL, (int64_t)NEXP * EMBD, FF, l.hd, &id), ST_OK);
    st_experts ex, exi, exm, bad;
    assert_int_equal(st_experts_make(c, l.gate, l.up, l.down, NEXP, &ex), ST_OK);
    assert_int_equal(st_experts_make(c, ig, iu, id, NEXP, &exi), ST_OK);
    assert_int_equal(st_experts_make(c, ig, iu, l.down, NEXP, &exm), ST_OK);
    assert_int_equal(st_experts_make(c, ig, l.up, id, NEXP, &bad), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "in place"));
    float *xe = malloc(sizeof(float) * ST_MAX_TOKENS * EMBD), *oa = malloc(sizeof(float) * ST_MAX_TOKENS * EMBD),
          *ob = malloc(sizeof(float) * ST_MAX_TOKENS * EMBD);
    int32_t rid[ST_MAX_TOKENS * TOPK];
    float wts[ST_MAX_TOKENS * TOPK];
    st_random_floats(&r, xe, (size_t)ST_MAX_TOKENS * EMBD, 1.0f);
    for (size_t i = 0; i < sizeof nts / sizeof nts[0]; i++) {
        const int nt = nts[i];
        st_random_routing(&r, nt, TOPK, NEXP, rid, wts);
        assert_int_equal(st_expert_grouped(c, &ex, xe, rid, wts, nt, TOPK, oa), ST_OK);
        assert_int_equal(st_expert_grouped(c, &exi, xe, rid, wts, nt, TOPK, ob), ST_OK);
        assert_memory_equal(oa, ob, sizeof(float) * (size_t)nt * EMBD);
        assert_int_equal(st_expert_grouped(c, &exm, xe, rid, wts, nt, TOPK, ob), ST_OK);
        assert_memory_equal(oa, ob, sizeof(float) * (size_t)nt * EMBD);
    }
    int pairs[8][2];
    assert_true(st_expert_variant_ids(pairs, 8) > 0);
    assert_int_equal(st_expert_grouped_variant(c, &exi, xe, rid, wts, 1, TOPK, ob, pairs[0][0], pairs[0][1]),
                     ST_ERR_UNSUPPORTED);
    assert_non_null(strstr(st_last_error(), "in-place layout"));
    st_matrix_destroy(ig);
    st_matrix_destroy(iu);
    st_matrix_destroy(id);
    drop_layer(&l);
    free(xe);
    free(oa);
    free(ob);
    free(x);
    free(ya);
    free(yb);
    st_ctx_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(strided_dense_is_the_reference),
        cmocka_unit_test(a_vocabulary_sized_output_matrix_works),
        cmocka_unit_test(expert_sets_are_checked_when_made),
        cmocka_unit_test(out_of_range_ids_add_nothing),
        cmocka_unit_test(expert_mat_is_the_reference),
        cmocka_unit_test(ffn_is_the_composition),
        cmocka_unit_test(combines_follow_their_definitions),
        cmocka_unit_test(a_matrix_serves_every_context_of_its_device),
        cmocka_unit_test(the_cpu_backend_has_no_streams),
        cmocka_unit_test(in_place_matrices_are_the_repacked_ones),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
