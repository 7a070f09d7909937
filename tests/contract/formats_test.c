/* formats: type info, f16 conversion, dequantization and q8_1 bit for bit
 * against the STQV reference vectors (tests/data/vectors), the CPU reference
 * dot against Y_Q8_1_F64, and the STQV reader's refusals. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "strata/table.h"

#include "strata/tools/vectors.h"
#include "strata/formats.h"
#include "strata/reference.h"
#include "strata/status.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VEC_DIR STRATA_TEST_DATA "/vectors"
/* The smallest copied file: the reader tests mutate it. */
#define SMALL_FILE VEC_DIR "/q8_0_M8_K64_T1.stqv"
#define K256_FILE VEC_DIR "/iq3_s_M8_K256_T4.stqv"

/* ---- helpers --------------------------------------------------------------- */

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t g_rng = 0x9e3779b9u;
static uint32_t rng(void)
{
    uint32_t x = g_rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return g_rng = x;
}

/* The whole file, through the library's own reader (strata/table.h). */
static uint8_t *read_all(const char *path, size_t *len)
{
    char *b = NULL;
    assert_int_equal(st_read_file(path, &b, len), ST_OK);
    assert_true(*len > 0);
    return (uint8_t *)b;
}

/* Paths of the copied vector files of type T ("<name>_M..."), NULL-ended. */
static char **files_of_type(st_qtype t, int *count)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s_M", st_qtype_name(t));
    DIR *d = opendir(VEC_DIR);
    assert_non_null(d);
    char **list = calloc(64, sizeof *list);
    assert_non_null(list);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 63) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 || l < 5 || strcmp(e->d_name + l - 5, ".stqv") != 0)
            continue;
        list[n] = malloc(strlen(VEC_DIR) + l + 2);
        assert_non_null(list[n]);
        sprintf(list[n], "%s/%s", VEC_DIR, e->d_name);
        n++;
    }
    closedir(d);
    *count = n;
    return list;
}

static void free_list(char **list)
{
    for (int i = 0; list[i]; i++) free(list[i]);
    free(list);
}

static st_stqv *open_ok(const char *path)
{
    st_stqv *s = NULL;
    st_status rc = st_stqv_open(path, &s);
    if (rc != ST_OK) fail_msg("%s: %s", path, st_last_error());
    return s;
}

/* Per-type tests get their type through the CMocka state. */
static st_qtype state_type(void **state) { return *(const st_qtype *)*state; }

/* ---- per-type: dequantize, q8_1, dot ---------------------------------------- */

static void dequantize_bit_exact(void **state)
{
    st_qtype t = state_type(state);
    int n;
    char **files = files_of_type(t, &n);
    assert_true(n >= 2); /* K256_T1 and K256_T4 at least */
    for (int i = 0; i < n; i++) {
        st_stqv *s = open_ok(files[i]);
        assert_int_equal(s->type, t);
        const uint8_t *wq = st_stqv_section_data(s, ST_STQV_W_QUANT, NULL);
        const float *wd = st_stqv_section_data(s, ST_STQV_W_DEQ, NULL);
        float *y = malloc((size_t)s->m * s->k * sizeof *y);
        assert_non_null(y);
        for (uint32_t m = 0; m < s->m; m++)
            assert_int_equal(st_dequantize_row(t, wq + (size_t)m * s->row_bytes, y + (size_t)m * s->k, s->k), ST_OK);
        if (memcmp(y, wd, (size_t)s->m * s->k * sizeof *y) != 0) {
            for (size_t j = 0; j < (size_t)s->m * s->k; j++)
                if (f2u(y[j]) != f2u(wd[j]))
                    fail_msg("%s: float %zu: 0x%08x, expected 0x%08x", files[i], j, f2u(y[j]), f2u(wd[j]));
        }
        free(y);
        st_stqv_close(s);
    }
    free_list(files);
}

/* Our q8_1 of X_F32 (all tokens), malloc'd. */
static uint8_t *quantize_x(const st_stqv *s)
{
    const float *x = st_stqv_section_data(s, ST_STQV_X_F32, NULL);
    size_t bytes = (size_t)s->t * s->k / ST_Q8_1_QK * ST_Q8_1_BLOCK_BYTES;
    uint8_t *xq = malloc(bytes);
    assert_non_null(xq);
    assert_int_equal(st_quantize_q8_1(x, xq, (int64_t)s->t * s->k), ST_OK);
    return xq;
}

