/* Decode calls after creation make no heap allocation (CPU backend): every
 * malloc/calloc/realloc/aligned allocation of the library goes through the
 * counting wrappers below (the test links with -Wl,--wrap=...: see
 * tests/CMakeLists.txt), and the count must not move across the calls, the
 * first one included, for every entry point, rows variant and token count. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "strata/decode.h"
#include "randgen.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_long g_allocs;

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
/* the linker's --wrap targets: every allocation of the library comes here */
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t b);
void *__wrap_realloc(void *p, size_t n);
int __wrap_posix_memalign(void **p, size_t a, size_t n);
void *__wrap_aligned_alloc(size_t a, size_t n);

void *__wrap_malloc(size_t n)
{
    atomic_fetch_add(&g_allocs, 1);
    return __real_malloc(n);
}
void *__wrap_calloc(size_t a, size_t b)
{
    atomic_fetch_add(&g_allocs, 1);
    return __real_calloc(a, b);
}
void *__wrap_realloc(void *p, size_t n)
{
    atomic_fetch_add(&g_allocs, 1);
    return __real_realloc(p, n);
}
int __wrap_posix_memalign(void **p, size_t a, size_t n)
{
    atomic_fetch_add(&g_allocs, 1);
    return __real_posix_memalign(p, a, n);
}
void *__wrap_aligned_alloc(size_t a, size_t n)
{
    atomic_fetch_add(&g_allocs, 1);
    return __real_aligned_alloc(a, n);
}

enum { EMBD = 512, FF = 128, NEXP = 16, ROWS = 300, COLS = 2048 };

static void *rows_of(st_rng *r, st_qtype t, int64_t rows, int64_t cols)
{
    void *w = malloc((size_t)rows * st_qtype_row_bytes(t, cols));
    assert_non_null(w);
    st_random_blocks(r, t, rows, cols, w);
    return w;
}

/* The wrappers really count: an allocation the library makes on purpose
 * (a matrix) moves the counter. Without this a broken --wrap would let
 * the test below pass for nothing. */
static void the_counter_counts(void **state)
{
    st_ctx *c = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &c), ST_OK);
    st_rng r;
    st_rng_seed(&r, 1);
    void *w = rows_of(&r, ST_Q8_0, 4, 64);
    const long before = atomic_load(&g_allocs);
    st_matrix *m = NULL;
    assert_int_equal(st_matrix_create(c, ST_Q8_0, 4, 64, w, &m), ST_OK);
    assert_true(atomic_load(&g_allocs) > before);
    st_matrix_destroy(m);
    st_ctx_destroy(c);
    free(w);
}

