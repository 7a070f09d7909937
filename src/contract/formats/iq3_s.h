/* IQ3_S (ggml type 21): 256 values per 110-byte block, 8 sub-blocks of 32,
 * each 8 groups of 4 magnitudes from iq3s_grid (9-bit index) with one sign
 * bit per value and a 4-bit sub-block scale s: y = d * (1 + 2s) * (+-g).
 * Canonical unit (a sub-block): w = +-g, W = d * (1 + 2s);
 *   acc = fma(W * da, isum, acc).
 * Device layout: 0: d u16[R][nb]   1: qs u8[R][nu][8]   2: qh u8[R][nu]
 * 3: signs u32[R][nu], transposed (value 4k + t's sign at bit k + 8t)
 * 4: scales u8[R][nb][4]. */
#ifndef ST_FMT_IQ3_S_H
#define ST_FMT_IQ3_S_H
#include "format_home.h"
#include "grids.h"

typedef struct {
    uint16_t d;        /* f16 scale */
    uint8_t qs[64];    /* low 8 bits of the 9-bit grid index, 8 bytes per sub-block */
    uint8_t qh[8];     /* 9th index bit: byte ib for sub-block ib, bit g for group g */
    uint8_t signs[32]; /* 4 bytes per sub-block, bit n = value n */
    uint8_t scales[4]; /* 4-bit sub-block scales, sub-block ib = nibble ib%2 of byte ib/2 */
} st_block_iq3_s;
ST_BLOCK_CHECK(IQ3_S, st_block_iq3_s);

/* IQ3_S: 4-bit sub-block scale s. */
ST_HD float st_w_iq3_s(float d, int s) { return st_fmul(d, (float)(1 + 2 * s)); }

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_IQ3_S(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_iq3_s, d), 2);
    for (int ib = 0; ib < 8; ib++) {
        st_io_field(io, 1, bi * 8 + ib, b + offsetof(st_block_iq3_s, qs) + 8 * ib, 8);
        st_io_field(io, 2, bi * 8 + ib, b + offsetof(st_block_iq3_s, qh) + ib, 1);
        st_io_transposed32(io, 3, bi * 8 + ib, b + offsetof(st_block_iq3_s, signs) + 4 * ib);
    }
    st_io_field(io, 4, bi, b + offsetof(st_block_iq3_s, scales), 4);
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_IQ3_S_HOST)
#define ST_FMT_IQ3_S_HOST
static void iq3_s_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_iq3_s, d));
    const uint8_t *qs = ST_FIELD(b, st_block_iq3_s, qs), *qh = ST_FIELD(b, st_block_iq3_s, qh);
    const uint8_t *signs = ST_FIELD(b, st_block_iq3_s, signs), *scales = ST_FIELD(b, st_block_iq3_s, scales);
    for (int ib = 0; ib < 8; ib++) {
        const int s = (scales[ib / 2] >> (4 * (ib % 2))) & 15;
        const float db = d * (float)(1 + 2 * s);
        for (int g = 0; g < 8; g++) {
            const unsigned idx = qs[8 * ib + g] | (((unsigned)(qh[ib] >> g) & 1u) << 8);
            const uint32_t G = st_iq3s_grid[idx];
            const unsigned sb = signs[4 * ib + g / 2];
            float *o = y + 32 * ib + 4 * g;
            for (int j = 0; j < 4; j++) {
                const float v = db * (float)((G >> (8 * j)) & 0xffu);
                o[j] = (sb & (1u << ((g % 2) * 4 + j))) ? -v : v; /* ggml's v * -1.f: an exact negation */
            }
        }
    }
}