static void q8_1_bytes_exact(void **state)
{
    st_qtype t = state_type(state);
    int n;
    char **files = files_of_type(t, &n);
    assert_true(n >= 2);
    for (int i = 0; i < n; i++) {
        st_stqv *s = open_ok(files[i]);
        size_t size;
        const uint8_t *want = st_stqv_section_data(s, ST_STQV_X_Q8_1, &size);
        uint8_t *xq = quantize_x(s);
        for (size_t j = 0; j < size; j++)
            if (xq[j] != want[j])
                fail_msg("%s: byte %zu (block %zu): 0x%02x, expected 0x%02x", files[i], j, j / 36, xq[j], want[j]);
        free(xq);
        st_stqv_close(s);
    }
    free_list(files);
}

/* The relative error tune_decode vectors uses: against the row's absolute
 * dot magnitude sum_k |W_DEQ[m][k] * xq_k|. */
static void dot_within_1e_4(void **state)
{
    st_qtype t = state_type(state);
    int n;
    char **files = files_of_type(t, &n);
    assert_true(n >= 2);
    for (int i = 0; i < n; i++) {
        st_stqv *s = open_ok(files[i]);
        assert_true(s->t <= 8);
        uint8_t *xq = quantize_x(s);
        float *y = calloc((size_t)s->t * s->m, sizeof *y);
        float *xf = malloc((size_t)s->k * sizeof *xf);
        assert_non_null(y);
        assert_non_null(xf);
        st_status rc = st_ref_mmvq(t, st_stqv_section_data(s, ST_STQV_W_QUANT, NULL), s->m, s->k, xq, (int)s->t, y, NULL);
        if (rc != ST_OK) fail_msg("%s: st_ref_mmvq: %s", files[i], st_last_error());
        const float *wd = st_stqv_section_data(s, ST_STQV_W_DEQ, NULL);
        const double *want = st_stqv_section_data(s, ST_STQV_Y_Q8_1_F64, NULL);
        for (uint32_t tk = 0; tk < s->t; tk++) {
            const uint8_t *xt = xq + (size_t)tk * s->k / 32 * 36;
            for (uint32_t k = 0; k < s->k; k++) {
                const uint8_t *b = xt + (k / 32) * 36;
                xf[k] = st_f16_to_f32((uint16_t)(b[0] | b[1] << 8)) * (float)(int8_t)b[4 + k % 32];
            }
            for (uint32_t m = 0; m < s->m; m++) {
                double mag = 0;
                for (uint32_t k = 0; k < s->k; k++) mag += fabs((double)wd[(size_t)m * s->k + k] * (double)xf[k]);
                double got = y[(size_t)tk * s->m + m], ref = want[(size_t)tk * s->m + m];
                double err = fabs(got - ref) / (mag > 1e-30 ? mag : 1e-30);
                if (!(err <= 1e-4))
                    fail_msg("%s: token %u row %u: %.9g vs %.17g, rel err %.3g", files[i], tk, m, got, ref, err);
            }
        }
        free(xf);
        free(y);
        free(xq);
        st_stqv_close(s);
    }
    free_list(files);
}

/* ---- q8_1 details ----------------------------------------------------------- */

static void q8_1_zero_block_is_all_zero(void **state)
{
    (void)state;
    float x[64] = {0};
    x[40] = 0.5f; /* second block non-zero, first all zero */
    uint8_t out[72];
    memset(out, 0xaa, sizeof out);
    assert_int_equal(st_quantize_q8_1(x, out, 64), ST_OK);
    for (int i = 0; i < 36; i++) assert_int_equal(out[i], 0);
    /* second block: d = 0.5/127, q[8] = 127, s = 0.5 */
    assert_int_equal(out[36] | out[37] << 8, st_f32_to_f16(0.5f / 127.0f));
    assert_int_equal(out[38] | out[39] << 8, st_f32_to_f16(0.5f));
    assert_int_equal((int8_t)out[40 + 8], 127);
}

static void q8_1_rounds_halves_away_from_zero(void **state)
{
    (void)state;
    /* amax 127 -> d = 1 exactly; x/d = x, so q = roundf(x). */
    float x[32] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.5f, -126.5f};
    uint8_t out[36];
    assert_int_equal(st_quantize_q8_1(x, out, 32), ST_OK);
    int8_t want[7] = {127, 3, -3, 1, -1, 2, -127};
    for (int i = 0; i < 7; i++) assert_int_equal((int8_t)out[4 + i], want[i]);
    assert_int_equal(out[0] | out[1] << 8, 0x3c00); /* d = 1.0 */
}

