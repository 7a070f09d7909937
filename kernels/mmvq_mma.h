/* iq_mmvq on the integer matrix units (st_gpu.h st_mma): each weight is
 * decoded once and multiplied with every token of the call.
 *
 * A block takes 16 rows (32 in two row groups where st_mma_rowgroups
 * says so: each B fragment then feeds both) and W warps. Warp w takes the units u with
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
 * The A operand: per round (the warp's 32 / W units) the lanes decode the
 * 16 x 32 / W row-units once each (a format's load and dec, units.h) into
 * the warp's staging area in shared memory, and each unit's fragment is
 * read from there (NVIDIA: words t, t + 4 of rows g, g + 8, one 8-byte read
 * each; gfx11: a lane's whole row); the factors of a C element's row come
 * by shuffle from the lane that decoded it. The next round's raw bytes are
 * requested before this round's matrix work, so each warp keeps a round of
 * weight loads in flight. On NVIDIA with 8 or 16 warps and the formats of
 * st_mma_coop (either layout, the grid staged or not), the whole block loads
 * and decodes each round instead: each warp's load reads 32 consecutive
 * units of one row (coalesced), the words go to the owning warp's area in
 * one of two alternating buffers, and the factors through shared memory.
 * The B operand and the activation scales come from the tiled planes
 * (common.h st_xplanes): one contiguous read per unit and tile; on NVIDIA
 * at 1-2 tiles a warp requests its next unit's before the current unit's
 * matrix work (two sets in registers), at 3-4 tiles on 32-stream rows a
 * tile's of the next unit once the current unit has used that tile's (one
 * set), else each unit's at its start. On NVIDIA (where st_mma_rows XPP
 * and XPG say) the last round of a pass or stream group also requests the
 * raw bytes of the next one's first round, and (XB) the butterfly
 * combines every tile after one pair of block barriers. */
#ifndef ST_MMVQ_MMA_H
#define ST_MMVQ_MMA_H

#include "common.h"
#include "strata/variants.h"

#include <atomic>

/* The factors of one decoded row-unit that its C elements need (those the
 * format has: st_unit_plain's traits). */
struct st_mma_rowf {
    float W, M;
    int f0, f1, g0, g1;
};

/* Decodes the row-units of one round of a warp into its staging area S (8
 * words each, in the order of st_mma::x_pos), from the raw bytes R loaded
 * before; row-unit k (of 16 SPW: row k % 16 of the block, the warp's unit
 * k / 16 of the round) is lane k % 32's slot k / 32. Keeps the factors in F. */
template <int TYPE, int PER, int RU>
ST_DEV void st_mma_stage(const typename st_unit_dec<TYPE>::raw (&r)[PER], const int (&u)[PER], int lane, const st_grids &g,
                         uint32_t (*s)[8], st_mma_rowf (&f)[PER])
{
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const int k = lane + 32 * i;
        if (RU % 32 != 0 && k >= RU) break;
        st_dunit un;
        st_unit_dec<TYPE>().dec(r[i], u[i], g, un);
        uint32_t w[8];
#pragma unroll
        for (int j = 0; j < 8; j++) w[st_mma::x_pos(j)] = un.w[j];
        uint4 *d = (uint4 *)s[k];
        d[0] = make_uint4(w[0], w[1], w[2], w[3]);
        d[1] = make_uint4(w[4], w[5], w[6], w[7]);
        f[i] = st_mma_rowf{un.W, un.M, un.f0, un.f1, un.g0, un.g1};
    }
}

/* The A operand of the warp's unit J of the round from its staging area S. */
ST_DEV void st_mma_read_a(const uint32_t (*s)[8], int j, int lane, uint32_t (&a)[st_mma::NA])
{
    using M = st_mma;
#if ST_HIP
    /* the row's 8 words (lanes 16-31 repeat 0-15) */
    const uint4 *p = (const uint4 *)s[16 * j + M::a_row(lane, 0)];
    const uint4 lo = p[0], hi = p[1];
    a[0] = lo.x, a[1] = lo.y, a[2] = lo.z, a[3] = lo.w, a[4] = hi.x, a[5] = hi.y, a[6] = hi.z, a[7] = hi.w;
#else
    /* words t, t + 4 of rows g and g + 8: A elements (g, t), (g + 8, t),
     * (g, t + 4), (g + 8, t + 4) */
    const int t = lane & 3;
    const uint2 r0 = *(const uint2 *)&s[16 * j + M::a_row(lane, 0)][2 * t];
    const uint2 r1 = *(const uint2 *)&s[16 * j + M::a_row(lane, 1)][2 * t];
    a[0] = r0.x, a[1] = r1.x, a[2] = r0.y, a[3] = r1.y;
#endif
}

/* The A operand of the warp's unit J of the round from its staging area S,
 * and the factors of the rows whose C elements the lane holds (from the
 * lanes that decoded them, F). */
template <int TYPE, int PER>
ST_DEV void st_mma_fetch_a(const uint32_t (*s)[8], int j, int lane, const st_mma_rowf (&f)[PER], uint32_t (&a)[st_mma::NA],
                           st_mma_rowf (&cf)[st_mma::NC])
{
    using M = st_mma;
    using D = st_unit_dec<TYPE>;
    st_mma_read_a(s, j, lane, a);
    /* row-unit 16 j + c_row sits in slot j / 2 (PER is 1 or 2) of lane
     * 16 (j % 2) + c_row */
    const st_mma_rowf &mine = PER > 1 && j >= 2 ? f[PER - 1] : f[0];
#pragma unroll
    for (int i = 0; i < M::NC; i++) {
#if !ST_HIP
        if (i & 1) { /* C elements 2h and 2h + 1 share row g + 8 h */
            cf[i] = cf[i - 1];
            continue;
        }
#endif
        const int src = 16 * (j & 1) + M::c_row(lane, i);
        cf[i].W = st_shfl_idx(mine.W, src);
        cf[i].M = D::min ? st_shfl_idx(mine.M, src) : 0.0f;
        cf[i].f0 = D::halves ? st_shfl_idx_i(mine.f0, src) : 1;
        cf[i].f1 = D::halves ? st_shfl_idx_i(mine.f1, src) : 1;
        cf[i].g0 = D::min_halves ? st_shfl_idx_i(mine.g0, src) : 1;
        cf[i].g1 = D::min_halves ? st_shfl_idx_i(mine.g1, src) : 1;
    }
}

/* The B words of unit U and token tile TL from the tiled planes (common.h
 * st_xtile): one contiguous read per warp, a lane's words in the order of
 * st_mma::x_pos. */
ST_DEV void st_mma_load_b(const st_xplanes &x, int u, int tl, int lane, uint32_t (&b)[st_mma::NB])
{
    using M = st_mma;
    const int8_t *q = x.qs + st_xtile(tl * M::TOK + M::b_tok(lane), u, x.nu) * 32;
#if ST_HIP
    const uint4 lo = *(const uint4 *)q, hi = *(const uint4 *)(q + 16);
    b[0] = lo.x, b[1] = lo.y, b[2] = lo.z, b[3] = lo.w, b[4] = hi.x, b[5] = hi.y, b[6] = hi.z, b[7] = hi.w;
#else
    const uint2 w = *(const uint2 *)(q + 8 * (lane & 3)); /* words t, t + 4 */
    b[0] = w.x, b[1] = w.y;
#endif
}

