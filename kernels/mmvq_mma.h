/* iq_mmvq on the integer matrix units (st_gpu.h st_mma): each weight is
 * decoded once and multiplied with every token of the call.
 *
 * A block takes 16 rows and W warps. Warp w takes the units u with
 * u % W == w, in increasing u: they are the units of the canonical streams
 * w, w + W, ... (stream = u % 32), so every stream still takes its units in
 * increasing order (docs/DESIGN.md section 2). Per unit the warp decodes the
 * 16 rows' weights into the A operand, and for each tile of TOK tokens one
 * matrix instruction gives the exact integer dot of every (row, token);
 * each lane then does the contract's float work for its C elements
 * (st_canon_unit, and st_canon_unit_min for formats with a min term, whose
 * q8_1 sums come from a second instruction with an all-ones A). Formats
 * with integer factors per 16 values take the two halves apart (mma16x2).
 * At the end the 32 stream partials of each (row, token) are combined by the
 * fixed butterfly: the levels 16 .. W inside each thread, the rest through
 * shared memory. A wide row (st_canon_mmvq_groups 4: 128 streams, unit u in
 * group (u / 32) % 4) runs that once per group, the groups one after another,
 * and combines the group values by st_canon_groups4. Same bits as the CPU
 * reference and every dp4a path.
 *
 * The A operand comes from each format's decoder: on NVIDIA a lane needs
 * words t and t + 4 of two rows' units, which a format's frag2 decodes alone
 * (has_frag2); otherwise the lane decodes the whole unit and keeps those
 * words (4 times the decode work). On gfx11 a lane holds a whole row-unit. */
#ifndef ST_MMVQ_MMA_H
#define ST_MMVQ_MMA_H

#include "common.h"
#include "strata/variants.h"

/* The unit factors of one decoded row: what the C elements need. */
struct st_mma_rowf {
    float W, M;
    int f0, f1, g0, g1;
};

/* Words WORDS[0..N) of unit U of ROW into OUT, and the row's factors, from
 * the format's whole-unit decoder. */
template <int TYPE, int N>
ST_DEV void st_mma_words(const st_mat_dev &m, int64_t row, int u, const st_grids &g, const int (&words)[N], uint32_t *out,
                         st_mma_rowf &f)
{
    st_dunit un;
    st_unit_dec<TYPE>().get(m, row, u, g, un);
#pragma unroll
    for (int i = 0; i < N; i++) out[i] = un.w[words[i]];
    f.W = un.W;
    f.M = un.M;
    f.f0 = un.f0;
    f.f1 = un.f1;
    f.g0 = un.g0;
    f.g1 = un.g1;
}

/* The operands of one lane for unit U: A words and the factors of the rows
 * whose C elements it holds. */
template <int TYPE>
ST_DEV void st_mma_load_a(const st_mat_dev &m, int64_t row0, int u, int lane, const st_grids &g,
                          uint32_t (&a)[st_mma::NA], st_mma_rowf (&cf)[st_mma::NC])
{
    using M = st_mma;
#if ST_HIP
    /* one row per lane (lanes 16-31 repeat 0-15), all 8 words; the C rows'
     * factors come from the lanes that decoded them */
    const int64_t r = row0 + M::a_row(lane, 0) < m.rows ? row0 + M::a_row(lane, 0) : m.rows - 1;
    const int words[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    st_mma_rowf f;
    st_mma_words<TYPE>(m, r, u, g, words, a, f);
#pragma unroll
    for (int i = 0; i < M::NC; i++) {
        const int src = M::c_row(lane, i);
        cf[i].W = st_shfl_idx(f.W, src);
        cf[i].M = st_unit_dec<TYPE>::min ? st_shfl_idx(f.M, src) : 0.0f;
        cf[i].f0 = st_unit_dec<TYPE>::halves ? st_shfl_idx_i(f.f0, src) : 1;
        cf[i].f1 = st_unit_dec<TYPE>::halves ? st_shfl_idx_i(f.f1, src) : 1;
        cf[i].g0 = st_unit_dec<TYPE>::min_halves ? st_shfl_idx_i(f.g0, src) : 1;
        cf[i].g1 = st_unit_dec<TYPE>::min_halves ? st_shfl_idx_i(f.g1, src) : 1;
    }
#else
    /* rows g and g + 8, words t and t + 4 of each: A elements (g, t),
     * (g + 8, t), (g, t + 4), (g + 8, t + 4); C elements 0-1 are row g's,
     * 2-3 row g + 8's */
    const int t = lane & 3;
    const int words[2] = {t, t + 4};
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int64_t rr = row0 + M::a_row(lane, h);
        const int64_t r = rr < m.rows ? rr : m.rows - 1;
        uint32_t w2[2];
        st_mma_rowf f;
        if constexpr (st_unit_dec<TYPE>::has_frag2) {
            f.W = st_unit_dec<TYPE>().frag2(m, r, u, g, t, w2[0], w2[1]);
            f.M = 0.0f;
            f.f0 = f.f1 = f.g0 = f.g1 = 1;
        } else {
            st_mma_words<TYPE>(m, r, u, g, words, w2, f);
        }
        a[h] = w2[0];
        a[h + 2] = w2[1];
        cf[2 * h] = f;
        cf[2 * h + 1] = f;
    }
#endif
}

