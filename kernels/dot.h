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

/* The in-place layout's formats of one unit a block (32 values) on
 * NVIDIA: a lane's block is BYTES bytes at a stride of BYTES, at an
 * alignment of 1-2, so its own loads are 4-6 narrow ones, each spread over
 * the 32 lanes' blocks (about 19 sectors a load instruction at 18 bytes;
 * Nsight on iq4_nl 14336x4096 at one token: twice the L1 sectors of the
 * planar layout, DRAM 45% busy against 59%, docs/PERFORMANCE.md). The
 * warp's 32 blocks are 32 * BYTES consecutive bytes (a multiple of 16):
 * where the matrix base and the row stride are multiples of 16, the warp
 * copies them to shared memory in 16-byte pieces (st_cp_async16) and each
 * lane reads its block there with the format's own load_blk
 * (st_coop_pipe). The raw, so the decode and the bytes out, are the
 * per-lane loads'. Taken at one token for the blocks of 18 bytes (Q4_0,
 * IQ4_NL), where it measured faster (an H100, 2026-12-06, old / new build
 * alternating, us: iq4_nl 14336x4096 20.40-20.51 -> 18.16-18.22, 4096x14336
 * 20.70-20.84 -> 19.19-19.23, q4_0 14336x4096 16.78 -> 16.40-16.44); Q8_0's
 * 34 bytes were slower (4096x14336 26.84-26.88 -> 27.49-27.51), the other
 * formats and 2 tokens are not measured and keep their own loads. */
ST_HD constexpr int st_qk_of(int t)
{
    return
#define ST_QK_OF_(id, name, ggml, qk, bytes) t == ggml ? qk :
        ST_QTYPES(ST_QK_OF_)
#undef ST_QK_OF_
        0;
}

ST_HD constexpr int st_bytes_of(int t)
{
    return
#define ST_BYTES_OF_(id, name, ggml, qk, bytes) t == ggml ? bytes :
        ST_QTYPES(ST_BYTES_OF_)
#undef ST_BYTES_OF_
        0;
}

template <int TYPE> struct st_coop_blocks {
#if defined(ST_CUDA)
    static constexpr bool ok = st_in_place(TYPE) && st_qk_of(st_base_type(TYPE)) == 32 && st_bytes_of(st_base_type(TYPE)) == 18;
#else
    static constexpr bool ok = false;
#endif
    static constexpr int bytes = st_bytes_of(st_base_type(TYPE));
};

/* Whether the blocks of M's rows start 16-aligned (every chunk of 32
 * blocks then does: 32 * BYTES is a multiple of 16). */
ST_DEV bool st_coop_aligned(const st_mat_dev &m)
{
    return ((uintptr_t)m.p[0] & 15u) == 0 && (m.rb & 15) == 0;
}

/* st_rows_dot's pipelined loop for one row and one token (B = 2 units a
 * lane a batch) on the in-place formats of st_coop_blocks: batch k + 1's
 * blocks are copied to shared memory while batch k is decoded from there.
 * A chunk is the warp's 32 consecutive units (T >= 32, one unit a lane);
 * one past the row's end copies only the blocks that exist (the row ends
 * 16-aligned, so no copy reads past it). Called by the blocks of 4 warps
 * of st_mmvq_default_kernel (its 128 threads). */
template <int TYPE, int T, int NT, int B, bool XBLOCKS>
ST_DEV void st_coop_pipe(const st_mat_dev &m, int64_t row, const st_xvec *xv, int n, const st_grids &g, int lane,
                         float (&acc)[1][NT][1])
{
    constexpr int BYTES = st_coop_blocks<TYPE>::bytes, CH = 32 * BYTES, STEP = T * B;
    static_assert(CH % 16 == 0, "a chunk of whole 16-byte pieces");
    __shared__ __align__(16) uint8_t s_chunk[4][2][B][CH];
    const int w = threadIdx.x / 32, l = lane & 31;
    const uint8_t *rowp = m.p[0] + row * m.rb;
    auto issue = [&](int u0, int k) {
#pragma unroll
        for (int b = 0; b < B; b++) {
            const int us = u0 + T * b + (lane - l); /* the warp's first unit */
            if (us < m.nu) {
                const int nv = m.nu - us < 32 ? m.nu - us : 32;
                const int pieces = (nv * BYTES + 15) / 16;
                const uint8_t *src = rowp + (int64_t)us * BYTES;
                for (int i = l; i < pieces; i += 32) st_cp_async16(&s_chunk[w][k][b][16 * i], src + 16 * i);
            }
        }
        st_cp_async_commit();
    };
    auto run = [&](int u0, int k) {
        st_syncwarp(); /* every lane's copies of buffer K have landed (each waited for its own) */
#pragma unroll
        for (int b = 0; b < B; b++) {
            const int u = u0 + T * b + lane;
            if (u < m.nu) {
                st_mat_dev c = m;
                c.p[0] = s_chunk[w][k][b];
                c.rb = 0;
                typename st_unit_dec<TYPE>::raw r;
                st_unit_dec<TYPE>::load(c, 0, l, r);
                st_dunit un[1];
                st_unit_dec<TYPE>::dec(r, u, g, un[0]);
                st_add_unit<TYPE, NT, 1, 1, XBLOCKS>(un, xv, n, u, 0, acc);
            }
        }
        st_syncwarp(); /* read before the next copies into buffer K */
    };
    issue(0, 0);
    st_grid_dep_wait(); /* the activations are read from here on */
    for (int u0 = 0; u0 < m.nu; u0 += 2 * STEP) {
        issue(u0 + STEP, 1);
        st_cp_async_wait<1>();
        run(u0, 0);
        if (u0 + STEP >= m.nu) break;
        issue(u0 + 2 * STEP, 0);
        st_cp_async_wait<1>();
        run(u0 + STEP, 1);
    }
    st_cp_async_wait<0>();
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
        bool coop = false;
        if constexpr (st_coop_blocks<TYPE>::ok && RW == 1 && NT == 1 && T >= 32) {
            coop = st_coop_aligned(m);
            if (coop) st_coop_pipe<TYPE, T, NT, B, XBLOCKS>(m, row0, xv, n, g, lane, acc);
        }
        if (!coop) {
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
