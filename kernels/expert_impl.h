/* expert_grouped kernels (instantiated per weight type by expert_<type>.hip).
 *
 * Default chain, 4 launches: q8_1(x) -> gate-up -> q8_1(h) -> down. Gate-up
 * and down run one (token, slot) pair per block row with the pairs grouped
 * by expert (sorted by expert id), so the tokens of a shared expert run side
 * by side: its rows come from DRAM once and from L2 for the others. The
 * down's last block per row block sums the k slots of each token in k order
 * (a ticket counter, no launch of its own). Measured on the H200 this beat
 * one block per expert serving its tokens in turn (2560/640, 64 experts,
 * top-8: 227 us at n_tokens 8), which serialises and cuts the grid. Knob
 * paths (variants.h):
 * GROUPED_V1 (expert list built by a separate launch, first-seen order),
 * EXPERT_V2 (per-token: one block per (token, slot), no grouping),
 * EXPERT_V2K (gate-up writes the 32 canonical stream partials; a separate
 * launch does the butterfly and silu), TSUM (down writes per-slot outputs; a
 * separate launch sums top-k), NO_SUB16_GU, IQ_STAGE_GRID=0. */
#include "common.h"
#include "mmvq_mma.h"
#include "strata/variants.h"

enum { GROUP_SORTED = 0, GROUP_V1 = 1, GROUP_NONE = 2, GROUP_PAIRS = 3 };

/* The shared arrays below are sized by the public limits: one flag per
 * expert (a ballot of 32 per step), one slot per (token, slot) pair. */
static_assert(ST_MAX_EXPERTS % 32 == 0, "st_expert_list ballots 32 experts at a time");
static_assert(ST_MAX_PAIRS == ST_MAX_TOKENS * ST_MAX_TOPK, "pairs are tokens x top-k");

/* GROUP_PAIRS: the (token, slot) pairs sorted by expert id (then by pair
 * index); block y takes ranks [y*ppb, y*ppb + ppb) of that order. A shared
 * expert's pairs are adjacent, so they run in the same or neighbouring
 * blocks: its rows come from DRAM once and from L1/L2 for the others, while
 * the grid stays wide. Fills S_RANK (rank -> pair) and returns the number
 * of pairs with a valid expert. Every thread calls it. */
ST_DEV int st_sort_pairs(const st_expert_args &a, int *s_ids, int *s_rank, int *s_valid)
{
    const int np = a.nt * a.topk;
    if (threadIdx.x == 0) *s_valid = 0;
    for (int p = threadIdx.x; p < np; p += blockDim.x) s_ids[p] = a.ids[p];
    __syncthreads();
    for (int p = threadIdx.x; p < np; p += blockDim.x) {
        const int e = s_ids[p];
        if ((unsigned)e >= (unsigned)a.n_expert) continue;
        int rank = 0;
        for (int q = 0; q < np; q++) {
            const int f = s_ids[q];
            rank += (unsigned)f < (unsigned)a.n_expert && (f < e || (f == e && q < p));
        }
        s_rank[rank] = p;
        atomicAdd(s_valid, 1);
    }
    __syncthreads();
    return *s_valid;
}

/* Used experts of this step into s_list (increasing id; GROUP_V1: the global
 * list in first-seen order). Every thread calls it. */
template <int MODE>
ST_DEV int st_expert_list(const st_expert_args &a, int *s_flags, int *s_list, int *s_ids)
{
    __shared__ int s_count;
    const int np = a.nt * a.topk;
    for (int p = threadIdx.x; p < np; p += blockDim.x) s_ids[p] = a.ids[p];
    if constexpr (MODE == GROUP_V1) {
        /* only the COUNT entries the grouping launch wrote are read */
        if (threadIdx.x == 0) s_count = a.groups[0];
        __syncthreads();
        for (int i = threadIdx.x; i < s_count; i += blockDim.x) s_list[i] = a.groups[1 + i];
        __syncthreads();
        return s_count;
    } else {
    for (int e = threadIdx.x; e < ST_MAX_EXPERTS; e += blockDim.x) s_flags[e] = 0;
    __syncthreads();
    for (int p = threadIdx.x; p < np; p += blockDim.x)
        if ((unsigned)s_ids[p] < (unsigned)a.n_expert) s_flags[s_ids[p]] = 1;
    __syncthreads();
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        int c = 0;
        for (int chunk = 0; chunk < ST_MAX_EXPERTS / 32; chunk++) {
            const bool f = s_flags[chunk * 32 + lane] != 0;
            const uint32_t mask = st_ballot(f);
            if (f) s_list[c + st_popc(mask & ((1u << lane) - 1u))] = chunk * 32 + lane;
            c += st_popc(mask);
        }
        if (lane == 0) s_count = c;
    }
    __syncthreads();
    return s_count;
    }
}

/* Calls FN(pairs, n) for the pairs (t*topk+k) routed to expert E, in chunks
 * of at most NT, in increasing pair order. Uniform across the block. */