/* The activation scales of the lane's C tokens of unit U and tile TL. */
ST_DEV void st_mma_load_da(const st_xplanes &x, int u, int tl, int lane, float (&da)[st_mma::NC])
{
    using M = st_mma;
    const float *p = x.d + st_xtile(tl * M::TOK, u, x.nu);
#if ST_HIP
    const float v = p[M::c_tok(lane, 0)]; /* one token per lane */
#pragma unroll
    for (int i = 0; i < M::NC; i++) da[i] = v;
#else
    const float2 v = *(const float2 *)(p + M::c_tok(lane, 0)); /* tokens 2t, 2t + 1 */
#pragma unroll
    for (int i = 0; i < M::NC; i++) da[i] = i & 1 ? v.y : v.x;
#endif
}

/* Where a block's columns come from. The tiled planes of the call's tokens
 * (the dense kernel): column c is token c. */
struct st_mma_tiled_cols {
    st_xplanes x;
    ST_DEVM void b(int u, int tl, int lane, uint32_t (&b)[st_mma::NB]) const { st_mma_load_b(x, u, tl, lane, b); }
    ST_DEVM void da(int u, int tl, int lane, float (&d)[st_mma::NC]) const { st_mma_load_da(x, u, tl, lane, d); }
};

/* Gathered columns (the expert kernels): column c is vector vec[c] of the
 * plain planes X (c < N; a column past N reads column 0's vector, and its
 * values are never stored: a column's C elements depend on its B alone). */
struct st_mma_gather_cols {
    st_xplanes x;
    const int *vec;
    int n;
    ST_DEVM int64_t at(int c, int u) const { return (int64_t)vec[c < n ? c : 0] * x.nu + u; }
    ST_DEVM void b(int u, int tl, int lane, uint32_t (&b)[st_mma::NB]) const
    {
        using M = st_mma;
        const int8_t *q = x.qs + at(tl * M::TOK + M::b_tok(lane), u) * 32;
#if ST_HIP
        const uint4 lo = *(const uint4 *)q, hi = *(const uint4 *)(q + 16);
        b[0] = lo.x, b[1] = lo.y, b[2] = lo.z, b[3] = lo.w, b[4] = hi.x, b[5] = hi.y, b[6] = hi.z, b[7] = hi.w;
#else
        /* words t and t + 4 of the plain (unpermuted) unit */
        const int t = lane & 3;
        b[0] = *(const uint32_t *)(q + 4 * t);
        b[1] = *(const uint32_t *)(q + 16 + 4 * t);
#endif
    }
    ST_DEVM void da(int u, int tl, int lane, float (&d)[st_mma::NC]) const
    {
        using M = st_mma;
#if ST_HIP
        const float v = x.d[at(tl * M::TOK + M::c_tok(lane, 0), u)];
#pragma unroll
        for (int i = 0; i < M::NC; i++) d[i] = v;
#else
        const float v0 = x.d[at(tl * M::TOK + M::c_tok(lane, 0), u)], v1 = x.d[at(tl * M::TOK + M::c_tok(lane, 1), u)];
#pragma unroll
        for (int i = 0; i < M::NC; i++) d[i] = i & 1 ? v1 : v0;
#endif
    }
};

/* Whether st_mma_rows of TYPE with W warps decodes a round with the whole
 * block (the coalesced decode; NVIDIA, 8 or 16 warps, the formats of
 * st_mma_block_decode, whose row-unit has the one factor W; the dense and
 * the expert kernels, either layout, the grid staged or not). Measured on
 * an H100 (2026-12-06, one device call, docs/PERFORMANCE.md): an Nsight
 * profile of the per-warp decode found 69-80% of its global load sectors
 * excess (a warp's load touched 16 rows x 2 units: 32 lines) and L1 85%
 * busy at one tile; with the coalesced decode, iq3_s 4096 x 14336 mma16 at
 * 1 token 42.7 -> 31.3 us, the default at 16 / 24 / 32 tokens 48.1 / 53.3
 * / 72.1 -> 38.0 / 40.1 / 61.9 us; the four shapes measured 8-33% faster
 * at 16-32 tokens; the MoE layer iq3_s/iq4_nl at 24 / 32 tokens 314 / 315
 * -> 272 / 277 us (its expert kernels). Limited to what passed the parity
 * tests on the device (every path, n_tokens 1..32, the in-place layout and
 * the expert kernels, 0 mismatches); the other formats take it once tested
 * there. gfx11 keeps the per-warp decode. */
template <int TYPE, int W> constexpr bool st_mma_coop = (W == 8 || W == 16) && st_mma_block_decode(TYPE);

/* The blocks per SM the dense kernel of TYPE with W warps is compiled for
 * (__launch_bounds__): 2 for mma8 with the block decode (NVIDIA), which
 * holds it to 128 registers. Measured on an H100 (2026-12-06, one device
 * call, two runs each): every configuration at 2 or more blocks per SM ran
 * fast and every one at 1 slow; iq4_xs 4096 x 14336 at 24 tokens (3 tiles,
 * 130 -> 128 registers) 61.4 -> 39.4 us, at 32 tokens (4 tiles, 157 -> 128
 * and 48 bytes of spills) 66.0 -> 53.3, iq3_s 4096 x 14336 at 32 67.7 ->
 * 52.4, the 14336 x 4096 shapes at 32 56.3-59.2 -> 48.4-50.7; ncu: L1 hits
 * 4% -> 48% (the two blocks share the activations), long-scoreboard stalls
 * the most common either way. The other formats keep 1 (unmeasured: their
 * kernels at 4 tiles spill 8-128 bytes under the cap). */
template <int TYPE, int W> constexpr int st_mma_min_blocks = W == 8 && st_mma_coop<TYPE, W> ? 2 : 1;
/* The passes over the row the dense kernel of TYPE with W warps and TILES
 * tiles takes (st_mma_rows PASSES): 2 with the block decode, 8 warps and 4
 * tiles (25-32 tokens), where the accumulators of a warp's 4 streams (64
 * a lane) held the kernel at the 128 registers of two blocks per SM and
 * spilled; two passes hold half of them and the first pass's sum (the knob
 * STRATA_MMA_ONE_PASS: one). Measured on an H100 (2026-12-06, one device
 * call, two runs each way, us, one pass -> two): 32 tokens iq4_xs 4096 x
 * 14336 53.9 -> 51.9, 14336 x 4096 50.3 -> 47.9, iq4_nl 14336 x 4096 49.8
 * -> 48.0, iq3_s 4096 x 14336 53.7 -> 51.6, in place iq4_nl 4096 x 14336
 * 58.1 -> 53.4; slower with 16 warps (iq4_nl 4096 x 14336 57.9 -> 65.2, in
 * place iq4_xs 59.8 -> 65.6) and at 3 tiles (24 tokens, every shape 3-10%:
 * iq4_xs 4096 x 14336 40.9 -> 44.0). Two row groups (st_mma_rowgroups,
 * 16 warps) take two passes at 3-4 tiles, the knob or not. */
