/* Batch invariance (docs/DESIGN.md section 2): a token's output bytes do not
 * depend on how many other tokens share the call or where they are routed.
 * For every n_tokens 2..ST_MAX_TOKENS, each token of a batch is compared with
 * the same token computed alone (n_tokens 1), through the default chain and
 * every variant: iq_mmvq for every format, expert_grouped with the other
 * tokens' routing drawn at random. Shared by the CPU test (every CI run) and
 * the GPU test (label gpu); BI_BACKEND picks the backend. */
#ifndef ST_TEST_BATCH_INVARIANCE_H
#define ST_TEST_BATCH_INVARIANCE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpu_test_size.h"
#include "randgen.h"
#include "strata/strata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BI_OK(expr)                                                                               \
    do {                                                                                          \
        st_status s_ = (expr);                                                                    \
        if (s_ != ST_OK) fail_msg("%s: %s (%s)", #expr, st_status_str(s_), st_last_error());      \
    } while (0)

static st_ctx *bi_ctx(st_backend b)
{
    st_ctx_params p;
    st_ctx_params_init(&p);
    p.backend = b;
    p.max_rows = 2048;
    p.max_cols = 8448; /* the wide rows (128 streams) of bi_mmvq_sweep */
    st_ctx *c = NULL;
    BI_OK(st_ctx_create_ex(&p, &c));
    st_dispatch_config cfg;
    st_dispatch_config_default(&cfg);
    st_ctx_set_dispatch(c, &cfg);
    return c;
}

static void *bi_dev(st_ctx *c, const void *h, size_t n)
{
    void *p = NULL;
    BI_OK(st_ctx_alloc(c, n ? n : 4, &p));
    if (n) BI_OK(st_ctx_upload(c, p, h, n));
    return p;
}

/* y (host) of mmvq through variant id ROWS (0: the default) */
static void bi_mmvq(st_ctx *c, const st_matrix *w, const float *x, int nt, int rows, float *y)
{
    const size_t xn = sizeof(float) * (size_t)nt * (size_t)st_matrix_cols(w);
    const size_t yn = sizeof(float) * (size_t)nt * (size_t)st_matrix_rows(w);
    float *dx = bi_dev(c, x, xn), *dy = NULL;
    BI_OK(st_ctx_alloc(c, yn, (void **)&dy));
    BI_OK(st_iq_mmvq_variant(c, w, dx, nt, dy, rows));
    BI_OK(st_ctx_sync(c));
    BI_OK(st_ctx_download(c, y, dy, yn));
    st_ctx_free(c, dx);
    st_ctx_free(c, dy);
}

static size_t g_bi_cmp, g_bi_bad;

/* the tokens of an nt-token call compared with the token alone: all of
 * them, or at the sanitizer size (gpu_test_size.h) the first, a middle and
 * the last (every kernel still runs at every count; the sanitizer looks at
 * memory, the full run at the bytes); at the racecheck size the first only
 * (the one-token kernel alone again is the same kernel) */
static int bi_next_token(int j, int nt)
{
    if (!sanitizer_size()) return j + 1;
    if (racecheck_size()) return nt;
    if (j < nt / 2) return nt / 2;
    return j < nt - 1 ? nt - 1 : nt;
}

static void bi_mmvq_sweep(st_backend b, const int *nts, int n_nts)
{
    st_ctx *c = bi_ctx(b);
    st_rng r;
    st_rng_seed(&r, 4242);
    int paths[32], np = 0;
    paths[np++] = 0;
#define BI_ROWS_(R) paths[np++] = R;
    STRATA_MMVQ_ROWS_VARIANTS(BI_ROWS_)
#undef BI_ROWS_
#define BI_MMA_(W) paths[np++] = STRATA_MMVQ_ID_MMA(W);
    STRATA_MMVQ_MMA_VARIANTS(BI_MMA_)
#undef BI_MMA_
#define BI_SPLIT_(W) paths[np++] = STRATA_MMVQ_ID_SPLIT(W);
    STRATA_MMVQ_SPLIT_VARIANTS(BI_SPLIT_)
#undef BI_SPLIT_
    const int np_short = np; /* the wide-row variants below run on the wide row only */
#define BI_WIDE_(T, R) paths[np++] = STRATA_MMVQ_ID_WIDE(T, R);
    STRATA_MMVQ_WIDE_VARIANTS(BI_WIDE_)
#undef BI_WIDE_
    const st_qtype types[] = {
#define BI_T_(id, name, ggml, qk, bytes) ST_##id,
        ST_QTYPES(BI_T_)
#undef BI_T_
    };
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        if (!test_shard_next()) continue;
        st_rng_seed(&r, 4242 + (uint64_t)ti); /* each format's data its own, whichever shard runs it */
        const st_qtype t = types[ti];
      /* a short row, and a wide one (ST_CANON_WIDE_UNITS: 128 streams) */
      for (int wide = 0; wide < 2; wide++) {
        const int big = st_qtype_block_values(t) == 256;
        const int rows = wide ? 11 : 37, /* 11: a last lane group of 4 rows holding 3 */ cols = wide ? (big ? 8448 : 8224) : big ? 512 : 160;
        void *wh = malloc((size_t)rows * st_qtype_row_bytes(t, cols));
        st_random_blocks(&r, t, rows, cols, wh);
        st_matrix *w = NULL;
        BI_OK(st_matrix_create(c, t, rows, cols, wh, &w));
        float *x = malloc(sizeof(float) * ST_MAX_TOKENS * (size_t)cols);
        float *y = malloc(sizeof(float) * ST_MAX_TOKENS * (size_t)rows), *y1 = malloc(sizeof(float) * (size_t)rows);
        st_random_floats(&r, x, (size_t)ST_MAX_TOKENS * (size_t)cols, 1.0f);
        for (int k = 0; k < n_nts; k++) {
            const int nt = nts[k];
            for (int p = 0; p < (wide ? np : np_short); p++) {
                if (racecheck_repeat(paths[p], -1, nt, rows)) continue;
                bi_mmvq(c, w, x, nt, paths[p], y);
                for (int j = 0; j < nt; j = bi_next_token(j, nt)) {
                    bi_mmvq(c, w, x + (size_t)j * (size_t)cols, 1, paths[p], y1);
                    g_bi_cmp++;
                    if (memcmp(y + (size_t)j * (size_t)rows, y1, sizeof(float) * (size_t)rows)) {
                        if (g_bi_bad++ < 5)
                            printf("  mmvq %s %dx%d path %d: token %d of %d differs from the token alone\n",
                                   st_qtype_name(t), rows, cols, paths[p], j, nt);
                    }
                }
            }
        }
        st_matrix_destroy(w);
        free(wh);
        free(x);
        free(y);
        free(y1);
        char unit[96];
        snprintf(unit, sizeof unit, "mmvq %s %dx%d", st_qtype_name(t), rows, cols);
        test_unit_time(unit);
      }
    }
    st_ctx_destroy(c);
}