/* B words of token N (already clamped to the call) for unit U. */
ST_DEV void st_mma_load_b(const st_xplanes &x, int u, int n, int lane, uint32_t (&b)[st_mma::NB])
{
    const uint32_t *q = (const uint32_t *)(x.qs + ((int64_t)n * x.nu + u) * 32);
#pragma unroll
    for (int i = 0; i < st_mma::NB; i++) b[i] = q[st_mma::b_word(lane, i)];
}

template <int TYPE, int W, int TILES, bool STAGE, int NG>
__global__ void __launch_bounds__(32 * W) st_mmvq_mma_kernel(st_mat_dev m, st_xplanes x, int nt, float *__restrict__ y,
                                                            st_grids gg)
{
    using M = st_mma;
    using D = st_unit_dec<TYPE>;
    constexpr int SPW = 32 / W; /* streams of a group per warp */
    __shared__ uint32_t s_grid[st_grid_bytes<TYPE>::n / 4 + 1];
    __shared__ float s_part[W][16][M::TOK];
    __shared__ float s_grp[NG > 1 ? 2 : 1][NG > 1 ? TILES * 16 * M::TOK : 1]; /* g0 (+ g2), g1 of a wide row */
    const st_grids g = st_setup_grids<TYPE, STAGE>(gg, s_grid);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t row0 = (int64_t)blockIdx.x * 16;
    uint32_t ones[M::NA];
#pragma unroll
    for (int i = 0; i < M::NA; i++) ones[i] = 0x01010101u;

    /* a round: the warp's SPW units of 32, in groups of G whose A operands
     * are all loaded first (independent loads in flight), then their
     * products. Each stream j has its own accumulator and still takes its
     * units in increasing order, so G changes no bit. G = SPW, except on
     * gfx11 with 4 streams per warp: there a lane decodes whole row-units,
     * and four of them at once spilled (q2_K, iq2_xs), so two at a time, and
     * one at a time for formats with a min term per 16 values (q2_K still
     * spilled 16 bytes at 2 tiles with two). */
#if ST_HIP
    constexpr int G = SPW <= 2 ? SPW : D::min_halves ? 1 : 2;
#else
    constexpr int G = SPW;
#endif
    /* A wide row's groups one after another (group q: the units u with
     * (u / 32) % 4 == q), each combined to one value per (row, token) */
    for (int gq = 0; gq < NG; gq++) {
    float acc[TILES][M::NC][SPW];
#pragma unroll
    for (int tl = 0; tl < TILES; tl++)
#pragma unroll
        for (int i = 0; i < M::NC; i++)
#pragma unroll
            for (int j = 0; j < SPW; j++) acc[tl][i][j] = 0.0f;
    for (int u0 = 32 * gq; u0 < m.nu; u0 += 32 * NG) {
#pragma unroll
    for (int j0 = 0; j0 < SPW; j0 += G) {
        uint32_t a[G][M::NA];
        st_mma_rowf cf[G][M::NC];
#pragma unroll
        for (int jj = 0; jj < G; jj++) {
            const int u = u0 + warp + W * (j0 + jj); /* of stream warp + W j */
            st_mma_load_a<TYPE>(m, row0, u < m.nu ? u : m.nu - 1, lane, g, a[jj], cf[jj]);
        }
#pragma unroll
        for (int jj = 0; jj < G; jj++) {
            const int j = j0 + jj;
            const int u = u0 + warp + W * j;
            if (u >= m.nu) break; /* uniform across the warp (and every later group's u is larger) */
#pragma unroll
            for (int tl = 0; tl < TILES; tl++) {
                if (tl * M::TOK >= nt) break; /* uniform across the warp */
                const int bt = tl * M::TOK + M::b_tok(lane);
                uint32_t b[M::NB];
                st_mma_load_b(x, u, bt < nt ? bt : nt - 1, lane, b);
                int c0[M::NC], c1[M::NC], q0[M::NC], q1[M::NC];
                if (D::halves)
                    M::mma16x2(c0, c1, a[jj], b);
                else
                    M::mma32(c0, a[jj], b);
                if (D::min) {
                    if (D::min_halves)
                        M::mma16x2(q0, q1, ones, b);
                    else
                        M::mma32(q0, ones, b);
                }
#pragma unroll
                for (int i = 0; i < M::NC; i++) {
                    const int tok = tl * M::TOK + M::c_tok(lane, i);
                    const float da = x.d[(int64_t)(tok < nt ? tok : nt - 1) * x.nu + u];
                    const st_mma_rowf &f = cf[jj][i];
                    const int isum = D::halves ? f.f0 * c0[i] + f.f1 * c1[i] : c0[i];
                    float v = st_canon_unit(f.W, da, isum, acc[tl][i][j]);
                    if (D::min) v = st_canon_unit_min(f.M, da, D::min_halves ? f.g0 * q0[i] + f.g1 * q1[i] : q0[i], v);
                    acc[tl][i][j] = v;
                }
            }
        }
    }
    }
    /* the butterfly: in-thread levels 16 .. W, then W/2 .. 1 over warps */
#pragma unroll
    for (int tl = 0; tl < TILES; tl++) {
#pragma unroll
        for (int h = 16; h >= W; h >>= 1)
#pragma unroll
            for (int i = 0; i < M::NC; i++)
#pragma unroll
                for (int jj = 0; jj < h / W; jj++) acc[tl][i][jj] = st_fadd(acc[tl][i][jj], acc[tl][i][jj + h / W]);
        if (tl > 0 || gq > 0) __syncthreads(); /* the previous tile's partials are read */
#pragma unroll
        for (int i = 0; i < M::NC; i++) s_part[warp][M::c_row(lane, i)][M::c_tok(lane, i)] = acc[tl][i][0];
        __syncthreads();
        for (int e = threadIdx.x; e < 16 * M::TOK; e += blockDim.x) {
            const int r = e / M::TOK, n = e % M::TOK;
            float v[W];
#pragma unroll
            for (int w = 0; w < W; w++) v[w] = s_part[w][r][n];
#pragma unroll
            for (int h = W / 2; h >= 1; h >>= 1)
#pragma unroll
                for (int w = 0; w < h; w++) v[w] = st_fadd(v[w], v[w + h]);
            const int tok = tl * M::TOK + n;
            float out = v[0];
            if constexpr (NG > 1) {
                /* the same thread takes element e in every group */
                float *g02 = &s_grp[0][tl * 16 * M::TOK + e], *g1 = &s_grp[1][tl * 16 * M::TOK + e];
                if (gq == 0) *g02 = out;
                else if (gq == 1) *g1 = out;
                else if (gq == 2) *g02 = st_fadd(*g02, out);
                else out = st_fadd(*g02, st_fadd(*g1, out)); /* st_canon_groups4 */
                if (gq < NG - 1) continue;
            }
            if (tok < nt && row0 + r < m.rows) y[(int64_t)tok * m.rows + row0 + r] = out;
        }
    }
    }
}