template <int TYPE, int W, int TILES, int RG = 1>
constexpr int st_mma_passes = st_mma_coop<TYPE, W> && ((W == 8 && TILES == 4) || (RG > 1 && TILES >= 3)) ? 2 : 1;
/* The 16-row groups a block of the dense kernel of TYPE with W warps and
 * TILES tiles takes (st_mma_rows RG): 2 with the block decode, 16 warps
 * and 2-4 tiles (9-32 tokens), so that each B fragment a warp loads feeds
 * two matrix instructions (two row groups) and the call reads the
 * activations half as often; two passes at 3-4 tiles (st_mma_passes: the
 * accumulators of two row groups; ptxas, iq4_xs: 100-128 registers, at 4
 * tiles 8 / 136 bytes of spills on 32- / 128-stream rows), and the block's
 * shared memory (82 KB
 * at 4 tiles on 128-stream rows) beyond the static 48 KB: dynamic
 * (st_mma_dyn_smem). Measured on an H100 (2026-12-07, one device call,
 * the same build with 16 rows a block beside it, two runs each, us, 16 ->
 * 32 rows, docs/rows32-h100-2026-12-07a.txt): mma16 at 16 tokens iq4_xs
 * 4096 x 14336 45.95 -> 36.18, iq3_s 47.94 -> 37.39, iq4_nl 45.03 ->
 * 34.55, in place iq3_s 60.98 -> 44.45; at 24 tokens 51.48 -> 44.86,
 * 52.55 -> 46.23, 50.04 -> 42.68; of the 36 cells (the six suite
 * shapes, both layouts, 16 / 24 / 32 tokens) 33 faster, in place iq4_xs
 * 14336 x 4096 at 32 tokens 0.7% slower, iq3_s 14336 x 4096 and 4096 x
 * 14336 at 32 tokens 3.9% and 1.5% slower. mma8 (two blocks of 16 rows an
 * SM) stays faster than either in all 36. */
template <int TYPE, int W, int TILES> constexpr int st_mma_rowgroups = st_mma_coop<TYPE, W> && W == 16 && TILES >= 2 ? 2 : 1;
#if ST_HIP
#define ST_MMA_BOUNDS(TYPE, W) __launch_bounds__(32 * (W))
#else
#define ST_MMA_BOUNDS(TYPE, W) __launch_bounds__(32 * (W), (st_mma_min_blocks<TYPE, W>))
#endif

/* The shared memory of st_mma_rows (COOP: with the block's decode, the
 * specialization below). */
template <int W, int TILES, int NG, bool COOP = false, int RG = 1> struct st_mma_smem {
    static_assert(RG == 1, "row groups: the block's decode");
    static constexpr int RU = 16 * (32 / W);  /* row-units a warp decodes per round */
    static constexpr int TB = 1;              /* tiles a butterfly batch (st_mma_rows) */
    uint32_t a[W][RU][8];                     /* each warp's decoded round */
    float part[TB][W][16][st_mma::TOK];
    float grp[NG > 1 ? 2 : 1][NG > 1 ? TILES * 16 * st_mma::TOK : 1]; /* g0 (+ g2), g1 of a wide row */
};

/* The block's decode: two staging buffers (rounds alternate, so one block
 * barrier per round suffices), each warp's area padded by 16 bytes so that
 * the 32 row-units a warp writes at once (one row, 32 units spread over W
 * areas, 32 / W unit slots each) spread over every bank, and the row
 * factor W of each (row, unit u0 + l of the round) in F, rows 33 floats
 * apart (no bank conflicts for the writer, one row and 32 units, nor for
 * the reader, 8 rows and one unit). The second buffer shares its bytes
 * with PART: the butterfly runs after a group's last round, behind a block
 * barrier; a group's first round stages into buffer 0, and its second
 * writes buffer 1 only after the first round's barrier, which every thread
 * reaches after the previous butterfly. With one row group it fits the 48
 * KB of static shared memory: W 16, 4 tiles, 4 groups takes 41,600 bytes
 * (28,672 without); two take 82,688 there, dynamic (st_mma_dyn_smem). */
template <int W, int TILES, int NG, int RG> struct st_mma_smem<W, TILES, NG, true, RG> {
    static constexpr int RU = 16 * RG * (32 / W);
    static constexpr int AW = 8 * RU + 4; /* a warp's area in words, with the padding */
    static constexpr int FS = 33;         /* a row's stride in F */
    /* the tiles whose partials the butterfly takes at once: all where
     * they fit in the second buffer's bytes (8 warps: 4 tiles in 16 KB),
     * else one */
    static constexpr int TB = TILES * W * 16 * RG * st_mma::TOK <= W * AW ? TILES : 1;
    uint32_t a0[W][AW];
    union {
        uint32_t a1[W][AW];
        float part[TB][W][16 * RG][st_mma::TOK];
    };
    float f[2][16 * RG][FS];
    float grp[NG > 1 ? 2 : 1][NG > 1 ? TILES * 16 * RG * st_mma::TOK : 1];
    /* warp w's staging area in buffer B, as st_mma_read_a reads it (the
     * buffers are adjacent: an offset, not a select, which took 2-11 more
     * registers in some variants) */
    ST_DEVM uint32_t (*stage(int b, int w))[8] { return (uint32_t (*)[8])(&a0[0][0] + (b * W + w) * AW); }
};

/* The block's decode: decodes the thread's row-units of the round (rows
 * WARP + W i of the block, i < PER, unit u0 + LANE of the round; R their
 * raw bytes, U their units) into buffer B: the words where the unit's
 * owner reads them (warp LANE % W, its unit LANE / W of the round: slot 16
 * RG (LANE / W) + row, in the order of st_mma::x_pos, as st_mma_stage) and the
 * factor W to sm.f[B]. */
template <int TYPE, int W, int PER, int RG, class SM>
ST_DEV void st_mma_stage_coop(const typename st_unit_dec<TYPE>::raw (&r)[PER], const int (&u)[PER], int warp, int lane,
                              const st_grids &g, SM &sm, int b)
{
    static_assert(offsetof(SM, a1) == sizeof(sm.a0), "SM::stage takes the buffers as adjacent");
    uint32_t (*const s)[8] = sm.stage(b, lane % W);
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const int row = warp + W * i;
        st_dunit un;
        st_unit_dec<TYPE>().dec(r[i], u[i], g, un);
        uint32_t w[8];
#pragma unroll
        for (int j = 0; j < 8; j++) w[st_mma::x_pos(j)] = un.w[j];
        uint4 *d = (uint4 *)s[16 * RG * (lane / W) + row];
        d[0] = make_uint4(w[0], w[1], w[2], w[3]);
        d[1] = make_uint4(w[4], w[5], w[6], w[7]);
        sm.f[b][row][lane] = un.W;
    }
}

/* The unit of the warp's slot J of the round at U0 (st_mma_rows, pass P
 * of PASSES): with one pass, stream WARP + W J's unit U0 + WARP + W J; with
 * two (SPW = 2 SPP slots), half J / SPP of the round (STEP units on), the
 * pass's stream WARP + W (P + 2 (J % SPP)) there. Increasing in J. The
 * loader and the compute loop both take a slot's unit here. */
