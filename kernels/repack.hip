/* The repack of ggml blocks already in device memory into the row-planar
 * layout: one thread per block, running the very per-block code the host
 * repack runs (each format home's st_io_<ID>), so the two layouts are the
 * same bytes by construction (tests/gpu/engine_runtime_test.hip compares
 * them). */
#include "common.h"

template <int TYPE>
__global__ void __launch_bounds__(256) st_repack_kernel(st_repack_io io, const uint8_t *__restrict__ src, size_t bb,
                                                        int64_t nblocks)
{
    const int64_t bi = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (bi >= nblocks) return;
    uint8_t *blk = (uint8_t *)(src + bi * (int64_t)bb); /* packing only reads it */
    switch (TYPE) {
#define ST_IO_CASE_(id, name, ggml, qk, bytes) \
    case ST_##id: st_io_##id(&io, bi, blk); break;
        ST_QTYPES(ST_IO_CASE_)
#undef ST_IO_CASE_
    default: break;
    }
}

st_rt_error st_launch_repack(st_rt_stream s, int type, const st_repack_io &io, const void *src, size_t bb,
                             int64_t nblocks, void *dst)
{
    (void)dst;
    const unsigned grid = (unsigned)((nblocks + 255) / 256);
    switch (type) {
#define ST_REPACK_LAUNCH_(id, name, ggml, qk, bytes)                                                \
    case ST_##id:                                                                                   \
        st_repack_kernel<ST_##id><<<grid, 256, 0, s>>>(io, (const uint8_t *)src, bb, nblocks); \
        break;
        ST_QTYPES(ST_REPACK_LAUNCH_)
#undef ST_REPACK_LAUNCH_
    default: return ST_RT_INVALID_VALUE;
    }
    return st_rt_get_last_error();
}
