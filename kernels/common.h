/* Shared by the kernel translation units and the host side. */
#ifndef ST_KERNELS_COMMON_H
#define ST_KERNELS_COMMON_H

#include "dot.h"
#include "strata/limits.h"
#include "strata/variants.h"

#include <type_traits>

/* q8_1 of one 32-value block held one value per lane (the whole warp takes
 * part): d = max|x|/127, q = roundf(x/d), s = butterfly sum, d and s as f16.
 * The one implementation every q8_1 path on the device uses. */
ST_DEV void st_quantize_warp_block(float v, int &q, uint16_t &d16, uint16_t &s16)
{
    float amax = fabsf(v), sum = v;
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1) {
        amax = fmaxf(amax, st_shfl_xor(amax, o, 32));
        sum = st_fadd(sum, st_shfl_xor(sum, o, 32));
    }
    const float d = st_fdiv(amax, 127.0f);
    q = amax == 0.0f ? 0 : (int)roundf(st_fdiv(v, d));
    d16 = st_float_to_half(d);
    s16 = st_float_to_half(sum);
}

struct st_launch {
    st_rt_stream stream;
    st_grids grids;
    bool dependent; /* the device takes programmatic dependent launches */
    /* the host's count of kernels launched on the integer matrix units
     * (iq_mmvq's and the experts'), counted where they are launched (the
     * context's stats: st_ctx_stats.mma_launches); NULL: not counted */
    unsigned long long *mma;
};

/* E, counting one matrix-unit launch in L when it succeeded. */
static inline st_rt_error st_count_mma(const st_launch &L, st_rt_error e)
{
    if (e == ST_RT_SUCCESS && L.mma) ++*L.mma;
    return e;
}

/* Launches KERNEL as a programmatic dependent of the kernel before it in
 * L's stream where WANT and the device allows it (L.dependent), else as
 * usual. The
 * kernel must call st_grid_dep_wait before it reads anything that kernel
 * writes: until then it may only read what no kernel of the stream writes
 * (weights, lookup tables). */
template <typename... P, typename... A>
static inline st_rt_error st_launch_dependent(const st_launch &L, bool want, void (*kernel)(P...), unsigned grid,
                                              unsigned block, A... args)
{
#if ST_CUDA
    if (L.dependent && want) return st_rt_launch_as_dependent(kernel, grid, block, L.stream, args...);
#endif
    kernel<<<grid, block, 0, L.stream>>>(static_cast<P>(args)...);
    return st_rt_get_last_error();
}

/* Activations of NT vectors in the planar q8_1 layout. Plain (tiled 0):
 * qs [nt][nu][32], d, d16, s16 [nt][nu]. Tiled for the matrix units
 * (tiled 1, st_mmvq_tiled): the tokens in tiles of st_mma::TOK, the units
 * of a tile one after another, each unit's TOK tokens together (st_xtile):
 * a warp's B operand of one unit and tile is one contiguous read, and its
 * scales too; the slots past the call's last token up to the tile's end
 * hold zeros. d16 and s16 stay [nt][nu] (the matrix units read neither).
 * Either way the planes hold st_xtile_tokens(nt) vectors' room when tiled. */
struct st_xplanes {
    int8_t *qs;
    float *d;
    uint16_t *d16; /* f16 bits of d */
    uint16_t *s16; /* f16 bits of the block sum */
    int nu;
    int tiled;
};

/* Token slots a tiled call of NT tokens takes: whole tiles. */
ST_HD int st_xtile_tokens(int nt) { return (nt + st_mma::TOK - 1) / st_mma::TOK * st_mma::TOK; }

/* The slot of token T's unit U in the tiled planes: qs bytes 32 x slot (word
 * w at 4 st_mma::x_pos(w) of them), d at slot. */
ST_DEV int64_t st_xtile(int t, int u, int nu)
{
    return ((int64_t)(t / st_mma::TOK) * nu + u) * st_mma::TOK + t % st_mma::TOK;
}

/* Whether the matrix-unit kernels of format TYPE (either layout) decode a
 * round with the whole block (mmvq_mma.h st_mma_coop: NVIDIA, the formats
 * that passed the device parity test with it). */
