/* The CPU reference: identical bytes for any thread count and chunking; the
 * expert FFN equals its composition from mmvq, q8_1 and silu; the device
 * layout round-trips; and a deliberately wrong summation order is caught by
 * a byte compare (the safety net can fail). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu_unit.h"
#include "randgen.h"
#include "reference_internal.h"
#include "repack.h"
#include "st_canon.h"
#include "strata/strata.h"

/* Every weight format (ST_QTYPES, the one list). */
#define ST_TYPE_(id, name, ggml, qk, bytes) ST_##id,
static const st_qtype TYPES[] = {ST_QTYPES(ST_TYPE_)};
#undef ST_TYPE_
#define NTYPES (sizeof TYPES / sizeof TYPES[0])

static void *rand_matrix(st_rng *r, st_qtype t, int rows, int cols)
{
    void *w = malloc((size_t)rows * st_qtype_row_bytes(t, cols));
    st_random_blocks(r, t, rows, cols, w);
    return w;
}

static uint8_t *quantize_tokens(const float *x, int nt, int k)
{
    uint8_t *xq = malloc((size_t)nt * (size_t)(k / 32) * ST_Q8_1_BLOCK_BYTES);
    for (int t = 0; t < nt; t++)
        assert_int_equal(st_quantize_q8_1(x + (size_t)t * k, xq + (size_t)t * (k / 32) * ST_Q8_1_BLOCK_BYTES, k), ST_OK);
    return xq;
}

static void mmvq_same_bytes_for_any_thread_split(void **state)
{
    (void)state;
    st_rng r;
    st_rng_seed(&r, 11);
    const int threads[] = {1, 2, 3, 7}, chunks[] = {0, 1, 2, 5, 17, 1000};
    for (size_t i = 0; i < NTYPES; i++) {
        const int rows = 97, cols = 2560, nt = 5;
        void *w = rand_matrix(&r, TYPES[i], rows, cols);
        float *x = malloc(sizeof(float) * nt * cols);
        st_random_floats(&r, x, (size_t)nt * cols, 1.0f);
        uint8_t *xq = quantize_tokens(x, nt, cols);
        float ref[5 * 97], y[5 * 97];
        st_cpu_split one = {1, 1};
        assert_int_equal(st_ref_mmvq(TYPES[i], w, rows, cols, xq, nt, ref, &one), ST_OK);
        for (size_t a = 0; a < 4; a++) {
            st_cpu_pool *pool = NULL; /* a pool of exactly that many threads */
            assert_int_equal(st_cpu_pool_create(threads[a], &pool), ST_OK);
            for (size_t b = 0; b < 6; b++) {
                st_cpu_split s = {threads[a], chunks[b]};
                memset(y, 0xff, sizeof y);
                assert_int_equal(st_ref_mmvq_pool(TYPES[i], w, rows, cols, xq, nt, y, rows, &s, pool), ST_OK);
                assert_memory_equal(y, ref, sizeof y);
            }
            st_cpu_pool_destroy(pool);
        }
        free(w);
        free(x);
        free(xq);
    }
}

typedef struct {
    void *g, *u, *d;
} ew_host;

static void expert_same_bytes_for_any_thread_split(void **state)
{
    (void)state;
    st_rng r;
    st_rng_seed(&r, 12);
    const int n_embd = 256, n_ff = 64, n_exp = 8, nt = 4, topk = 2;
    st_expert_weights ew = {ST_IQ3_S, ST_IQ4_NL, n_embd, n_ff, n_exp, rand_matrix(&r, ST_IQ3_S, n_exp * n_ff, n_embd),
                            rand_matrix(&r, ST_IQ3_S, n_exp * n_ff, n_embd), rand_matrix(&r, ST_IQ4_NL, n_exp * n_embd, n_ff)};
    float x[4 * 256], wts[8], ref[4 * 256], out[4 * 256];
    int32_t ids[8] = {3, 5, 5, 1, 3, 5, 7, 0};
    st_random_floats(&r, x, sizeof x / sizeof x[0], 1.0f);
    for (int i = 0; i < 8; i++) wts[i] = 0.1f * (float)(i + 1);
    st_cpu_split one = {1, 1};
    assert_int_equal(st_ref_expert_grouped(&ew, x, ids, wts, nt, topk, ref, &one), ST_OK);
    const int threads[] = {1, 2, 5}, chunks[] = {0, 1, 3, 64};
    void *scratch = malloc(st_ref_expert_scratch_bytes(ew.n_embd, ew.n_ff, nt, topk));
    assert_non_null(scratch);
    for (int a = 0; a < 3; a++) {
        st_cpu_pool *pool = NULL; /* a pool of exactly that many threads */
        assert_int_equal(st_cpu_pool_create(threads[a], &pool), ST_OK);
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++) {
                st_cpu_split gs = {threads[a], chunks[b]}, ds = {threads[a], chunks[c]};
                memset(out, 0xff, sizeof out);
                assert_int_equal(st_ref_expert_grouped_ws(&ew, NULL, x, ids, wts, nt, topk, out, &gs, &ds, pool, scratch), ST_OK);
                assert_memory_equal(out, ref, sizeof out);
            }
        st_cpu_pool_destroy(pool);
    }
    free(scratch);
    free((void *)ew.gate);
    free((void *)ew.up);
    free((void *)ew.down);
}