template <int NT, typename F>
ST_DEV void st_for_pairs(const int *s_ids, int np, int e, F fn)
{
    int pl[NT];
    int cnt = 0;
    for (int p = 0; p < np; p++) {
        if (s_ids[p] != e) continue;
#pragma unroll
        for (int k = 0; k < NT; k++)
            if (k == cnt) pl[k] = p;
        if (++cnt == NT) {
            fn(pl, cnt);
            cnt = 0;
        }
    }
    if (cnt) fn(pl, cnt);
}

ST_DEV st_xvec st_xvec_of(const st_xplanes &x, int idx)
{
    st_xvec v;
    v.qs = x.qs + (int64_t)idx * x.nu * 32;
    v.d = x.d + (int64_t)idx * x.nu;
    return v;
}

/* ---- gate-up ------------------------------------------------------------ */
template <int TYPE, int T, int NT, bool STAGE, int THREADS, int MODE>
__global__ void __launch_bounds__(THREADS) st_gate_up_kernel(st_expert_args a, st_grids gg)
{
    __shared__ uint32_t s_grid[st_grid_bytes<TYPE>::n / 4 + 1];
    __shared__ int s_flags[ST_MAX_EXPERTS], s_list[ST_MAX_PAIRS], s_ids[ST_MAX_PAIRS];
    const st_grids g = st_setup_grids<TYPE, STAGE>(gg, s_grid);
    const int np = a.nt * a.topk;
    constexpr int RPB = THREADS / T;
    const int r = blockIdx.x * RPB + threadIdx.x / T, lane = threadIdx.x % T;
    const int rr = r < a.n_ff ? r : a.n_ff - 1;
    if (MODE == GROUP_NONE || MODE == GROUP_PAIRS) {
        /* GROUP_NONE: one (token, slot) per block in pair order, weights
         * re-read for every pair; GROUP_PAIRS: a.ppb pairs per block in
         * expert order */
        __shared__ int s_valid;
        int r0 = blockIdx.y, r1 = blockIdx.y + 1;
        if (MODE == GROUP_PAIRS) {
            const int valid = st_sort_pairs(a, s_ids, s_list, &s_valid);
            r0 = blockIdx.y * a.ppb;
            r1 = r0 + a.ppb < valid ? r0 + a.ppb : valid;
        }
        for (int rk = r0; rk < r1; rk++) {
            const int p = MODE == GROUP_NONE ? rk : s_list[rk];
            const int e = a.ids[p];
            if ((unsigned)e >= (unsigned)a.n_expert) continue;
            st_xvec xv[1] = {st_xvec_of(a.xq, p / a.topk)};
            float gv[1], uv[1];
            st_row_dot<TYPE, T, 1>(a.gate, (int64_t)e * a.n_ff + rr, xv, 1, g, lane, gv);
            st_row_dot<TYPE, T, 1>(a.up, (int64_t)e * a.n_ff + rr, xv, 1, g, lane, uv);
            if (lane == 0 && r < a.n_ff) a.h[(int64_t)p * a.n_ff + r] = st_silu_mul(gv[0], uv[0]);
        }
        return;
    }
    const int count = st_expert_list<MODE>(a, s_flags, s_list, s_ids);
    if ((int)blockIdx.y >= count) return;
    const int e = s_list[blockIdx.y];
    st_for_pairs<NT>(s_ids, np, e, [&](const int *pl, int n) {
        st_xvec xv[NT];
#pragma unroll
        for (int i = 0; i < NT; i++) xv[i] = st_xvec_of(a.xq, (i < n ? pl[i] : pl[0]) / a.topk);
        float gv[NT], uv[NT];
        st_row_dot<TYPE, T, NT>(a.gate, (int64_t)e * a.n_ff + rr, xv, n, g, lane, gv);
        st_row_dot<TYPE, T, NT>(a.up, (int64_t)e * a.n_ff + rr, xv, n, g, lane, uv);
        if (lane == 0 && r < a.n_ff) {
#pragma unroll
            for (int i = 0; i < NT; i++)
                if (i < n) a.h[(int64_t)pl[i] * a.n_ff + r] = st_silu_mul(gv[i], uv[i]);
        }
    });
}

/* k-split gate-up: block z = 0/1 takes canonical streams 16z..16z+15, one
 * per lane, and writes the partials; st_combine_v2k_kernel finishes. */
