/* Q5_0 (ggml type 6): 32 values per 22-byte block, y = (q - 16) * d with
 * q = 0..31 (4 low bits in qs, the 5th in qh).
 * Canonical unit (the block): w = q - 16 (-16..15), W = d;
 *   acc = fma(d * da, isum, acc).
 * Device layout: 0: d u16[R][nu]   1: qs u8[R][nu][16] (as ggml: byte i =
 * low bits of value i | of value i+16 << 4)   2: qh u32[R][nu], transposed
 * (value 4k + t's 5th bit at bit k + 8t, as IQ3_S's signs), so word k's
 * four 5th bits come out with a shift and a mask. */
#ifndef ST_FMT_Q5_0_H
#define ST_FMT_Q5_0_H
#include "format_home.h"

typedef struct {
    uint16_t d;     /* f16 scale */
    uint8_t qh[4];  /* uint32: bit i = the 5th bit of value i */
    uint8_t qs[16]; /* low 4 bits: value j low nibble, value j+16 high nibble */
} st_block_q5_0;
ST_BLOCK_CHECK(Q5_0, st_block_q5_0);

ST_HD float st_w_q5_0(float d) { return d; }

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_Q5_0(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_q5_0, d), 2);
    st_io_field(io, 1, bi, b + offsetof(st_block_q5_0, qs), 16);
    st_io_transposed32(io, 2, bi, b + offsetof(st_block_q5_0, qh));
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_Q5_0_HOST)
#define ST_FMT_Q5_0_HOST
/* The 5-bit values of a Q5_0/Q5_1 block: 0..31. */
static inline void st_q5_values(const uint8_t *qs, uint32_t qh, int *v)
{
    for (int j = 0; j < 16; j++) {
        v[j] = (qs[j] & 15) | (int)(((qh >> j) & 1u) << 4);
        v[j + 16] = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
    }
}

static void q5_0_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_q5_0, d));
    int v[32];
    st_q5_values(ST_FIELD(b, st_block_q5_0, qs), st_ld32(ST_FIELD(b, st_block_q5_0, qh)), v);
    for (int j = 0; j < 32; j++) y[j] = (float)(v[j] - 16) * d;
}

static void q5_0_unit(const uint8_t *b, int j, st_unit *o)
{
    (void)j;
    int v[32];
    st_q5_values(ST_FIELD(b, st_block_q5_0, qs), st_ld32(ST_FIELD(b, st_block_q5_0, qh)), v);
    o->W = st_w_q5_0(st_ldh(ST_FIELD(b, st_block_q5_0, d)));
    for (int i = 0; i < 32; i++) o->w[i] = (int16_t)(v[i] - 16);
}

static void q5_0_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32);
    s->n = 3;
    s->per_row[0] = 2 * nu;
    s->per_row[1] = 16 * nu;
    s->per_row[2] = 4 * nu;
}

static void q5_0_scales(uint8_t *b, float d) { st_put_f16(b + offsetof(st_block_q5_0, d), d); }

ST_FORMAT_OPS(Q5_0, q5_0)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_Q5_0_DEVICE)
#define ST_FMT_Q5_0_DEVICE
/* The 32 five-bit values (0..31) of a Q5_0/Q5_1/Q5_K unit as 8 words: Q
 * holds the low nibbles (byte i = value i | value i+16 << 4), HT the 5th
 * bits transposed (value 4k + t at bit k + 8t). */
ST_DEV void st_q5_words(const uint4 &q, uint32_t ht, st_dunit &o)
{
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
        o.w[k] = (w[k] & 0x0f0f0f0fu) | (((ht >> k) & 0x01010101u) << 4);
        o.w[k + 4] = ((w[k] >> 4) & 0x0f0f0f0fu) | (((ht >> (k + 4)) & 0x01010101u) << 4);
    }
}

template <> struct st_unit_dec<ST_Q5_0> : st_unit_plain {
    struct raw {
        uint4 q;
        uint32_t qh;
        uint16_t d;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u;
        r.d = ld_u16(m.p[0] + ru * 2);
        r.q = *(const uint4 *)(m.p[1] + ru * 16);
        r.qh = *(const uint32_t *)(m.p[2] + ru * 4);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_Q5_0);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_q5_0;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_Q5_0, ST_BYTES_Q5_0>(m, row, u, j);
        (void)j;
        r.d = ST_LDB(16, b, B, d, 0, 0);
        static_assert(offsetof(B, qs) == offsetof(B, qh) + 4, "qh and qs are one 20-byte span");
        uint32_t w[5];
        ST_LDW(20, b, B, qh, 0, 0, w);
        r.qh = st_transpose_bits_dev(w[0]);
        r.q = st_uint4(w + 1);
    }
    ST_DEV void dec(const raw &r, int, const st_grids &, st_dunit &o)
    {
        o.W = st_w_q5_0(st_h2f(r.d));
        st_q5_words(r.q, r.qh, o);
#pragma unroll
        for (int k = 0; k < 8; k++) o.w[k] = st_sub_bytes(o.w[k], 0x10101010u);
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};
#endif
