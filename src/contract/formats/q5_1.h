/* Q5_1 (ggml type 7): 32 values per 24-byte block, y = q * d + m with
 * q = 0..31 (4 low bits in qs, the 5th in qh).
 * Canonical unit (the block): w = q, W = d, the additive min as in Q4_1:
 * M = -m, g0 = g1 = 1;
 *   acc = fma(d * da, isum, acc);  acc = fma(-(M * da), sum(q8), acc).
 * Device layout: 0: dm u32[R][nu] (d | m << 16)   1: qs u8[R][nu][16]
 * 2: qh u32[R][nu], transposed as Q5_0's. */
#ifndef ST_FMT_Q5_1_H
#define ST_FMT_Q5_1_H
#include "format_home.h"
#include "formats/q4_1.h" /* st_m_add */
#include "formats/q5_0.h" /* the 5-bit values */

typedef struct {
    uint16_t d;     /* f16 scale */
    uint16_t m;     /* f16 min, added to every value */
    uint8_t qh[4];  /* uint32: bit i = the 5th bit of value i */
    uint8_t qs[16]; /* low 4 bits, as Q5_0 */
} st_block_q5_1;
ST_BLOCK_CHECK(Q5_1, st_block_q5_1);

ST_HD float st_w_q5_1(float d) { return d; }

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_Q5_1(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_q5_1, d), 4); /* d and m, adjacent */
    st_io_field(io, 1, bi, b + offsetof(st_block_q5_1, qs), 16);
    st_io_transposed32(io, 2, bi, b + offsetof(st_block_q5_1, qh));
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_Q5_1_HOST)
#define ST_FMT_Q5_1_HOST
#include "formats/q5_0.h"
static void q5_1_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_q5_1, d)), m = st_ldh(ST_FIELD(b, st_block_q5_1, m));
    int v[32];
    st_q5_values(ST_FIELD(b, st_block_q5_1, qs), st_ld32(ST_FIELD(b, st_block_q5_1, qh)), v);
    for (int j = 0; j < 32; j++) y[j] = (float)v[j] * d + m;
}

static void q5_1_unit(const uint8_t *b, int j, st_unit *o)
{
    (void)j;
    int v[32];
    st_q5_values(ST_FIELD(b, st_block_q5_1, qs), st_ld32(ST_FIELD(b, st_block_q5_1, qh)), v);
    o->W = st_w_q5_1(st_ldh(ST_FIELD(b, st_block_q5_1, d)));
    o->M = st_m_add(st_ldh(ST_FIELD(b, st_block_q5_1, m)));
    o->mf[0] = o->mf[1] = 1;
    o->has_min = true;
    for (int i = 0; i < 32; i++) o->w[i] = (int16_t)v[i];
}

static void q5_1_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32);
    s->n = 3;
    s->per_row[0] = 4 * nu;
    s->per_row[1] = 16 * nu;
    s->per_row[2] = 4 * nu;
}

static void q5_1_scales(uint8_t *b, float d)
{
    st_put_f16(b + offsetof(st_block_q5_1, d), d);
    st_put_f16(b + offsetof(st_block_q5_1, m), d * -8.0f);
}

ST_FORMAT_OPS(Q5_1, q5_1)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_Q5_1_DEVICE)
#define ST_FMT_Q5_1_DEVICE
#include "formats/q5_0.h" /* st_q5_words */
template <> struct st_unit_dec<ST_Q5_1> : st_unit_plain {
    static constexpr bool min = true;
    struct raw {
        uint4 q;
        uint32_t dm, qh;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u;
        r.dm = *(const uint32_t *)(m.p[0] + ru * 4);
        r.q = *(const uint4 *)(m.p[1] + ru * 16);
        r.qh = *(const uint32_t *)(m.p[2] + ru * 4);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_Q5_1);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_q5_1;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_Q5_1, ST_BYTES_Q5_1>(m, row, u, j);
        (void)j;
        static_assert(offsetof(B, m) == offsetof(B, d) + 2 && offsetof(B, qh) == offsetof(B, d) + 4,
                      "d, m, qh are one 8-byte load");
        const uint2 h = ST_LDB(64, b, B, d, 0, 0);
        r.dm = h.x;
        r.qh = st_transpose_bits_dev(h.y);
        r.q = ST_LDB(128, b, B, qs, 0, 0);
    }
    ST_DEV void dec(const raw &r, int, const st_grids &, st_dunit &o)
    {
        o.W = st_w_q5_1(st_h2f((uint16_t)(r.dm & 0xffffu)));
        o.M = st_m_add(st_h2f((uint16_t)(r.dm >> 16)));
        st_q5_words(r.q, r.qh, o);
        o.f0 = o.f1 = 1;
    }
    ST_UNIT_GET
};
#endif
