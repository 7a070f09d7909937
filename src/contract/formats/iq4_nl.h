/* IQ4_NL (ggml type 20): 32 values per 18-byte block, y = d * kvalues_iq4nl[q].
 * Canonical unit (the block): w = kvalues_iq4nl[q] (int8), W = d;
 *   acc = fma(d * da, isum, acc).
 * Device layout: 0: d u16[R][nu]   1: qs u8[R][nu][16] (as ggml: byte i =
 * value i | value i+16 << 4). */
#ifndef ST_FMT_IQ4_NL_H
#define ST_FMT_IQ4_NL_H
#include "format_home.h"
#include "grids.h"

typedef struct {
    uint16_t d;     /* f16 scale */
    uint8_t qs[16]; /* 4-bit indices into kvalues_iq4nl */
} st_block_iq4_nl;
ST_BLOCK_CHECK(IQ4_NL, st_block_iq4_nl);

ST_HD float st_w_iq4_nl(float d) { return d; }

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_IQ4_NL(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_iq4_nl, d), 2);
    st_io_field(io, 1, bi, b + offsetof(st_block_iq4_nl, qs), 16);
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_IQ4_NL_HOST)
#define ST_FMT_IQ4_NL_HOST
static void iq4_nl_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_iq4_nl, d));
    const uint8_t *qs = ST_FIELD(b, st_block_iq4_nl, qs);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)st_kvalues_iq4nl[qs[j] & 15];
        y[j + 16] = d * (float)st_kvalues_iq4nl[qs[j] >> 4];
    }
}

static void iq4_nl_unit(const uint8_t *b, int j, st_unit *o)
{
    (void)j;
    const uint8_t *qs = ST_FIELD(b, st_block_iq4_nl, qs);
    o->W = st_w_iq4_nl(st_ldh(ST_FIELD(b, st_block_iq4_nl, d)));
    for (int i = 0; i < 16; i++) {
        o->w[i] = st_kvalues_iq4nl[qs[i] & 15];
        o->w[i + 16] = st_kvalues_iq4nl[qs[i] >> 4];
    }
}

static void iq4_nl_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32);
    s->n = 2;
    s->per_row[0] = 2 * nu;
    s->per_row[1] = 16 * nu;
}

static void iq4_nl_scales(uint8_t *b, float d) { st_put_f16(b + offsetof(st_block_iq4_nl, d), d); }

ST_FORMAT_OPS(IQ4_NL, iq4_nl)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_IQ4_NL_DEVICE)
#define ST_FMT_IQ4_NL_DEVICE
/* kvalues_iq4nl as the four table registers of st_lut16 */
ST_DEV void st_nl_words(const uint4 q, st_dunit &o)
{
    const uint32_t tab[4] = {0xbfad9881u, 0xf6eaddcfu, 0x26190d01u, 0x71594535u};
    st_lut_words(q, tab, o);
}

template <> struct st_unit_dec<ST_IQ4_NL> : st_unit_plain {
    struct raw {
        uint4 q;
        uint16_t d;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u;
        r.d = ld_u16(m.p[0] + ru * 2);
        r.q = *(const uint4 *)(m.p[1] + ru * 16);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_IQ4_NL);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_iq4_nl;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_IQ4_NL, ST_BYTES_IQ4_NL>(m, row, u, j);
        (void)j;
        r.d = ST_LDB(16, b, B, d, 0, 0);
        uint32_t q[4];
        ST_LDW(16, b, B, qs, 0, 0, q);
        r.q = st_uint4(q);
    }
    ST_DEV void dec(const raw &r, int, const st_grids &, st_dunit &o)
    {
        o.W = st_w_iq4_nl(st_h2f(r.d));
        st_nl_words(r.q, o);
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};
#endif
