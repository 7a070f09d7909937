/* The GPU unit decoders (kernels/units.h) and their per-unit contract
 * arithmetic (st_unit_fma), compiled for the host through st_gpu_emu.h, give
 * exactly the CPU reference's integers and float bits on the device layout
 * (src/contract/repack.c) for every format, with both vendors' table lookups;
 * each home's in-place LOAD_BLK (ggml's blocks, padded rows, the weakest
 * alignment the wrap allows) gives DEC bit for bit what the planes' LOAD
 * gives, with every load aligned (the emulation checks) and inside the
 * blocks (ASan). This runs on every CPU build: a decode bug in the kernels
 * shows here before a GPU ever runs them. */
#define ST_HOST_EMULATION 1

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern "C" {
#include <cmocka.h>

#include "cpu_unit.h"
#include "grids.h"
#include "randgen.h"
#include "repack.h"
#include "strata/formats.h"
}

#include "units.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ST_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(ST_TEST_ASAN)
#define ST_TEST_ASAN 1
#endif
#if ST_TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

int st_emu_use_hip_lut = 0;

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* The device unit DU against the CPU reference's unit CU. */
template <int TYPE>
static void expect_cpu_unit(const st_dunit &du, const st_unit &cu, const char *layout, int row, int u)
{
    const st_qtype t = (st_qtype)TYPE;
    for (int j = 0; j < 32; j++) {
        const int v = (int)(int8_t)(du.w[j / 4] >> (8 * (j % 4))) * (j < 16 ? du.f0 : du.f1);
        if (v != cu.w[j])
            fail_msg("%s (%s) row %d unit %d weight %d: device %d, CPU %d", st_qtype_name(t), layout, row, u, j, v,
                     cu.w[j]);
    }
    assert_int_equal(bits(du.W), bits(cu.W));
    assert_int_equal((int)st_unit_dec<TYPE>::min, (int)cu.has_min);
    if (cu.has_min) {
        assert_int_equal(bits(du.M), bits(cu.M));
        const bool mh = st_unit_dec<TYPE>::min_halves;
        assert_int_equal(mh ? du.g0 : 1, cu.mf[0]);
        assert_int_equal(mh ? du.g1 : 1, cu.mf[1]);
    }
}

/* DEC of the in-place LOAD_BLK gives bit for bit what it gives of the
 * planes' LOAD. */
static void expect_same_dunit(const st_dunit &a, const st_dunit &b, st_qtype t, int row, int u)
{
    for (int k = 0; k < 8; k++)
        if (a.w[k] != b.w[k])
            fail_msg("%s row %d unit %d word %d: in place %08x, planes %08x", st_qtype_name(t), row, u, k, a.w[k],
                     b.w[k]);
    assert_int_equal(bits(a.W), bits(b.W));
    assert_int_equal(bits(a.M), bits(b.M));
    assert_int_equal(a.f0, b.f0);
    assert_int_equal(a.f1, b.f1);
    assert_int_equal(a.g0, b.g0);
    assert_int_equal(a.g1, b.g1);
}

/* Bytes [P, P + N) unreadable (ASan) or readable again. */
static void poison(const uint8_t *p, size_t n, bool on)
{
#if ST_TEST_ASAN
    if (on)
        ASAN_POISON_MEMORY_REGION(p, n);
    else
        ASAN_UNPOISON_MEMORY_REGION(p, n);
#else
    (void)p;
    (void)n;
    (void)on;
#endif
}

/* The in-place layout (layout.h rb) of ROWS rows of RB bytes as the wrap
 * may hand it over at its weakest: the base aligned to the format's
 * guarantee A and no more, each row followed by 3A + 16 bytes of junk (the
 * last row ends the allocation). Around the rows is poisoned for ASan, so
 * a read outside the blocks fails too. */
struct inplace_rows {
    uint8_t *mem;
    size_t mem_n;
    st_mat_dev m;
};