template <int TYPE, int NT, bool STAGE>
__global__ void __launch_bounds__(128) st_gate_up_v2k_kernel(st_expert_args a, st_grids gg)
{
    __shared__ uint32_t s_grid[st_grid_bytes<TYPE>::n / 4 + 1];
    __shared__ int s_flags[ST_MAX_EXPERTS], s_list[ST_MAX_PAIRS], s_ids[ST_MAX_PAIRS];
    const st_grids g = st_setup_grids<TYPE, STAGE>(gg, s_grid);
    const int np = a.nt * a.topk;
    const int r = blockIdx.x * 8 + threadIdx.x / 16, s = 16 * blockIdx.z + threadIdx.x % 16;
    const int count = st_expert_list<GROUP_SORTED>(a, s_flags, s_list, s_ids);
    if ((int)blockIdx.y >= count || r >= a.n_ff) return; /* no shuffles below */
    const int e = s_list[blockIdx.y];
    st_for_pairs<NT>(s_ids, np, e, [&](const int *pl, int n) {
        st_xvec xv[NT];
#pragma unroll
        for (int i = 0; i < NT; i++) xv[i] = st_xvec_of(a.xq, (i < n ? pl[i] : pl[0]) / a.topk);
        float gv[NT], uv[NT];
        st_stream_dot<TYPE, NT>(a.gate, (int64_t)e * a.n_ff + r, xv, n, g, s, gv);
        st_stream_dot<TYPE, NT>(a.up, (int64_t)e * a.n_ff + r, xv, n, g, s, uv);
#pragma unroll
        for (int i = 0; i < NT; i++)
            if (i < n) {
                float *pp = a.partial + (((int64_t)pl[i] * a.n_ff + r) * 2) * 32;
                pp[s] = gv[i];
                pp[32 + s] = uv[i];
            }
    });
}

/* ---- down ------------------------------------------------------------- */
/* Rows organisation with the top-k sum fused: out[t][i] in one pass. */
template <int TYPE, int T, int NT, bool STAGE, int THREADS, int MODE>
__global__ void __launch_bounds__(THREADS) st_down_fused_kernel(st_expert_args a, st_grids gg)
{
    constexpr int RPB = THREADS / T;
    __shared__ uint32_t s_grid[st_grid_bytes<TYPE>::n / 4 + 1];
    __shared__ int s_flags[ST_MAX_EXPERTS], s_list[ST_MAX_PAIRS], s_ids[ST_MAX_PAIRS];
    /* each row's y per (token, slot) pair: RPB x np floats of dynamic shared
     * memory (st_down_fused_smem), so a call of a few pairs keeps the
     * occupancy of a small array while ST_MAX_PAIRS calls still fit */
    extern __shared__ float s_dyn[];
    const st_grids g = st_setup_grids<TYPE, STAGE>(gg, s_grid);
    const int np = a.nt * a.topk;
    const int rib = threadIdx.x / T, lane = threadIdx.x % T;
    float *s_y = s_dyn + rib * np;
    const int i = blockIdx.x * RPB + rib;
    const int ii = i < a.n_embd ? i : a.n_embd - 1;
    for (int k = lane; k < np; k += T) s_y[k] = 0.0f; /* pairs with invalid ids add 0 */
    const int count = st_expert_list<MODE>(a, s_flags, s_list, s_ids);
    for (int gi = 0; gi < count; gi++) {
        const int e = s_list[gi];
        st_for_pairs<NT>(s_ids, np, e, [&](const int *pl, int n) {
            st_xvec xv[NT];
#pragma unroll
            for (int q = 0; q < NT; q++) xv[q] = st_xvec_of(a.hq, q < n ? pl[q] : pl[0]);
            float yv[NT];
            st_row_dot<TYPE, T, NT>(a.down, (int64_t)e * a.n_embd + ii, xv, n, g, lane, yv);
            if (lane == 0) {
#pragma unroll
                for (int q = 0; q < NT; q++)
                    if (q < n) s_y[pl[q]] = yv[q];
            }
        });
    }
    __syncthreads();
    if (i < a.n_embd)
        for (int t = lane; t < a.nt; t += T) {
            float acc = 0.0f;
            for (int k = 0; k < a.topk; k++) acc = st_fma(a.wts[t * a.topk + k], s_y[t * a.topk + k], acc);
            a.out[(int64_t)t * a.n_embd + i] = acc;
        }
}

/* TSUM: grid (row blocks, used experts); per-slot outputs to a.y. */
template <int TYPE, int NT, bool STAGE>
__global__ void __launch_bounds__(128) st_down_slots_kernel(st_expert_args a, st_grids gg)
{
    __shared__ uint32_t s_grid[st_grid_bytes<TYPE>::n / 4 + 1];
    __shared__ int s_flags[ST_MAX_EXPERTS], s_list[ST_MAX_PAIRS], s_ids[ST_MAX_PAIRS];
    const st_grids g = st_setup_grids<TYPE, STAGE>(gg, s_grid);
    const int np = a.nt * a.topk;
    const int i = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
    const int ii = i < a.n_embd ? i : a.n_embd - 1;
    const int count = st_expert_list<GROUP_SORTED>(a, s_flags, s_list, s_ids);
    if ((int)blockIdx.y >= count) return;
    const int e = s_list[blockIdx.y];
    st_for_pairs<NT>(s_ids, np, e, [&](const int *pl, int n) {
        st_xvec xv[NT];
#pragma unroll
        for (int q = 0; q < NT; q++) xv[q] = st_xvec_of(a.hq, q < n ? pl[q] : pl[0]);
        float yv[NT];
        st_row_dot<TYPE, 32, NT>(a.down, (int64_t)e * a.n_embd + ii, xv, n, g, lane, yv);
        if (lane == 0 && i < a.n_embd) {
#pragma unroll
            for (int q = 0; q < NT; q++)
                if (q < n) a.y[(int64_t)pl[q] * a.n_embd + i] = yv[q];
        }
    });
}