/* The CUDA kernel's warp butterfly, lane by lane: every lane adds lane i^o
 * at the same time. The sum of a left-to-right loop differs. */
static float lane_butterfly_sum(const float *x)
{
    float v[32], w[32];
    memcpy(v, x, sizeof v);
    for (int o = 16; o >= 1; o >>= 1) {
        for (int i = 0; i < 32; i++) w[i] = v[i] + v[i ^ o];
        memcpy(v, w, sizeof v);
    }
    return v[0];
}

static void q8_1_sum_follows_warp_butterfly(void **state)
{
    (void)state;
    /* Left to right: (2^24 + 1) rounds to 2^24, minus 2^24 gives 0. The
     * butterfly pairs x[0] with x[16] first and keeps the 1. */
    float x[32] = {0};
    x[0] = 16777216.0f;
    x[16] = -16777216.0f;
    x[1] = 1.0f;
    uint8_t out[36];
    assert_int_equal(st_quantize_q8_1(x, out, 32), ST_OK);
    assert_int_equal(out[2] | out[3] << 8, 0x3c00);
    /* Random blocks with a wide dynamic range. */
    g_rng = 4242;
    for (int it = 0; it < 20000; it++) {
        for (int i = 0; i < 32; i++) {
            uint32_t e = 127 - 10 + rng() % 30;
            x[i] = u2f((rng() & 0x807fffffu) | (e << 23));
        }
        assert_int_equal(st_quantize_q8_1(x, out, 32), ST_OK);
        uint16_t want = st_f32_to_f16(lane_butterfly_sum(x));
        if ((out[2] | out[3] << 8) != want) fail_msg("block %d: s 0x%04x, expected 0x%04x", it, out[2] | out[3] << 8, want);
    }
}

static void q8_1_non_finite_input_does_not_crash(void **state)
{
    (void)state;
    float x[32] = {0};
    x[3] = INFINITY;
    x[4] = NAN;
    uint8_t out[36];
    assert_int_equal(st_quantize_q8_1(x, out, 32), ST_OK);
}

/* ---- f16 -------------------------------------------------------------------- */

static bool half_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }

/* Independent decoding: sign * mant * 2^(exp-25) in double. */
static double half_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : ldexp(m | 0x400, e - 25);
    return (h & 0x8000) ? -v : v;
}

static void f16_round_trip_all_65536(void **state)
{
    (void)state;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = st_f16_to_f32(h);
        if (half_is_nan(h)) {
            assert_true(isnan(f));
            uint16_t back = st_f32_to_f16(f);
            assert_true(half_is_nan(back));
            assert_int_equal(back & 0x8000, h & 0x8000);
            continue;
        }
        if ((h & 0x7fff) == 0x7c00)
            assert_true(isinf(f) && (signbit(f) != 0) == ((h & 0x8000) != 0));
        else
            assert_true((double)f == half_value(h));
        if (st_f32_to_f16(f) != h) fail_msg("half 0x%04x -> %a -> 0x%04x", h, (double)f, st_f32_to_f16(f));
    }
}

/* Reference f32 -> f16 RNE by search over the ordered positive halves, with
 * 0x7c00 standing for 65536 (the first value past the largest finite half),
 * so that rounding up to it means overflow to inf. */
