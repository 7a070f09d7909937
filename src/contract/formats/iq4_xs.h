/* IQ4_XS (ggml type 23): 256 values per 136-byte block, 8 sub-blocks of 32
 * with 6-bit scales ls: y = d * (ls - 32) * kvalues_iq4nl[q].
 * Canonical unit (a sub-block): w = kvalues_iq4nl[q], W = d * (ls - 32);
 *   acc = fma(W * da, isum, acc).
 * Device layout: 0: the block's first 8 bytes (d, scales_h, scales_l)
 * u8[R][nb][8]   1: qs u8[R][nu][16]: a unit's factors come from one 8-byte
 * load (the 8 lanes of a block's units read the same bytes). Measured on the
 * H200 against planes d / scales_h / scales_l apart: docs/PERFORMANCE.md.
 * The unit decoder shares IQ4_NL's table lookup. */
#ifndef ST_FMT_IQ4_XS_H
#define ST_FMT_IQ4_XS_H
#include "format_home.h"
#include "formats/iq4_nl.h"

typedef struct {
    uint16_t d;         /* f16 scale */
    uint16_t scales_h;  /* high 2 bits of the 8 sub-block scales (bits 2ib..2ib+1) */
    uint8_t scales_l[4]; /* low 4 bits: sub-block ib is nibble ib%2 of byte ib/2 */
    uint8_t qs[128];    /* 16 bytes per sub-block, 4-bit indices into kvalues_iq4nl */
} st_block_iq4_xs;
ST_BLOCK_CHECK(IQ4_XS, st_block_iq4_xs);

/* IQ4_XS: sub-block scale ls in 0..63. */
ST_HD float st_w_iq4_xs(float d, int ls) { return st_fmul(d, (float)(ls - 32)); }

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_IQ4_XS(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_iq4_xs, d), 8); /* d, scales_h, scales_l */
    for (int ib = 0; ib < 8; ib++) st_io_field(io, 1, bi * 8 + ib, b + offsetof(st_block_iq4_xs, qs) + 16 * ib, 16);
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_IQ4_XS_HOST)
#define ST_FMT_IQ4_XS_HOST
static int iq4_xs_ls(const uint8_t *b, int ib)
{
    const unsigned sh = st_ld16(ST_FIELD(b, st_block_iq4_xs, scales_h));
    const uint8_t *sl = ST_FIELD(b, st_block_iq4_xs, scales_l);
    return ((sl[ib / 2] >> (4 * (ib % 2))) & 15) | (int)(((sh >> (2 * ib)) & 3) << 4);
}

static void iq4_xs_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_iq4_xs, d));
    const uint8_t *qs = ST_FIELD(b, st_block_iq4_xs, qs);
    for (int ib = 0; ib < 8; ib++) {
        const float dl = d * (float)(iq4_xs_ls(b, ib) - 32);
        const uint8_t *q = qs + 16 * ib;
        float *o = y + 32 * ib;
        for (int j = 0; j < 16; j++) {
            o[j] = dl * (float)st_kvalues_iq4nl[q[j] & 15];
            o[j + 16] = dl * (float)st_kvalues_iq4nl[q[j] >> 4];
        }
    }
}

static void iq4_xs_unit(const uint8_t *b, int ib, st_unit *o)
{
    o->W = st_w_iq4_xs(st_ldh(ST_FIELD(b, st_block_iq4_xs, d)), iq4_xs_ls(b, ib));
    const uint8_t *q = ST_FIELD(b, st_block_iq4_xs, qs) + 16 * ib;
    for (int j = 0; j < 16; j++) {
        o->w[j] = st_kvalues_iq4nl[q[j] & 15];
        o->w[j + 16] = st_kvalues_iq4nl[q[j] >> 4];
    }
}

static void iq4_xs_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32), nb = (size_t)(k / 256);
    s->n = 2;
    s->per_row[0] = 8 * nb;
    s->per_row[1] = 16 * nu;
}

static void iq4_xs_scales(uint8_t *b, float d) { st_put_f16(b + offsetof(st_block_iq4_xs, d), d); }

ST_FORMAT_OPS(IQ4_XS, iq4_xs)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_IQ4_XS_DEVICE)
#define ST_FMT_IQ4_XS_DEVICE
#include "formats/iq4_nl.h" /* st_nl_words */
/* Sub-block IB's 6-bit scale from a block's first 8 bytes H (little-endian
 * words: d | scales_h << 16, scales_l[0..3]). */
ST_DEV int st_iq4_xs_ls(const uint2 h, int ib)
{
    return (int)(((h.y >> (4 * ib)) & 15u) | (((h.x >> (16 + 2 * ib)) & 3u) << 4));
}

template <> struct st_unit_dec<ST_IQ4_XS> : st_unit_plain {
    struct raw {
        uint4 q;
        uint2 h; /* d | scales_h << 16, scales_l */
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        r.h = *(const uint2 *)(m.p[0] + rb * 8);
        r.q = *(const uint4 *)(m.p[1] + ru * 16);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_IQ4_XS);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_iq4_xs;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_IQ4_XS, ST_BYTES_IQ4_XS>(m, row, u, j);
        static_assert(offsetof(B, scales_h) == offsetof(B, d) + 2 && offsetof(B, scales_l) == offsetof(B, d) + 4,
                      "d, scales_h, scales_l are one 8-byte load");
        r.h = ST_LDB(64, b, B, d, 0, 0);
        r.q = ST_LDB(128, b, B, qs, 16, j);
    }
    ST_DEV void dec(const raw &r, int u, const st_grids &, st_dunit &o)
    {
        o.W = st_w_iq4_xs(st_h2f((uint16_t)r.h.x), st_iq4_xs_ls(r.h, u & 7));
        st_nl_words(r.q, o);
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};
#endif
