/* On-device q8_1 quantization of activations (one warp per 32-block): the
 * same bytes as st_quantize_q8_1 on the CPU, in the plain or the tiled
 * planes (common.h st_xplanes) or the legacy 36-byte blocks. */
#include "common.h"

template <bool BLOCKS>
__global__ void __launch_bounds__(256) st_quantize_kernel(const float *__restrict__ x, int64_t k, int n,
                                                          st_xplanes xp, uint8_t *__restrict__ blocks, int64_t xs,
                                                          const int32_t *__restrict__ ids, int n_expert)
{
    /* the iq_mmvq default kernel after it may launch now (it waits for
     * this grid's end before it reads the activations) */
    st_grid_dep_release();
    /* launched as a dependent itself (st_launch_quantize): the kernel
     * before it (the engine's, or the previous call's iq_mmvq) may still
     * run, so nothing is read or written before it has finished */
    st_grid_dep_wait();
    const int lane = threadIdx.x & 31;
    const int64_t nbk = k / 32;
    const int64_t gw = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int slots = xp.tiled ? st_xtile_tokens(n) : n;
    if (gw >= nbk * slots) return; /* whole warps leave together */
    const int64_t t = gw / nbk, b = gw % nbk;
    int q = 0;
    uint16_t d16 = 0, s16 = 0;
    /* xs: floats between vectors; a pair whose expert id is out of range
     * (IDS given) is quantized as zeros and its vector never read: the
     * FFN's gate-up stage writes no intermediate for it */
    if (t < n && (!ids || (unsigned)ids[t] < (unsigned)n_expert))
        st_quantize_warp_block(x[t * xs + b * 32 + lane], q, d16, s16);
    if (!BLOCKS && xp.tiled) {
        /* a slot past the last token gets zeros: whole tiles are read */
        const int64_t sl = st_xtile((int)t, (int)b, (int)nbk);
        xp.qs[sl * 32 + 4 * st_mma::x_pos(lane / 4) + lane % 4] = (int8_t)q;
        if (lane == 0) {
            xp.d[sl] = t < n ? st_h2f(d16) : 0.0f;
            if (t < n) {
                xp.d16[gw] = d16;
                xp.s16[gw] = s16;
            }
        }
    } else if (BLOCKS) {
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
    return st_rt_func_ptx_version(st_quantize_kernel<false>) >= 90;
#else
    return false;
#endif
}

st_rt_error st_launch_quantize(const st_launch &L, const float *x, int64_t k, int n, const st_xplanes &xp,
                               uint8_t *blocks, int64_t x_stride, const int32_t *ids, int n_expert)
{
    const int64_t xs = x_stride ? x_stride : k;
    const int64_t warps = (k / 32) * (xp.tiled && !blocks ? st_xtile_tokens(n) : n);
    const int per_block = 8;
    const unsigned grid = (unsigned)((warps + per_block - 1) / per_block);
    /* a programmatic dependent of whatever kernel precedes it in the
     * stream (it waits for that kernel's end before its first read): its
     * launch overlaps that kernel's last blocks. Measured on the H200 in
     * one run against a plain launch (us, eager, 4096x14336 / 14336x4096):
     * iq4_xs n_tokens 1 17.2 -> 15.4 / 16.7 -> 14.9, iq4_nl 14336x4096
     * n_tokens 2 19.2 -> 17.5, the MoE layer n_tokens 1 27.2 -> 26.0 */
    if (blocks) return st_launch_dependent(L, true, st_quantize_kernel<true>, grid, 32 * per_block, x, k, n, xp, blocks, xs, ids,
                                   n_expert);
    return st_launch_dependent(L, true, st_quantize_kernel<false>, grid, 32 * per_block, x, k, n, xp, blocks, xs, ids,
                               n_expert);
}