template <int W, int STEP, int SPP, int PASSES> ST_DEV int st_mma_slot_unit(int u0, int p, int warp, int j)
{
    if constexpr (PASSES == 1)
        return u0 + warp + W * j;
    else
        return u0 + STEP * (j / SPP) + W * (p + 2 * (j % SPP)) + warp;
}

/* One block's work: rows ROW0 .. ROW0 + 16 RG - 1 of the NROWS rows at RBASE of M
 * (a row past NROWS reads the last one and is never stored) times the
 * first NTL (<= TILES) tiles of columns from COLS, with DEPTH_NV rounds
 * of weight loads in flight per warp on NVIDIA; STORE(c, r, v) gets
 * row ROW0 + r's value of column c (c < st_mma::TOK NTL; the caller drops
 * the columns it does not have). Every thread of the block calls it. */
template <int TYPE, int W, int TILES, int NG, int DEPTH_NV, bool COOP = false, int PASSES = 1, int RG = 1, class Cols,
          class Store>
ST_DEV void st_mma_rows(const st_mat_dev &m, int64_t rbase, int64_t nrows, int64_t row0, int ntl, const st_grids &g,
                        st_mma_smem<W, TILES, NG, COOP, RG> &sm, const Cols &cols, Store store)
{
    using M = st_mma;
    using D = st_unit_dec<TYPE>;
    constexpr int SPW = 32 / W;             /* streams of a group per warp */
    constexpr int RU = 16 * RG * SPW;       /* row-units a warp decodes per round */
    constexpr int PER = (RU + 31) / 32;     /* of them per lane */
    static_assert(W >= 8 && 32 % W == 0, "st_mma_fetch_a takes a lane's row-unit slots as 1 or 2 (W 8, 16, 32)");
    /* COOP (st_mma_coop): a thread loads and decodes rows warp + W i (i <
     * PER) of unit u0 + lane of each round, PER = 16 RG / W row-units as
     * before, so a warp's load reads one row's 32 consecutive units; the
     * words go to the owning warp's staging area, the factors through
     * shared memory (only W: plain formats) */
    static_assert(!COOP || ((W == 8 || W == 16) && PER == 16 * RG / W), "the block's decode: 8 or 16 warps");
    static_assert(RG == 1 || COOP, "row groups: the block's decode");
    static_assert(!COOP || (!D::halves && !D::min), "the block's decode passes only the factor W");
    /* PASSES 2 (st_mma_passes): the warp's streams in two passes over the
     * row, those of even slot j first (stream warp + W j), then the odd;
     * a round then spans two rounds' units (RSTEP) and holds the pass's
     * half of each: the same units a stream, in the same order */
    static_assert(PASSES == 1 || (PASSES == 2 && COOP && SPW % 2 == 0), "two passes: the block's decode, 8 or 16 warps");
    constexpr int STEP = 32 * NG;         /* a group's units from one round to the next */
    constexpr int RSTEP = STEP * PASSES;  /* the units a round spans */
    constexpr int SPP = SPW / PASSES;     /* accumulator slots of a pass */
#if ST_HIP
    static_assert(!COOP, "the block's decode reads the factors in the NVIDIA C layout");
#endif
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int buf = 0; /* COOP: the staging buffer of the next round */
    int pass = 0; /* PASSES 2: the pass under way */
    uint32_t ones[M::NA];
#pragma unroll
    for (int i = 0; i < M::NA; i++) ones[i] = 0x01010101u;

    /* The raw bytes of the lane's row-units of the round at U0 (row-unit k
     * = lane + 32 i: row k % 16, the warp's unit k / 16 of the round, that
     * is stream warp + W (k / 16); COOP: rows warp + W i of unit u0 +
     * lane, with two passes the unit of slot lane / W of the round at U0,
     * st_mma_slot_unit); past the rows' or the row's end the last row or
     * unit is read and never used. */
    /* gfx11 with two row-units per lane (W 8): no prefetch, and the B words
     * (8 per lane and tile there) loaded tile by tile, else the registers
     * spill */
#if ST_HIP
    constexpr bool PREFETCH = PER == 1, B_AHEAD = false;
    constexpr int DEPTH = 1;
#else
    /* DEPTH_NV rounds of loads in flight per warp (1 or 2; 2 costs
     * registers) */
    constexpr bool PREFETCH = true, B_AHEAD = true;
    constexpr int DEPTH = DEPTH_NV;
    static_assert(DEPTH == 1 || DEPTH == 2, "one or two rounds in flight");
#endif
    /* ROT (NVIDIA, 3-4 tiles, 32-stream rows, one row group; not the
     * one-pass 8-warp 4-tile kernel, which spilled 112 bytes with it): one
     * set of B registers, a tile's B words and scales of the warp's next
     * unit requested as soon as the unit before has used that tile's
     * (st_mma_rows unit). Measured on an H100 (2026-12-07, one device
     * call, three runs each, min, us, without / with; docs/PERFORMANCE.md,
     * nineteenth session): 14336 x 4096 at 24 / 32 tokens iq4_xs 38.32 /
     * 47.38 -> 36.96 / 45.34, iq4_nl 37.63 / 45.53 -> 35.51 / 42.93, iq3_s
     * 41.84 / 49.73 -> 39.85 / 48.54, in place 3-6% faster; 9-16 tokens
     * within 1%. The form at every tile count (branch brot) was slower on
     * 128-stream rows, where it spilled (eighteenth session). */
    constexpr bool ROT = B_AHEAD && TILES >= 3 && NG == 1 && RG == 1 && !(W == 8 && TILES == 4 && PASSES == 1);
    /* XSEG (NVIDIA): a segment's last round requests the next segment's
     * first round (a segment: one pass over one stream group; so no pass
     * or group after the first starts on a load), and the butterfly takes
     * the tiles st_mma_smem::TB at a time (one pair of block barriers for
     * them, not one a tile). Where: 32-stream rows, the in-place layout at
     * 3-4 tiles, planar IQ4_NL. Measured on an H100 (2026-12-07, one
     * device call, three runs each, min, us, without / with, with ROT
     * both ways on 32-stream rows; docs/PERFORMANCE.md, nineteenth
     * session): 14336 x 4096 at 32 tokens iq4_xs 45.34 -> 43.40, iq4_nl
     * 42.93 -> 41.84, iq3_s 48.54 -> 46.65, at 9-16 tokens 1-3% faster;
     * 4096 x 14336 at 32 tokens in place iq4_xs 47.64 -> 45.52, iq3_s
     * 55.44 -> 53.42, planar iq4_nl 45.86 -> 43.77 (24 tokens 37.45 ->
     * 36.21). Not where it was slower: planar iq4_xs and iq3_s on
     * 128-stream rows (4096 x 14336 at 24 tokens 38.51 -> 43.34 and 39.67
     * -> 45.51, at 32 1-2% slower, with the same 128 registers and no
     * spills), the in-place layout at 1-2 tiles there (up to 2% slower).
     * Taken apart there (a second call, three runs each, us, without /
     * with), the slower part was the next group's request: the butterfly's
     * batches alone, planar iq4_xs 4096 x 14336 at 24 / 32 tokens 38.30 /
     * 49.10 -> 36.87 / 46.24, iq3_s at 32 50.31 -> 48.26 (ptxas: the
     * 32-token kernel's 8 bytes of spills gone), 9-16 tokens within 0.4%:
     * XB on every planar row; with the next pass's first round requested
     * too, iq4_xs at 32 44.83, iq3_s 48.88: XPP for planar IQ4_XS; the
     * next group's first round (XPG) only where XSEG is. */
#if ST_HIP
    constexpr bool XB = false, XPP = false, XPG = false;
#else
    constexpr bool XSEG = NG == 1 || (st_in_place(TYPE) && TILES >= 3) || TYPE == ST_IQ4_NL;
    constexpr bool XB = XSEG || !st_in_place(TYPE), XPP = XSEG || TYPE == ST_IQ4_XS, XPG = XSEG;
#endif
    using I0 = std::integral_constant<int, 0>;
    using ILAST = std::integral_constant<int, DEPTH - 1>;
    typename D::raw raw[DEPTH][PER];
    int ru_u[DEPTH][PER];
    /* into buffer D (a compile-time index), for pass P */
    auto load_round = [&](auto dc, int u0, int p) {
        constexpr int d = decltype(dc)::value;
        if constexpr (COOP) {
            /* row warp + W i, the unit of slot lane / W of warp lane % W */
            const int ul = st_mma_slot_unit<W, STEP, SPP, PASSES>(u0, p, lane % W, lane / W);
            const int u = ul < m.nu ? ul : m.nu - 1;
#pragma unroll
            for (int i = 0; i < PER; i++) {
                const int64_t r = rbase + (row0 + warp + W * i < nrows ? row0 + warp + W * i : nrows - 1);
                ru_u[d][i] = u;
                D().load(m, r, u, raw[d][i]);
            }
        } else {
            (void)p;
#pragma unroll
            for (int i = 0; i < PER; i++) {
                const int k = lane + 32 * i;
                const int64_t r = rbase + (row0 + k % 16 < nrows ? row0 + k % 16 : nrows - 1);
                const int u = u0 + warp + W * (k / 16);
                ru_u[d][i] = u < m.nu ? u : m.nu - 1;
                if (RU % 32 == 0 || k < RU) D().load(m, r, ru_u[d][i], raw[d][i]);
            }
        }
    };

    /* A round: the warp's SPW units of 32 (stream warp + W j takes unit u0
     * + warp + W j). Its lanes decode the 16 SPW row-units once into the
     * warp's staging area (COOP: the block decodes the round together,
     * st_mma_stage_coop), the raw bytes of the round DEPTH rounds on are
     * requested, and each unit's A operand comes from the staging area:
     * every weight is read and decoded once, DEPTH rounds of loads in
     * flight while this round computes. Each stream j has its own
     * accumulator and takes its units in increasing order (docs/DESIGN.md
     * section 2). A wide row's groups run one after another (group q: the
     * units u with (u / 32) % 4 == q), each combined to one value per (row,
     * column). With two passes the slots of a pass (SPP) are the
     * accumulators: the in-thread levels of the butterfly that pair two
     * slots of a pass run at its end, and the last one (h = W) adds the
     * two passes' values, in FIN. */
    for (int gq = 0; gq < NG; gq++) {
    float fin[RG][TILES][M::NC]; /* the thread's value after the in-thread levels */
    /* COOP: a group's first round stages into buffer 0, because buffer 1
     * holds PART, which the previous group's butterfly may still read (the
     * second pass goes on alternating: a warp may still read the first
     * pass's last buffer) */
    buf = 0;
#pragma unroll
    for (int ps = 0; ps < PASSES; ps++) {
    pass = ps;
    float acc[RG][TILES][M::NC][SPP];
#pragma unroll
    for (int rg = 0; rg < RG; rg++)
#pragma unroll
        for (int tl = 0; tl < TILES; tl++)
#pragma unroll
            for (int i = 0; i < M::NC; i++)
#pragma unroll
                for (int j = 0; j < SPP; j++) acc[rg][tl][i][j] = 0.0f;
    /* with one round in flight, a pass's first round (XPP) or a group's
     * (XPG), but the block's first, was requested in the previous
     * segment's last round */
    if (PREFETCH) {
        if (DEPTH > 1 || (ps > 0 ? !XPP : gq > 0 ? !XPG : true)) load_round(I0{}, 32 * gq, ps);
        if (DEPTH > 1 && 32 * gq + RSTEP < m.nu) load_round(ILAST{}, 32 * gq + RSTEP, ps);
    }
    /* the B words and activation scales of unit U and tile TL */
    auto load_bt = [&](int u, int tl, uint32_t (&b)[TILES][M::NB], float (&das)[TILES][M::NC]) {
        cols.b(u, tl, lane, b[tl]);
        cols.da(u, tl, lane, das[tl]);
    };
    /* those of its first NTL tiles (B_AHEAD) */
    auto load_b = [&](int u, uint32_t (&b)[TILES][M::NB], float (&das)[TILES][M::NC]) {
#pragma unroll
        for (int tl = 0; tl < TILES; tl++) {
            if (tl >= ntl) break;
            load_bt(u, tl, b, das);
        }
    };
#if !ST_HIP
    /* ROT: the B words and scales of the warp's next unit, tile by tile;
     * the pass's first unit's here */
    uint32_t bq[TILES][M::NB];
    float dq[TILES][M::NC];
    if constexpr (ROT) {
        const int uf = st_mma_slot_unit<W, STEP, SPP, PASSES>(32 * gq, pass, warp, 0);
        if (uf < m.nu) load_b(uf, bq, dq);
    }
#endif
    auto round = [&](auto dc, int u0) {
        constexpr int d = decltype(dc)::value;
        if (!PREFETCH) load_round(dc, u0, pass);
        st_mma_rowf f[PER];
        int cur_u[PER];
#pragma unroll
        for (int i = 0; i < PER; i++) cur_u[i] = ru_u[d][i];
        /* COOP: the block stages this round into buffer BUF. Its last
         * readers (two rounds back, or the previous group's) finished
         * before an earlier block barrier. After one block barrier, each
         * warp reads its units from its area there. */
        uint32_t (*sab)[8]; /* this warp's staging area of the round */
        if constexpr (COOP) {
            st_mma_stage_coop<TYPE, W, PER, RG>(raw[d], cur_u, warp, lane, g, sm, buf);
            sab = sm.stage(buf, warp);
            (void)f;
        } else {
            sab = sm.a[warp];
            st_mma_stage<TYPE, PER, RU>(raw[d], cur_u, lane, g, sab, f);
        }
        if (PREFETCH && u0 + DEPTH * RSTEP < m.nu)
            load_round(dc, u0 + DEPTH * RSTEP, pass);
        else if (PREFETCH && DEPTH == 1 && (XPP || XPG)) {
            /* the segment's last round: the next segment's first (the
             * next pass's, XPP, else the next group's, XPG), so that the
             * pass or group does not start on a load */
            if (pass + 1 < PASSES) {
                if (XPP) load_round(dc, 32 * gq, pass + 1);
            } else if (XPG && gq + 1 < NG)
                load_round(dc, 32 * (gq + 1), 0);
        }
        if constexpr (COOP)
            __syncthreads();
        else
            st_syncwarp();
        constexpr bool BP = B_AHEAD && TILES <= 2; /* below */
        /* the warp's unit J (stream warp + W J) into accumulator slot S */
        /* ROT: once a tile's B and DAS are used they are replaced by unit
         * UN's (when UN < m.nu: the warp's next unit) */
        auto unit = [&](int j, int u, int sl, uint32_t (&b)[TILES][M::NB], float (&das)[TILES][M::NC], int un) {
            uint32_t a[RG][M::NA];
            st_mma_rowf cf[RG][M::NC];
            if constexpr (COOP) {
                /* row group rg of unit slot warp + W j: slot RG j + rg of
                 * the staging area; the factors of its rows (C elements 2 h
                 * and 2 h + 1 share row g + 8 h) */
#pragma unroll
                for (int rg = 0; rg < RG; rg++) {
                    st_mma_read_a(sab, RG * j + rg, lane, a[rg]);
#pragma unroll
                    for (int i = 0; i < M::NC; i += 2) {
                        cf[rg][i] = st_mma_rowf{sm.f[buf][16 * rg + M::c_row(lane, i)][warp + W * j], 0.0f, 1, 1, 1, 1};
                        cf[rg][i + 1] = cf[rg][i];
                    }
                }
            } else
                st_mma_fetch_a<TYPE, PER>(sab, j, lane, f, a[0], cf[0]);
            /* the first NTL tiles (the dense kernel: every tile; the last
             * tile's columns past the call's hold zeros or another column's
             * vector and are never stored); BP: B and DAS loaded by the
             * caller */
            if constexpr (B_AHEAD && !BP && !ROT) load_b(u, b, das);
#pragma unroll
            for (int tl = 0; tl < TILES; tl++) {
                if (tl >= ntl) break;
                if (!B_AHEAD) load_bt(u, tl, b, das);
                int q0[M::NC], q1[M::NC];
                if (D::min) {
                    if (D::min_halves)
                        M::mma16x2(q0, q1, ones, b[tl]);
                    else
                        M::mma32(q0, ones, b[tl]);
                }
#pragma unroll
                for (int rg = 0; rg < RG; rg++) {
                    int c0[M::NC], c1[M::NC];
                    if (D::halves)
                        M::mma16x2(c0, c1, a[rg], b[tl]);
                    else
                        M::mma32(c0, a[rg], b[tl]);
#pragma unroll
                    for (int i = 0; i < M::NC; i++) {
                        const float da = das[tl][i];
                        const st_mma_rowf &cfi = cf[rg][i];
                        const int isum = D::halves ? cfi.f0 * c0[i] + cfi.f1 * c1[i] : c0[i];
                        float v = st_canon_unit(cfi.W, da, isum, acc[rg][tl][i][sl]);
                        if (D::min)
                            v = st_canon_unit_min(cfi.M, da, D::min_halves ? cfi.g0 * q0[i] + cfi.g1 * q1[i] : q0[i], v);
                        acc[rg][tl][i][sl] = v;
                    }
                }
                if constexpr (ROT)
                    if (un < m.nu) load_bt(un, tl, b, das);
            }
        };
#if ST_HIP
        /* gfx11: one unit at a time in a loop that is not unrolled, always
         * into slot 0, the slots rotated after each unit (so slot 0 is the
         * next stream's); unrolled, the compiler held several units'
         * operands at once and W 8 spilled (q2_K: 224-688 bytes of scratch,
         * 151 VGPRs the old way) */
#pragma unroll 1
        for (int j = 0; j < SPW; j++) {
            const int u = u0 + warp + W * j;
            uint32_t b[TILES][M::NB];
            float das[TILES][M::NC];
            if (u < m.nu) unit(j, u, 0, b, das, m.nu);
#pragma unroll
            for (int tl = 0; tl < TILES; tl++)
#pragma unroll
                for (int i = 0; i < M::NC; i++) {
                    const float t0 = acc[0][tl][i][0];
#pragma unroll
                    for (int k = 0; k + 1 < SPW; k++) acc[0][tl][i][k] = acc[0][tl][i][k + 1];
                    acc[0][tl][i][SPW - 1] = t0;
                }
        }
#else
        /* BP: unit j + 1's B words requested before unit j's matrix work
         * (two sets in registers; 1-2 tiles, where ptxas (iq4_xs) finds
         * the registers: 89-115, no spills; at 3-4 tiles it spilled 40-216
         * bytes), else each unit's right before its own (in unit).
         * Measured on an H100 (2026-12-07, one device call, three runs
         * each, us, before / after, docs/bpipe-h100-2026-12-07c.txt): at
         * 9-16 tokens every cell of the four shapes 3-6% faster (iq4_nl
         * 4096 x 14336 at 16 tokens 34.16 / 32.35, iq3_s 36.35 / 34.22,
         * iq4_xs 14336 x 4096 33.87 / 32.83, in place iq4_nl 39.34 /
         * 36.78), 1-2 tokens (the dp4a kernels) and 24-32 within 0.6%. */
        constexpr int NBUF = BP ? 2 : 1;
        uint32_t bb[NBUF][TILES][M::NB];
        float dd[NBUF][TILES][M::NC];
        if constexpr (ROT) (void)bb, (void)dd; /* ROT: BQ and DQ instead */
        if constexpr (BP) {
            const int u = st_mma_slot_unit<W, STEP, SPP, PASSES>(u0, pass, warp, 0);
            if (u < m.nu) load_b(u, bb[0], dd[0]);
        }
#pragma unroll
        for (int j = 0; j < SPW; j++) {
            /* two passes: slot j of the round is the pass's slot j % SPP */
            const int u = st_mma_slot_unit<W, STEP, SPP, PASSES>(u0, pass, warp, j);
            if (u >= m.nu) break; /* uniform across the warp (and every later j's u is larger) */
            if constexpr (BP)
                if (j + 1 < SPW) {
                    const int un = st_mma_slot_unit<W, STEP, SPP, PASSES>(u0, pass, warp, j + 1);
                    if (un < m.nu) load_b(un, bb[(j + 1) % NBUF], dd[(j + 1) % NBUF]);
                }
            if constexpr (ROT) {
                /* the warp's next unit: slot j + 1's, after the last slot
                 * the next round's first (rounds run at u0, u0 + RSTEP, ...) */
                const int un = j + 1 < SPW ? st_mma_slot_unit<W, STEP, SPP, PASSES>(u0, pass, warp, j + 1)
                                           : st_mma_slot_unit<W, STEP, SPP, PASSES>(u0 + RSTEP, pass, warp, 0);
                unit(j, u, j % SPP, bq, dq, un);
            } else
                unit(j, u, j % SPP, bb[j % NBUF], dd[j % NBUF], m.nu);
        }
#endif
        if constexpr (COOP)
            buf ^= 1;
        else
            st_syncwarp(); /* the staging area is read before the next round writes it */
    };
    for (int u0 = 32 * gq; u0 < m.nu; u0 += DEPTH * RSTEP) {
        round(I0{}, u0);
        if (DEPTH > 1 && u0 + RSTEP < m.nu) round(ILAST{}, u0 + RSTEP);
    }
    /* the butterfly's in-thread levels 16 .. W (a pass's: 16 .. 2 W, and
     * h = W across the passes; slot jj + h / W of the row is the pass's
     * jj + h / (2 W)) */
#pragma unroll
    for (int rg = 0; rg < RG; rg++)
#pragma unroll
    for (int tl = 0; tl < TILES; tl++) {
        if (tl >= ntl) break;
#pragma unroll
        for (int h = 16; h >= W * PASSES; h >>= 1)
#pragma unroll
            for (int i = 0; i < M::NC; i++)
#pragma unroll
                for (int jj = 0; jj < h / (W * PASSES); jj++)
                    acc[rg][tl][i][jj] = st_fadd(acc[rg][tl][i][jj], acc[rg][tl][i][jj + h / (W * PASSES)]);
#pragma unroll
        for (int i = 0; i < M::NC; i++)
            fin[rg][tl][i] = ps == 0 ? acc[rg][tl][i][0] : st_fadd(fin[rg][tl][i], acc[rg][tl][i][0]);
    }
    }
    /* the butterfly's levels W/2 .. 1 over warps, TB tiles at a time
     * (XB: st_mma_smem::TB, every tile where PART holds them, one pair
     * of block barriers for them; else one) */
    constexpr int TB = XB ? std::remove_reference_t<decltype(sm)>::TB : 1;
    constexpr int TE = 16 * RG * M::TOK; /* a tile's elements */
#pragma unroll
    for (int t0 = 0; t0 < TILES; t0 += TB) {
        /* uniform across the block; NTL >= 1 always (the dense kernel
         * passes TILES, the expert kernel a chunk of 1 or more columns):
         * COOP relies on the first batch's barrier below, after which no
         * thread still reads a staging buffer, before the next call or
         * group stages again */
        if (t0 >= ntl) break;
        /* the previous batch's partials are read (COOP: also, no thread
         * still reads staging buffer 1, which shares PART's bytes) */
        if (COOP || t0 > 0 || gq > 0) __syncthreads();
#pragma unroll
        for (int tb = 0; tb < TB; tb++)
#pragma unroll
            for (int rg = 0; rg < RG; rg++)
#pragma unroll
                for (int i = 0; i < M::NC; i++)
                    if (TB == 1 || t0 + tb < ntl)
                        sm.part[tb][warp][16 * rg + M::c_row(lane, i)][M::c_tok(lane, i)] = fin[rg][t0 + tb][i];
        __syncthreads();
        for (int e = threadIdx.x; e < TB * TE; e += blockDim.x) {
            const int tb = TB > 1 ? e / TE : 0, el = TB > 1 ? e % TE : e, tl = t0 + tb;
            if (TB > 1 && tl >= ntl) break; /* e only grows */
            const int r = el / M::TOK, n = el % M::TOK;
            float v[W];
#pragma unroll
            for (int w = 0; w < W; w++) v[w] = sm.part[tb][w][r][n];
#pragma unroll
            for (int h = W / 2; h >= 1; h >>= 1)
#pragma unroll
                for (int w = 0; w < h; w++) v[w] = st_fadd(v[w], v[w + h]);
            float out = v[0];
            if constexpr (NG > 1) {
                /* the same thread takes element e in every group */
                float *g02 = &sm.grp[0][tl * TE + el], *g1 = &sm.grp[1][tl * TE + el];
                if (gq == 0) *g02 = out;
                else if (gq == 1) *g1 = out;
                else if (gq == 2) *g02 = st_fadd(*g02, out);
                else out = st_fadd(*g02, st_fadd(*g1, out)); /* st_canon_groups4 */
                if (gq < NG - 1) continue;
            }
            if (row0 + r < nrows) store(tl * M::TOK + n, r, out);
        }
    }
    }
}

