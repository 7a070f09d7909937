/* The canonical row dot on the device: a group of T lanes computes one row
 * against up to NT activation vectors, with NG stream groups (S = 32 NG
 * streams, T divides S). Lane l owns streams l, l+T, ...; each stream takes
 * its units in increasing order. One group (T = 8, 16, 32): the fixed
 * butterfly, in-thread levels 16..T, then shuffles T/2..1, the bits of
 * st_canon_combine32 on the CPU. Four groups (a wide row, T = 32, 64 or
 * 128: one to four warps on a row): each group's 32 streams by the shuffle
 * butterfly inside one warp, then (g0 + g2) + (g1 + g3) in the thread or
 * through shared memory (st_canon_groups4). */
#ifndef ST_DOT_H
#define ST_DOT_H

#include "units.h"

/* One q8_1 activation vector. Planar (the default layout): qs int8[nu][32]
 * and the block scales d as f32 (the f16 value, converted exactly). Blocks
 * (the legacy path): ggml's 36-byte block_q8_1 at qs, d unused. */
struct st_xvec {
    const int8_t *qs;
    const float *d;
};

template <bool BLOCKS>
ST_DEV void st_load_x(const st_xvec &x, int u, int4 &a, int4 &b, float &da)
{
    if (BLOCKS) {
        const uint8_t *p = (const uint8_t *)x.qs + (int64_t)u * 36;
        const int *q = (const int *)(p + 4);
        a = make_int4(q[0], q[1], q[2], q[3]);
        b = make_int4(q[4], q[5], q[6], q[7]);
        da = st_h2f(*(const uint16_t *)p);
    } else {
        const int4 *xp = (const int4 *)(x.qs + (int64_t)u * 32);
        a = xp[0];
        b = xp[1];
        da = x.d[u];
    }
}

template <int TYPE, bool XBLOCKS>
ST_DEV float st_unit_acc(const st_dunit &un, const st_xvec &x, int u, float acc)
{
    int4 a, b;
    float da;
    st_load_x<XBLOCKS>(x, u, a, b, da);
    return st_unit_fma<TYPE>(un, a, b, da, acc);
}

/* The single canonical stream S of a row (units S, S+32, ...; one group: the
 * expert kernels' rows), before the butterfly: the k-split path writes these
 * partials to memory. */
template <int TYPE, int NT>
ST_DEV void st_stream_dot(const st_mat_dev &m, int64_t row, const st_xvec *xv, int n, const st_grids &g, int s,
                          float *acc)
{
#pragma unroll
    for (int i = 0; i < NT; i++) acc[i] = 0.0f;
    for (int u = s; u < m.nu; u += 32) {
        st_dunit un;
        st_unit_dec<TYPE>::get(m, row, u, g, un);
#pragma unroll
        for (int i = 0; i < NT; i++)
            if (i < n) acc[i] = st_unit_acc<TYPE, false>(un, xv[i], u, acc[i]);
    }
}

/* Adds unit U of RW rows (decoded) to stream J of each token's accumulators:
 * each activation block is loaded once for the RW rows. */
template <int TYPE, int NT, int J, int RW, bool XBLOCKS>
ST_DEV void st_add_unit(const st_dunit (&un)[RW], const st_xvec *xv, int n, int u, int j, float (&acc)[RW][NT][J])
{
#pragma unroll
    for (int i = 0; i < NT; i++)
        if (i < n) {
            int4 xa, xb;
            float da;
            st_load_x<XBLOCKS>(xv[i], u, xa, xb, da);
#pragma unroll
            for (int k = 0; k < RW; k++) acc[k][i][j] = st_unit_fma<TYPE>(un[k], xa, xb, da, acc[k][i][j]);
        }
}

/* Issues the weight loads of batch U0 (units U0 + S b + lane + T j, S = T J
 * the streams). */
template <int TYPE, int T, int B, int J, int RW>
ST_DEV void st_load_batch(const st_mat_dev &m, int64_t row0, int kmax, int u0, int lane,
                          typename st_unit_dec<TYPE>::raw (&r)[B][J][RW])
{
#pragma unroll
    for (int b = 0; b < B; b++)
#pragma unroll
        for (int j = 0; j < J; j++) {
            const int u = u0 + T * J * b + lane + T * j;
            if (u < m.nu)
#pragma unroll
                for (int k = 0; k < RW; k++) st_unit_dec<TYPE>::load(m, row0 + (k < kmax ? k : kmax), u, r[b][j][k]);
        }
}

/* Decodes batch U0 and adds it to the streams, each stream's units in
 * increasing order. */
template <int TYPE, int T, int NT, int B, int J, int RW, bool XBLOCKS>
ST_DEV void st_run_batch(int nu, const st_xvec *xv, int n, const st_grids &g, int u0, int lane,
                         const typename st_unit_dec<TYPE>::raw (&r)[B][J][RW], float (&acc)[RW][NT][J])
{
#pragma unroll
    for (int b = 0; b < B; b++)
#pragma unroll
        for (int j = 0; j < J; j++) {
            const int u = u0 + T * J * b + lane + T * j;
            if (u < nu) {
                st_dunit un[RW];
#pragma unroll
                for (int k = 0; k < RW; k++) st_unit_dec<TYPE>::dec(r[b][j][k], u, g, un[k]);
                st_add_unit<TYPE, NT, J, RW, XBLOCKS>(un, xv, n, u, j, acc);
            }
        }
}

