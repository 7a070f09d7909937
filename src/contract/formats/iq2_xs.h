/* IQ2_XS (ggml type 17): 256 values per 74-byte block, 8 sub-blocks of 32,
 * each 4 groups of 8 magnitudes from iq2xs_grid; each group a uint16 (9-bit
 * grid index, 7-bit ksigns_iq2xs index) and a 4-bit scale per 16 values:
 * y = d * (0.5 + s) * 0.25 * (+-g).
 * Canonical unit (a sub-block), as IQ2_S's: the scales are integer
 * half-factors f0 = 2 s0 + 1, f1 = 2 s1 + 1, w = +-g, W = d * 0.125;
 *   isum = f0 * sum(w q)[0..15] + f1 * sum(w q)[16..31],
 *   acc = fma(W * da, isum, acc).
 * Device layout: 0: d u16[R][nb]   1: qs u16[R][nu][4]   2: scales u8[R][nu]. */
#ifndef ST_FMT_IQ2_XS_H
#define ST_FMT_IQ2_XS_H
#include "format_home.h"
#include "grids.h"

typedef struct {
    uint16_t d;        /* f16 scale */
    uint16_t qs[32];   /* per group: low 9 bits grid index, high 7 bits ksigns index */
    uint8_t scales[8]; /* two 4-bit scales per sub-block: low nibble groups 0-1 */
} st_block_iq2_xs;
ST_BLOCK_CHECK(IQ2_XS, st_block_iq2_xs);

ST_HD float st_w_iq2_xs(float d) { return st_fmul(d, 0.125f); }

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_IQ2_XS(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_iq2_xs, d), 2);
    for (int ib = 0; ib < 8; ib++) {
        st_io_field(io, 1, bi * 8 + ib, b + offsetof(st_block_iq2_xs, qs) + 8 * ib, 8);
        st_io_field(io, 2, bi * 8 + ib, b + offsetof(st_block_iq2_xs, scales) + ib, 1);
    }
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_IQ2_XS_HOST)
#define ST_FMT_IQ2_XS_HOST
static void iq2_xs_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_iq2_xs, d));
    const uint8_t *qs = ST_FIELD(b, st_block_iq2_xs, qs), *scales = ST_FIELD(b, st_block_iq2_xs, scales);
    for (int ib = 0; ib < 8; ib++) {
        float db[2];
        db[0] = d * (0.5f + (float)(scales[ib] & 15)) * 0.25f;
        db[1] = d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f;
        for (int l = 0; l < 4; l++) {
            const unsigned v = st_ld16(qs + 2 * (4 * ib + l));
            const uint64_t G = st_iq2xs_grid[v & 511];
            const unsigned signs = st_ksigns_iq2xs[v >> 9];
            for (int j = 0; j < 8; j++) {
                const float x = db[l / 2] * (float)((G >> (8 * j)) & 0xffu);
                y[32 * ib + 8 * l + j] = (signs & st_kmask_iq2xs[j]) ? -x : x; /* ggml's * -1.f */
            }
        }
    }
}

static void iq2_xs_unit(const uint8_t *b, int ib, st_unit *o)
{
    const uint8_t *qs = ST_FIELD(b, st_block_iq2_xs, qs);
    const uint8_t sc = ST_FIELD(b, st_block_iq2_xs, scales)[ib];
    o->W = st_w_iq2_xs(st_ldh(ST_FIELD(b, st_block_iq2_xs, d)));
    for (int l = 0; l < 4; l++) {
        const int f = 2 * ((l < 2) ? (sc & 15) : (sc >> 4)) + 1;
        const unsigned v = st_ld16(qs + 2 * (4 * ib + l));
        const uint64_t G = st_iq2xs_grid[v & 511];
        const unsigned signs = st_ksigns_iq2xs[v >> 9];
        for (int j = 0; j < 8; j++) {
            const int x = (int)((G >> (8 * j)) & 0xff) * f;
            o->w[8 * l + j] = (int16_t)(((signs >> j) & 1) ? -x : x);
        }
    }
}

static void iq2_xs_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32), nb = (size_t)(k / 256);
    s->n = 3;
    s->per_row[0] = 2 * nb;
    s->per_row[1] = 8 * nu;
    s->per_row[2] = nu;
}

static void iq2_xs_scales(uint8_t *b, float d) { st_put_f16(b + offsetof(st_block_iq2_xs, d), d); }

ST_FORMAT_OPS(IQ2_XS, iq2_xs)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_IQ2_XS_DEVICE)
#define ST_FMT_IQ2_XS_DEVICE
#include "formats/iq3_xxs.h" /* st_ksigns8 */
template <> struct st_unit_dec<ST_IQ2_XS> : st_unit_plain {
    static constexpr bool halves = true;
    static constexpr int grid_bytes = 4096; /* iq2xs_grid */
    ST_DEV const uint32_t *grid(const st_grids &g) { return (const uint32_t *)g.iq2xs; }
    ST_DEV void set_grid(st_grids &g, const uint32_t *s) { g.iq2xs = (const uint2 *)s; }
    struct raw {
        uint2 q; /* the 4 groups' uint16 */
        uint16_t d;
        uint8_t sc;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        r.q = *(const uint2 *)(m.p[1] + ru * 8);
        r.sc = m.p[2][ru];
        r.d = ld_u16(m.p[0] + rb * 2);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_IQ2_XS);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_iq2_xs;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_IQ2_XS, ST_BYTES_IQ2_XS>(m, row, u, j);
        uint32_t q[2];
        ST_LDW(8, b, B, qs, 8, j, q);
        r.q = st_uint2(q);
        r.sc = ST_FIELD(b, B, scales)[j];
        r.d = ST_LDB(16, b, B, d, 0, 0);
    }
    ST_DEV void dec(const raw &r, int, const st_grids &g, st_dunit &o)
    {
        o.W = st_w_iq2_xs(st_h2f(r.d));
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint32_t v = ((l < 2 ? r.q.x : r.q.y) >> (16 * (l & 1))) & 0xffffu;
            const uint2 gv = g.iq2xs[v & 511u];
            const uint32_t s8 = st_ksigns8(v >> 9);
            o.w[2 * l] = st_apply_signs4(gv.x, s8 & 15u);
            o.w[2 * l + 1] = st_apply_signs4(gv.y, s8 >> 4);
        }
        o.f0 = 2 * (int)(r.sc & 15u) + 1;
        o.f1 = 2 * (int)(r.sc >> 4) + 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};
#endif
