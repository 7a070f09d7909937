/* MXFP4 (ggml type 39): 32 values per 17-byte block, an E8M0 shared scale e
 * (a power of two) and 32 E2M1 values as 4-bit indices into kvalues_mxfp4
 * (the E2M1 values doubled, so ggml halves the scale):
 * y = kvalues_mxfp4[q] * 2^(e - 128).
 * Canonical unit (the block): w = kvalues_mxfp4[q] (-12..12),
 * W = 2^(e - 128) exactly, built from its bits as ggml's
 * ggml_e8m0_to_fp32_half (subnormal for e < 2);
 *   acc = fma(W * da, isum, acc).
 * Device layout: 0: e u8[R][nu]   1: qs u8[R][nu][16] (as ggml: byte i =
 * value i | value i+16 << 4). */
#ifndef ST_FMT_MXFP4_H
#define ST_FMT_MXFP4_H
#include "format_home.h"
#include "grids.h"

typedef struct {
    uint8_t e;      /* E8M0 scale: 2^(e - 127) */
    uint8_t qs[16]; /* 4-bit indices into kvalues_mxfp4 */
} st_block_mxfp4;
ST_BLOCK_CHECK(MXFP4, st_block_mxfp4);

/* Half the E8M0 value, 2^(e - 128), exactly (no float operation). */
ST_HD float st_w_mxfp4(int e)
{
    return st_u2f(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_MXFP4(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_mxfp4, e), 1);
    st_io_field(io, 1, bi, b + offsetof(st_block_mxfp4, qs), 16);
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_MXFP4_HOST)
#define ST_FMT_MXFP4_HOST
static void mxfp4_deq(const uint8_t *b, float *y)
{
    const float d = st_w_mxfp4(*ST_FIELD(b, st_block_mxfp4, e));
    const uint8_t *qs = ST_FIELD(b, st_block_mxfp4, qs);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)st_kvalues_mxfp4[qs[j] & 15] * d;
        y[j + 16] = (float)st_kvalues_mxfp4[qs[j] >> 4] * d;
    }
}

static void mxfp4_unit(const uint8_t *b, int j, st_unit *o)
{
    (void)j;
    const uint8_t *qs = ST_FIELD(b, st_block_mxfp4, qs);
    o->W = st_w_mxfp4(*ST_FIELD(b, st_block_mxfp4, e));
    for (int i = 0; i < 16; i++) {
        o->w[i] = st_kvalues_mxfp4[qs[i] & 15];
        o->w[i + 16] = st_kvalues_mxfp4[qs[i] >> 4];
    }
}

static void mxfp4_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32);
    s->n = 2;
    s->per_row[0] = nu;
    s->per_row[1] = 16 * nu;
}

/* The power of two at or below |d|: e = 128 + floor(log2 |d|). */
static void mxfp4_scales(uint8_t *b, float d)
{
    const int ex = (int)((st_f2u(d) >> 23) & 0xffu) - 127;
    b[offsetof(st_block_mxfp4, e)] = (uint8_t)(ex < -128 ? 0 : ex > 127 ? 255 : 128 + ex);
}

ST_FORMAT_OPS(MXFP4, mxfp4)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_MXFP4_DEVICE)
#define ST_FMT_MXFP4_DEVICE
template <> struct st_unit_dec<ST_MXFP4> : st_unit_plain {
    struct raw {
        uint4 q;
        uint8_t e;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u;
        r.e = m.p[0][ru];
        r.q = *(const uint4 *)(m.p[1] + ru * 16);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_MXFP4);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_mxfp4;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_MXFP4, ST_BYTES_MXFP4>(m, row, u, j);
        (void)j;
        static_assert(blk_align == 1 && offsetof(B, qs) == 1 && offsetof(B, qs) + 16 == sizeof(B),
                      "qs: 16 bytes at any alignment, one byte of the block before, none after");
        r.e = *ST_FIELD(b, B, e);
        r.q = st_ld128_a1_head1(ST_FIELD(b, B, qs));
    }
    ST_DEV void dec(const raw &r, int, const st_grids &, st_dunit &o)
    {
        /* kvalues_mxfp4 as the four table registers of st_lut16 */
        const uint32_t tab[4] = {0x03020100u, 0x0c080604u, 0xfdfeff00u, 0xf4f8fafcu};
        o.W = st_w_mxfp4(r.e);
        st_lut_words(r.q, tab, o);
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};
#endif