ST_HD constexpr bool st_mma_block_decode(int type)
{
#if ST_HIP
    return (void)type, false;
#else
    return st_base_type(type) == ST_IQ3_S || st_base_type(type) == ST_IQ4_XS || st_base_type(type) == ST_IQ4_NL;
#endif
}

/* Whether an iq_mmvq call of format TYPE and variant ROWS (an id,
 * strata/variants.h) with NT tokens runs on the matrix units and so reads
 * tiled activations: the matrix-unit variants, and the default chain (not
 * the legacy path) beyond 8 tokens, or from STRATA_MMVQ_BLOCK_DECODE_MMA_TOKENS
 * tokens for the formats of st_mma_block_decode. The one place the runtime
 * and the launcher decide it. */
static inline bool st_mmvq_tiled(int type, int rows, int nt, bool legacy)
{
    const st_mmvq_variant v = st_mmvq_variant_of(rows);
    const int from = st_mma_block_decode(type) ? STRATA_MMVQ_BLOCK_DECODE_MMA_TOKENS : STRATA_MMVQ_DEFAULT_MMA_TOKENS;
    return v.family == ST_MMVQ_MMA || (v.family == ST_MMVQ_DEFAULT && !legacy && nt >= from);
}

/* Whether this build's kernels were compiled with the dependent-launch
 * instructions (PTX for sm_90 or later; false on HIP). */
bool st_quantize_takes_dependents();

/* f32 [n][k] -> q8_1, planar (BLOCKS=false) or 36-byte ggml blocks; vector
 * t at X + t * X_STRIDE (0: K, back to back). With IDS (one expert id per
 * vector, the pairs of an FFN call), a vector whose id is outside
 * 0..N_EXPERT-1 is not read and quantizes as zeros. */
st_rt_error st_launch_quantize(const st_launch &L, const float *x, int64_t k, int n, const st_xplanes &xp,
                               uint8_t *blocks, int64_t x_stride = 0, const int32_t *ids = nullptr,
                               int n_expert = 0);

/* iq_mmvq for one type: rows = 0 default chain, else a rows variant.
 * ONE_ROW (the knob STRATA_MMVQ_ONE_ROW): the default's dp4a kernels take
 * one row per lane group whatever the row count (st_mmvq_rows_per_group).
 * ONE_PASS (the knob STRATA_MMA_ONE_PASS): the matrix-unit kernels with 8
 * warps take every stream of a warp in one pass over the row
 * (st_mma_passes; two row groups keep their two). */
template <int TYPE>
st_rt_error st_launch_mmvq(const st_launch &L, const st_mat_dev &m, const st_xplanes &x, const uint8_t *xblocks,
                           int nt, float *y, int rows, bool stage_grid, bool legacy, bool one_row = false,
                           bool one_pass = false);

/* The expert kernels' shared arguments. */
struct st_expert_args {
    st_mat_dev gate, up, down;
    int n_expert, n_embd, n_ff, nt, topk;
    const int32_t *ids;
    const float *wts;
    st_xplanes xq;   /* tokens, n_embd */
    float *h;        /* [np][n_ff] */
    st_xplanes hq;   /* pairs, n_ff */
    float *y;        /* [np][n_embd] (TSUM, V2 down) */
    float *partial;  /* [np][n_ff][2][32] (V2K) */
    int32_t *groups; /* GROUPED_V1 table: [0] = count, [1..count] the used experts (at most ST_MAX_PAIRS);
                        EXPERT_MMA: st_pair_table */
    uint32_t *tickets; /* fused down: one counter per row block, left at 0 */
    int ppb;           /* GROUP_PAIRS: pairs per block (expert order) */
    float *out;      /* [nt][n_embd] */
};

struct st_expert_plan {
    int gu_t, gu_rows;   /* lanes per row and rows per block of gate-up */
    int dn_t, dn_rows;   /* of down */
    bool stage_grid, v2, v2k, tsum, grouped_v1;
    bool mma;            /* on the matrix units (expert_impl.h st_expert_mma_kernel), the top-k sum a launch of its own */
    bool fused;          /* down per (row block, expert) with the top-k sum done by the last block */
};

