/* iq_mmvq kernels, instantiated once per weight type by mmvq_<type>.hip:
 *  - the default chain: T lanes per row from the row length (sub-warp for
 *    short rows), 4 warps per block, IQ grids from global memory or staged
 *    in LDS (STRATA_IQ_STAGE_GRID_MMVQ=1);
 *    (with 1-4 tokens, and row pairs at 8, launched as a dependent of the
 *    q8_1 kernel on NVIDIA sm_90+);
 *  - the table variants: one warp per row, R rows per block, R expanded from
 *    STRATA_MMVQ_ROWS_VARIANTS; the matrix-instruction variants (mmvq_mma.h),
 *    the split variants, W warps on one row (mmvq_split.h), and on wide rows
 *    (128 streams) the wide-row variants, the default's kernel with a fixed
 *    geometry (STRATA_MMVQ_WIDE_VARIANTS);
 *  - the legacy path (STRATA_OLD_IQ_MMVQ): ggml block_q8_1 activations read
 *    with 4-byte loads, one warp per block. */
#include "common.h"
#include "mmvq_mma.h"
#include "strata/variants.h"

/* Each group of T lanes computes RW adjacent rows with NG stream groups
 * (st_canon_mmvq_groups of the row length; T > 32 needs XW, shared memory of
 * T / 32 floats per row and token of each lane group in the block). */
template <int TYPE, int T, int NT, int RW, bool XBLOCKS, bool WRONG = false, bool PIPE = false, int NG = 1>
ST_DEV void st_mmvq_body(const st_mat_dev &m, const st_xvec *xv, int nt, float *__restrict__ y,
                         int rows_per_block, const st_grids &g, float *xw = nullptr)
{
    const int64_t row0 = (int64_t)blockIdx.x * rows_per_block + (threadIdx.x / T) * RW;
    const int lane = threadIdx.x % T;
    float out[RW][NT];
    /* Rows past the end still run the dot (on the last row) so every lane
     * takes part in the shuffles; they do not store. */
    const int64_t r0 = row0 < m.rows ? row0 : m.rows - 1;
    /* the group's last row that exists: each row computed on its own (a
     * partial last group of 4 can hold 2 or 3 rows) */
    const int kmax = m.rows - 1 - r0 < RW - 1 ? (int)(m.rows - 1 - r0) : RW - 1;
    st_rows_dot<TYPE, T, NT, RW, XBLOCKS, WRONG, PIPE, NG>(m, r0, kmax, xv, nt, g, lane, out,
                                                         xw ? xw + (threadIdx.x / T) * RW * NT * (T / 32) : nullptr);
    if (lane == 0) {
#pragma unroll
        for (int k = 0; k < RW; k++)
#pragma unroll
            for (int i = 0; i < NT; i++)
                if (i < nt && row0 + k < m.rows) y[(int64_t)i * m.rows + row0 + k] = out[k][i];
    }
}

template <int NT>
ST_DEV void st_xvecs(const int8_t *qs, const float *d, int nu, int nt, bool blocks, st_xvec *xv)
{
#pragma unroll
    for (int i = 0; i < NT; i++) {
        const int ii = i < nt ? i : 0;
        xv[i].qs = blocks ? qs + (int64_t)ii * nu * 36 : qs + (int64_t)ii * nu * 32;
        xv[i].d = d ? d + (int64_t)ii * nu : nullptr;
    }
}

#include "mmvq_split.h" /* needs st_xvecs */

/* RW rows per lane group: with several tokens, two rows share each
 * activation load (used when there are enough rows to keep the grid wide).
 * With 1-2 tokens (pipelined weight loads) the NVIDIA build caps registers
 * at 64 (8 blocks of 4 warps per SM): at 72 the 1024 blocks of a 4096-row
 * matrix no longer fit one wave on the H200 (IQ3_S n_tokens 2: 35.2 us,
 * 28.7 us without the pipeline). */