/* EXPERT_V2: one block row-range per token, slots in k order, fused sum. */
template <int TYPE, bool STAGE>
__global__ void __launch_bounds__(128) st_down_v2_kernel(st_expert_args a, st_grids gg)
{
    __shared__ uint32_t s_grid[st_grid_bytes<TYPE>::n / 4 + 1];
    const st_grids g = st_setup_grids<TYPE, STAGE>(gg, s_grid);
    const int i = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
    const int ii = i < a.n_embd ? i : a.n_embd - 1;
    const int t = blockIdx.y;
    float acc = 0.0f;
    for (int k = 0; k < a.topk; k++) {
        const int p = t * a.topk + k;
        const int e = a.ids[p];
        float yv[1] = {0.0f};
        if ((unsigned)e < (unsigned)a.n_expert) {
            st_xvec xv[1] = {st_xvec_of(a.hq, p)};
            st_row_dot<TYPE, 32, 1>(a.down, (int64_t)e * a.n_embd + ii, xv, 1, g, lane, yv);
        }
        acc = st_fma(a.wts[p], yv[0], acc);
    }
    if (lane == 0 && i < a.n_embd) a.out[(int64_t)t * a.n_embd + i] = acc;
}

/* ---- launchers ---------------------------------------------------------- */
template <int TYPE> struct st_has_grid {
    static constexpr bool v = st_grid_bytes<TYPE>::n > 0;
};

#define ST_STAGE_DISPATCH(STAGEVAR, CALL_TRUE, CALL_FALSE) \
    do {                                                   \
        if (st_has_grid<TYPE>::v && (STAGEVAR)) {          \
            CALL_TRUE;                                     \
        } else {                                           \
            CALL_FALSE;                                    \
        }                                                  \
    } while (0)


/* ---- on the integer matrix units (STRATA_EXPERT_MMA) -------------------- */
/* Block (x, y): rows 16 x .. 16 x + 15 of the y-th used expert (increasing
 * id), its pairs as the columns (increasing pair index, in chunks of TILES
 * tiles; the table of st_expert_pairs_kernel, launched once per call): every weight row is read and decoded once per block for all the
 * expert's tokens (mmvq_mma.h st_mma_rows), the same bits as the CPU
 * reference's row dot. Gate-up runs the gate rows, then the up rows, and
 * writes h = silu(gate) * up; down writes the per-slot outputs to a.y and
 * st_topk_sum_kernel sums them in k order. */

template <int TYPE, int W, int TILES, bool STAGE, bool DOWN>
__global__ void __launch_bounds__(32 * W) st_expert_mma_kernel(st_expert_args a, st_grids gg)
{
    constexpr int COLS = TILES * st_mma::TOK;
    __shared__ uint32_t s_grid[st_grid_bytes<TYPE>::n / 4 + 1];
    __shared__ int s_pl[ST_MAX_PAIRS], s_vec[ST_MAX_PAIRS];
    constexpr bool COOP = st_mma_coop<TYPE, W>;
    __shared__ __align__(16) st_mma_smem<W, TILES, 1, COOP> sm; /* an expert row: one group of 32 streams */
    __shared__ float s_g[DOWN ? 1 : 16][DOWN ? 1 : COLS];
    const st_grids g = st_setup_grids<TYPE, STAGE>(gg, s_grid);
    /* the expert's pairs from st_expert_pairs_kernel's table */
    const st_pair_table t = st_pair_table_of(a.groups);
    if ((int)blockIdx.y >= *t.used) return; /* uniform across the block */
    const int e = t.expert[blockIdx.y], n = t.count[blockIdx.y];
    for (int c = threadIdx.x; c < n; c += blockDim.x) {
        const int p = t.pairs[t.start[blockIdx.y] + c];
        s_pl[c] = p;
        s_vec[c] = DOWN ? p : p / a.topk;
    }
    __syncthreads();
    const int64_t row0 = (int64_t)blockIdx.x * 16;
    const int nrows = DOWN ? a.n_embd : a.n_ff;
    const int64_t rbase = (int64_t)e * nrows;
    for (int c0 = 0; c0 < n; c0 += COLS) {
        const int nc = n - c0 < COLS ? n - c0 : COLS;
        const int ntl = (nc + st_mma::TOK - 1) / st_mma::TOK;
        if constexpr (DOWN) {
            const st_mma_gather_cols cols{a.hq, s_vec + c0, nc};
            st_mma_rows<TYPE, W, TILES, 1, 2, COOP>(a.down, rbase, nrows, row0, ntl, g, sm, cols, [&](int c, int r, float v) {
                if (c < nc) a.y[(int64_t)s_pl[c0 + c] * a.n_embd + row0 + r] = v;
            });
        } else {
            const st_mma_gather_cols cols{a.xq, s_vec + c0, nc};
            st_mma_rows<TYPE, W, TILES, 1, 2, COOP>(a.gate, rbase, nrows, row0, ntl, g, sm, cols,
                                               [&](int c, int r, float v) { s_g[r][c] = v; });
            __syncthreads(); /* the staging and partial areas are reused */
            st_mma_rows<TYPE, W, TILES, 1, 2, COOP>(a.up, rbase, nrows, row0, ntl, g, sm, cols, [&](int c, int r, float v) {
                if (c < nc) a.h[(int64_t)s_pl[c0 + c] * a.n_ff + row0 + r] = st_silu_mul(s_g[r][c], v);
            });
        }
        __syncthreads(); /* the next chunk reuses the shared areas */
    }
}