/* out[t] = sum_k w * down_e . q8_1(silu(gate_e . q8_1(x)) * (up_e . q8_1(x))), built from st_ref_mmvq,
 * for the routing IDS [nt][topk]. */
static void check_composition(st_rng *r, st_qtype gu, st_qtype dn, int n_embd, int n_ff, int n_exp, int nt, int topk,
                              const int32_t *ids)
{
    const size_t grb = st_qtype_row_bytes(gu, n_embd), drb = st_qtype_row_bytes(dn, n_ff);
    st_expert_weights ew = {gu, dn, n_embd, n_ff, n_exp, rand_matrix(r, gu, n_exp * n_ff, n_embd),
                            rand_matrix(r, gu, n_exp * n_ff, n_embd), rand_matrix(r, dn, n_exp * n_embd, n_ff)};
    const size_t nx = (size_t)nt * (size_t)n_embd;
    float *x = malloc(sizeof(float) * nx), *out = malloc(sizeof(float) * nx), *want = malloc(sizeof(float) * nx);
    float *wts = malloc(sizeof(float) * (size_t)(nt * topk));
    float *g = malloc(sizeof(float) * (size_t)n_ff), *u = malloc(sizeof(float) * (size_t)n_ff);
    float *h = malloc(sizeof(float) * (size_t)n_ff), *y = malloc(sizeof(float) * (size_t)n_embd);
    st_random_floats(r, x, nx, 2.0f);
    for (int i = 0; i < nt * topk; i++) wts[i] = st_rng_float(r);
    assert_int_equal(st_ref_expert_grouped(&ew, x, ids, wts, nt, topk, out, NULL), ST_OK);
    for (int t = 0; t < nt; t++) {
        uint8_t *xq = quantize_tokens(x + (size_t)t * n_embd, 1, n_embd);
        float *acc = want + (size_t)t * n_embd;
        memset(acc, 0, sizeof(float) * (size_t)n_embd);
        for (int k = 0; k < topk; k++) {
            int e = ids[t * topk + k];
            assert_int_equal(st_ref_mmvq(gu, (const uint8_t *)ew.gate + (size_t)e * n_ff * grb, n_ff, n_embd, xq, 1, g, NULL), ST_OK);
            assert_int_equal(st_ref_mmvq(gu, (const uint8_t *)ew.up + (size_t)e * n_ff * grb, n_ff, n_embd, xq, 1, u, NULL), ST_OK);
            for (int i = 0; i < n_ff; i++) h[i] = st_silu_mul(g[i], u[i]);
            uint8_t *hq = quantize_tokens(h, 1, n_ff);
            assert_int_equal(st_ref_mmvq(dn, (const uint8_t *)ew.down + (size_t)e * n_embd * drb, n_embd, n_ff, hq, 1, y, NULL), ST_OK);
            for (int i = 0; i < n_embd; i++) acc[i] = st_fma(wts[t * topk + k], y[i], acc[i]);
            free(hq);
        }
        free(xq);
    }
    assert_memory_equal(out, want, sizeof(float) * nx);
    free((void *)ew.gate);
    free((void *)ew.up);
    free((void *)ew.down);
    free(x), free(out), free(want), free(wts), free(g), free(u), free(h), free(y);
}

