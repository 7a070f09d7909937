/* The repack of ggml blocks already in device memory into the row-planar
 * layout: one thread per block, running the very per-block code the host
 * repack runs (src/contract/repack_block.h), so the two layouts are the
 * same bytes by construction (tests/gpu/device_repack_test.c compares
 * them). */
#include "common.h"

__global__ void __launch_bounds__(256) st_repack_kernel(int type, st_repack_plan p, const uint8_t *__restrict__ src,
                                                        size_t bb, int64_t nblocks, uint8_t *__restrict__ dst)
{
    const int64_t bi = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (bi >= nblocks) return;
    /* packing only reads the block (to_packed = 1) */
    st_rp_block(type, &p, bi, (uint8_t *)(src + bi * (int64_t)bb), dst, 1);
}

st_rt_error st_launch_repack(st_rt_stream s, int type, const st_repack_plan &p, const void *src, size_t bb,
                             int64_t nblocks, void *dst)
{
    const unsigned grid = (unsigned)((nblocks + 255) / 256);
    st_repack_kernel<<<grid, 256, 0, s>>>(type, p, (const uint8_t *)src, bb, nblocks, (uint8_t *)dst);
    return st_rt_get_last_error();
}