/* W 8 warps; as many tiles as a.nt tokens need, at most MAXT (an expert's
 * share of a call is small: n_tokens x top-k / experts on average, 2.3
 * pairs at 16 tokens, top-8 of 64; registers for more tiles cost every
 * block occupancy, and an expert with more pairs takes further chunks, its
 * rows then from L2). NVIDIA: one tile (8 pairs) a chunk, every format.
 * Measured on an H100 (docs/PERFORMANCE.md, twentieth and twenty-first
 * sessions; one device call each, three runs, min, us, two tiles / one;
 * 64 experts, top-8): iq3_s/iq4_nl 2560/640 at 16 / 24 / 32 tokens
 * 242.44 / 266.44 / 272.47 -> 206.40 / 227.61 / 231.61 (down iq4_nl 120
 * -> 80 registers, 3 blocks an SM instead of 2); 2048/768 iq4_xs/iq4_xs
 * at 24 234.11 -> 218.88, q4_K/q6_K at 32 365.15 -> 285.00 (in place
 * 529.90 -> 392.55; ptxas: q4_K gate-up 154 -> 117 registers, 2 blocks
 * an SM instead of 1), iq2_xxs/iq3_xxs at 32 277.93 -> 233.52. gfx1100
 * keeps two (not measured there). */
template <int TYPE, bool DOWN>
static st_rt_error st_expert_mma(const st_launch &L, const st_expert_args &a, const st_expert_plan &p)
{
#if ST_HIP
    constexpr int MAXT = 16 / st_mma::TOK;
#else
    constexpr int MAXT = 1;
#endif
    constexpr int W = 8;
    constexpr bool SG = st_has_grid<TYPE>::v;
    const int np = a.nt * a.topk;
    const int groups = np < a.n_expert ? np : a.n_expert;
    const int rows = DOWN ? a.n_embd : a.n_ff;
    const dim3 grid((unsigned)((rows + 15) / 16), (unsigned)groups);
    const int tiles = (a.nt + st_mma::TOK - 1) / st_mma::TOK;
    /* an expert row takes the 32 canonical streams whatever its length
     * (the 128-stream wide rows are iq_mmvq's only: docs/DESIGN.md
     * section 2), so one group */
    return st_by_count<MAXT>(tiles, [&](auto tc) {
        constexpr int TL = decltype(tc)::value;
        if (SG && p.stage_grid)
            st_expert_mma_kernel<TYPE, W, TL, SG, DOWN><<<grid, 32 * W, 0, L.stream>>>(a, L.grids);
        else
            st_expert_mma_kernel<TYPE, W, TL, false, DOWN><<<grid, 32 * W, 0, L.stream>>>(a, L.grids);
        return st_count_mma(L, st_rt_get_last_error());
    });
}

/* ---- the default down: per (row block, expert), top-k sum by the last block */
/* Down per (row block, pair in expert order): per-slot outputs go to a.y,
 * and the last block of each row block (a ticket counter) sums the top-k
 * slots in k order, so the sum needs no launch of its own. (Quantizing h in
 * LDS inside every block was measured slower than the separate q8_1 launch:
 * the per-block quantize latency chain outweighs the saved launch.) */