/* The dynamic shared memory of the dense kernel with RG row groups (0:
 * static; RG 2 takes more than the 48 KB of static shared memory). */
template <int W, int TILES, int NG, bool COOP, int RG>
constexpr size_t st_mma_dyn_smem = RG > 1 ? sizeof(st_mma_smem<W, TILES, NG, COOP, RG>) : 0;

template <int TYPE, int W, int TILES, bool STAGE, int NG, int PASSES, int RG>
__global__ void ST_MMA_BOUNDS(TYPE, W) st_mmvq_mma_kernel(st_mat_dev m, st_xplanes x, int nt, float *__restrict__ y,
                                                            st_grids gg)
{
    __shared__ uint32_t s_grid[st_grid_bytes<TYPE>::n / 4 + 1];
    constexpr bool COOP = st_mma_coop<TYPE, W>;
    using SM = st_mma_smem<W, TILES, NG, COOP, RG>;
    const st_grids g = st_setup_grids<TYPE, STAGE>(gg, s_grid);
    const int64_t row0 = (int64_t)blockIdx.x * 16 * RG;
    auto run = [&](SM &sm) {
        st_mma_rows<TYPE, W, TILES, NG, 1, COOP, PASSES, RG>(m, 0, m.rows, row0, TILES, g, sm, st_mma_tiled_cols{x},
                                                             [&](int tok, int r, float v) {
                                                                 if (tok < nt) y[(int64_t)tok * m.rows + row0 + r] = v;
                                                             });
    };
    if constexpr (st_mma_dyn_smem<W, TILES, NG, COOP, RG> > 0) {
        extern __shared__ __align__(16) unsigned char st_mma_dyn[];
        run(*reinterpret_cast<SM *>(st_mma_dyn));
    } else {
        __shared__ __align__(16) SM sm;
        run(sm);
    }
}

