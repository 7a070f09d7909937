/* The in-place loads on the GPU: for every format, each home's LOAD_BLK
 * reads ggml's blocks where an engine may hold them at their weakest (the
 * base aligned to the format's guarantee ST_BLK_ALIGN and no more, rows
 * padded, layout.h rb) without a fault (a misaligned load stops the kernel),
 * and DEC gives of it, bit for bit, what it gives of the planes' LOAD (the
 * host repack). The CPU test (tests/contract/unit_decoders_test.cpp) checks
 * the same through the emulation; this runs the vendor compiler's code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>

#include "grids.h"
#include "randgen.h"
#include "repack.h"
#include "strata/formats.h"
}

#include "units.h"

#include <stdio.h>
#include <string.h>
#include <vector>

#define CHECK_RT(expr)                                                                          \
    do {                                                                                        \
        st_rt_error e_ = (expr);                                                                \
        if (e_ != ST_RT_SUCCESS) fail_msg("%s: %s", #expr, st_rt_error_string(e_));             \
    } while (0)

/* Per (row, unit): 1 where DEC of the two loads differs in any bit. */
template <int TYPE>
__global__ void inplace_vs_planes(st_mat_dev planes, st_mat_dev blk, st_grids g, int *differ)
{
    const int row = blockIdx.x;
    for (int u = threadIdx.x; u < planes.nu; u += blockDim.x) {
        using D = st_unit_dec<TYPE>;
        typename D::raw r1, r2;
        D::load(planes, row, u, r1);
        D::load_blk(blk, row, u, r2);
        st_dunit a = {}, b = {};
        D::dec(r1, u, g, a);
        D::dec(r2, u, g, b);
        bool same = __float_as_uint(a.W) == __float_as_uint(b.W) && __float_as_uint(a.M) == __float_as_uint(b.M) &&
                    a.f0 == b.f0 && a.f1 == b.f1 && a.g0 == b.g0 && a.g1 == b.g1;
        for (int k = 0; k < 8; k++) same = same && a.w[k] == b.w[k];
        differ[row * planes.nu + u] = same ? 0 : 1;
    }
}

template <int TYPE>
static size_t check_type(st_rng *r, const st_grids &g, int rows, int nb)
{
    const st_qtype t = (st_qtype)TYPE;
    const int cols = nb * st_qtype_block_values(t), nu = cols / 32;
    const int align = st_unit_dec<TYPE>::blk_align;
    const size_t rb = st_qtype_row_bytes(t, cols), stride = rb + 3 * (size_t)align + 16;
    std::vector<uint8_t> w((size_t)rows * rb);
    st_random_blocks(r, t, rows, cols, w.data());
    std::vector<uint8_t> packed(st_repack_size(t, rows, cols));
    assert_int_equal(st_repack(t, rows, cols, w.data(), packed.data()), ST_OK);
    size_t off[ST_MAX_PLANES] = {0};
    const int planes = st_repack_planes(t, rows, cols, off);
    uint8_t *dpacked = nullptr, *din = nullptr;
    int *ddiff = nullptr;
    CHECK_RT(st_rt_malloc((void **)&dpacked, packed.size()));
    CHECK_RT(st_rt_memcpy_htod(dpacked, packed.data(), packed.size(), 0));
    /* st_rt_malloc is at least 256-aligned: the base is aligned to A, not 2A */
    const size_t span = (size_t)(rows - 1) * stride + rb;
    CHECK_RT(st_rt_malloc((void **)&din, span + 64));
    CHECK_RT(st_rt_memset(din, 0xa5, span + 64, 0));
    uint8_t *base = din + align;
    for (int row = 0; row < rows; row++)
        CHECK_RT(st_rt_memcpy_htod(base + (size_t)row * stride, w.data() + (size_t)row * rb, rb, 0));
    CHECK_RT(st_rt_malloc((void **)&ddiff, sizeof(int) * (size_t)rows * nu));
    st_mat_dev mp, mb;
    memset(&mp, 0, sizeof mp);
    for (int i = 0; i < planes; i++) mp.p[i] = dpacked + off[i];
    mp.rows = rows;
    mp.nu = nu;
    mp.nb = nb;
    mb = mp;
    memset(mb.p, 0, sizeof mb.p);
    mb.p[0] = base;
    mb.rb = (int64_t)stride;
    inplace_vs_planes<TYPE><<<rows, 64>>>(mp, mb, g, ddiff);
    CHECK_RT(st_rt_get_last_error());
    CHECK_RT(st_rt_stream_sync(0));
    std::vector<int> diff((size_t)rows * nu);
    CHECK_RT(st_rt_memcpy_dtoh(diff.data(), ddiff, sizeof(int) * diff.size(), 0));
    CHECK_RT(st_rt_stream_sync(0));
    for (size_t i = 0; i < diff.size(); i++)
        if (diff[i])
            fail_msg("%s row %zu unit %zu: in place and planes decode differently", st_qtype_name(t), i / nu, i % nu);
    CHECK_RT(st_rt_free(dpacked));
    CHECK_RT(st_rt_free(din));
    CHECK_RT(st_rt_free(ddiff));
    return diff.size();
}

static void inplace_loads_decode_as_planes(void **state)
{
    (void)state;
    st_grids g;
    std::vector<void *> tables;
#define ST_GRID_UP_(field, type, table)                                    \
    {                                                                      \
        void *d = nullptr;                                                 \
        CHECK_RT(st_rt_malloc(&d, sizeof(table)));                         \
        CHECK_RT(st_rt_memcpy_htod(d, table, sizeof(table), 0));           \
        g.field = (const type *)d;                                         \
        tables.push_back(d);                                               \
    }
    ST_DEVICE_GRIDS(ST_GRID_UP_)
#undef ST_GRID_UP_
    st_rng r;
    st_rng_seed(&r, 24);
    size_t n = 0;
    int formats = 0;
#define ST_CHECK_(id, name, ggml, qk, bytes) \
    n += check_type<ST_##id>(&r, g, 9, qk == 32 ? 37 : 7); \
    formats++;
    ST_QTYPES(ST_CHECK_)
#undef ST_CHECK_
    for (void *d : tables) CHECK_RT(st_rt_free(d));
    printf("%zu units of %d formats read in place (minimal alignment, padded rows) decode as from the planes\n", n,
           formats);
}

int main(void)
{
    int devices = 0;
    if (st_rt_get_device_count(&devices) != ST_RT_SUCCESS || devices == 0) {
        printf("no usable GPU: skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(inplace_loads_decode_as_planes),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