template <int TYPE, int T, int NT, int RW, bool STAGE, int NG = 1, int MINB = -1>
__global__ void ST_LAUNCH_BOUNDS(128, MINB >= 0 ? MINB : NT <= 2 && (NG == 1 || (NT == 2 && st_unit_dec<TYPE>::grid_bytes > 0)) ? 8 : 0)
    st_mmvq_default_kernel(st_mat_dev m, const int8_t *__restrict__ qs,
                                                              const float *__restrict__ d, int nt,
                                                              float *__restrict__ y, st_grids gg)
{
    __shared__ uint32_t s_grid[st_grid_bytes<TYPE>::n / 4 + 1];
    __shared__ float s_xw[T > 32 ? 4 * RW * NT : 1]; /* (128 / T) lane groups x RW x NT x T / 32 */
    /* The q8_1 kernel of the next call is a dependent of this one (it
     * waits for this grid's end before it reads or writes anything): it
     * may launch once every block of this grid has released it. Released
     * at the start (so it is resident when this grid ends) for one token,
     * and for two on one-group rows, of formats without a grid table; at
     * the end of each block otherwise. Measured on the H200 (us, eager,
     * start / end, each pair in one run): 4096x14336 n_tokens 1 iq4_xs
     * 15.84 / 16.13, iq4_nl 14.62 / 14.97; 14336x4096 n_tokens 2 iq4_nl
     * 17.53 / 18.04, iq4_xs 18.17 / 18.77; but 4096x14336 n_tokens 2 (128
     * streams) iq4_xs 18.63 / 16.87, iq4_nl 18.02 / 16.24; iq3_s n_tokens
     * 1 17.93 / 17.45 (4096x14336), 2 20.61 / 20.20 (14336x4096); n_tokens
     * 8 iq4_nl 14336x4096 39.73 / 35.89, 4096x14336 32.28 / 30.55
     * (docs/PERFORMANCE.md, fourth run). */
    constexpr bool early = NT <= 2 && st_unit_dec<TYPE>::grid_bytes == 0 && (NG == 1 || NT == 1);
    if (early) st_grid_dep_release();
    const st_grids g = st_setup_grids<TYPE, STAGE>(gg, s_grid);
    st_xvec xv[NT];
    st_xvecs<NT>(qs, d, m.nu, nt, false, xv);
    st_mmvq_body<TYPE, T, NT, RW, false, false, true, NG>(m, xv, nt, y, 4 * 32 / T * RW, g, s_xw);
    if (!early) st_grid_dep_release();
}

template <int TYPE, int NT, int R, int NG>
__global__ void __launch_bounds__(32 * R) st_mmvq_rows_kernel(st_mat_dev m, const int8_t *__restrict__ qs,
                                                             const float *__restrict__ d, int nt,
                                                             float *__restrict__ y, st_grids g)
{
    st_xvec xv[NT];
    st_xvecs<NT>(qs, d, m.nu, nt, false, xv);
#ifdef STRATA_TEST_WRONG_VARIANT
    st_mmvq_body<TYPE, 32, NT, 1, false, R == 16, false, NG>(m, xv, nt, y, R, g); /* a deliberately wrong variant */
#else
    st_mmvq_body<TYPE, 32, NT, 1, false, false, false, NG>(m, xv, nt, y, R, g);
#endif
}

template <int TYPE, int NT, int NG>
__global__ void __launch_bounds__(32) st_mmvq_legacy_kernel(st_mat_dev m, const uint8_t *__restrict__ blocks,
                                                           int nt, float *__restrict__ y, st_grids g)
{
    st_xvec xv[NT];
    st_xvecs<NT>((const int8_t *)blocks, nullptr, m.nu, nt, true, xv);
    st_mmvq_body<TYPE, 32, NT, 1, true, false, false, NG>(m, xv, nt, y, 1, g);
}