/* Launches the dense kernel; its dynamic shared memory allowed once per
 * kernel and device (the attribute is the device's: a bit per device of
 * this instance's mask; two host threads may both set it, the same value). */
template <int TYPE, int W, int TL, bool STAGE, int NG, int P, int RG>
static void st_mmvq_mma_go(const st_launch &L, const st_mat_dev &m, const st_xplanes &x, int nt, float *y)
{
    constexpr size_t DYN = st_mma_dyn_smem<W, TL, NG, st_mma_coop<TYPE, W>, RG>;
    const unsigned grid = (unsigned)((m.rows + 16 * RG - 1) / (16 * RG));
    auto *k = st_mmvq_mma_kernel<TYPE, W, TL, STAGE, NG, P, RG>;
    if constexpr (DYN > 0) {
        /* (a bit outlives a device reset, after which the attribute is
         * gone: nothing in the library resets a device) */
        static std::atomic<uint64_t> allowed{0};
        int dev = -1;
        /* a device past the mask's 64 bits sets it at every launch */
        const bool in_mask = st_rt_get_device(&dev) == ST_RT_SUCCESS && dev >= 0 && dev < 64;
        if (!in_mask || !(allowed.load(std::memory_order_acquire) >> dev & 1))
            if (st_rt_func_set_smem(k, (int)DYN) == ST_RT_SUCCESS && in_mask)
                allowed.fetch_or(uint64_t(1) << dev, std::memory_order_release);
    }
    k<<<grid, 32 * W, DYN, L.stream>>>(m, x, nt, y, L.grids);
}