static uint16_t ref_f32_to_f16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (isnan(f)) return 0x7e00;
    double a = fabs((double)f);
    if (a >= 65536.0) return sign | 0x7c00;
    int lo = 0, hi = 0x7c00; /* value(lo) <= a < value(hi) */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (half_value((uint16_t)mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    double vhi = hi == 0x7c00 ? 65536.0 : half_value((uint16_t)hi);
    double dlo = a - half_value((uint16_t)lo), dhi = vhi - a; /* exact in double */
    int r = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
    return (uint16_t)(sign | r);
}

static void check_f32_to_f16(float f)
{
    uint16_t got = st_f32_to_f16(f), want = ref_f32_to_f16(f);
    if (isnan(f)) {
        assert_true(half_is_nan(got));
        return;
    }
    if (got != want) fail_msg("f32 %a (0x%08x): 0x%04x, expected 0x%04x", (double)f, f2u(f), got, want);
}

static void f32_to_f16_rounds_to_nearest_even(void **state)
{
    (void)state;
    g_rng = 12345;
    /* Every midpoint between adjacent halves (and the largest finite one and
     * "65536"), and the floats one ulp either side, both signs. */
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double next = h + 1 == 0x7c00 ? 65536.0 : half_value((uint16_t)(h + 1));
        float mid = (float)((half_value((uint16_t)h) + next) / 2); /* exact: 12 bits */
        float v = (float)half_value((uint16_t)h);
        float c[5] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY), v, nextafterf(v, INFINITY)};
        for (int i = 0; i < 5; i++) {
            check_f32_to_f16(c[i]);
            check_f32_to_f16(-c[i]);
        }
    }
    /* ~1e6 random floats: any bit pattern, and patterns with exponents in and
     * around the half range (subnormal halves through overflow). */
    for (int i = 0; i < 500000; i++) check_f32_to_f16(u2f(rng()));
    for (int i = 0; i < 500000; i++) {
        uint32_t e = 127 - 27 + rng() % 46; /* 2^-27 .. 2^18 */
        check_f32_to_f16(u2f((rng() & 0x807fffffu) | (e << 23)));
    }
    /* Named boundaries. */
    const float b[] = {65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e30f, INFINITY, 5.9604645e-8f /* 2^-24 */,
                       2.9802322e-8f /* 2^-25: tie -> 0 */, 2.9802326e-8f, 8.940697e-8f /* 1.5*2^-24: tie -> 2 */,
                       6.1035156e-5f /* smallest normal half */, 6.1031431e-5f, 1.0f, 1.0004883f /* tie */, 0.0f,
                       1e-45f /* smallest subnormal float */};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        check_f32_to_f16(b[i]);
        check_f32_to_f16(-b[i]);
    }
    assert_int_equal(st_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(st_f32_to_f16(-65520.0f), 0xfc00);
    assert_int_equal(st_f32_to_f16(2.9802322e-8f), 0x0000);
    assert_int_equal(st_f32_to_f16(1.0004883f), 0x3c00);
    assert_true(half_is_nan(st_f32_to_f16(NAN)));
}

/* ---- type info ---------------------------------------------------------------- */

/* Every type of ST_QTYPES against what ggml wrote into its reference files
 * (the STQV header's type id, values and bytes per block, read raw here, not
 * through the reader that compares them with the list), and the name
 * functions. */
static void type_info_matches_ggml(void **state)
{
    (void)state;
    int n_types = 0;
#define ST_TYPE_ROW_(id, nm, ggml_id, qk_, bytes_) {ST_##id, nm, ggml_id, qk_, bytes_},
    static const struct {
        st_qtype t;
        const char *name;
        int ggml, qk, bytes;
    } types[] = {ST_QTYPES(ST_TYPE_ROW_)};
#undef ST_TYPE_ROW_
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++, n_types++) {
        const st_qtype t = types[i].t;
        assert_int_equal((int)t, types[i].ggml);
        assert_true(st_qtype_valid(types[i].ggml));
        assert_string_equal(st_qtype_name(t), types[i].name);
        assert_int_equal(st_qtype_from_name(types[i].name), t);
        char upper[32];
        snprintf(upper, sizeof upper, "%s", types[i].name);
        for (char *c = upper; *c; c++)
            if (*c >= 'a' && *c <= 'z') *c = (char)(*c - 'a' + 'A');
        assert_int_equal(st_qtype_from_name(upper), t);
        assert_int_equal(st_qtype_block_values(t), types[i].qk);
        assert_int_equal(st_qtype_block_bytes(t), types[i].bytes);
        assert_int_equal(st_qtype_row_bytes(t, 4096), (size_t)(4096 / types[i].qk * types[i].bytes));
        assert_int_equal(st_qtype_row_bytes(t, 0), 0);
        assert_non_null(strstr(st_qtype_names(), types[i].name));
        /* ggml's own numbers for the type, from its reference file */
        int nf;
        char **files = files_of_type(t, &nf);
        if (nf < 2) fail_msg("%s: %d reference files in " VEC_DIR ", need K256 (or K64) T1 and T4", types[i].name, nf);
        size_t len;
        uint8_t *raw = read_all(files[0], &len);
        assert_true(len >= 64);
        uint32_t h[3];
        memcpy(&h[0], raw + 8, 4);
        memcpy(&h[1], raw + 32, 4);
        memcpy(&h[2], raw + 36, 4);
        assert_int_equal(h[0], (uint32_t)types[i].ggml);
        assert_int_equal(h[1], (uint32_t)types[i].qk);
        assert_int_equal(h[2], (uint32_t)types[i].bytes);
        free(raw);
        free_list(files);
    }
    /* spot checks written out: ggml's ids and sizes of two types */
    assert_int_equal((int)ST_Q8_0, 8);
    assert_int_equal(st_qtype_block_bytes(ST_Q8_0), 34);
    assert_int_equal((int)ST_IQ3_S, 21);
    assert_int_equal(st_qtype_block_bytes(ST_IQ3_S), 110);
    assert_int_equal(st_qtype_from_name("Iq3_S"), ST_IQ3_S);
    const char *names = st_qtype_names();
    assert_true(names[0] != ' ' && names[strlen(names) - 1] != ' ');
    printf("type info: %d types match ggml's reference files\n", n_types);
}