/* (A kernel launched by st_launch_dependent reaches st_grid_dep_wait here
 * before its first activation load: only weight loads come before it.)
 * RW rows at once, row k = ROW0 + min(k, KMAX) (KMAX: the last row of the
 * group that exists; the rows past it repeat it and are not stored): each lane decodes the RW rows'
 * units and loads each activation block once for all of them, so activation
 * traffic is divided by RW (it dominates for several tokens). PIPE (the
 * iq_mmvq kernels): with one unit per lane per step and 1-2 tokens the
 * weight loads are software-pipelined, a batch's loads issued before the
 * previous batch is decoded, so each lane keeps loads in flight while it
 * computes. Measured on the H200 (4096x14336, n_tokens 1): IQ3_S 22.7 ->
 * 20.5 us, IQ4_NL 19.0 -> 17.3 us; for the expert kernels' short rows
 * (2-3 units per lane) it was slower (29.1 -> 31.2 us per MoE call) and
 * costs gfx1100 registers, so they do not use it. */
template <int TYPE, int T, int NT, int RW, bool XBLOCKS = false, bool WRONG_ORDER = false, bool PIPE = false, int NG = 1>
ST_DEV void st_rows_dot(const st_mat_dev &m, int64_t row0, int kmax, const st_xvec *xv, int n,
                        const st_grids &g, int lane, float (*out)[NT], float *xw = nullptr)
{
    constexpr int S = 32 * NG;
    static_assert(NG == 1 || NG == 4, "one or four stream groups");
    static_assert(S % T == 0 && (NG == 1 ? T <= 32 : T >= 32), "T lanes divide the streams");
    constexpr int J = S / T;
    float acc[RW][NT][J];
#pragma unroll
    for (int k = 0; k < RW; k++)
#pragma unroll
        for (int i = 0; i < NT; i++)
#pragma unroll
            for (int j = 0; j < J; j++) acc[k][i][j] = 0.0f;

    if constexpr (PIPE && J == 1 && ((RW == 1 && NT <= 2) || NT == 4)) {
        /* one unit per lane per step: pipelined, two register buffers of B
         * units (B = 2 for one row and 1-2 tokens: 2 to 4 units in flight
         * per lane; B = 1 for 4 tokens, the next unit's loads issued before
         * this one's decode and token work). Measured on the H200 in one
         * run against the unpipelined loop (us, 4096x14336 / 14336x4096,
         * 4 tokens): iq4_nl 36.5 -> 31.2 / 26.4 -> 25.1, iq4_xs 33.2 ->
         * 31.8 / 28.0 -> 27.8, iq3_s 34.5 -> 33.6 / 29.2 -> 29.2; with 8
         * tokens, or a row pair at 2 tokens, it was slower (iq3_s
         * 4096x14336 nt 8 52.3 -> 56.5; 14336x4096 nt 2 22.7 -> 26.5), so
         * those keep the loop below. */
        constexpr int B = RW == 1 && NT <= 2 ? 2 : 1, STEP = S * B;
        typename st_unit_dec<TYPE>::raw r0[B][J][RW], r1[B][J][RW];
        st_load_batch<TYPE, T, B, J, RW>(m, row0, kmax, 0, lane, r0);
        st_grid_dep_wait(); /* the activations are read from here on */
        for (int u0 = 0; u0 < m.nu; u0 += 2 * STEP) {
            st_load_batch<TYPE, T, B, J, RW>(m, row0, kmax, u0 + STEP, lane, r1);
            st_run_batch<TYPE, T, NT, B, J, RW, XBLOCKS>(m.nu, xv, n, g, u0, lane, r0, acc);
            if (u0 + STEP >= m.nu) break;
            st_load_batch<TYPE, T, B, J, RW>(m, row0, kmax, u0 + 2 * STEP, lane, r0);
            st_run_batch<TYPE, T, NT, B, J, RW, XBLOCKS>(m.nu, xv, n, g, u0 + STEP, lane, r1, acc);
        }
    } else if constexpr (J == 1) {
        /* one unit per lane per step (the rows variants; the default
         * with 8 tokens or a row pair at 2): the loads of the step first,
         * then its decode */
        st_grid_dep_wait();
        for (int u0 = 0; u0 < m.nu; u0 += S) {
            typename st_unit_dec<TYPE>::raw r[1][J][RW];
            st_load_batch<TYPE, T, 1, J, RW>(m, row0, kmax, u0, lane, r);
            st_run_batch<TYPE, T, NT, 1, J, RW, XBLOCKS>(m.nu, xv, n, g, u0, lane, r, acc);
        }
    } else {
        /* sub-warp rows, or one or two warps on a wide row: J units per
         * lane per step already; each decoded as it is loaded, which keeps
         * the J raw units out of registers (gfx1100: up to 40 VGPRs more
         * with loads first) */
        st_grid_dep_wait();
        for (int u0 = 0; u0 < m.nu; u0 += S) {
#pragma unroll
            for (int j = 0; j < J; j++) {
                const int u = u0 + lane + T * j;
                if (u < m.nu) {
                    st_dunit un[RW];
#pragma unroll
                    for (int k = 0; k < RW; k++) st_unit_dec<TYPE>::get(m, row0 + (k < kmax ? k : kmax), u, g, un[k]);
                    st_add_unit<TYPE, NT, J, RW, XBLOCKS>(un, xv, n, u, j, acc);
                }
            }
        }
    }
    if constexpr (NG == 1) {
#pragma unroll
        for (int k = 0; k < RW; k++)
#pragma unroll
            for (int i = 0; i < NT; i++) {
#pragma unroll
                for (int h = 16; h >= T; h >>= 1)
#pragma unroll
                    for (int j = 0; j < h / T; j++) acc[k][i][j] = st_fadd(acc[k][i][j], acc[k][i][j + h / T]);
                if (!WRONG_ORDER) {
#pragma unroll
                    for (int h = T / 2; h >= 1; h >>= 1) acc[k][i][0] = st_fadd(acc[k][i][0], st_shfl_xor(acc[k][i][0], h, T));
                } else {
                    /* test builds only (STRATA_TEST_WRONG_VARIANT): the butterfly
                     * in the opposite level order, to prove the byte compares
                     * catch a changed summation order */
#pragma unroll
                    for (int h = 1; h <= T / 2; h <<= 1) acc[k][i][0] = st_fadd(acc[k][i][0], st_shfl_xor(acc[k][i][0], h, T));
                }
                out[k][i] = acc[k][i][0];
            }
    } else {
        /* each stream's group in one warp: stream lane + T j is in group
         * (lane + T j) / 32, i.e. warp w = lane / 32 holds groups
         * w + (T / 32) j */
        constexpr int WPR = T / 32; /* warps per row */
#pragma unroll
        for (int k = 0; k < RW; k++)
#pragma unroll
            for (int i = 0; i < NT; i++)
#pragma unroll
                for (int j = 0; j < J; j++) {
                    if (!WRONG_ORDER) {
#pragma unroll
                        for (int h = 16; h >= 1; h >>= 1) acc[k][i][j] = st_fadd(acc[k][i][j], st_shfl_xor(acc[k][i][j], h, 32));
                    } else {
#pragma unroll
                        for (int h = 1; h <= 16; h <<= 1) acc[k][i][j] = st_fadd(acc[k][i][j], st_shfl_xor(acc[k][i][j], h, 32));
                    }
                }
        if constexpr (WPR == 1) {
#pragma unroll
            for (int k = 0; k < RW; k++)
#pragma unroll
                for (int i = 0; i < NT; i++) out[k][i] = st_canon_groups4(acc[k][i][0], acc[k][i][1], acc[k][i][2], acc[k][i][3]);
        } else {
            /* XW: WPR floats per (row, token) of this lane group, in shared
             * memory; every lane of the block reaches the barrier */
            const int w = lane / 32;
#pragma unroll
            for (int k = 0; k < RW; k++)
#pragma unroll
                for (int i = 0; i < NT; i++)
                    if (lane % 32 == 0)
                        xw[(k * NT + i) * WPR + w] = WPR == 2 ? st_fadd(acc[k][i][0], acc[k][i][1]) : acc[k][i][0];
            __syncthreads();
#pragma unroll
            for (int k = 0; k < RW; k++)
#pragma unroll
                for (int i = 0; i < NT; i++) {
                    const float *p = xw + (k * NT + i) * WPR;
                    out[k][i] = WPR == 2 ? st_fadd(p[0], p[1]) : st_canon_groups4(p[0], p[1], p[2], p[3]);
                }
        }
    }
}

template <int TYPE, int T, int NT, bool XBLOCKS = false>
ST_DEV void st_row_dot(const st_mat_dev &m, int64_t row, const st_xvec *xv, int n, const st_grids &g, int lane,
                       float *out)
{
    st_rows_dot<TYPE, T, NT, 1, XBLOCKS>(m, row, 0, xv, n, g, lane, (float(*)[NT])out);
}

/* Stage the format's lookup table in LDS (STAGE) or use it from global
 * memory. The shared arrays are sized for the table the type needs (its
 * decoder's grid_bytes, 0 for none). */
template <int TYPE> struct st_grid_bytes {
    static constexpr int n = st_unit_dec<TYPE>::grid_bytes;
};

template <int TYPE, bool STAGE>
ST_DEV st_grids st_setup_grids(const st_grids &gg, uint32_t *smem)
{
    using D = st_unit_dec<TYPE>;
    st_grids g = gg;
    if (STAGE && D::grid_bytes > 0) {
        const int words = D::grid_bytes / 4;
        const uint32_t *src = D::grid(gg);
        for (int i = threadIdx.x; i < words; i += blockDim.x) smem[i] = src[i];
        __syncthreads();
        D::set_grid(g, smem);
    }
    return g;
}

#endif
