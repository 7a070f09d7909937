/* IQ2_XXS (ggml type 16): 256 values per 66-byte block, 8 sub-blocks of 32,
 * each 4 groups of 8 magnitudes from iq2xxs_grid (8-bit index); per
 * sub-block a uint32 with 4 x 7 sign bits (ksigns_iq2xs) and a 4-bit scale
 * ls: y = d * (0.5 + ls) * 0.25 * (+-g).
 * Canonical unit (a sub-block): w = +-g (8, 25 or 43), W = d * (2 ls + 1)
 * * 0.125 (both products exact: an f16 times a 5-bit integer, then a power
 * of two);
 *   acc = fma(W * da, isum, acc).
 * Device layout: 0: d u16[R][nb]   1: qs u8[R][nu][8] (as ggml: 4 grid
 * indices, then the scale-and-signs word). */
#ifndef ST_FMT_IQ2_XXS_H
#define ST_FMT_IQ2_XXS_H
#include "format_home.h"
#include "grids.h"

typedef struct {
    uint16_t d;     /* f16 scale */
    uint8_t qs[64]; /* per sub-block: 4 grid indices, then uint32 (4 x 7 sign bits, 4-bit scale on top) */
} st_block_iq2_xxs;
ST_BLOCK_CHECK(IQ2_XXS, st_block_iq2_xxs);

ST_HD float st_w_iq2_xxs(float d, int ls) { return st_fmul(st_fmul(d, (float)(2 * ls + 1)), 0.125f); }

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_IQ2_XXS(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_iq2_xxs, d), 2);
    for (int ib = 0; ib < 8; ib++) st_io_field(io, 1, bi * 8 + ib, b + offsetof(st_block_iq2_xxs, qs) + 8 * ib, 8);
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_IQ2_XXS_HOST)
#define ST_FMT_IQ2_XXS_HOST
static void iq2_xxs_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_iq2_xxs, d));
    const uint8_t *qs = ST_FIELD(b, st_block_iq2_xxs, qs);
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t a = st_ld32(qs + 8 * ib + 4);
        const float db = d * (0.5f + (float)(a >> 28)) * 0.25f;
        for (int l = 0; l < 4; l++) {
            const uint64_t G = st_iq2xxs_grid[qs[8 * ib + l]];
            const unsigned signs = st_ksigns_iq2xs[(a >> (7 * l)) & 127];
            for (int j = 0; j < 8; j++) {
                const float v = db * (float)((G >> (8 * j)) & 0xffu);
                y[32 * ib + 8 * l + j] = (signs & st_kmask_iq2xs[j]) ? -v : v; /* ggml's * -1.f */
            }
        }
    }
}

static void iq2_xxs_unit(const uint8_t *b, int ib, st_unit *o)
{
    const uint8_t *qs = ST_FIELD(b, st_block_iq2_xxs, qs) + 8 * ib;
    const uint32_t a = st_ld32(qs + 4);
    o->W = st_w_iq2_xxs(st_ldh(ST_FIELD(b, st_block_iq2_xxs, d)), (int)(a >> 28));
    for (int l = 0; l < 4; l++) {
        const uint64_t G = st_iq2xxs_grid[qs[l]];
        const unsigned signs = st_ksigns_iq2xs[(a >> (7 * l)) & 127];
        for (int j = 0; j < 8; j++) {
            const int v = (int)((G >> (8 * j)) & 0xff);
            o->w[8 * l + j] = (int16_t)(((signs >> j) & 1) ? -v : v);
        }
    }
}

static void iq2_xxs_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32), nb = (size_t)(k / 256);
    s->n = 2;
    s->per_row[0] = 2 * nb;
    s->per_row[1] = 8 * nu;
}

static void iq2_xxs_scales(uint8_t *b, float d) { st_put_f16(b + offsetof(st_block_iq2_xxs, d), d); }

ST_FORMAT_OPS(IQ2_XXS, iq2_xxs)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_IQ2_XXS_DEVICE)
#define ST_FMT_IQ2_XXS_DEVICE
#include "formats/iq3_xxs.h" /* st_ksigns8 */
template <> struct st_unit_dec<ST_IQ2_XXS> : st_unit_plain {
    static constexpr int grid_bytes = 2048; /* iq2xxs_grid */
    ST_DEV const uint32_t *grid(const st_grids &g) { return (const uint32_t *)g.iq2xxs; }
    ST_DEV void set_grid(st_grids &g, const uint32_t *s) { g.iq2xxs = (const uint2 *)s; }
    struct raw {
        uint2 q; /* x: the 4 grid indices, y: scale and signs */
        uint16_t d;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        r.q = *(const uint2 *)(m.p[1] + ru * 8);
        r.d = ld_u16(m.p[0] + rb * 2);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_IQ2_XXS);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_iq2_xxs;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_IQ2_XXS, ST_BYTES_IQ2_XXS>(m, row, u, j);
        uint32_t q[2];
        ST_LDW(8, b, B, qs, 8, j, q);
        r.q = st_uint2(q);
        r.d = ST_LDB(16, b, B, d, 0, 0);
    }
    ST_DEV void dec(const raw &r, int, const st_grids &g, st_dunit &o)
    {
        o.W = st_w_iq2_xxs(st_h2f(r.d), (int)(r.q.y >> 28));
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint2 gv = g.iq2xxs[(r.q.x >> (8 * l)) & 0xffu];
            const uint32_t s8 = st_ksigns8((r.q.y >> (7 * l)) & 127u);
            o.w[2 * l] = st_apply_signs4(gv.x, s8 & 15u);
            o.w[2 * l + 1] = st_apply_signs4(gv.y, s8 >> 4);
        }
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};
#endif