/* The dense kernel with TL tiles and P passes (P 2 only where
 * st_mma_passes gives it: no other instance is compiled). */
template <int TYPE, int W, int TL, int P, int RG>
static void st_mmvq_mma_tp(const st_launch &L, const st_mat_dev &m, const st_xplanes &x, int nt, float *y, bool stage)
{
    if (st_canon_mmvq_groups(m.nu) == 4) {
        if (stage)
            st_mmvq_mma_go<TYPE, W, TL, true, 4, P, RG>(L, m, x, nt, y);
        else
            st_mmvq_mma_go<TYPE, W, TL, false, 4, P, RG>(L, m, x, nt, y);
    } else if (stage)
        st_mmvq_mma_go<TYPE, W, TL, true, 1, P, RG>(L, m, x, nt, y);
    else
        st_mmvq_mma_go<TYPE, W, TL, false, 1, P, RG>(L, m, x, nt, y);
}

/* W warps per block (8, 16 or 32: 4, 2 or 1 streams per warp; 4 warps held too many
 * registers on gfx1100: scratch); as many
 * tiles as NT tokens need, 16 RG rows a block (st_mma_rowgroups); ONE_PASS:
 * one pass over the row where st_mma_passes gives two to 8 warps. */
template <int TYPE, int W>
static st_rt_error st_mmvq_mma_w(const st_launch &L, const st_mat_dev &m, const st_xplanes &x, int nt,
                                                     float *y, bool stage, bool one_pass)
{
    constexpr int MAXT = (ST_MAX_TOKENS + st_mma::TOK - 1) / st_mma::TOK;
    const int tiles = (nt + st_mma::TOK - 1) / st_mma::TOK;
    return st_by_count<MAXT>(tiles, [&](auto tc) {
        constexpr int TL = decltype(tc)::value;
        constexpr int RG = st_mma_rowgroups<TYPE, W, TL>;
        constexpr int P = st_mma_passes<TYPE, W, TL, RG>;
        /* two row groups always take their passes (one pass would hold
         * twice the accumulators; never compiled); the knob is 8 warps' */
        if constexpr (RG > 1)
            st_mmvq_mma_tp<TYPE, W, TL, P, RG>(L, m, x, nt, y, stage);
        else if (P > 1 && !one_pass)
            st_mmvq_mma_tp<TYPE, W, TL, P, 1>(L, m, x, nt, y, stage);
        else
            st_mmvq_mma_tp<TYPE, W, TL, 1, 1>(L, m, x, nt, y, stage);
        return st_count_mma(L, st_rt_get_last_error());
    });
}