static void expert_equals_its_composition(void **state)
{
    (void)state;
    st_rng r;
    st_rng_seed(&r, 13);
    const int32_t ids[9] = {0, 4, 2, 4, 5, 0, 1, 2, 3};
    check_composition(&r, ST_IQ4_XS, ST_Q8_0, 512, 96, 6, 3, 3, ids);
}

/* At the limits: ST_MAX_EXPERTS experts, ST_MAX_TOKENS tokens of top-
 * ST_MAX_TOPK (ST_MAX_PAIRS pairs in one call), the last expert id used,
 * some experts shared by several tokens; and Qwen3-Next's 512 / top-10. */
static void expert_equals_its_composition_at_the_limits(void **state)
{
    (void)state;
    st_rng r;
    st_rng_seed(&r, 17);
    int32_t ids[ST_MAX_PAIRS];
    const int topks[] = {ST_MAX_TOPK, 10};
    for (size_t i = 0; i < 2; i++) {
        const int topk = topks[i];
        for (int t = 0; t < ST_MAX_TOKENS; t++)
            for (int k = 0; k < topk; k++) /* distinct within a token */
                ids[t * topk + k] = k < 2 ? ST_MAX_EXPERTS - 1 - k : (t * 37 + k * 5) % (ST_MAX_EXPERTS - 2);
        check_composition(&r, ST_IQ3_S, ST_IQ4_NL, 256, 64, ST_MAX_EXPERTS, ST_MAX_TOKENS, topk, ids);
    }
}

/* One past each limit is refused with a message that names it; the output
 * is left as it was. */
static void expert_refuses_beyond_the_limits(void **state)
{
    (void)state;
    st_rng r;
    st_rng_seed(&r, 19);
    const int n_embd = 256, n_ff = 32;
    st_expert_weights ew = {ST_Q8_0, ST_Q8_0, n_embd, n_ff, ST_MAX_EXPERTS + 1,
                            rand_matrix(&r, ST_Q8_0, (ST_MAX_EXPERTS + 1) * n_ff, n_embd),
                            rand_matrix(&r, ST_Q8_0, (ST_MAX_EXPERTS + 1) * n_ff, n_embd),
                            rand_matrix(&r, ST_Q8_0, (ST_MAX_EXPERTS + 1) * n_embd, n_ff)};
    float x[256] = {0}, wts[ST_MAX_TOPK + 1] = {0}, out[256];
    int32_t ids[ST_MAX_TOPK + 1] = {0};
    for (int k = 0; k <= ST_MAX_TOPK; k++) ids[k] = k;
    memset(out, 0x5a, sizeof out);
    assert_int_equal(st_ref_expert_grouped(&ew, x, ids, wts, 1, 2, out, NULL), ST_ERR_INVALID_ARG);
    char want[128];
    snprintf(want, sizeof want, "n_expert %d is out of range 1..%d (ST_MAX_EXPERTS)", ST_MAX_EXPERTS + 1, ST_MAX_EXPERTS);
    assert_non_null(strstr(st_last_error(), want));
    ew.n_expert = ST_MAX_EXPERTS;
    assert_int_equal(st_ref_expert_grouped(&ew, x, ids, wts, 1, ST_MAX_TOPK + 1, out, NULL), ST_ERR_INVALID_ARG);
    snprintf(want, sizeof want, "top-k %d is out of range 1..%d (ST_MAX_TOPK)", ST_MAX_TOPK + 1, ST_MAX_TOPK);
    assert_non_null(strstr(st_last_error(), want));
    for (int i = 0; i < 256; i++) assert_int_equal(((uint8_t *)out)[i], 0x5a);
    assert_int_equal(st_ref_expert_grouped(&ew, x, ids, wts, 1, ST_MAX_TOPK, out, NULL), ST_OK);
    free((void *)ew.gate);
    free((void *)ew.up);
    free((void *)ew.down);
}

/* A "variant" that sums the units of a row in plain order instead of the 32
 * canonical streams: mathematically the same dot, different rounding. */
