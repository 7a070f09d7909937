/* IQ1_M (ggml type 29): 256 values per 56-byte block, 8 sub-blocks of 32,
 * each 4 groups of 8 values g in {-1, 0, 1} from iq1s_grid (11-bit index)
 * with a delta sign per group and a 3-bit scale per 16 values; the f16
 * block scale d is spread over the top nibbles of the four scale words:
 * y = d * (2s + 1) * (g + delta), delta = +-1/8.
 * Canonical unit (a sub-block): the delta folds into integer weights,
 * w = 8 g + (delta > 0 ? 1 : -1), the scales are integer half-factors
 * f0/f1 = 2s + 1 of the two halves, and W = d * 0.125 carries the /8;
 *   isum = f0 * sum(w q)[0..15] + f1 * sum(w q)[16..31],
 *   acc = fma(W * da, isum, acc).
 * Device layout: 0: qs u8[R][nu][4]   1: qh u8[R][nu][2]   2: scales
 * u16[R][nb][4] (as ggml; the decoder assembles d from them). */
#ifndef ST_FMT_IQ1_M_H
#define ST_FMT_IQ1_M_H
#include "format_home.h"
#include "grids.h"

typedef struct {
    uint8_t qs[32];     /* low 8 bits of the 11-bit grid index, one per group */
    uint8_t qh[16];     /* 2 per sub-block, a nibble per group: bits 0-2 index bits 8-10, bit 3 delta sign */
    uint8_t scales[8];  /* 4 uint16: 3-bit scales in bits 0-11, the f16 d's nibbles in bits 12-15 */
} st_block_iq1_m;
ST_BLOCK_CHECK(IQ1_M, st_block_iq1_m);

ST_HD float st_w_iq1_m(float d) { return st_fmul(d, 0.125f); }

/* The f16 bits of d from the four scale words. */
ST_HD uint16_t st_iq1_m_d(uint32_t s0, uint32_t s1, uint32_t s2, uint32_t s3)
{
    return (uint16_t)((s0 >> 12) | ((s1 >> 8) & 0x00f0u) | ((s2 >> 4) & 0x0f00u) | (s3 & 0xf000u));
}

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_IQ1_M(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    for (int ib = 0; ib < 8; ib++) {
        st_io_field(io, 0, bi * 8 + ib, b + offsetof(st_block_iq1_m, qs) + 4 * ib, 4);
        st_io_field(io, 1, bi * 8 + ib, b + offsetof(st_block_iq1_m, qh) + 2 * ib, 2);
    }
    st_io_field(io, 2, bi, b + offsetof(st_block_iq1_m, scales), 8);
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_IQ1_M_HOST)
#define ST_FMT_IQ1_M_HOST
static unsigned iq1_m_sc(const uint8_t *b, int i) { return st_ld16(ST_FIELD(b, st_block_iq1_m, scales) + 2 * i); }

static float iq1_m_d(const uint8_t *b)
{
    return st_half_to_float(st_iq1_m_d(iq1_m_sc(b, 0), iq1_m_sc(b, 1), iq1_m_sc(b, 2), iq1_m_sc(b, 3)));
}

/* Group L of sub-block IB: its grid entry, delta sign and 3-bit scale. */
static void iq1_m_group(const uint8_t *b, int ib, int l, uint64_t *G, int *neg, int *s)
{
    const unsigned t = (ST_FIELD(b, st_block_iq1_m, qh)[2 * ib + l / 2] >> (4 * (l % 2))) & 15u;
    *G = st_iq1s_grid[ST_FIELD(b, st_block_iq1_m, qs)[4 * ib + l] | ((t & 7u) << 8)];
    *neg = (t & 8u) != 0;
    *s = (int)((iq1_m_sc(b, ib / 2) >> (6 * (ib % 2) + 3 * (l / 2))) & 7u);
}