template <int TYPE, int T, bool STAGE, int THREADS>
__global__ void __launch_bounds__(THREADS) st_down_fused2_kernel(st_expert_args a, st_grids gg)
{
    __shared__ uint32_t s_grid[st_grid_bytes<TYPE>::n / 4 + 1];
    __shared__ int s_rank[ST_MAX_PAIRS], s_ids[ST_MAX_PAIRS];
    __shared__ int s_valid;
    __shared__ unsigned s_last;
    const st_grids g = st_setup_grids<TYPE, STAGE>(gg, s_grid);
    constexpr int RPB = THREADS / T;
    const int rib = threadIdx.x / T, lane = threadIdx.x % T;
    const int i = blockIdx.x * RPB + rib;
    const int ii = i < a.n_embd ? i : a.n_embd - 1;
    /* a.ppb pairs per block row, pairs in expert order */
    const int valid = st_sort_pairs(a, s_ids, s_rank, &s_valid);
    const int nblk = (valid + a.ppb - 1) / a.ppb;
    if ((int)blockIdx.y >= (nblk > 0 ? nblk : 1)) return;
    const int r0 = blockIdx.y * a.ppb, r1 = r0 + a.ppb < valid ? r0 + a.ppb : valid;
    for (int rk = r0; rk < r1; rk++) {
        const int p = s_rank[rk];
        st_xvec xv[1] = {st_xvec_of(a.hq, p)};
        float yv[1];
        st_row_dot<TYPE, T, 1>(a.down, (int64_t)s_ids[p] * a.n_embd + ii, xv, 1, g, lane, yv);
        if (lane == 0 && i < a.n_embd) a.y[(int64_t)p * a.n_embd + i] = yv[0];
    }
    const unsigned tickets_want = nblk > 0 ? (unsigned)nblk : 1u;
    /* last block of this row block sums the slots */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned ticket = atomicAdd(&a.tickets[blockIdx.x], 1u);
        s_last = ticket + 1 == tickets_want;
        if (s_last) a.tickets[blockIdx.x] = 0; /* ready for the next call */
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    if (i < a.n_embd)
        for (int t = lane; t < a.nt; t += T) {
            float acc = 0.0f;
            for (int k = 0; k < a.topk; k++) {
                const int p = t * a.topk + k;
                const float y = (unsigned)s_ids[p] < (unsigned)a.n_expert ? st_ld_coherent(a.y + (int64_t)p * a.n_embd + i) : 0.0f;
                acc = st_fma(a.wts[p], y, acc);
            }
            a.out[(int64_t)t * a.n_embd + i] = acc;
        }
}

template <int TYPE, int NT, int T, int THREADS>
static st_rt_error st_down_fused2(const st_launch &L, const st_expert_args &a, bool stage, int groups)
{
    constexpr int RPB = THREADS / T;
    constexpr bool SG = st_has_grid<TYPE>::v;
    (void)groups;
    dim3 grid((a.n_embd + RPB - 1) / RPB, (a.nt * a.topk + a.ppb - 1) / a.ppb);
    ST_STAGE_DISPATCH(stage, (st_down_fused2_kernel<TYPE, T, SG, THREADS><<<grid, THREADS, 0, L.stream>>>(a, L.grids)),
                      (st_down_fused2_kernel<TYPE, T, false, THREADS><<<grid, THREADS, 0, L.stream>>>(a, L.grids)));
    return st_rt_get_last_error();
}

/* The default gate-up: one pair per block row, pairs in expert order. */
template <int TYPE>
static st_rt_error st_gate_up_fused(const st_launch &L, const st_expert_args &a, const st_expert_plan &p)
{
    constexpr bool SG = st_has_grid<TYPE>::v;
    const int rpb = 128 / p.gu_t, np = a.nt * a.topk;
    dim3 pg((a.n_ff + rpb - 1) / rpb, (np + a.ppb - 1) / a.ppb);
    return st_by_lanes(p.gu_t, [&](auto tt) {
        constexpr int TT = decltype(tt)::value;
        ST_STAGE_DISPATCH(p.stage_grid,
                          (st_gate_up_kernel<TYPE, TT, 1, SG, 128, GROUP_PAIRS><<<pg, 128, 0, L.stream>>>(a, L.grids)),
                          (st_gate_up_kernel<TYPE, TT, 1, false, 128, GROUP_PAIRS><<<pg, 128, 0, L.stream>>>(a, L.grids)));
        return st_rt_get_last_error();
    });
}