/* Unit U of ROW added to *ACC with the contract's float operations. */
static void add_unit(st_qtype t, const uint8_t *row, int u, const uint8_t *xq, float *acc)
{
    st_unit un;
    st_unit_decode(t, row, u, &un);
    const uint8_t *blk = xq + (size_t)u * ST_Q8_1_BLOCK_BYTES;
    const float da = st_half_to_float((uint16_t)(blk[0] | blk[1] << 8));
    int32_t isum = 0, qm = 0;
    for (int j = 0; j < 32; j++) {
        isum += un.w[j] * (int8_t)blk[4 + j];
        qm += un.mf[j / 16] * (int8_t)blk[4 + j];
    }
    *acc = st_fma(st_fmul(un.W, da), (float)isum, *acc);
    if (un.has_min) *acc = st_fma(-st_fmul(un.M, da), (float)qm, *acc);
}

static void wrong_order_mmvq(st_qtype t, const uint8_t *w, int rows, int cols, const uint8_t *xq, float *y)
{
    const size_t rb = st_qtype_row_bytes(t, cols);
    for (int r = 0; r < rows; r++) {
        float acc = 0.0f;
        for (int u = 0; u < cols / 32; u++) add_unit(t, w + (size_t)r * rb, u, xq, &acc);
        y[r] = acc;
    }
}

/* The contract written out a second time, for one row: S streams (stream
 * u % S), each group of 32 by a recursive halving (pairs i, i + 16 first),
 * then S / 32 groups pairwise the same way (g, g + 2 first for 4). */
static float halving(float *v, int n)
{
    for (int h = n / 2; h >= 1; h /= 2)
        for (int i = 0; i < h; i++) v[i] = st_fadd(v[i], v[i + h]);
    return v[0];
}

static float streams_dot(st_qtype t, const uint8_t *row, int cols, const uint8_t *xq, int S)
{
    float acc[128] = {0}, grp[4];
    for (int u = 0; u < cols / 32; u++) add_unit(t, row, u, xq, &acc[u % S]);
    for (int g = 0; g < S / 32; g++) grp[g] = halving(acc + 32 * g, 32);
    return halving(grp, S / 32);
}

/* iq_mmvq rows of ST_CANON_WIDE_UNITS units or more take 128 streams in 4
 * groups; shorter rows (and every expert row) 32. Checked on the edges
 * (255, 256 and 257 units) and a long row, for a format with and one
 * without a min term. */
static void wide_rows_take_128_streams(void **state)
{
    (void)state;
    st_rng r;
    st_rng_seed(&r, 21);
    const st_qtype types[] = {ST_IQ4_NL, ST_Q4_1, ST_IQ4_XS};
    const int cols_of[] = {255 * 32, 256 * 32, 257 * 32, 448 * 32};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t ci = 0; ci < sizeof cols_of / sizeof cols_of[0]; ci++) {
            const int cols = cols_of[ci], rows = 16;
            if (cols % st_qtype_block_values(types[ti])) continue;
            void *w = rand_matrix(&r, types[ti], rows, cols);
            float *x = malloc(sizeof(float) * (size_t)cols);
            st_random_floats(&r, x, (size_t)cols, 1.0f);
            uint8_t *xq = quantize_tokens(x, 1, cols);
            float y[16];
            assert_int_equal(st_ref_mmvq(types[ti], w, rows, cols, xq, 1, y, NULL), ST_OK);
            const int S = cols / 32 >= ST_CANON_WIDE_UNITS ? ST_CANON_STREAMS * ST_CANON_WIDE_GROUPS : ST_CANON_STREAMS;
            int other = 0;
            for (int i = 0; i < rows; i++) {
                const uint8_t *row = (const uint8_t *)w + (size_t)i * st_qtype_row_bytes(types[ti], cols);
                const float want = streams_dot(types[ti], row, cols, xq, S);
                assert_memory_equal(&y[i], &want, 4);
                const float o = streams_dot(types[ti], row, cols, xq, S == 32 ? 128 : 32);
                other += memcmp(&y[i], &o, 4) != 0;
            }
            /* the two orders round differently on most rows: the check above
             * tells them apart */
            assert_true(other > rows / 4);
            free(w);
            free(x);
            free(xq);
        }
}