/* The default chain's warps on the matrix units (NG: the row's stream
 * groups, st_canon_mmvq_groups). NVIDIA, the formats with the block decode
 * (st_mma_block_decode; they take the matrix units from
 * STRATA_MMVQ_BLOCK_DECODE_MMA_TOKENS tokens): 1 tile 8 on the 128-stream
 * rows, else 16; 2-4 tiles 8 (at 4 tiles two passes, st_mma_passes).
 * Planar IQ4_NL and in-place IQ4_XS took 16 on 128-stream rows at 4 tiles
 * until mma8 took two passes: measured on an H100 (2026-12-06, one device
 * call, two runs each, us, mma8 / mma16), iq4_nl 4096 x 14336 at 32
 * tokens 45.58 / 55.72 (the 42be22b column of
 * docs/bstage-h100-2026-12-06g.txt; ggml 46.89 in the call before,
 * docs/compare-h100-2026-12-06f.txt); in place iq4_xs 4096 x 14336 at 32
 * tokens (2026-12-07, one device call, three runs, bench's in-place/mma8
 * rows, docs/rows32-h100-2026-12-07a.txt) 47.71-47.99 / 55.39-59.03 (the
 * mma16 of 16 and of 32 rows a block; ggml 43.35 in the same call). Measured on an H100
 * (2026-12-06, three device calls, us,
 * mma8 / mma16, mma8 at two blocks per SM): 8 tokens 4096 x 14336 iq4_xs
 * 28.4 / 30.3, iq3_s 31.2 / 30.9, iq4_nl 27.4 / 28.5, 14336 x 4096 27.7 /
 * 26.2, 31.3 / 28.7, 26.9 / 24.5 (the dp4a default 32.2-36.7 there, and
 * slower than either from 6 tokens on: docs/PERFORMANCE.md); 16 tokens
 * 33.6 / 45.6, 36.0 / 47.5, 34.1 / 45.0, 33.7 / 39.3, 37.2 / 41.3, 32.7 /
 * 38.3; 32 tokens 53.3 / 57.5, 52.4 / 57.8, 62.1 / 56.0, 14336 x 4096 48.4
 * / 52.3, 50.7 / 53.2, 48.9 / 50.0; in place at 32 tokens on 4096 x
 * 14336, iq4_nl 57.3 / 66.3, iq3_s 57.2 / 71.7, but iq4_xs 69.8 / 58.2-58.7
 * (those two from two calls on the same kind of card: the bench times
 * variants on the planar layout only). The other formats (beyond 8 tokens): 8 at 17..24
 * tokens, and beyond 24 for IQ4_NL, else 16, measured on the H200 with the
 * per-warp decode (us, mma16 -> mma8): 24 tokens iq4_nl 4096x14336 61.7 ->
 * 45.8, 14336x4096 49.2 -> 48.0, iq3_s 58.4 -> 54.2 / 62.1 -> 59.3, iq4_xs
 * 51.6 -> 47.4 / 54.1 -> 52.7; 32 tokens iq4_nl 80.8 -> 54.8 / 60.1 ->
 * 57.2, but iq3_s 74.3 -> 81.7 / 72.7 -> 80.9 and iq4_xs 69.0 -> 77.2 /
 * 64.8 -> 74.2; at 16 tokens within 1-6% either way. gfx11 (16 tokens per
 * tile, unmeasured): 16. */
static inline int st_mma_default_warps(int type, int nt, int ng)
{
#if ST_HIP
    (void)type, (void)nt, (void)ng;
    return 16;
#else
    if (st_mma_block_decode(type)) {
        const int tiles = (nt + st_mma::TOK - 1) / st_mma::TOK;
        return tiles == 1 && ng != 4 ? 16 : 8;
    }
    return nt > 16 && (nt <= 24 || st_base_type(type) == ST_IQ4_NL) ? 8 : 16;
#endif
}

/* The matrix-instruction kernels for TYPE with W = -ROWS warps per block
 * (STRATA_MMVQ_MMA_VARIANTS). */
template <int TYPE>
static st_rt_error st_launch_mmvq_mma(const st_launch &L, const st_mat_dev &m, const st_xplanes &x, int nt, float *y,
                                      int w, bool stage, bool one_pass)
{
    switch (w) {
#define ST_MMA_CASE_(W) \
    case W: return st_mmvq_mma_w<TYPE, W>(L, m, x, nt, y, stage, one_pass);
        STRATA_MMVQ_MMA_VARIANTS(ST_MMA_CASE_)
#undef ST_MMA_CASE_
    default: return ST_RT_INVALID_VALUE;
    }
}

#endif