/* The pairs grouped by expert (st_expert_pairs_kernel, expert_misc.hip),
 * in the workspace's groups area: the used experts in increasing id, each
 * one's first index into PAIRS and its count, and PAIRS, the (token, slot)
 * pairs with a valid expert sorted by (expert, pair). */
struct st_pair_table {
    int32_t *used, *expert, *start, *count, *pairs;
};
ST_HD st_pair_table st_pair_table_of(int32_t *groups)
{
    return st_pair_table{groups, groups + 1, groups + 1 + ST_MAX_PAIRS, groups + 1 + 2 * ST_MAX_PAIRS,
                         groups + 1 + 3 * ST_MAX_PAIRS};
}
/* int32 entries of the groups area: the table above (GROUPED_V1's list
 * takes the first 1 + ST_MAX_PAIRS) */
#define ST_GROUPS_WORDS (1 + 4 * ST_MAX_PAIRS)

template <int TYPE>
st_rt_error st_launch_gate_up(const st_launch &L, const st_expert_args &a, const st_expert_plan &p);
template <int TYPE>
st_rt_error st_launch_down(const st_launch &L, const st_expert_args &a, const st_expert_plan &p);
st_rt_error st_launch_group_v1(const st_launch &L, const st_expert_args &a);

/* st_expert_mat (ggml's MUL_MAT_ID): per (token, slot) pair p = t*topk+k
 * with e = ids[t * ids_stride + k], y[t * y_token_stride + k *
 * y_slot_stride + r] = W_e[r] . x vector (t when x_slots is 1, else p); an
 * id out of range writes zeros and reads no weight. */
struct st_expert_mat_args {
    st_mat_dev w; /* n_expert experts of ROWS rows */
    int n_expert, rows, nt, topk, x_slots;
    const int32_t *ids;
    int64_t ids_stride;
    st_xplanes x;
    float *y;
    int64_t y_slot_stride, y_token_stride;
};
template <int TYPE>
st_rt_error st_launch_expert_mat(const st_launch &L, const st_expert_mat_args &m, bool stage_grid);

/* st_expert_ffn beyond the fused kernels (another combine, biases, strides
 * of ids, weights or outputs): the gate and up outputs G, U [np][n_ff] (of
 * st_expert_mat) combined with their biases into H, and the down outputs
 * Y [np][n_embd] with their bias summed over the top-k in k order. A pair
 * whose id is out of range: H 0, and w * 0 in the sum. */
struct st_ffn_args {
    int n_expert, n_embd, n_ff, nt, topk, act;
    float alpha, limit;
    const int32_t *ids;
    int64_t ids_stride;
    const float *wts;
    int64_t wts_stride;
    const float *gate_bias, *up_bias, *down_bias;
    const float *g, *u;
    float *h;
    const float *y;
    float *out;
    int64_t out_stride;
};
st_rt_error st_launch_ffn_combine(const st_launch &L, const st_ffn_args &a);
st_rt_error st_launch_ffn_sum(const st_launch &L, const st_ffn_args &a);
st_rt_error st_launch_topk_sum(const st_launch &L, const st_expert_args &a);
st_rt_error st_launch_expert_pairs(const st_launch &L, const st_expert_args &a);
st_rt_error st_launch_combine_v2k(const st_launch &L, const st_expert_args &a);

/* The device-side repack (kernels/repack.hip): NBLOCKS ggml blocks of BB
 * bytes at SRC (device memory) into the planes of IO (which the caller
 * cleared). The same per-block code as the host's st_repack: the format
 * home's st_io_<ID>. */
st_rt_error st_launch_repack(st_rt_stream s, int type, const st_repack_io &io, const void *src, size_t bb,
                             int64_t nblocks, void *dst);

/* The checking mode (kernels/check.hip): the first id of NT x TOPK (token
 * rows STRIDE apart) outside 0..N_EXPERT-1 folded into *FIRST as
 * st_bad_id_key (ST_BAD_ID_NONE when none). The key orders by token, then
 * slot: token in bits 44..63, slot in 32..43, the value's bits below. */
