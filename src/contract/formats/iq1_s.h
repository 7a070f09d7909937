/* IQ1_S (ggml type 19): 256 values per 50-byte block, 8 sub-blocks of 32,
 * each 4 groups of 8 values g in {-1, 0, 1} from iq1s_grid (11-bit index),
 * a 3-bit scale s and a delta sign per sub-block:
 * y = d * (2s + 1) * (g + delta), delta = +-1/8.
 * Canonical unit (a sub-block): the delta folds into integer weights,
 * w = 8 g + (delta > 0 ? 1 : -1) (-9..9), and W = d * (2s + 1) * 0.125
 * carries the /8 (both products exact);
 *   acc = fma(W * da, isum, acc).
 * Device layout: 0: d u16[R][nb]   1: qs u8[R][nu][4]   2: qh u16[R][nu].
 * The GPU decoder reads ggml's GPU packing of the grid (iq1s_grid_gpu:
 * nibbles g + 1), so a group is one 32-bit lookup. */
#ifndef ST_FMT_IQ1_S_H
#define ST_FMT_IQ1_S_H
#include "format_home.h"
#include "grids.h"

typedef struct {
    uint16_t d;      /* f16 scale */
    uint8_t qs[32];  /* low 8 bits of the 11-bit grid index, one per group */
    uint16_t qh[8];  /* per sub-block: bits 3l..3l+2 index bits 8-10 of group l, 12-14 scale, 15 delta sign */
} st_block_iq1_s;
ST_BLOCK_CHECK(IQ1_S, st_block_iq1_s);

ST_HD float st_w_iq1_s(float d, int s) { return st_fmul(st_fmul(d, (float)(2 * s + 1)), 0.125f); }

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_IQ1_S(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_iq1_s, d), 2);
    for (int ib = 0; ib < 8; ib++) {
        st_io_field(io, 1, bi * 8 + ib, b + offsetof(st_block_iq1_s, qs) + 4 * ib, 4);
        st_io_field(io, 2, bi * 8 + ib, b + offsetof(st_block_iq1_s, qh) + 2 * ib, 2);
    }
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_IQ1_S_HOST)
#define ST_FMT_IQ1_S_HOST
static void iq1_s_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_iq1_s, d));
    const uint8_t *qs = ST_FIELD(b, st_block_iq1_s, qs), *qh = ST_FIELD(b, st_block_iq1_s, qh);
    for (int ib = 0; ib < 8; ib++) {
        const unsigned h = st_ld16(qh + 2 * ib);
        const float dl = d * (float)(2 * ((h >> 12) & 7) + 1);
        const float delta = (h & 0x8000u) ? -0.125f : 0.125f;
        for (int l = 0; l < 4; l++) {
            const uint64_t G = st_iq1s_grid[qs[4 * ib + l] | (((h >> (3 * l)) & 7u) << 8)];
            for (int j = 0; j < 8; j++) y[32 * ib + 8 * l + j] = dl * ((float)(int8_t)(G >> (8 * j)) + delta);
        }
    }
}

static void iq1_s_unit(const uint8_t *b, int ib, st_unit *o)
{
    const uint8_t *qs = ST_FIELD(b, st_block_iq1_s, qs) + 4 * ib;
    const unsigned h = st_ld16(ST_FIELD(b, st_block_iq1_s, qh) + 2 * ib);
    o->W = st_w_iq1_s(st_ldh(ST_FIELD(b, st_block_iq1_s, d)), (int)((h >> 12) & 7));
    const int delta = (h & 0x8000u) ? -1 : 1;
    for (int l = 0; l < 4; l++) {
        const uint64_t G = st_iq1s_grid[qs[l] | (((h >> (3 * l)) & 7u) << 8)];
        for (int j = 0; j < 8; j++) o->w[8 * l + j] = (int16_t)(8 * (int8_t)(G >> (8 * j)) + delta);
    }
}

static void iq1_s_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32), nb = (size_t)(k / 256);
    s->n = 3;
    s->per_row[0] = 2 * nb;
    s->per_row[1] = 4 * nu;
    s->per_row[2] = 2 * nu;
}

static void iq1_s_scales(uint8_t *b, float d) { st_put_f16(b + offsetof(st_block_iq1_s, d), d); }

ST_FORMAT_OPS(IQ1_S, iq1_s)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_IQ1_S_DEVICE)
#define ST_FMT_IQ1_S_DEVICE
/* One group of IQ1_S/IQ1_M from its iq1s_grid_gpu entry V (nibbles g + 1:
 * byte i = element i | element i + 4 << 4) with delta sign NEG: the words
 * of 8 g + 1 (NEG 0) or 8 g - 1 (NEG 1), i.e. 8 (g + 1) - 7 or - 9. */
ST_DEV void st_iq1_group(uint32_t v, uint32_t neg, uint32_t &lo, uint32_t &hi)
{
    const uint32_t c = neg ? 0x09090909u : 0x07070707u;
    lo = st_sub_bytes((v << 3) & 0x78787878u, c);
    hi = st_sub_bytes((v >> 1) & 0x78787878u, c);
}

template <> struct st_unit_dec<ST_IQ1_S> : st_unit_plain {
    static constexpr int grid_bytes = 8192; /* iq1s_grid_gpu */
    ST_DEV const uint32_t *grid(const st_grids &g) { return g.iq1s; }
    ST_DEV void set_grid(st_grids &g, const uint32_t *s) { g.iq1s = s; }
    struct raw {
        uint32_t qs;
        uint16_t d, qh;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        r.qs = *(const uint32_t *)(m.p[1] + ru * 4);
        r.qh = ld_u16(m.p[2] + ru * 2);
        r.d = ld_u16(m.p[0] + rb * 2);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_IQ1_S);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_iq1_s;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_IQ1_S, ST_BYTES_IQ1_S>(m, row, u, j);
        r.qs = ST_LDB(32, b, B, qs, 4, j);
        r.qh = ST_LDB(16, b, B, qh, 2, j);
        r.d = ST_LDB(16, b, B, d, 0, 0);
    }
    ST_DEV void dec(const raw &r, int, const st_grids &g, st_dunit &o)
    {
        const uint32_t h = r.qh;
        o.W = st_w_iq1_s(st_h2f(r.d), (int)((h >> 12) & 7u));
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint32_t idx = ((r.qs >> (8 * l)) & 0xffu) | (((h >> (3 * l)) & 7u) << 8);
            st_iq1_group(g.iq1s[idx], h >> 15, o.w[2 * l], o.w[2 * l + 1]);
        }
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};
#endif
