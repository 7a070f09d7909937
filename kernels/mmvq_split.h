/* iq_mmvq with W warps on one row ("splitW", STRATA_MMVQ_SPLIT_VARIANTS).
 *
 * A long row (K = 14336: 448 units) under the S = 32 streams gives each lane
 * of a one-warp row 14 units in a chain, and a 4096-row matrix only 4096
 * warps: too few loads in flight. Here a block of W warps takes one row and
 * the work of each stream is taken apart where the contract allows it:
 *
 *  1. (all warps) unit u = 32 k + s, the k-th unit of stream s, is decoded
 *     by lane s of warp k % W; for every token the lane forms the exact
 *     integer dot and the unit's factor (st_canon_factor: W * da, and the
 *     min term's -(M * da)) and writes the pair (factor, (float)isum) to
 *     shared memory. These are independent of each other and of the
 *     stream's accumulator, so a lane issues the loads of all its units of
 *     a chunk before decoding any.
 *  2. (after a barrier) the accumulator of (stream s, token t), held by one
 *     thread for the whole row, adds the chunk's pairs in increasing k:
 *     acc = fma(factor, isum, acc) (st_canon_add), the min term after its
 *     unit's main term: the operations of st_canon_unit in the same order.
 *  3. The 32 streams of a token sit in the 32 lanes of one warp: the fixed
 *     butterfly by shuffles, 16 .. 1.
 *
 * On a wide row (st_canon_mmvq_groups 4: 128 streams) unit 32 k + s is the
 * unit of stream s of group k % 4: phase 2 keeps one accumulator per group,
 * and phase 3 ends with st_canon_groups4.
 *
 * Same bits as the CPU reference and every other path, for every W. The
 * shared buffer holds one chunk (W * L k-steps); two buffers alternate, so a
 * chunk needs one barrier: a thread writes buffer c & 1 again only after
 * the barrier of chunk c + 1, which every thread reaches after its reads of
 * chunk c (where two do not fit, one buffer and a second barrier). */
#ifndef ST_MMVQ_SPLIT_H
#define ST_MMVQ_SPLIT_H

#include "common.h"
#include "strata/variants.h"

template <int TYPE, int W, int NT> struct st_split_geom {
    static constexpr int NTERM = st_unit_dec<TYPE>::min ? 2 : 1;
    /* units in flight per lane in a chunk: 4 for up to 2 (token, term)
     * pairs, 2 for up to 4, else 1 (8 bytes per (unit, token, term): one
     * buffer holds 2 KB per warp, 4 KB with 8 tokens and a min term) */
    static constexpr int L = NT * NTERM <= 2 ? 4 : NT * NTERM <= 4 ? 2 : 1;
    static constexpr int CH = W * L;                 /* k-steps per chunk */
    static constexpr int BUF = CH * NT * NTERM * 32; /* float2 per buffer */
    static constexpr int NCHAIN = (NT + W - 1) / W;  /* tokens per warp in phase 2 */
    /* two buffers where they fit the 48 KB of static shared memory beside
     * the staged grid, else one (and a second barrier per chunk) */
    static constexpr int NBUF = 2 * BUF * 8 + st_grid_bytes<TYPE>::n + 4 <= 48 * 1024 ? 2 : 1;
    static_assert(BUF * 8 + st_grid_bytes<TYPE>::n + 4 <= 48 * 1024, "split buffer too large");
};