static void byte_compare_catches_a_changed_summation_order(void **state)
{
    (void)state;
    st_rng r;
    st_rng_seed(&r, 14);
    const int rows = 256, cols = 4096;
    void *w = rand_matrix(&r, ST_IQ3_S, rows, cols);
    float x[4096], ref[256], bad[256];
    st_random_floats(&r, x, 4096, 1.0f);
    uint8_t *xq = quantize_tokens(x, 1, cols);
    assert_int_equal(st_ref_mmvq(ST_IQ3_S, w, rows, cols, xq, 1, ref, NULL), ST_OK);
    wrong_order_mmvq(ST_IQ3_S, w, rows, cols, xq, bad);
    int differ = 0;
    double maxrel = 0;
    for (int i = 0; i < rows; i++) {
        differ += memcmp(&ref[i], &bad[i], 4) != 0;
        double rel = ref[i] != 0 ? (bad[i] - ref[i]) / (double)ref[i] : 0;
        if (rel < 0) rel = -rel;
        if (rel > maxrel) maxrel = rel;
    }
    printf("wrong summation order: %d of %d rows differ in their bytes (max rel diff %.2g): caught\n", differ, rows, maxrel);
    /* The values agree to float rounding, yet the bytes differ: the compare
     * the tuner runs must see it. */
    assert_true(differ > rows / 4);
    assert_true(maxrel < 1e-3);
    assert_true(memcmp(ref, bad, sizeof ref) != 0);
    free(w);
    free(xq);
}

static void repack_round_trips_every_type(void **state)
{
    (void)state;
    st_rng r;
    st_rng_seed(&r, 15);
    for (size_t i = 0; i < NTYPES; i++) {
        const int rows = 13, cols = st_qtype_block_values(TYPES[i]) == 256 ? 768 : 96;
        const size_t n = (size_t)rows * st_qtype_row_bytes(TYPES[i], cols);
        void *w = rand_matrix(&r, TYPES[i], rows, cols);
        const size_t pn = st_repack_size(TYPES[i], rows, cols);
        assert_true(pn >= n && pn <= n + 5 * 15);
        void *packed = malloc(pn), *back = malloc(n);
        assert_int_equal(st_repack(TYPES[i], rows, cols, w, packed), ST_OK);
        assert_int_equal(st_unpack(TYPES[i], rows, cols, packed, back), ST_OK);
        assert_memory_equal(back, w, n);
        free(w);
        free(packed);
        free(back);
    }
    assert_int_equal(st_repack_size(ST_IQ3_S, 4, 100), 0);
}

/* The random test blocks every GPU parity test and the tuner use are sane
 * for every format: each home overwrites its scale fields, so no value is
 * inf or NaN (which could hide a mismatch) and the magnitudes stay small. */
static void random_blocks_are_finite_for_every_type(void **state)
{
    (void)state;
    st_rng r;
    st_rng_seed(&r, 16);
    for (size_t i = 0; i < NTYPES; i++) {
        const int rows = 64, cols = 3 * st_qtype_block_values(TYPES[i]);
        void *w = rand_matrix(&r, TYPES[i], rows, cols);
        float *y = malloc(sizeof(float) * (size_t)cols);
        int nonzero = 0;
        for (int row = 0; row < rows; row++) {
            assert_int_equal(st_dequantize_row(TYPES[i], (const uint8_t *)w + (size_t)row * st_qtype_row_bytes(TYPES[i], cols),
                                               y, cols),
                             ST_OK);
            for (int k = 0; k < cols; k++) {
                if (!(y[k] >= -16.0f && y[k] <= 16.0f))
                    fail_msg("%s row %d value %d: %g", st_qtype_name(TYPES[i]), row, k, (double)y[k]);
                nonzero += y[k] != 0.0f;
            }
        }
        assert_true(nonzero > rows * cols / 2);
        free(y);
        free(w);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mmvq_same_bytes_for_any_thread_split),
        cmocka_unit_test(expert_same_bytes_for_any_thread_split),
        cmocka_unit_test(expert_equals_its_composition),
        cmocka_unit_test(expert_equals_its_composition_at_the_limits),
        cmocka_unit_test(expert_refuses_beyond_the_limits),
        cmocka_unit_test(byte_compare_catches_a_changed_summation_order),
        cmocka_unit_test(wide_rows_take_128_streams),
        cmocka_unit_test(repack_round_trips_every_type),
        cmocka_unit_test(random_blocks_are_finite_for_every_type),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