static void type_info_rejects_unknown(void **state)
{
    (void)state;
    const int bad[] = {-1, 0, 1, 4, 9, 15, 24, 30, 1000}; /* 9, 15: activation-only Q8_1, Q8_K; 30: bf16 */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(st_qtype_valid(bad[i]));
        assert_string_equal(st_qtype_name((st_qtype)bad[i]), "?");
        assert_int_equal(st_qtype_block_values((st_qtype)bad[i]), 0);
        assert_int_equal(st_qtype_block_bytes((st_qtype)bad[i]), 0);
        assert_int_equal(st_qtype_row_bytes((st_qtype)bad[i], 256), 0);
    }
    const char *names[] = {"", "iq3", "iq3_s ", "iq3_sx", "q8_1", "q8_k", "f16", "iq3_s\n"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        assert_int_equal(st_qtype_from_name(names[i]), ST_QTYPE_NONE);
    assert_int_equal(st_qtype_from_name(NULL), ST_QTYPE_NONE);
}

static void row_bytes_rejects_bad_k(void **state)
{
    (void)state;
    assert_int_equal(st_qtype_row_bytes(ST_Q8_0, 33), 0);
    assert_int_equal(st_qtype_row_bytes(ST_Q8_0, -32), 0);
    assert_int_equal(st_qtype_row_bytes(ST_IQ3_S, 32), 0);
    assert_int_equal(st_qtype_row_bytes(ST_IQ3_S, 2560), 10 * 110);
    assert_int_equal(st_qtype_row_bytes(ST_IQ4_NL, 64), 36);
    /* Huge K: exact where size_t holds it, 0 (not a wrapped value) where not. */
    int64_t huge = INT64_MAX - INT64_MAX % 32;
    if (SIZE_MAX / 34 >= (uint64_t)huge / 32)
        assert_true(st_qtype_row_bytes(ST_Q8_0, huge) == (size_t)((uint64_t)huge / 32 * 34));
    else
        assert_int_equal(st_qtype_row_bytes(ST_Q8_0, huge), 0);
    if (SIZE_MAX <= UINT32_MAX) assert_int_equal(st_qtype_row_bytes(ST_Q8_0, (int64_t)1 << 40), 0);
}

/* ---- argument validation -------------------------------------------------------- */

static void expect_invalid(st_status rc)
{
    assert_int_equal(rc, ST_ERR_INVALID_ARG);
    assert_true(strlen(st_last_error()) > 0);
}

static void dequantize_rejects_bad_arguments(void **state)
{
    (void)state;
    uint8_t blk[2 * 144] = {0};
    float y[512];
    expect_invalid(st_dequantize_row(ST_Q8_0, NULL, y, 32));
    assert_non_null(strstr(st_last_error(), "src"));
    expect_invalid(st_dequantize_row(ST_Q8_0, blk, NULL, 32));
    assert_non_null(strstr(st_last_error(), "dst"));
    expect_invalid(st_dequantize_row(ST_Q8_0, blk, y, 33));
    assert_non_null(strstr(st_last_error(), "multiple"));
    expect_invalid(st_dequantize_row(ST_Q8_0, blk, y, -32));
    expect_invalid(st_dequantize_row(ST_Q4_K, blk, y, 32));
    expect_invalid(st_dequantize_row((st_qtype)9, blk, y, 32));
    assert_non_null(strstr(st_last_error(), "type"));
    expect_invalid(st_dequantize_row(ST_QTYPE_NONE, blk, y, 32));
    assert_int_equal(st_dequantize_row(ST_Q4_K, blk, y, 0), ST_OK);
    assert_int_equal(st_dequantize_row(ST_Q4_K, blk, y, 512), ST_OK);
    for (int i = 0; i < 512; i++) assert_true(y[i] == 0.0f);
}