static void iq3_s_unit(const uint8_t *b, int ib, st_unit *o)
{
    const int s = (ST_FIELD(b, st_block_iq3_s, scales)[ib / 2] >> (4 * (ib % 2))) & 15;
    o->W = st_w_iq3_s(st_ldh(ST_FIELD(b, st_block_iq3_s, d)), s);
    const uint8_t *qs = ST_FIELD(b, st_block_iq3_s, qs) + 8 * ib;
    const uint8_t qh = ST_FIELD(b, st_block_iq3_s, qh)[ib];
    const uint8_t *sg = ST_FIELD(b, st_block_iq3_s, signs) + 4 * ib;
    for (int g = 0; g < 8; g++) {
        const uint32_t grid = st_iq3s_grid[qs[g] | (((qh >> g) & 1) << 8)];
        for (int j = 0; j < 4; j++) {
            const int e = 4 * g + j;
            const int v = (int)((grid >> (8 * j)) & 0xff);
            o->w[e] = (int16_t)(((sg[e / 8] >> (e % 8)) & 1) ? -v : v);
        }
    }
}

static void iq3_s_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32), nb = (size_t)(k / 256);
    s->n = 5;
    s->per_row[0] = 2 * nb;
    s->per_row[1] = 8 * nu;
    s->per_row[2] = nu;
    s->per_row[3] = 4 * nu;
    s->per_row[4] = 4 * nb;
}

static void iq3_s_scales(uint8_t *b, float d) { st_put_f16(b + offsetof(st_block_iq3_s, d), d); }

ST_FORMAT_OPS(IQ3_S, iq3_s)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_IQ3_S_DEVICE)
#define ST_FMT_IQ3_S_DEVICE
template <> struct st_unit_dec<ST_IQ3_S> : st_unit_plain {
    static constexpr int grid_bytes = 2048; /* iq3s_grid */
    ST_DEV const uint32_t *grid(const st_grids &g) { return g.iq3s; }
    ST_DEV void set_grid(st_grids &g, const uint32_t *s) { g.iq3s = s; }
    struct raw {
        uint2 qs;
        uint32_t sg;
        uint16_t d;
        uint8_t qh, sc;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        r.qs = *(const uint2 *)(m.p[1] + ru * 8);
        r.qh = m.p[2][ru];
        r.sg = *(const uint32_t *)(m.p[3] + ru * 4);
        r.sc = m.p[4][rb * 4 + (u & 7) / 2];
        r.d = ld_u16(m.p[0] + rb * 2);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_IQ3_S);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_iq3_s;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_IQ3_S, ST_BYTES_IQ3_S>(m, row, u, j);
        uint32_t q[2];
        ST_LDW(8, b, B, qs, 8, j, q);
        r.qs = st_uint2(q);
        r.qh = ST_FIELD(b, B, qh)[j];
        r.sg = st_transpose_bits_dev(ST_LDB(32, b, B, signs, 4, j));
        r.sc = ST_FIELD(b, B, scales)[j / 2];
        r.d = ST_LDB(16, b, B, d, 0, 0);
    }
    ST_DEV void dec(const raw &r, int u, const st_grids &g, st_dunit &o)
    {
        const uint32_t sc = ((uint32_t)r.sc >> (4 * (u & 1))) & 15u;
        o.W = st_w_iq3_s(st_h2f(r.d), (int)sc);
        /* qh's 8 bits as bytes of 0/1 (groups 0-3, 4-7), zipped with the qs
         * bytes into pairs of 9-bit grid indices */
        const uint32_t h[2] = {((r.qh & 15u) * 0x00204081u) & 0x01010101u,
                               (((uint32_t)r.qh >> 4) * 0x00204081u) & 0x01010101u};
#pragma unroll
        for (int k = 0; k < 8; k += 2) {
            const uint32_t ix = st_zip_bytes(k < 4 ? r.qs.x : r.qs.y, h[k / 4], (k / 2) & 1);
            o.w[k] = st_apply_signs_t(g.iq3s[ix & 0xffffu], r.sg, k);
            o.w[k + 1] = st_apply_signs_t(g.iq3s[ix >> 16], r.sg, k + 1);
        }
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};
#endif
