/* IQ3_XXS (ggml type 18): 256 values per 98-byte block, 8 sub-blocks of 32,
 * each 4 groups of 8 = two iq3xxs_grid entries of 4 magnitudes; per
 * sub-block a uint32 with 4 x 7 sign bits (ksigns_iq2xs) and a 4-bit scale
 * ls: y = d * (0.5 + ls) * 0.5 * (+-g).
 * Canonical unit (a sub-block): w = +-g, W = d * (2 ls + 1) * 0.25;
 *   acc = fma(W * da, isum, acc).
 * Device layout: 0: d u16[R][nb]   1: qs u8[R][nu][8]   2: scales_and_signs
 * u32[R][nu]. */
#ifndef ST_FMT_IQ3_XXS_H
#define ST_FMT_IQ3_XXS_H
#include "format_home.h"
#include "grids.h"

typedef struct {
    uint16_t d;                  /* f16 scale */
    uint8_t qs[64];              /* 8 grid indices per sub-block */
    uint8_t scales_and_signs[32]; /* one uint32 per sub-block: 4 x 7 sign bits, 4-bit scale on top */
} st_block_iq3_xxs;
ST_BLOCK_CHECK(IQ3_XXS, st_block_iq3_xxs);

/* IQ3_XXS: 4-bit scale ls (top bits of the scales-and-signs word). */
ST_HD float st_w_iq3_xxs(float d, int ls)
{
    return st_fmul(st_fmul(d, (float)(2 * ls + 1)), 0.25f);
}

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_IQ3_XXS(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_iq3_xxs, d), 2);
    for (int ib = 0; ib < 8; ib++) {
        st_io_field(io, 1, bi * 8 + ib, b + offsetof(st_block_iq3_xxs, qs) + 8 * ib, 8);
        st_io_field(io, 2, bi * 8 + ib, b + offsetof(st_block_iq3_xxs, scales_and_signs) + 4 * ib, 4);
    }
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_IQ3_XXS_HOST)
#define ST_FMT_IQ3_XXS_HOST
/* Not d * (ls + 0.5f) / 2: ggml's own order, for ggml's bits. */
static void iq3_xxs_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_iq3_xxs, d));
    const uint8_t *qs = ST_FIELD(b, st_block_iq3_xxs, qs), *ss = ST_FIELD(b, st_block_iq3_xxs, scales_and_signs);
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t a = st_ld32(ss + 4 * ib);
        const float db = d * (0.5f + (float)(a >> 28)) * 0.5f;
        for (int l = 0; l < 4; l++) {
            const unsigned signs = st_ksigns_iq2xs[(a >> (7 * l)) & 127];
            const uint32_t g1 = st_iq3xxs_grid[qs[8 * ib + 2 * l]];
            const uint32_t g2 = st_iq3xxs_grid[qs[8 * ib + 2 * l + 1]];
            float *o = y + 32 * ib + 8 * l;
            for (int j = 0; j < 4; j++) {
                const float v1 = db * (float)((g1 >> (8 * j)) & 0xffu), v2 = db * (float)((g2 >> (8 * j)) & 0xffu);
                o[j] = (signs & (1u << j)) ? -v1 : v1;
                o[j + 4] = (signs & (1u << (j + 4))) ? -v2 : v2;
            }
        }
    }
}

static void iq3_xxs_unit(const uint8_t *b, int ib, st_unit *o)
{
    const uint32_t a = st_ld32(ST_FIELD(b, st_block_iq3_xxs, scales_and_signs) + 4 * ib);
    o->W = st_w_iq3_xxs(st_ldh(ST_FIELD(b, st_block_iq3_xxs, d)), (int)(a >> 28));
    const uint8_t *qs = ST_FIELD(b, st_block_iq3_xxs, qs) + 8 * ib;
    for (int l = 0; l < 4; l++) {
        const uint8_t signs = st_ksigns_iq2xs[(a >> (7 * l)) & 127];
        const uint32_t g1 = st_iq3xxs_grid[qs[2 * l]], g2 = st_iq3xxs_grid[qs[2 * l + 1]];
        for (int j = 0; j < 8; j++) {
            const uint32_t g = j < 4 ? g1 : g2;
            const int v = (int)((g >> (8 * (j & 3))) & 0xff);
            o->w[8 * l + j] = (int16_t)(((signs >> j) & 1) ? -v : v);
        }
    }
}

static void iq3_xxs_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32), nb = (size_t)(k / 256);
    s->n = 3;
    s->per_row[0] = 2 * nb;
    s->per_row[1] = 8 * nu;
    s->per_row[2] = 4 * nu;
}

static void iq3_xxs_scales(uint8_t *b, float d) { st_put_f16(b + offsetof(st_block_iq3_xxs, d), d); }

ST_FORMAT_OPS(IQ3_XXS, iq3_xxs)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_IQ3_XXS_DEVICE)
#define ST_FMT_IQ3_XXS_DEVICE
/* The 8 sign bits of a group from its 7 stored ones: bit 7 makes the count
 * of set bits even (ksigns_iq2xs without the table). */
ST_DEV uint32_t st_ksigns8(uint32_t s7) { return s7 | ((uint32_t)(st_popc(s7) & 1) << 7); }

template <> struct st_unit_dec<ST_IQ3_XXS> : st_unit_plain {
    static constexpr int grid_bytes = 1024; /* iq3xxs_grid */
    ST_DEV const uint32_t *grid(const st_grids &g) { return g.iq3xxs; }
    ST_DEV void set_grid(st_grids &g, const uint32_t *s) { g.iq3xxs = s; }
    struct raw {
        uint2 qs;
        uint32_t a;
        uint16_t d;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        r.qs = *(const uint2 *)(m.p[1] + ru * 8);
        r.a = *(const uint32_t *)(m.p[2] + ru * 4);
        r.d = ld_u16(m.p[0] + rb * 2);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_IQ3_XXS);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_iq3_xxs;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_IQ3_XXS, ST_BYTES_IQ3_XXS>(m, row, u, j);
        uint32_t q[2];
        ST_LDW(8, b, B, qs, 8, j, q);
        r.qs = st_uint2(q);
        r.a = ST_LDB(32, b, B, scales_and_signs, 4, j);
        r.d = ST_LDB(16, b, B, d, 0, 0);
    }
    ST_DEV void dec(const raw &r, int, const st_grids &g, st_dunit &o)
    {
        o.W = st_w_iq3_xxs(st_h2f(r.d), (int)(r.a >> 28));
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint32_t s8 = st_ksigns8((r.a >> (7 * l)) & 127u);
            const uint32_t q = l < 2 ? r.qs.x : r.qs.y;
            const uint32_t i1 = (q >> (16 * (l & 1))) & 0xffu, i2 = (q >> (16 * (l & 1) + 8)) & 0xffu;
            o.w[2 * l] = st_apply_signs4(g.iq3xxs[i1], s8 & 15u);
            o.w[2 * l + 1] = st_apply_signs4(g.iq3xxs[i2], s8 >> 4);
        }
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};
#endif