static void quantize_q8_1_rejects_bad_arguments(void **state)
{
    (void)state;
    float x[64] = {0};
    uint8_t out[72];
    expect_invalid(st_quantize_q8_1(NULL, out, 32));
    expect_invalid(st_quantize_q8_1(x, NULL, 32));
    expect_invalid(st_quantize_q8_1(x, out, 33));
    assert_non_null(strstr(st_last_error(), "multiple"));
    expect_invalid(st_quantize_q8_1(x, out, -32));
    assert_int_equal(st_quantize_q8_1(x, out, 0), ST_OK);
}

/* ---- STQV reader ----------------------------------------------------------------- */

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Parse must refuse with ST_ERR_PARSE, a message, and *out NULL; the message
 * must contain NEEDLE when given. */
static void expect_refused(const uint8_t *buf, size_t len, const char *needle)
{
    st_stqv *s = (st_stqv *)(uintptr_t)1;
    st_status rc = st_stqv_parse(buf, len, &s);
    if (rc != ST_ERR_PARSE) fail_msg("len %zu: status %s, expected ST_ERR_PARSE", len, st_status_name(rc));
    assert_null(s);
    assert_true(strlen(st_last_error()) > 0);
    if (needle && !strstr(st_last_error(), needle))
        fail_msg("message '%s' does not mention '%s'", st_last_error(), needle);
}

static void stqv_opens_every_copied_file(void **state)
{
    (void)state;
    DIR *d = opendir(VEC_DIR);
    assert_non_null(d);
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".stqv")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", VEC_DIR, e->d_name);
        st_stqv *s = open_ok(path);
        char name[128];
        snprintf(name, sizeof name, "%s_M%u_K%u_T%u.stqv", st_qtype_name(s->type), s->m, s->k, s->t);
        assert_string_equal(name, e->d_name);
        assert_int_equal(s->seed, 1234);
        for (int i = 0; i < ST_STQV_N_SECTIONS; i++) {
            size_t size;
            const void *p = st_stqv_section_data(s, i, &size);
            assert_true(i == ST_STQV_RESERVED || (i == ST_STQV_X_Q8_K && s->k % 256) ? p == NULL : p != NULL);
            assert_true(((uintptr_t)p & 7) == 0);
        }
        st_stqv_close(s);
        files++;
    }
    closedir(d);
    assert_true(files >= 16);
    assert_null(st_stqv_section_data(NULL, 0, NULL));
}

static void stqv_refuses_truncated_files(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = read_all(SMALL_FILE, &len);
    st_stqv *s;
    assert_int_equal(st_stqv_parse(buf, len, &s), ST_OK);
    for (size_t n = 0; n <= 300; n++) expect_refused(buf, n, NULL);
    expect_refused(buf, 100, "truncated");
    /* Every section's end and start, and around them. */
    for (int i = 0; i < ST_STQV_N_SECTIONS; i++) {
        if (!s->sec_size[i]) continue;
        size_t end = (size_t)(s->sec_off[i] + s->sec_size[i]);
        size_t cuts[] = {(size_t)s->sec_off[i], (size_t)s->sec_off[i] + 1, end - 1, end - 8};
        for (int c = 0; c < 4; c++) expect_refused(buf, cuts[c], "past the end");
    }
    expect_refused(buf, len - 1, "past the end");
    st_stqv_close(s);
    /* Through the file path too. */
    char path[] = "/tmp/formats_test_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len - 16, f), len - 16);
    fclose(f);
    s = (st_stqv *)(uintptr_t)1;
    assert_int_equal(st_stqv_open(path, &s), ST_ERR_PARSE);
    assert_null(s);
    remove(path);
    free(buf);
}

/* Applies MUTATE to a fresh copy of the small file and expects a refusal. */
#define REFUSE_AFTER(needle, stmt)                      \
    do {                                                \
        uint8_t *b_ = malloc(len);                      \
        assert_non_null(b_);                            \
        memcpy(b_, orig, len);                          \
        {                                               \
            uint8_t *b = b_;                            \
            stmt;                                       \
        }                                               \
        expect_refused(b_, len, needle);                \
        free(b_);                                       \
    } while (0)

#define SEC_OFF(i) (b + 64 + 16 * (i))
#define SEC_SIZE(i) (b + 72 + 16 * (i))