static void bi_expert_sweep(st_backend b, const int *nts, int n_nts)
{
    st_ctx *c = bi_ctx(b);
    st_rng r;
    st_rng_seed(&r, 777);
    enum { EMBD = 256, FF = 64, NEXP = 24 };
    const int topk = ST_MAX_TOPK < 6 ? ST_MAX_TOPK : 6;
    void *g = malloc((size_t)NEXP * FF * st_qtype_row_bytes(ST_IQ3_S, EMBD)), *u = malloc((size_t)NEXP * FF * st_qtype_row_bytes(ST_IQ3_S, EMBD));
    void *d = malloc((size_t)NEXP * EMBD * st_qtype_row_bytes(ST_IQ4_NL, FF));
    st_random_blocks(&r, ST_IQ3_S, (int64_t)NEXP * FF, EMBD, g);
    st_random_blocks(&r, ST_IQ3_S, (int64_t)NEXP * FF, EMBD, u);
    st_random_blocks(&r, ST_IQ4_NL, (int64_t)NEXP * EMBD, FF, d);
    st_matrix *mg, *mu, *md;
    BI_OK(st_matrix_create(c, ST_IQ3_S, (int64_t)NEXP * FF, EMBD, g, &mg));
    BI_OK(st_matrix_create(c, ST_IQ3_S, (int64_t)NEXP * FF, EMBD, u, &mu));
    BI_OK(st_matrix_create(c, ST_IQ4_NL, (int64_t)NEXP * EMBD, FF, d, &md));
    st_experts ex = {mg, mu, md, NEXP};
    int paths[32][2], np = 0;
    paths[np][0] = paths[np][1] = 0;
    np++;
#define BI_PAIR_(GU, DN) paths[np][0] = GU, paths[np][1] = DN, np++;
    STRATA_EXPERT_ROWS_VARIANTS(BI_PAIR_)
#undef BI_PAIR_
    float *x = malloc(sizeof(float) * ST_MAX_TOKENS * EMBD), *o = malloc(sizeof(float) * ST_MAX_TOKENS * EMBD);
    float *o1 = malloc(sizeof(float) * EMBD);
    int32_t ids[ST_MAX_PAIRS];
    float wts[ST_MAX_PAIRS];
    st_random_floats(&r, x, (size_t)ST_MAX_TOKENS * EMBD, 1.0f);
    for (int k = 0; k < n_nts; k++) {
        const int nt = nts[k];
        if (!test_shard_next()) continue;
        st_rng_seed(&r, 7770 + (uint64_t)k);
        st_random_routing(&r, nt, topk, NEXP, ids, wts); /* the other tokens' routing: drawn anew */
        for (int p = 0; p < np; p++) {
            float *dx = bi_dev(c, x, sizeof(float) * (size_t)nt * EMBD), *dout = NULL;
            int32_t *di = bi_dev(c, ids, sizeof(int32_t) * (size_t)(nt * topk));
            float *dw = bi_dev(c, wts, sizeof(float) * (size_t)(nt * topk));
            BI_OK(st_ctx_alloc(c, sizeof(float) * (size_t)nt * EMBD, (void **)&dout));
            BI_OK(st_expert_grouped_variant(c, &ex, dx, di, dw, nt, topk, dout, paths[p][0], paths[p][1]));
            BI_OK(st_ctx_sync(c));
            BI_OK(st_ctx_download(c, o, dout, sizeof(float) * (size_t)nt * EMBD));
            for (int j = 0; j < nt; j = bi_next_token(j, nt)) {
                float *ex1 = bi_dev(c, x + (size_t)j * EMBD, sizeof(float) * EMBD), *eo = NULL;
                int32_t *ei = bi_dev(c, ids + j * topk, sizeof(int32_t) * (size_t)topk);
                float *ew = bi_dev(c, wts + j * topk, sizeof(float) * (size_t)topk);
                BI_OK(st_ctx_alloc(c, sizeof(float) * EMBD, (void **)&eo));
                BI_OK(st_expert_grouped_variant(c, &ex, ex1, ei, ew, 1, topk, eo, paths[p][0], paths[p][1]));
                BI_OK(st_ctx_sync(c));
                BI_OK(st_ctx_download(c, o1, eo, sizeof(float) * EMBD));
                g_bi_cmp++;
                if (memcmp(o + (size_t)j * EMBD, o1, sizeof(float) * EMBD)) {
                    if (g_bi_bad++ < 5)
                        printf("  expert rows %d/%d: token %d of %d differs from the token alone\n", paths[p][0],
                               paths[p][1], j, nt);
                }
                st_ctx_free(c, ex1);
                st_ctx_free(c, eo);
                st_ctx_free(c, ei);
                st_ctx_free(c, ew);
            }
            st_ctx_free(c, dx);
            st_ctx_free(c, dout);
            st_ctx_free(c, di);
            st_ctx_free(c, dw);
        }
    }
    st_matrix_destroy(mg);
    st_matrix_destroy(mu);
    st_matrix_destroy(md);
    free(g);
    free(u);
    free(d);
    free(x);
    free(o);
    free(o1);
    st_ctx_destroy(c);
}

static void bi_run(st_backend b, const int *nts, int n_nts)
{
    g_bi_cmp = g_bi_bad = 0;
    test_unit_time(NULL);
    bi_mmvq_sweep(b, nts, n_nts);
    bi_expert_sweep(b, nts, n_nts);
    test_unit_time("expert sweep");
    printf("batch invariance (%s)%s%s: %zu tokens compared with the token alone, %zu differ\n",
           b == ST_BACKEND_GPU ? "gpu" : "cpu", sanitizer_size() ? " (sanitizer size)" : "", test_shard_label(), g_bi_cmp,
           g_bi_bad);
    assert_int_equal(g_bi_bad, 0);
    assert_true(g_bi_cmp > 0);
}

#endif
