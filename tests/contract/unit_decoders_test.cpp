/* The GPU unit decoders (kernels/units.h) and their per-unit contract
 * arithmetic (st_unit_fma), compiled for the host through st_gpu_emu.h, give
 * exactly the CPU reference's integers and float bits on the device layout
 * (src/contract/repack.c) for every format, with both vendors' table lookups. This
 * runs on every CPU build: a decode bug in the kernels shows here before a
 * GPU ever runs them. */
#define ST_HOST_EMULATION 1

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include <cmocka.h>

#include "cpu_unit.h"
#include "grids.h"
#include "randgen.h"
#include "repack.h"
#include "strata/formats.h"
}

#include "units.h"

int st_emu_use_hip_lut = 0;

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

template <int TYPE>
static size_t check_type(st_rng *r, int rows, int cols)
{
    const st_qtype t = (st_qtype)TYPE;
    const size_t rb = st_qtype_row_bytes(t, cols);
    uint8_t *w = (uint8_t *)malloc((size_t)rows * rb);
    st_random_blocks(r, t, rows, cols, w);
    const size_t n = st_repack_size(t, rows, cols);
    uint8_t *packed = (uint8_t *)malloc(n);
    assert_int_equal(st_repack(t, rows, cols, w, packed), ST_OK);
    size_t off[ST_MAX_PLANES] = {0};
    const int planes = st_repack_planes(t, rows, cols, off);
    st_mat_dev m;
    memset(&m, 0, sizeof m);
    for (int i = 0; i < planes; i++) m.p[i] = packed + off[i];
    m.rows = rows;
    m.nu = cols / 32;
    m.nb = cols / st_qtype_block_values(t);
    st_grids g;
#define ST_GRID_HOST_(name, type, table) g.name = (const type *)table;
    ST_DEVICE_GRIDS(ST_GRID_HOST_)
#undef ST_GRID_HOST_
    size_t checked = 0;
    for (int row = 0; row < rows; row++)
        for (int u = 0; u < m.nu; u++) {
            st_dunit du;
            st_unit_dec<TYPE>::get(m, row, u, g, du);
            st_unit cu;
            st_unit_decode(t, w + (size_t)row * rb, u, &cu);
            for (int j = 0; j < 32; j++) {
                const int v = (int)(int8_t)(du.w[j / 4] >> (8 * (j % 4))) * (j < 16 ? du.f0 : du.f1);
                if (v != cu.w[j])
                    fail_msg("%s row %d unit %d weight %d: device %d, CPU %d", st_qtype_name(t), row, u, j, v, cu.w[j]);
            }
            assert_int_equal(bits(du.W), bits(cu.W));
            assert_int_equal((int)st_unit_dec<TYPE>::min, (int)cu.has_min);
            if (cu.has_min) {
                assert_int_equal(bits(du.M), bits(cu.M));
                const bool mh = st_unit_dec<TYPE>::min_halves;
                assert_int_equal(mh ? du.g0 : 1, cu.mf[0]);
                assert_int_equal(mh ? du.g1 : 1, cu.mf[1]);
            }
            /* the contract's float work on one q8_1 block */
            int8_t q[32];
            for (int j = 0; j < 32; j++) q[j] = (int8_t)(st_rng_u32(r) & 0xff);
            const float da = st_rng_float(r) * 0.01f, acc0 = st_rng_float(r);
            int4 a, b;
            memcpy(&a, q, 16);
            memcpy(&b, q + 16, 16);
            int32_t isum = 0, qm = 0;
            for (int j = 0; j < 32; j++) {
                isum += cu.w[j] * q[j];
                qm += cu.mf[j / 16] * q[j];
            }
            float want = st_fma(st_fmul(cu.W, da), (float)isum, acc0);
            if (cu.has_min) want = st_fma(-st_fmul(cu.M, da), (float)qm, want);
            assert_int_equal(bits(st_unit_fma<TYPE>(du, a, b, da, acc0)), bits(want));
            checked++;
        }
    free(w);
    free(packed);
    return checked;
}

static void run_all(const char *vendor)
{
    st_rng r;
    st_rng_seed(&r, 31337);
    size_t n = 0;
    int formats = 0;
#define ST_CHECK_(id, name, ggml, qk, bytes) \
    n += check_type<ST_##id>(&r, 7, 3 * qk);    \
    formats++;
    ST_QTYPES(ST_CHECK_)
#undef ST_CHECK_
    printf("%s table lookups: %zu units of %d formats decode and accumulate exactly as the CPU reference\n", vendor, n,
           formats);
}

static void device_decoders_match_cpu_reference_cuda_lookups(void **state)
{
    (void)state;
    st_emu_use_hip_lut = 0;
    run_all("CUDA");
}

static void device_decoders_match_cpu_reference_hip_lookups(void **state)
{
    (void)state;
    st_emu_use_hip_lut = 1;
    run_all("HIP");
}

/* Both vendors' nibble lookups agree with a plain table lookup. */
static void lut16_matches_a_plain_lookup(void **state)
{
    (void)state;
    const uint32_t tab[4] = {0xbfad9881u, 0xf6eaddcfu, 0x26190d01u, 0x71594535u};
    st_rng r;
    st_rng_seed(&r, 5);
    for (int it = 0; it < 100000; it++) {
        const uint32_t q = st_rng_u32(&r);
        uint32_t lo[2], hi[2];
        st_lut16_nib(q, tab, lo[0], hi[0]);
        st_lut16_byte(q, tab, lo[1], hi[1]);
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 4; j++) {
                const int8_t want_lo = st_kvalues_iq4nl[(q >> (8 * j)) & 15];
                const int8_t want_hi = st_kvalues_iq4nl[(q >> (8 * j + 4)) & 15];
                assert_int_equal((int8_t)(lo[k] >> (8 * j)), want_lo);
                assert_int_equal((int8_t)(hi[k] >> (8 * j)), want_hi);
            }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lut16_matches_a_plain_lookup),
        cmocka_unit_test(device_decoders_match_cpu_reference_cuda_lookups),
        cmocka_unit_test(device_decoders_match_cpu_reference_hip_lookups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