/* The row-planar layout's other gate-up plans (the tuning families). */
template <int TYPE, int NT>
static st_rt_error st_gate_up_planar(const st_launch &L, const st_expert_args &a, const st_expert_plan &p)
{
    const int np = a.nt * a.topk;
    const int groups = np < a.n_expert ? np : a.n_expert;
    constexpr bool SG = st_has_grid<TYPE>::v;
    const int rpb = 128 / p.gu_t;
    if (p.v2k) {
        dim3 grid((a.n_ff + 7) / 8, groups, 2);
        ST_STAGE_DISPATCH(p.stage_grid, (st_gate_up_v2k_kernel<TYPE, NT, SG><<<grid, 128, 0, L.stream>>>(a, L.grids)),
                          (st_gate_up_v2k_kernel<TYPE, NT, false><<<grid, 128, 0, L.stream>>>(a, L.grids)));
        return st_rt_get_last_error();
    }
    if (p.v2) {
        dim3 grid((a.n_ff + 3) / 4, np);
        ST_STAGE_DISPATCH(p.stage_grid,
                          (st_gate_up_kernel<TYPE, 32, 1, SG, 128, GROUP_NONE><<<grid, 128, 0, L.stream>>>(a, L.grids)),
                          (st_gate_up_kernel<TYPE, 32, 1, false, 128, GROUP_NONE><<<grid, 128, 0, L.stream>>>(a, L.grids)));
        return st_rt_get_last_error();
    }
    if (p.gu_rows) { /* table variant: one warp per row, GU rows per block */
        switch (p.gu_rows * 256 + p.dn_rows) {
#define ST_GU_CASE(GU, DN)                                                                                       \
    case (GU) * 256 + (DN): {                                                                                    \
        dim3 grid((a.n_ff + GU - 1) / GU, (np + a.ppb - 1) / a.ppb);                                             \
        st_gate_up_kernel<TYPE, 32, 1, SG, 32 * GU, GROUP_PAIRS><<<grid, 32 * GU, 0, L.stream>>>(a, L.grids);   \
        return st_rt_get_last_error();                                                                           \
    }
            STRATA_EXPERT_ROWS_VARIANTS(ST_GU_CASE)
#undef ST_GU_CASE
        default: return ST_RT_INVALID_VALUE;
        }
    }
    if (p.fused) return st_gate_up_fused<TYPE>(L, a, p);
    dim3 grid((a.n_ff + rpb - 1) / rpb, groups);
    if (p.grouped_v1) {
        st_gate_up_kernel<TYPE, 32, NT, SG, 128, GROUP_V1><<<dim3((a.n_ff + 3) / 4, groups), 128, 0, L.stream>>>(a, L.grids);
        return st_rt_get_last_error();
    }
    return st_by_lanes(p.gu_t, [&](auto tt) {
        constexpr int TT = decltype(tt)::value;
        ST_STAGE_DISPATCH(p.stage_grid,
                          (st_gate_up_kernel<TYPE, TT, NT, SG, 128, GROUP_SORTED><<<grid, 128, 0, L.stream>>>(a, L.grids)),
                          (st_gate_up_kernel<TYPE, TT, NT, false, 128, GROUP_SORTED><<<grid, 128, 0, L.stream>>>(a, L.grids)));
        return st_rt_get_last_error();
    });
}

template <int TYPE, int NT>
static st_rt_error st_gate_up_nt(const st_launch &L, const st_expert_args &a, const st_expert_plan &p)
{
    if (p.mma) return st_expert_mma<TYPE, false>(L, a, p);
    if constexpr (st_in_place(TYPE)) {
        /* the in-place layout: the default plan and the matrix units only */
        if (!p.fused || p.gu_rows) return ST_RT_INVALID_VALUE;
        return st_gate_up_fused<TYPE>(L, a, p);
    } else {
        return st_gate_up_planar<TYPE, NT>(L, a, p);
    }
}

/* The row-planar layout's other down plans (the tuning families). */
template <int TYPE, int NT>
static st_rt_error st_down_planar(const st_launch &L, const st_expert_args &a, const st_expert_plan &p)
{
    const int np = a.nt * a.topk;
    const int groups = np < a.n_expert ? np : a.n_expert;
    constexpr bool SG = st_has_grid<TYPE>::v;
    if (p.v2) {
        dim3 grid((a.n_embd + 3) / 4, a.nt);
        ST_STAGE_DISPATCH(p.stage_grid, (st_down_v2_kernel<TYPE, SG><<<grid, 128, 0, L.stream>>>(a, L.grids)),
                          (st_down_v2_kernel<TYPE, false><<<grid, 128, 0, L.stream>>>(a, L.grids)));
        return st_rt_get_last_error();
    }
    if (p.tsum) {
        dim3 grid((a.n_embd + 3) / 4, groups);
        ST_STAGE_DISPATCH(p.stage_grid, (st_down_slots_kernel<TYPE, NT, SG><<<grid, 128, 0, L.stream>>>(a, L.grids)),
                          (st_down_slots_kernel<TYPE, NT, false><<<grid, 128, 0, L.stream>>>(a, L.grids)));
        return st_rt_get_last_error();
    }
    if (p.dn_rows) {
        switch (p.gu_rows * 256 + p.dn_rows) {
#define ST_DN_CASE(GU, DN)                                                                                             \
    case (GU) * 256 + (DN):                                                                                            \
        return st_down_fused2<TYPE, NT, 32, 32 * DN>(L, a, p.stage_grid, groups);
            STRATA_EXPERT_ROWS_VARIANTS(ST_DN_CASE)
#undef ST_DN_CASE
        default: return ST_RT_INVALID_VALUE;
        }
    }
    if (p.fused)
        return st_by_lanes(p.dn_t, [&](auto tt) {
            return st_down_fused2<TYPE, NT, decltype(tt)::value, 128>(L, a, p.stage_grid, groups);
        });
    const size_t pairs = (size_t)a.nt * (size_t)a.topk;
    if (p.grouped_v1) {
        st_down_fused_kernel<TYPE, 32, NT, SG, 128, GROUP_V1><<<(a.n_embd + 3) / 4, 128, sizeof(float) * 4 * pairs, L.stream>>>(
            a, L.grids);
        return st_rt_get_last_error();
    }
    const int rpb = 128 / p.dn_t;
    const unsigned grid = (unsigned)((a.n_embd + rpb - 1) / rpb);
    const size_t smem = sizeof(float) * (size_t)rpb * pairs;
    return st_by_lanes(p.dn_t, [&](auto tt) {
        constexpr int TT = decltype(tt)::value;
        ST_STAGE_DISPATCH(p.stage_grid,
                          (st_down_fused_kernel<TYPE, TT, NT, SG, 128, GROUP_SORTED><<<grid, 128, smem, L.stream>>>(a, L.grids)),
                          (st_down_fused_kernel<TYPE, TT, NT, false, 128, GROUP_SORTED><<<grid, 128, smem, L.stream>>>(a, L.grids)));
        return st_rt_get_last_error();
    });
}