template <int TYPE, int W, int NT, bool STAGE, int NG>
__global__ void __launch_bounds__(32 * W) st_mmvq_split_kernel(st_mat_dev m, const int8_t *__restrict__ qs,
                                                              const float *__restrict__ d, int nt,
                                                              float *__restrict__ y, st_grids gg)
{
    using G = st_split_geom<TYPE, W, NT>;
    using D = st_unit_dec<TYPE>;
    __shared__ uint32_t s_grid[st_grid_bytes<TYPE>::n / 4 + 1];
    __shared__ float2 s_pair[G::NBUF][G::BUF];
    const st_grids g = st_setup_grids<TYPE, STAGE>(gg, s_grid);
    st_xvec xv[NT];
    st_xvecs<NT>(qs, d, m.nu, nt, false, xv);
    const int64_t row = blockIdx.x;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int nk = (m.nu + 31) / 32;
    /* stream (lane, group q): on a wide row (NG 4) unit 32 k + lane is in
     * group k % 4 */
    float acc[G::NCHAIN][NG];
#pragma unroll
    for (int q = 0; q < G::NCHAIN; q++)
#pragma unroll
        for (int gq = 0; gq < NG; gq++) acc[q][gq] = 0.0f;

    for (int c = 0, k0 = 0; k0 < nk; c++, k0 += G::CH) {
        float2 *buf = s_pair[G::NBUF == 2 ? c & 1 : 0];
        if (G::NBUF == 1 && c > 0) __syncthreads(); /* the previous chunk is read */
        /* phase 1: this warp's k-steps of the chunk, loads first */
        typename D::raw r[G::L];
#pragma unroll
        for (int j = 0; j < G::L; j++) {
            const int u = 32 * (k0 + warp + W * j) + lane;
            if (u < m.nu) D().load(m, row, u, r[j]);
        }
#pragma unroll
        for (int j = 0; j < G::L; j++) {
            const int kk = warp + W * j;
            const int u = 32 * (k0 + kk) + lane;
            if (u < m.nu) {
                st_dunit un;
                D().dec(r[j], u, g, un);
#pragma unroll
                for (int t = 0; t < NT; t++)
                    if (t < nt) {
                        int4 a, b;
                        float da;
                        st_load_x<false>(xv[t], u, a, b, da);
                        int isum, qm;
                        st_unit_isums<TYPE>(un, a, b, isum, qm);
                        float2 *e = buf + ((kk * NT + t) * G::NTERM) * 32 + lane;
                        e[0] = make_float2(st_canon_factor(un.W, da), (float)isum);
                        if (D::min) e[32] = make_float2(-st_canon_factor(un.M, da), (float)qm);
                    }
            }
        }
        __syncthreads();
        /* phase 2: the accumulators of (stream lane, token warp + W q) */
#pragma unroll
        for (int q = 0; q < G::NCHAIN; q++) {
            const int t = warp + W * q;
            if (t < NT && t < nt) {
                const int kn = nk - k0 < G::CH ? nk - k0 : G::CH;
#pragma unroll
                for (int gq = 0; gq < NG; gq++)
                    for (int kk = ((gq - k0) % NG + NG) % NG; kk < kn; kk += NG) {
                        if (32 * (k0 + kk) + lane >= m.nu) break; /* this stream has no more units */
                        const float2 *e = buf + ((kk * NT + t) * G::NTERM) * 32 + lane;
                        const float2 p = e[0];
                        acc[q][gq] = st_canon_add(p.x, p.y, acc[q][gq]);
                        if (D::min) {
                            const float2 pm = e[32];
                            acc[q][gq] = st_canon_add(pm.x, pm.y, acc[q][gq]);
                        }
                    }
            }
        }
    }
    /* the butterfly of each token's 32 streams of a group, in its warp;
     * a wide row's groups then by st_canon_groups4 */
#pragma unroll
    for (int q = 0; q < G::NCHAIN; q++) {
        const int t = warp + W * q;
        if (t < NT) { /* uniform over the warp: every lane takes part */
            float v[NG];
#pragma unroll
            for (int gq = 0; gq < NG; gq++) {
                v[gq] = acc[q][gq];
#pragma unroll
                for (int h = 16; h >= 1; h >>= 1) v[gq] = st_fadd(v[gq], st_shfl_xor(v[gq], h, 32));
            }
            float r = v[0];
            if constexpr (NG == 4) r = st_canon_groups4(v[0], v[1], v[2], v[3]);
            if (lane == 0 && t < nt) y[(int64_t)t * m.rows + row] = r;
        }
    }
}

/* The split kernels of TYPE with W warps per row, NT bucket as the default
 * chain's (1, 2, 4, 8; more tokens run in chunks of 8 by the caller). */
template <int TYPE, int NT>
static st_rt_error st_mmvq_split_nt(const st_launch &L, const st_mat_dev &m, const st_xplanes &x, int nt, float *y,
                                    int w, bool stage)
{
    return st_by_groups(m.nu, [&](auto ng) {
        constexpr int NG = decltype(ng)::value;
        switch (w) {
#define ST_SPLIT_CASE_(W)                                                                                        \
    case W:                                                                                                      \
        if (stage)                                                                                               \
            st_mmvq_split_kernel<TYPE, W, NT, true, NG><<<(unsigned)m.rows, 32 * W, 0, L.stream>>>(m, x.qs, x.d, nt, \
                                                                                                 y, L.grids);  \
        else                                                                                                     \
            st_mmvq_split_kernel<TYPE, W, NT, false, NG><<<(unsigned)m.rows, 32 * W, 0, L.stream>>>(m, x.qs, x.d, \
                                                                                                  nt, y, L.grids); \
        return st_rt_get_last_error();
            STRATA_MMVQ_SPLIT_VARIANTS(ST_SPLIT_CASE_)
#undef ST_SPLIT_CASE_
        default: return ST_RT_INVALID_VALUE;
        }
    });
}

#endif