/* W warps per block (8, 16 or 32: 4, 2 or 1 streams per warp; 4 warps held too many
 * registers on gfx1100: scratch); as many
 * tiles as NT tokens need. */
template <int TYPE, int W>
static st_rt_error st_mmvq_mma_w(const st_launch &L, const st_mat_dev &m, const st_xplanes &x, int nt,
                                                     float *y, bool stage)
{
    constexpr int MAXT = (ST_MAX_TOKENS + st_mma::TOK - 1) / st_mma::TOK;
    const int tiles = (nt + st_mma::TOK - 1) / st_mma::TOK;
    const unsigned grid = (unsigned)((m.rows + 15) / 16);
    return st_by_count<MAXT>(tiles, [&](auto tc) {
        constexpr int TL = decltype(tc)::value;
        if (st_canon_mmvq_groups(m.nu) == 4) {
            if (stage)
                st_mmvq_mma_kernel<TYPE, W, TL, true, 4><<<grid, 32 * W, 0, L.stream>>>(m, x, nt, y, L.grids);
            else
                st_mmvq_mma_kernel<TYPE, W, TL, false, 4><<<grid, 32 * W, 0, L.stream>>>(m, x, nt, y, L.grids);
        } else if (stage)
            st_mmvq_mma_kernel<TYPE, W, TL, true, 1><<<grid, 32 * W, 0, L.stream>>>(m, x, nt, y, L.grids);
        else
            st_mmvq_mma_kernel<TYPE, W, TL, false, 1><<<grid, 32 * W, 0, L.stream>>>(m, x, nt, y, L.grids);
        return st_rt_get_last_error();
    });
}


/* The matrix-instruction kernels for TYPE with W = -ROWS warps per block
 * (STRATA_MMVQ_MMA_VARIANTS). */
template <int TYPE>
static st_rt_error st_launch_mmvq_mma(const st_launch &L, const st_mat_dev &m, const st_xplanes &x, int nt, float *y,
                                      int w, bool stage)
{
    switch (w) {
#define ST_MMA_CASE_(W) \
    case W: return st_mmvq_mma_w<TYPE, W>(L, m, x, nt, y, stage);
        STRATA_MMVQ_MMA_VARIANTS(ST_MMA_CASE_)
#undef ST_MMA_CASE_
    default: return ST_RT_INVALID_VALUE;
    }
}

#endif