template <int TYPE, int NT>
static st_rt_error st_down_nt(const st_launch &L, const st_expert_args &a, const st_expert_plan &p)
{
    if (p.mma) return st_expert_mma<TYPE, true>(L, a, p);
    if constexpr (st_in_place(TYPE)) {
        /* the in-place layout: the default plan and the matrix units only */
        if (!p.fused || p.dn_rows) return ST_RT_INVALID_VALUE;
        const int np = a.nt * a.topk;
        const int groups = np < a.n_expert ? np : a.n_expert;
        return st_by_lanes(p.dn_t, [&](auto tt) {
            return st_down_fused2<TYPE, NT, decltype(tt)::value, 128>(L, a, p.stage_grid, groups);
        });
    } else {
        return st_down_planar<TYPE, NT>(L, a, p);
    }
}

/* ---- st_expert_mat (MUL_MAT_ID): one warp per (row, pair), the rows of
 * the expert kernels (32 lanes, one group of 32 streams). Grid (row blocks
 * of 4, pairs): every block reads its pair's id; an id out of range
 * writes zeros. */
template <int TYPE, bool STAGE>
__global__ void __launch_bounds__(128) st_expert_mat_kernel(st_expert_mat_args m, st_grids gg)
{
    __shared__ uint32_t s_grid[st_grid_bytes<TYPE>::n / 4 + 1];
    const st_grids g = st_setup_grids<TYPE, STAGE>(gg, s_grid);
    const int i = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
    const int ii = i < m.rows ? i : m.rows - 1;
    const int p = blockIdx.y, t = p / m.topk, k = p % m.topk;
    const int e = m.ids[(int64_t)t * m.ids_stride + k];
    float yv[1] = {0.0f};
    if ((unsigned)e < (unsigned)m.n_expert) { /* uniform over the block */
        st_xvec xv[1] = {st_xvec_of(m.x, m.x_slots == 1 ? t : p)};
        st_row_dot<TYPE, 32, 1>(m.w, (int64_t)e * m.rows + ii, xv, 1, g, lane, yv);
    }
    if (lane == 0 && i < m.rows) m.y[(int64_t)t * m.y_token_stride + (int64_t)k * m.y_slot_stride + i] = yv[0];
}

template <int TYPE>
st_rt_error st_launch_expert_mat(const st_launch &L, const st_expert_mat_args &m, bool stage_grid)
{
    constexpr bool SG = st_has_grid<TYPE>::v;
    dim3 grid((unsigned)((m.rows + 3) / 4), (unsigned)(m.nt * m.topk));
    ST_STAGE_DISPATCH(stage_grid, (st_expert_mat_kernel<TYPE, SG><<<grid, 128, 0, L.stream>>>(m, L.grids)),
                      (st_expert_mat_kernel<TYPE, false><<<grid, 128, 0, L.stream>>>(m, L.grids)));
    return st_rt_get_last_error();
}

/* A block serves its expert's pairs one at a time (NT = 1): the rows it
 * re-reads for a second pair come from L2, not DRAM. Measured on the H200
 * (2560/640, 64 experts, top-8, n_tokens 8): 8 slots per chunk 420 us (the
 * register footprint cut occupancy), 2 slots 240 us, the per-token path
 * without grouping 123 us. */
template <int TYPE>
st_rt_error st_launch_gate_up(const st_launch &L, const st_expert_args &a, const st_expert_plan &p)
{
    return st_gate_up_nt<TYPE, 1>(L, a, p);
}

template <int TYPE>
st_rt_error st_launch_down(const st_launch &L, const st_expert_args &a, const st_expert_plan &p)
{
    return st_down_nt<TYPE, 1>(L, a, p);
}