static void stqv_refuses_bad_headers(void **state)
{
    (void)state;
    size_t len;
    uint8_t *orig = read_all(SMALL_FILE, &len);
    REFUSE_AFTER("magic", b[0] = 'X');
    REFUSE_AFTER("magic", memcpy(b, "GGUF", 4));
    REFUSE_AFTER("version", put32(b + 4, 2));
    REFUSE_AFTER("version", put32(b + 4, 0));
    REFUSE_AFTER("not supported", put32(b + 8, 9));
    REFUSE_AFTER("not supported", put32(b + 8, 0xffffffffu));
    REFUSE_AFTER("does not match", put32(b + 8, 21)); /* iq3_s header on q8_0 blocks */
    REFUSE_AFTER("empty", put32(b + 12, 0));
    REFUSE_AFTER("empty", put32(b + 16, 0));
    REFUSE_AFTER("empty", put32(b + 20, 0));
    REFUSE_AFTER("multiple", put32(b + 16, 48));
    REFUSE_AFTER("does not match", put32(b + 32, 64));
    REFUSE_AFTER("row_bytes", put32(b + 40, 69));
    REFUSE_AFTER("vec_dot_type", put32(b + 44, 2));
    REFUSE_AFTER("X_VDT", put32(b + 44, 9)); /* Q8_1 activations are 36-byte blocks, the file has Q8_0's */
    REFUSE_AFTER("Q8_K", put32(b + 44, 15)); /* K = 64 */
    REFUSE_AFTER("flags", put32(b + 28, 2)); /* Q8_K section with K = 64 */
    REFUSE_AFTER("n_sections", put32(b + 48, 13));
    REFUSE_AFTER("header_size", put32(b + 52, 512));
    /* A shape the sections do not have. */
    REFUSE_AFTER("needs", put32(b + 12, 9); put32(b + 40, 68));
    free(orig);
}

static void stqv_refuses_bad_section_tables(void **state)
{
    (void)state;
    size_t len;
    uint8_t *orig = read_all(SMALL_FILE, &len);
    /* Offsets past EOF. */
    REFUSE_AFTER("past the end", put64(SEC_OFF(10), len));
    REFUSE_AFTER("past the end", put64(SEC_OFF(10), (uint64_t)1 << 40));
    REFUSE_AFTER("overflows", put64(SEC_OFF(0), UINT64_MAX - 7)); /* + 2048 wraps */
    /* u64 overflow of offset + size (reserved section: any size). */
    REFUSE_AFTER("overflow", put64(SEC_OFF(11), UINT64_MAX - 7); put64(SEC_SIZE(11), 16));
    REFUSE_AFTER("past the end", put64(SEC_OFF(11), len); put64(SEC_SIZE(11), 8));
    /* Overlaps: with the header, with the previous section, out of order. */
    REFUSE_AFTER("header", put64(SEC_OFF(0), 0));
    REFUSE_AFTER("header", put64(SEC_OFF(0), 128));
    REFUSE_AFTER("overlaps", put64(SEC_OFF(3), get64(SEC_OFF(2))));
    REFUSE_AFTER("overlaps", put64(SEC_OFF(3), get64(SEC_OFF(3)) - 8));
    REFUSE_AFTER("overlaps", put64(SEC_OFF(11), 256); put64(SEC_SIZE(11), 8));
    /* Sizes that disagree with the header. */
    REFUSE_AFTER("needs", put64(SEC_SIZE(2), get64(SEC_SIZE(2)) - 4));
    REFUSE_AFTER("needs", put64(SEC_SIZE(5), UINT64_MAX));
    /* Missing, misaligned, unexpected. */
    REFUSE_AFTER("missing", put64(SEC_OFF(6), 0); put64(SEC_SIZE(6), 0));
    REFUSE_AFTER("aligned", put64(SEC_OFF(9), get64(SEC_OFF(9)) + 4));
    REFUSE_AFTER("flags", put64(SEC_OFF(7), get64(SEC_OFF(10))); put64(SEC_SIZE(7), 8));
    /* M*K overflowing 64 bits: K = 0xF0000000 (row_bytes still fits u32). */
    REFUSE_AFTER("overflows", put32(b + 12, 0xffffffffu); put32(b + 16, 0xf0000000u);
                 put32(b + 40, 0xf0000000u / 32 * 34));
    REFUSE_AFTER("overflows", put32(b + 20, 0xffffffffu); put32(b + 16, 0xf0000000u);
                 put32(b + 40, 0xf0000000u / 32 * 34));
    free(orig);
}

