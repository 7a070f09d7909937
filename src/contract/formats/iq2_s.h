/* IQ2_S (ggml type 22): 256 values per 82-byte block, 8 sub-blocks of 32,
 * each 4 groups of 8 magnitudes from iq2s_grid (10-bit index) with one sign
 * bit per value and a 4-bit scale per 16 values:
 * y = d * (0.5 + s) * 0.25 * (+-g).
 * Canonical unit (a sub-block): the scales are integer half-factors
 * f0 = 2 s0 + 1, f1 = 2 s1 + 1, W = d * 0.125;
 *   isum = f0 * sum(w q)[0..15] + f1 * sum(w q)[16..31],
 *   acc = fma(W * da, isum, acc).
 * Device layout: 0: d u16[R][nb]   1: qs u8[R][nu][4]   2: signs u8[R][nu][4]
 * 3: qh u8[R][nu]   4: scales u8[R][nu]. */
#ifndef ST_FMT_IQ2_S_H
#define ST_FMT_IQ2_S_H
#include "format_home.h"
#include "grids.h"

typedef struct {
    uint16_t d;        /* f16 scale */
    uint8_t qs[32];    /* low 8 bits of the 10-bit grid index, 4 per sub-block */
    uint8_t signs[32]; /* one byte per group, bit j = value j (ggml: the second half of qs) */
    uint8_t qh[8];     /* high 2 index bits: byte ib, bits 2l..2l+1 for group l */
    uint8_t scales[8]; /* two 4-bit scales per sub-block: low nibble groups 0-1 */
} st_block_iq2_s;
ST_BLOCK_CHECK(IQ2_S, st_block_iq2_s);

/* IQ2_S: both 4-bit scales are folded into isum as (2s+1) integer factors. */
ST_HD float st_w_iq2_s(float d) { return st_fmul(d, 0.125f); }

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_IQ2_S(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_iq2_s, d), 2);
    for (int ib = 0; ib < 8; ib++) {
        st_io_field(io, 1, bi * 8 + ib, b + offsetof(st_block_iq2_s, qs) + 4 * ib, 4);
        st_io_field(io, 2, bi * 8 + ib, b + offsetof(st_block_iq2_s, signs) + 4 * ib, 4);
        st_io_field(io, 3, bi * 8 + ib, b + offsetof(st_block_iq2_s, qh) + ib, 1);
        st_io_field(io, 4, bi * 8 + ib, b + offsetof(st_block_iq2_s, scales) + ib, 1);
    }
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_IQ2_S_HOST)
#define ST_FMT_IQ2_S_HOST
static void iq2_s_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_iq2_s, d));
    const uint8_t *qs = ST_FIELD(b, st_block_iq2_s, qs), *signs = ST_FIELD(b, st_block_iq2_s, signs);
    const uint8_t *qh = ST_FIELD(b, st_block_iq2_s, qh), *scales = ST_FIELD(b, st_block_iq2_s, scales);
    for (int ib = 0; ib < 8; ib++) {
        float db[2];
        db[0] = d * (0.5f + (float)(scales[ib] & 15)) * 0.25f;
        db[1] = d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f;
        for (int l = 0; l < 4; l++) {
            const float dl = db[l / 2];
            const unsigned idx = qs[4 * ib + l] | (((unsigned)(qh[ib] >> (2 * l)) & 3u) << 8);
            const uint64_t G = st_iq2s_grid[idx];
            const unsigned sg = signs[4 * ib + l];
            float *o = y + 32 * ib + 8 * l;
            for (int j = 0; j < 8; j++) {
                const float v = dl * (float)((G >> (8 * j)) & 0xffu);
                o[j] = (sg & (1u << j)) ? -v : v;
            }
        }
    }
}

static void iq2_s_unit(const uint8_t *b, int ib, st_unit *o)
{
    o->W = st_w_iq2_s(st_ldh(ST_FIELD(b, st_block_iq2_s, d)));
    const uint8_t sc = ST_FIELD(b, st_block_iq2_s, scales)[ib];
    const uint8_t qh = ST_FIELD(b, st_block_iq2_s, qh)[ib];
    for (int l = 0; l < 4; l++) {
        const int f = 2 * ((l < 2) ? (sc & 15) : (sc >> 4)) + 1;
        const uint64_t g = st_iq2s_grid[ST_FIELD(b, st_block_iq2_s, qs)[4 * ib + l] | (((qh >> (2 * l)) & 3) << 8)];
        const uint8_t signs = ST_FIELD(b, st_block_iq2_s, signs)[4 * ib + l];
        for (int j = 0; j < 8; j++) {
            const int v = (int)((g >> (8 * j)) & 0xff) * f;
            o->w[8 * l + j] = (int16_t)(((signs >> j) & 1) ? -v : v);
        }
    }
}

static void iq2_s_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32), nb = (size_t)(k / 256);
    s->n = 5;
    s->per_row[0] = 2 * nb;
    s->per_row[1] = 4 * nu;
    s->per_row[2] = 4 * nu;
    s->per_row[3] = nu;
    s->per_row[4] = nu;
}

static void iq2_s_scales(uint8_t *b, float d) { st_put_f16(b + offsetof(st_block_iq2_s, d), d); }

ST_FORMAT_OPS(IQ2_S, iq2_s)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_IQ2_S_DEVICE)
#define ST_FMT_IQ2_S_DEVICE
template <> struct st_unit_dec<ST_IQ2_S> : st_unit_plain {
    static constexpr bool halves = true;
    static constexpr int grid_bytes = 8192; /* iq2s_grid */
    ST_DEV const uint32_t *grid(const st_grids &g) { return (const uint32_t *)g.iq2s; }
    ST_DEV void set_grid(st_grids &g, const uint32_t *s) { g.iq2s = (const uint2 *)s; }
    struct raw {
        uint32_t qs, sg;
        uint16_t d;
        uint8_t qh, sc;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        r.qs = *(const uint32_t *)(m.p[1] + ru * 4);
        r.sg = *(const uint32_t *)(m.p[2] + ru * 4);
        r.qh = m.p[3][ru];
        r.sc = m.p[4][ru];
        r.d = ld_u16(m.p[0] + rb * 2);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_IQ2_S);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_iq2_s;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_IQ2_S, ST_BYTES_IQ2_S>(m, row, u, j);
        r.qs = ST_LDB(32, b, B, qs, 4, j);
        r.sg = ST_LDB(32, b, B, signs, 4, j);
        r.qh = ST_FIELD(b, B, qh)[j];
        r.sc = ST_FIELD(b, B, scales)[j];
        r.d = ST_LDB(16, b, B, d, 0, 0);
    }
    ST_DEV void dec(const raw &r, int, const st_grids &g, st_dunit &o)
    {
        o.W = st_w_iq2_s(st_h2f(r.d));
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint32_t idx = ((r.qs >> (8 * l)) & 0xffu) | ((((uint32_t)r.qh >> (2 * l)) & 3u) << 8);
            const uint2 gv = g.iq2s[idx];
            const uint32_t s = (r.sg >> (8 * l)) & 0xffu;
            o.w[2 * l] = st_apply_signs4(gv.x, s & 15u);
            o.w[2 * l + 1] = st_apply_signs4(gv.y, s >> 4);
        }
        o.f0 = 2 * (int)(r.sc & 15u) + 1;
        o.f1 = 2 * (int)(r.sc >> 4) + 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};
#endif