/* The default chain's geometry on a wide row (st_canon_mmvq_groups 4: 128
 * streams): T lanes per row (two or four warps) and RW rows per lane group
 * (each activation load shared by RW rows). Chosen per token bucket and
 * format family from one H200 run of every combination (T 64 / 128 x RW 1 /
 * 2 / 4, 4096x14336, us, eager; docs/PERFORMANCE.md):
 *   1 token: T 128, RW 1 (iq4_nl 16.27, iq4_xs 17.11); formats with a grid
 *     table RW 2 (iq3_s 20.14 -> 18.88);
 *   2 tokens: T 64, RW 2 (iq4_nl 17.78, iq4_xs 18.42, iq3_s 21.35 with the
 *     64-register cap of the one-group kernels, 30.9 without it, which
 *     formats without a grid are better without: iq4_xs 19.23 -> 18.42);
 *   4 tokens: RW 4, T 64 (iq4_nl 21.74, iq4_xs 21.96), T 128 with a grid
 *     (iq3_s 30.75; 38.3 at T 64);
 *   8 tokens: T 64, RW 4 with at most 128 registers (4 blocks of 4 warps
 *     per SM: the 512 blocks of a 4096-row matrix in one wave); a second
 *     run against the geometry before (T 128, RW 4, 157 registers; IQ4_XS
 *     RW 2): iq4_nl 40.3 -> 32.3, iq4_xs 38.2 -> 33.6, iq3_s 43.1 -> 37.8
 *     (T 128 RW 4 at 128 registers: 33.5 / 33.7 / 37.2; at 96 registers,
 *     spilling: 37.8 / 40.2 / 43.1).
 * Every one is launched as a dependent of the q8_1 kernel (NVIDIA sm_90+;
 * at 8 tokens 49.3 -> 48.0 us for iq4_xs, T 128). One token keeps the
 * default cap (64 registers, 8 blocks an SM): for 10 / 12 blocks (48 / 40
 * registers, spilling) it was slower on an H100 (2026-12-07, one call,
 * three runs, min, us, 4096x14336): iq4_xs 16.62 -> 19.70 / 26.57, iq4_nl
 * 16.83 -> 17.73 / 21.56, in place iq4_nl (no spill at 48) 19.18 -> 19.29
 * / 19.44 (docs/PERFORMANCE.md, twentieth session). Since 2026-12-06 the
 * three formats measured here reach the 8-token bucket at 5 tokens only on
 * NVIDIA (their default takes the matrix units from 6:
 * STRATA_MMVQ_BLOCK_DECODE_MMA_TOKENS); the other formats at 5-8.
 * gfx1100 (not measured: no AMD card here) takes RW 2 where the H200 takes
 * 4, and at 8 tokens the geometry before (T 128, RW 2): four rows held
 * 125-202 VGPRs there (10 or fewer waves per SIMD) against the default
 * chain's budget of 96. */
#if ST_HIP
#define ST_WIDE_RW4 2
#else
#define ST_WIDE_RW4 4
#endif
template <int TYPE, int NT> struct st_wide_geom {
    static constexpr bool grid = st_unit_dec<TYPE>::grid_bytes > 0;
#if ST_HIP
    static constexpr int T = NT == 2 || (NT == 4 && !grid) ? 64 : 128;
    static constexpr int RW = NT == 1 ? (grid ? 2 : 1) : ST_WIDE_RW4;
    static constexpr int MINB = -1;
#else
    static constexpr int T = NT == 2 || NT == 8 || (NT == 4 && !grid) ? 64 : 128;
    static constexpr int RW = NT == 1 ? (grid ? 2 : 1) : NT == 2 ? 2 : ST_WIDE_RW4;
    static constexpr int MINB = NT == 8 ? 4 : -1; /* the default cap otherwise */
#endif
};

/* T lanes per wide row, RW rows per lane group (MINB: at least MINB blocks
 * per SM, a register cap), as a dependent launch. */
template <int TYPE, int NT, int T, int RW, int MINB = -1>
static st_rt_error st_mmvq_wide_launch(const st_launch &L, const st_mat_dev &m, const st_xplanes &x, int nt, float *y,
                                       bool stage)
{
    const int rpb = 4 * 32 / T * RW;
    const unsigned grid = (unsigned)((m.rows + rpb - 1) / rpb);
    if (stage)
        return st_launch_dependent(L, true, st_mmvq_default_kernel<TYPE, T, NT, RW, true, 4, MINB>, grid, 128, m, x.qs, x.d, nt, y, L.grids);
    return st_launch_dependent(L, true, st_mmvq_default_kernel<TYPE, T, NT, RW, false, 4, MINB>, grid, 128, m, x.qs, x.d, nt, y, L.grids);
}

template <int TYPE, int NT>
static st_rt_error st_mmvq_wide(const st_launch &L, const st_mat_dev &m, const st_xplanes &x, int nt, float *y,
                                bool stage)
{
    using G = st_wide_geom<TYPE, NT>;
    return st_mmvq_wide_launch<TYPE, NT, G::T, G::RW, G::MINB>(L, m, x, nt, y, stage);
}