static void decode_calls_do_not_allocate(void **state)
{
    st_ctx_params p;
    st_ctx_params_init(&p);
    p.backend = ST_BACKEND_CPU;
    p.max_rows = 4096;
    p.max_cols = 4096;
    st_ctx *c = NULL;
    assert_int_equal(st_ctx_create_ex(&p, &c), ST_OK);
    st_rng r;
    st_rng_seed(&r, 3);
    void *w = rows_of(&r, ST_IQ3_S, ROWS, COLS);
    void *g = rows_of(&r, ST_IQ4_XS, (int64_t)NEXP * FF, EMBD), *u = rows_of(&r, ST_IQ4_XS, (int64_t)NEXP * FF, EMBD);
    void *d = rows_of(&r, ST_Q8_0, (int64_t)NEXP * EMBD, FF);
    st_matrix *mw, *mg, *mu, *md;
    assert_int_equal(st_matrix_create(c, ST_IQ3_S, ROWS, COLS, w, &mw), ST_OK);
    assert_int_equal(st_matrix_create(c, ST_IQ4_XS, (int64_t)NEXP * FF, EMBD, g, &mg), ST_OK);
    assert_int_equal(st_matrix_create(c, ST_IQ4_XS, (int64_t)NEXP * FF, EMBD, u, &mu), ST_OK);
    assert_int_equal(st_matrix_create(c, ST_Q8_0, (int64_t)NEXP * EMBD, FF, d, &md), ST_OK);
    st_experts ex = {mg, mu, md, NEXP};
    float *x = malloc(sizeof(float) * ST_MAX_TOKENS * COLS), *y = malloc(sizeof(float) * ST_MAX_TOKENS * ROWS);
    float *out = malloc(sizeof(float) * ST_MAX_TOKENS * EMBD);
    st_random_floats(&r, x, (size_t)ST_MAX_TOKENS * COLS, 1.0f);
    int32_t ids[ST_MAX_PAIRS];
    float wts[ST_MAX_PAIRS];
    const int topk = ST_MAX_TOPK < NEXP ? ST_MAX_TOPK : NEXP;
    st_random_routing(&r, ST_MAX_TOKENS, topk, NEXP, ids, wts);

    /* ggml's operations: MUL_MAT with strides, MUL_MAT_ID, the FFN with another combine and biases */
    float *bias = calloc((size_t)NEXP * (2 * FF + EMBD), sizeof(float));
    float *ye = malloc(sizeof(float) * 2 * (size_t)topk * (EMBD > FF ? EMBD : FF));
    st_ffn_options o;
    st_ffn_options_init(&o);
    o.act = ST_ACT_SWIGLU_OAI;
    o.gate_bias = bias;
    o.up_bias = bias + NEXP * FF;
    o.down_bias = bias + 2 * NEXP * FF;
    const long before_ops = atomic_load(&g_allocs);
    for (int nt = 1; nt <= 2; nt++) {
        assert_int_equal(st_iq_mmvq_strided(c, mw, x, COLS + 32, nt, y, ROWS + 1), ST_OK);
        assert_int_equal(st_expert_mat(c, mg, NEXP, x, 1, 0, EMBD, ids, topk, nt, topk, ye, FF, (int64_t)FF * topk), ST_OK);
        assert_int_equal(st_expert_mat(c, md, NEXP, x, topk, FF, (int64_t)FF * topk, ids, topk, nt, topk, ye, EMBD,
                                       (int64_t)EMBD * topk), ST_OK);
        assert_int_equal(st_expert_ffn(c, &ex, &o, x, ids, wts, nt, topk, out), ST_OK);
    }
    assert_int_equal(atomic_load(&g_allocs), before_ops);
    free(bias);
    free(ye);
    const long before = atomic_load(&g_allocs);
    for (int nt = 1; nt <= ST_MAX_TOKENS; nt++) {
        assert_int_equal(st_iq_mmvq(c, mw, x, nt, y), ST_OK);
        assert_int_equal(st_expert_grouped(c, &ex, x, ids, wts, nt, topk, out), ST_OK);
#define MMVQ_(R) assert_int_equal(st_iq_mmvq_variant(c, mw, x, nt, y, R), ST_OK);
        STRATA_MMVQ_ROWS_VARIANTS(MMVQ_)
#undef MMVQ_
#define EXPERT_(GU, DN) assert_int_equal(st_expert_grouped_variant(c, &ex, x, ids, wts, nt, topk, out, GU, DN), ST_OK);
        STRATA_EXPERT_ROWS_VARIANTS(EXPERT_)
#undef EXPERT_
    }
    /* a refused call allocates nothing either */
    assert_int_equal(st_iq_mmvq(c, mw, x, ST_MAX_TOKENS + 1, y), ST_ERR_INVALID_ARG);
    /* a wide-row variant on a row of one stream group is refused, naming why */
    assert_true(COLS / 32 < ST_CANON_WIDE_UNITS);
    assert_int_equal(st_iq_mmvq_variant(c, mw, x, 1, y, STRATA_MMVQ_ID_WIDE(64, 2)), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "iq_mmvq: wide64x2 needs rows of at least 8192 values (128 streams)"));
    assert_int_equal(atomic_load(&g_allocs), before);

    st_matrix_destroy(mw);
    st_matrix_destroy(mg);
    st_matrix_destroy(mu);
    st_matrix_destroy(md);
    st_ctx_destroy(c);
    free(w);
    free(g);
    free(u);
    free(d);
    free(x);
    free(y);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_counter_counts),
        cmocka_unit_test(decode_calls_do_not_allocate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