static void inplace_make(inplace_rows *ip, st_rng *r, st_qtype t, int align, int rows, int cols, const uint8_t *w)
{
    const size_t rb = st_qtype_row_bytes(t, cols), stride = rb + 3 * (size_t)align + 16;
    const size_t span = (size_t)(rows - 1) * stride + rb;
    ip->mem_n = span + 64;
    ip->mem = (uint8_t *)malloc(ip->mem_n);
    uint8_t *base = (uint8_t *)((((uintptr_t)ip->mem + 32) & ~(uintptr_t)31) + (uintptr_t)align);
    assert_true((uintptr_t)base % (uintptr_t)align == 0 && (uintptr_t)base % (2 * (uintptr_t)align) != 0);
    for (size_t i = 0; i < ip->mem_n; i++) ip->mem[i] = (uint8_t)st_rng_u32(r);
    for (int row = 0; row < rows; row++) memcpy(base + (size_t)row * stride, w + (size_t)row * rb, rb);
    poison(ip->mem, (size_t)(base - ip->mem), true);
    for (int row = 0; row + 1 < rows; row++) poison(base + (size_t)row * stride + rb, stride - rb, true);
    poison(base + span, ip->mem_n - (size_t)(base - ip->mem) - span, true);
    memset(&ip->m, 0, sizeof ip->m);
    ip->m.p[0] = base;
    ip->m.rb = (int64_t)stride;
    ip->m.rows = rows;
    ip->m.nu = cols / 32;
    ip->m.nb = cols / st_qtype_block_values(t);
}

static void inplace_free(inplace_rows *ip)
{
    poison(ip->mem, ip->mem_n, false);
    free(ip->mem);
}

template <int TYPE>
static size_t check_type(st_rng *r, int rows, int cols, size_t *in_place)
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
    /* the guarantee the home assumes: the largest power of two dividing
     * the block, at most 16 */
    int align = 1;
    while (align < 16 && st_qtype_block_bytes(t) % (2 * align) == 0) align *= 2;
    assert_int_equal(st_unit_dec<TYPE>::blk_align, align);
    inplace_rows ip;
    inplace_make(&ip, r, t, align, rows, cols, w);
    st_grids g;
#define ST_GRID_HOST_(name, type, table) g.name = (const type *)table;
    ST_DEVICE_GRIDS(ST_GRID_HOST_)
#undef ST_GRID_HOST_
    size_t checked = 0;
    for (int row = 0; row < rows; row++)
        for (int u = 0; u < m.nu; u++) {
            st_dunit du, di;
            memset(&du, 0, sizeof du);
            memset(&di, 0, sizeof di);
            st_unit_dec<TYPE>::get(m, row, u, g, du);
            typename st_unit_dec<TYPE>::raw raw;
            st_unit_dec<TYPE>::load_blk(ip.m, row, u, raw);
            st_unit_dec<TYPE>::dec(raw, u, g, di);
            st_unit cu;
            st_unit_decode(t, w + (size_t)row * rb, u, &cu);
            expect_cpu_unit<TYPE>(du, cu, "planes", row, u);
            expect_cpu_unit<TYPE>(di, cu, "in place", row, u);
            expect_same_dunit(di, du, t, row, u);
            (*in_place)++;
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
    inplace_free(&ip);
    free(w);
    free(packed);
    return checked;
}

static void run_all(const char *vendor)
{
    st_rng r;
    st_rng_seed(&r, 31337);
    size_t n = 0, in_place = 0;
    int formats = 0;
#define ST_CHECK_(id, name, ggml, qk, bytes)           \
    n += check_type<ST_##id>(&r, 7, 3 * qk, &in_place); \
    formats++;
    ST_QTYPES(ST_CHECK_)
#undef ST_CHECK_
    printf("%s table lookups: %zu units of %d formats decode and accumulate exactly as the CPU reference; "
           "%zu read in place (ggml's blocks, rows padded, minimal alignment) decode bit for bit as from the planes\n",
           vendor, n, formats, in_place);
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

/* The emulated device load stops the test at a misaligned address, as a
 * GPU faults (so a wrong alignment assumption of an in-place load fails
 * above); an aligned one reads the little-endian bytes. */
static void emulated_loads_refuse_misaligned_addresses(void **state)
{
    (void)state;
    alignas(16) uint8_t buf[32];
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
    assert_int_equal(st_ld_at<uint32_t>(buf + 4), 0x07060504u);
    assert_int_equal(st_ld32a<2>(buf + 6), 0x09080706u);
    fflush(stdout);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        (void)!freopen("/dev/null", "w", stderr);
        (void)st_ld_at<uint32_t>(buf + 2);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
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
        cmocka_unit_test(emulated_loads_refuse_misaligned_addresses),
        cmocka_unit_test(device_decoders_match_cpu_reference_cuda_lookups),
        cmocka_unit_test(device_decoders_match_cpu_reference_hip_lookups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