/* The wide-row variant ROWS (STRATA_MMVQ_WIDE_VARIANTS); a row of one
 * stream group has none. */
template <int TYPE, int NT>
static st_rt_error st_mmvq_wide_variant(const st_launch &L, const st_mat_dev &m, const st_xplanes &x, int nt, float *y,
                                        int rows, bool stage)
{
    if (st_canon_mmvq_groups(m.nu) != 4) return ST_RT_INVALID_VALUE;
    const st_mmvq_variant v = st_mmvq_variant_of(rows);
#define ST_WIDE_CASE_(T, R) \
    if (v.lanes == (T) && v.rows == (R)) return st_mmvq_wide_launch<TYPE, NT, T, R>(L, m, x, nt, y, stage);
    STRATA_MMVQ_WIDE_VARIANTS(ST_WIDE_CASE_)
#undef ST_WIDE_CASE_
    return ST_RT_INVALID_VALUE;
}

template <int TYPE, int NT>
static st_rt_error st_mmvq_nt(const st_launch &L, const st_mat_dev &m, const st_xplanes &x,
                              const uint8_t *xblocks, int nt, float *y, int rows, bool stage, bool legacy, bool one_row)
{
    const st_mmvq_variant v = st_mmvq_variant_of(rows);
    if constexpr (st_in_place(TYPE)) {
        /* the in-place layout has the default chain (and the matrix units,
         * st_launch_mmvq), not the tuning families nor the legacy path */
        (void)xblocks;
        if (legacy || v.family != ST_MMVQ_DEFAULT) return ST_RT_INVALID_VALUE;
    } else {
        if (legacy)
            return st_by_groups(m.nu, [&](auto ng) {
                st_mmvq_legacy_kernel<TYPE, NT, decltype(ng)::value><<<(unsigned)m.rows, 32, 0, L.stream>>>(m, xblocks, nt, y, L.grids);
                return st_rt_get_last_error();
            });
        if (v.family == ST_MMVQ_WIDE) return st_mmvq_wide_variant<TYPE, NT>(L, m, x, nt, y, rows, stage);
        if (v.family == ST_MMVQ_SPLIT) return st_mmvq_split_nt<TYPE, NT>(L, m, x, nt, y, v.warps, stage);
    }
    /* The default chain with 1-4 tokens is launched as a programmatic
     * dependent of the q8_1 kernel before it (NVIDIA sm_90+): its blocks
     * start while the activations are quantized and issue their first
     * weight loads before st_grid_dep_wait. Measured on the H200 in one run
     * each (us, eager calls; 4096x14336 / 14336x4096): n_tokens 1 iq4_nl
     * 17.34 -> 15.75 / 16.82 -> 15.49, iq3_s 20.71 -> 19.42 / 20.54 ->
     * 19.23, iq4_xs 21.28 -> 19.85 / 19.88 -> 18.41. With 8 tokens it was
     * slower with one row per lane group (the 4096-row matrices: iq4_nl
     * 47.3 -> 51.4, iq3_s 52.3 -> 54.2) and faster with two (14336 rows:
     * iq4_nl 38.3 -> 37.0, iq4_xs 37.1 -> 35.9), so 8 tokens launch as
     * dependents only with row pairs. */
    if (v.family == ST_MMVQ_DEFAULT && st_canon_mmvq_groups(m.nu) == 4) return st_mmvq_wide<TYPE, NT>(L, m, x, nt, y, stage);
    if (v.family == ST_MMVQ_DEFAULT) {
        const int t = st_lanes_for_units(m.nu, 8);
        const bool rw2 = !one_row && st_mmvq_rows_per_group(TYPE, NT, m.rows) == 2;
        const int rpb = 4 * 32 / t * (rw2 ? 2 : 1);
        const unsigned grid = (unsigned)((m.rows + rpb - 1) / rpb);
        return st_by_lanes(t, [&](auto tt) {
            constexpr int TT = decltype(tt)::value;
            constexpr int RW2 = NT > 1 ? 2 : 1; /* no two-row kernels for one token */
            if (rw2 && NT > 1) {
                if (stage)
                    return st_launch_dependent(L, true, st_mmvq_default_kernel<TYPE, TT, NT, RW2, true>, grid, 128, m, x.qs, x.d, nt, y, L.grids);
                else
                    return st_launch_dependent(L, true, st_mmvq_default_kernel<TYPE, TT, NT, RW2, false>, grid, 128, m, x.qs, x.d, nt, y, L.grids);
            } else {
                if (stage)
                    return st_launch_dependent(L, NT <= 4, st_mmvq_default_kernel<TYPE, TT, NT, 1, true>, grid, 128, m, x.qs, x.d, nt, y, L.grids);
                else
                    return st_launch_dependent(L, NT <= 4, st_mmvq_default_kernel<TYPE, TT, NT, 1, false>, grid, 128, m, x.qs, x.d, nt, y, L.grids);
            }
        });
    }
    if constexpr (st_in_place(TYPE)) {
        return ST_RT_INVALID_VALUE;
    } else {
        return st_by_groups(m.nu, [&](auto ng) {
            constexpr int NG = decltype(ng)::value;
            if (v.family != ST_MMVQ_ROWS) return ST_RT_INVALID_VALUE;
            switch (v.rows) {
#define ST_ROWS_CASE(R)                                                                                       \
        case R:                                                                                                   \
            st_mmvq_rows_kernel<TYPE, NT, R, NG><<<(unsigned)((m.rows + R - 1) / R), 32 * R, 0, L.stream>>>(m, x.qs, x.d, nt, \
                                                                                                      y, L.grids); \
            break;
                STRATA_MMVQ_ROWS_VARIANTS(ST_ROWS_CASE)
#undef ST_ROWS_CASE
            default: return ST_RT_INVALID_VALUE;
            }
            return st_rt_get_last_error();
        });
    }
}

