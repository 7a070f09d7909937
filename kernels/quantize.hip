/* On-device q8_1 quantization of activations (one warp per 32-block): the
 * same bytes as st_quantize_q8_1 on the CPU. */
#include "common.h"

template <bool BLOCKS>
__global__ void __launch_bounds__(256) st_quantize_kernel(const float *__restrict__ x, int64_t k, int n,
                                                          st_xplanes xp, uint8_t *__restrict__ blocks)
{
    /* the iq_mmvq default kernel after it may launch now (it waits for
     * this grid's end before it reads the activations) */
    st_grid_dep_release();
    const int lane = threadIdx.x & 31;
    const int64_t nbk = k / 32;
    const int64_t gw = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (gw >= nbk * n) return; /* whole warps leave together */
    const int64_t t = gw / nbk, b = gw % nbk;
    int q;
    uint16_t d16, s16;
    st_quantize_warp_block(x[t * k + b * 32 + lane], q, d16, s16);
    if (BLOCKS) {
        uint8_t *blk = blocks + gw * 36;
        blk[4 + lane] = (uint8_t)(int8_t)q;
        if (lane == 0) {
            blk[0] = (uint8_t)(d16 & 0xff);
            blk[1] = (uint8_t)(d16 >> 8);
            blk[2] = (uint8_t)(s16 & 0xff);
            blk[3] = (uint8_t)(s16 >> 8);
        }
    } else {
        xp.qs[gw * 32 + lane] = (int8_t)q;
        if (lane == 0) {
            xp.d16[gw] = d16;
            xp.s16[gw] = s16;
            xp.d[gw] = st_h2f(d16);
        }
    }
}

bool st_quantize_takes_dependents()
{
#if ST_CUDA
    /* the kernels hold griddepcontrol only when compiled for sm_90 or
     * later: a build for an older architecture that the driver compiles
     * from its PTX for this device must launch as usual */
    cudaFuncAttributes a;
    if (cudaFuncGetAttributes(&a, st_quantize_kernel<false>) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return a.ptxVersion >= 90;
#else
    return false;
#endif
}

st_rt_error st_launch_quantize(const st_launch &L, const float *x, int64_t k, int n, const st_xplanes &xp,
                               uint8_t *blocks)
{
    const int64_t warps = (k / 32) * n;
    const int per_block = 8;
    const unsigned grid = (unsigned)((warps + per_block - 1) / per_block);
    if (blocks)
        st_quantize_kernel<true><<<grid, 32 * per_block, 0, L.stream>>>(x, k, n, xp, blocks);
    else
        st_quantize_kernel<false><<<grid, 32 * per_block, 0, L.stream>>>(x, k, n, xp, blocks);
    return st_rt_get_last_error();
}