static void stqv_survives_random_corruption(void **state)
{
    (void)state;
    size_t len;
    uint8_t *orig = read_all(K256_FILE, &len);
    uint8_t *b = malloc(len);
    assert_non_null(b);
    g_rng = 777;
    int accepted = 0;
    for (int it = 0; it < 5000; it++) {
        memcpy(b, orig, len);
        int flips = 1 + (int)(rng() % 4);
        for (int f = 0; f < flips; f++) {
            uint32_t r = rng();
            size_t pos = r % 256; /* header and section table */
            if (r & 0x80000000u)
                b[pos] ^= (uint8_t)(1u << (rng() % 8));
            else
                b[pos] = (uint8_t)rng();
        }
        size_t n = (rng() % 8 == 0) ? rng() % len : len;
        st_stqv *s = NULL;
        st_status rc = st_stqv_parse(b, n, &s);
        if (rc == ST_OK) {
            accepted++;
            for (int i = 0; i < ST_STQV_N_SECTIONS; i++) {
                size_t sz;
                const uint8_t *p = st_stqv_section_data(s, i, &sz);
                if (p) assert_true(p >= s->data && p + sz <= s->data + s->size);
            }
            st_stqv_close(s);
        } else {
            assert_int_equal(rc, ST_ERR_PARSE);
            assert_null(s);
        }
    }
    assert_true(accepted > 0 && accepted < 5000); /* seed, padding bytes: benign */
    free(b);
    free(orig);
}

static void stqv_open_reports_io_and_argument_errors(void **state)
{
    (void)state;
    st_stqv *s = (st_stqv *)(uintptr_t)1;
    assert_int_equal(st_stqv_open(VEC_DIR "/no_such_file.stqv", &s), ST_ERR_IO);
    assert_null(s);
    assert_non_null(strstr(st_last_error(), "cannot open"));
    assert_int_equal(st_stqv_open(NULL, &s), ST_ERR_INVALID_ARG);
    assert_int_equal(st_stqv_open(SMALL_FILE, NULL), ST_ERR_INVALID_ARG);
    assert_int_equal(st_stqv_parse(NULL, 10, &s), ST_ERR_INVALID_ARG);
    st_stqv_close(NULL);
    assert_string_equal(st_stqv_section_name(ST_STQV_W_DEQ), "W_DEQ");
    assert_string_equal(st_stqv_section_name(99), "?");
    s = open_ok(SMALL_FILE);
    assert_null(st_stqv_section_data(s, -1, NULL));
    assert_null(st_stqv_section_data(s, ST_STQV_N_SECTIONS, NULL));
    assert_null(st_stqv_section_data(s, ST_STQV_X_Q8_K, NULL)); /* K = 64 */
    st_stqv_close(s);
}

/* ---- registration ------------------------------------------------------------------- */

/* One st_qtype object per type of ST_QTYPES, for the per-type tests' state. */
#define ST_TYPE_VAR_(id, name, ggml, qk, bytes) static const st_qtype TV_##id = ST_##id;
ST_QTYPES(ST_TYPE_VAR_)
#undef ST_TYPE_VAR_

#define PER_TYPE_(id, tname, ggml, qk, bytes)                                                   \
    {"dequantize_" tname "_bit_exact", dequantize_bit_exact, NULL, NULL, (void *)&TV_##id},      \
        {"q8_1_bytes_exact_" tname, q8_1_bytes_exact, NULL, NULL, (void *)&TV_##id},             \
        {"dot_" tname "_within_1e-4", dot_within_1e_4, NULL, NULL, (void *)&TV_##id},

int main(void)
{
    const struct CMUnitTest tests[] = {
        ST_QTYPES(PER_TYPE_)
        cmocka_unit_test(q8_1_zero_block_is_all_zero),
        cmocka_unit_test(q8_1_rounds_halves_away_from_zero),
        cmocka_unit_test(q8_1_sum_follows_warp_butterfly),
        cmocka_unit_test(q8_1_non_finite_input_does_not_crash),
        cmocka_unit_test(f16_round_trip_all_65536),
        cmocka_unit_test(f32_to_f16_rounds_to_nearest_even),
        cmocka_unit_test(type_info_matches_ggml),
        cmocka_unit_test(type_info_rejects_unknown),
        cmocka_unit_test(row_bytes_rejects_bad_k),
        cmocka_unit_test(dequantize_rejects_bad_arguments),
        cmocka_unit_test(quantize_q8_1_rejects_bad_arguments),
        cmocka_unit_test(stqv_opens_every_copied_file),
        cmocka_unit_test(stqv_refuses_truncated_files),
        cmocka_unit_test(stqv_refuses_bad_headers),
        cmocka_unit_test(stqv_refuses_bad_section_tables),
        cmocka_unit_test(stqv_survives_random_corruption),
        cmocka_unit_test(stqv_open_reports_io_and_argument_errors),
    };
    return cmocka_run_group_tests_name("formats", tests, NULL, NULL);
}