template <int TYPE>
st_rt_error st_launch_mmvq(const st_launch &L, const st_mat_dev &m, const st_xplanes &x, const uint8_t *xblocks,
                           int nt, float *y, int rows, bool stage, bool legacy, bool one_row, bool one_pass)
{
    const st_mmvq_variant v = st_mmvq_variant_of(rows);
    /* the matrix units read the tiled activations the runtime quantized
     * for them (the same st_mmvq_tiled), the other kernels the plain */
    if ((x.tiled != 0) != st_mmvq_tiled(TYPE, rows, nt, legacy)) return ST_RT_INVALID_VALUE;
    if (v.family == ST_MMVQ_MMA) return st_launch_mmvq_mma<TYPE>(L, m, x, nt, y, v.warps, stage, one_pass);
    /* verify batches: the default chain takes the matrix units (each
     * weight decoded once for every token) */
    if (x.tiled)
        return st_launch_mmvq_mma<TYPE>(L, m, x, nt, y, st_mma_default_warps(TYPE, nt, st_canon_mmvq_groups(m.nu)), stage,
                                         one_pass);
    if (nt > 8) {
        /* a rows variant and the legacy path run in chunks of 8 tokens,
         * exact because a token's bytes never depend on the other tokens
         * of a call */
        for (int t0 = 0; t0 < nt; t0 += 8) {
            const int64_t nu = m.nu;
            st_xplanes c = x;
            if (c.qs) {
                c.qs += (int64_t)t0 * nu * 32;
                c.d += (int64_t)t0 * nu;
                c.d16 += (int64_t)t0 * nu;
                c.s16 += (int64_t)t0 * nu;
            }
            const uint8_t *cb = xblocks ? xblocks + (int64_t)t0 * nu * 36 : nullptr;
            const int n = nt - t0 < 8 ? nt - t0 : 8;
            ST_RT_TRY(st_launch_mmvq<TYPE>(L, m, c, cb, n, y + (int64_t)t0 * m.rows, rows, stage, legacy, one_row, one_pass));
        }
        return ST_RT_SUCCESS;
    }
    switch (st_nt_bucket(nt)) {
    case 1: return st_mmvq_nt<TYPE, 1>(L, m, x, xblocks, nt, y, rows, stage, legacy, one_row);
    case 2: return st_mmvq_nt<TYPE, 2>(L, m, x, xblocks, nt, y, rows, stage, legacy, one_row);
    case 4: return st_mmvq_nt<TYPE, 4>(L, m, x, xblocks, nt, y, rows, stage, legacy, one_row);
    default: return st_mmvq_nt<TYPE, 8>(L, m, x, xblocks, nt, y, rows, stage, legacy, one_row);
    }
}