static void iq1_m_deq(const uint8_t *b, float *y)
{
    const float d = iq1_m_d(b);
    for (int ib = 0; ib < 8; ib++)
        for (int l = 0; l < 4; l++) {
            uint64_t G;
            int neg, s;
            iq1_m_group(b, ib, l, &G, &neg, &s);
            const float dl = d * (float)(2 * s + 1), delta = neg ? -0.125f : 0.125f;
            for (int j = 0; j < 8; j++) y[32 * ib + 8 * l + j] = dl * ((float)(int8_t)(G >> (8 * j)) + delta);
        }
}

static void iq1_m_unit(const uint8_t *b, int ib, st_unit *o)
{
    o->W = st_w_iq1_m(iq1_m_d(b));
    for (int l = 0; l < 4; l++) {
        uint64_t G;
        int neg, s;
        iq1_m_group(b, ib, l, &G, &neg, &s);
        for (int j = 0; j < 8; j++) o->w[8 * l + j] = (int16_t)((8 * (int8_t)(G >> (8 * j)) + (neg ? -1 : 1)) * (2 * s + 1));
    }
}

static void iq1_m_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32), nb = (size_t)(k / 256);
    s->n = 3;
    s->per_row[0] = 4 * nu;
    s->per_row[1] = 2 * nu;
    s->per_row[2] = 8 * nb;
}

/* d's f16 bits into the top nibbles of the scale words; their random low
 * 12 bits (the 3-bit scales) stay. */
static void iq1_m_scales(uint8_t *b, float d)
{
    const unsigned h = st_float_to_half(d);
    uint8_t *sc = b + offsetof(st_block_iq1_m, scales);
    for (int i = 0; i < 4; i++) sc[2 * i + 1] = (uint8_t)((sc[2 * i + 1] & 0x0f) | (((h >> (4 * i)) & 15) << 4));
}

ST_FORMAT_OPS(IQ1_M, iq1_m)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_IQ1_M_DEVICE)
#define ST_FMT_IQ1_M_DEVICE
#include "formats/iq1_s.h" /* st_iq1_group */
template <> struct st_unit_dec<ST_IQ1_M> : st_unit_plain {
    static constexpr bool halves = true;
    static constexpr int grid_bytes = 8192; /* iq1s_grid_gpu */
    ST_DEV const uint32_t *grid(const st_grids &g) { return g.iq1s; }
    ST_DEV void set_grid(st_grids &g, const uint32_t *s) { g.iq1s = s; }
    struct raw {
        uint2 sc;
        uint32_t qs;
        uint16_t qh;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        r.qs = *(const uint32_t *)(m.p[0] + ru * 4);
        r.qh = ld_u16(m.p[1] + ru * 2);
        r.sc = *(const uint2 *)(m.p[2] + rb * 8);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_IQ1_M);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_iq1_m;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_IQ1_M, ST_BYTES_IQ1_M>(m, row, u, j);
        r.qs = ST_LDB(32, b, B, qs, 4, j);
        r.qh = ST_LDB(16, b, B, qh, 2, j);
        r.sc = ST_LDB(64, b, B, scales, 0, 0);
    }
    ST_DEV void dec(const raw &r, int u, const st_grids &g, st_dunit &o)
    {
        const int ib = u & 7;
        o.W = st_w_iq1_m(st_h2f(st_iq1_m_d(r.sc.x & 0xffffu, r.sc.x >> 16, r.sc.y & 0xffffu, r.sc.y >> 16)));
        const uint32_t w = ((ib < 4 ? r.sc.x : r.sc.y) >> (16 * ((ib >> 1) & 1) + 6 * (ib & 1)));
        o.f0 = 2 * (int)(w & 7u) + 1;
        o.f1 = 2 * (int)((w >> 3) & 7u) + 1;
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint32_t t = ((uint32_t)r.qh >> (4 * l)) & 15u;
            const uint32_t idx = ((r.qs >> (8 * l)) & 0xffu) | ((t & 7u) << 8);
            st_iq1_group(g.iq1s[idx], t >> 3, o.w[2 * l], o.w[2 * l + 1]);
        }
        o.M = 0.0f;
    }
    ST_UNIT_GET
};
#endif