#define ST_BAD_ID_NONE (~0ull)
ST_HD unsigned long long st_bad_id_key(int t, int k, int32_t v)
{
    return ((unsigned long long)(unsigned)t << 44) | ((unsigned long long)(unsigned)k << 32) | (uint32_t)v;
}
static_assert(ST_MAX_TOKENS < (1 << 20) && ST_MAX_TOPK < (1 << 12), "st_bad_id_key's fields hold a token and a slot");
st_rt_error st_launch_check_ids(const st_launch &L, const int32_t *ids, int64_t stride, int nt, int topk, int n_expert,
                                unsigned long long *first);

/* A launch the runtime refuses (an invalid configuration), for the fault
 * tests' injected launch failure (st_gpu_fail_launch_at, backend.h): its
 * error is a real one, with the runtime's message. */
st_rt_error st_probe_bad_launch(st_rt_stream s);

/* The probes (kernels/probes.hip): a streaming read of BYTES at SRC folded
 * into SINK, an empty launch, and the weight loads of the default iq_mmvq
 * on M without the decode (the ablation). */
st_rt_error st_probe_read_launch(st_rt_stream s, const void *src, size_t bytes, float *sink);
st_rt_error st_probe_empty_launch(st_rt_stream s);
st_rt_error st_probe_loads_launch(st_rt_stream s, int type, const st_mat_dev &m, float *sink);

/* Pick the lanes per row of a row with NU units: the default chain's
 * sub-warp rule. */
static inline int st_lanes_for_units(int nu, int min_lanes)
{
    int t = nu <= 16 ? 8 : nu <= 48 ? 16 : 32;
    return t < min_lanes ? min_lanes : t;
}

/* Rows per lane group of the default iq_mmvq: 2 (sharing activation loads)
 * for several tokens when the matrix has rows enough to keep >= ~2 blocks of
 * 4 warps per SM slot busy, else 1; but 1 at 2 tokens for planar IQ4_NL
 * and IQ4_XS on NVIDIA. Measured on an H100 in one call, 14336 x 4096, one
 * row (the knob STRATA_MMVQ_ONE_ROW) between two runs with two (us, within
 * 0.5% run to run): 2 tokens iq4_nl 19.35 -> 18.28, iq4_xs 19.75 -> 18.27,
 * but iq3_s 20.59 -> 23.71; 3-5 tokens two rows won or tied for all three
 * (iq4_nl 5 tokens 29.47 -> 33.18). The in-place layout keeps two until
 * measured. NT: the token bucket (2 is 2 tokens). */
static inline int st_mmvq_rows_per_group(int type, int nt, int64_t rows)
{
#if !ST_HIP
    if (nt == 2 && (type == ST_IQ4_NL || type == ST_IQ4_XS)) return 1;
#endif
    return nt > 1 && rows >= 8192 ? 2 : 1;
}

/* Calls F(std::integral_constant<int, T>) for the lanes per row T (8, 16,
 * else 32) chosen at run time: the one place the launchers turn the
 * default's sub-warp choice into a template argument. */
template <typename F> static inline st_rt_error st_by_lanes(int t, F f)
{
    if (t == 8) return f(std::integral_constant<int, 8>());
    if (t == 16) return f(std::integral_constant<int, 16>());
    return f(std::integral_constant<int, 32>());
}

/* Calls F(std::integral_constant<int, NG>) for the stream groups of a row
 * of NU units (st_canon_mmvq_groups: 1 or 4). */
template <typename F> static inline st_rt_error st_by_groups(int nu, F f)
{
    if (st_canon_mmvq_groups(nu) == 4) return f(std::integral_constant<int, 4>());
    return f(std::integral_constant<int, 1>());
}

/* Calls F(std::integral_constant<int, N>) for N = n in 1..MAX (MAX if larger). */
template <int MAX, typename F> static inline st_rt_error st_by_count(int n, F f)
{
    if constexpr (MAX > 1) {
        if (n < MAX) return st_by_count<MAX - 1>(n, f);
    }
    return f(std::integral_constant<int, MAX>());
}

static inline int st_nt_bucket(int n) { return n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : 8; }

#define ST_RT_TRY(expr)                                  \
    do {                                                 \
        st_rt_error e_ = (expr);                         \
        if (e_ != ST_RT_SUCCESS) return e_;              \
    } while (0)

#endif
