/* Q5_K (ggml type 13): 256 values per 176-byte block, 8 sub-blocks of 32
 * with 6-bit scales and mins packed as Q4_K's:
 * y = (d * sc) * q - (dmin * m), q = 4 low bits + 16 * high bit, 0..31.
 * Canonical unit (a sub-block), as Q4_K: w = q, W = d * sc, M = dmin * m,
 * min factors g0 = g1 = 1;
 *   acc = fma(W * da, isum, acc);  acc = fma(-(M * da), sum(q8), acc).
 * Device layout: Q4_K's four planes (0: d u16[R][nb]  1: qs u8[R][nu][16]
 * regrouped  2: dmin u16[R][nb]  3: scales u8[R][nb][12]) and 4: qh
 * u32[R][nu], the unit's 32 high bits transposed (value 4k + t at bit
 * k + 8t, as Q5_0's). */
#ifndef ST_FMT_Q5_K_H
#define ST_FMT_Q5_K_H
#include "format_home.h"
#include "formats/q4_k.h" /* the scales, the factors, the nibble regrouping */

typedef struct {
    uint16_t d;         /* f16 scale of the 6-bit sub-block scales */
    uint16_t dmin;      /* f16 scale of the 6-bit sub-block mins */
    uint8_t scales[12]; /* packed as Q4_K's */
    uint8_t qh[32];     /* bit j of byte l: high bit of value l of sub-block j */
    uint8_t qs[128];    /* low 4 bits, grouped as Q4_K's */
} st_block_q5_k;
ST_BLOCK_CHECK(Q5_K, st_block_q5_k);

ST_HD float st_w_q5_k(float d, int sc) { return st_w_q4_k(d, sc); }
ST_HD float st_m_q5_k(float dmin, int m) { return st_m_q4_k(dmin, m); }

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_Q5_K(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_q5_k, d), 2);
    st_io_field(io, 2, bi, b + offsetof(st_block_q5_k, dmin), 2);
    st_io_field(io, 3, bi, b + offsetof(st_block_q5_k, scales), 12);
    for (int j = 0; j < 8; j++) {
        st_k4_nibbles_io(io, 1, bi * 8 + j, b + offsetof(st_block_q5_k, qs), j);
        st_io_bits_transposed(io, 4, bi * 8 + j, b + offsetof(st_block_q5_k, qh), j);
    }
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_Q5_K_HOST)
#define ST_FMT_Q5_K_HOST
#include "formats/q4_k.h"
static void q5_k_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_q5_k, d)), dmin = st_ldh(ST_FIELD(b, st_block_q5_k, dmin));
    const uint8_t *scales = ST_FIELD(b, st_block_q5_k, scales), *qs = ST_FIELD(b, st_block_q5_k, qs);
    const uint8_t *qh = ST_FIELD(b, st_block_q5_k, qh);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        st_k4_scale_min(j, scales, &sc, &m);
        const float d1 = d * (float)sc, m1 = dmin * (float)m;
        const uint8_t *q = qs + 32 * (j / 2);
        for (int l = 0; l < 32; l++) {
            const int v = ((q[l] >> (4 * (j % 2))) & 15) + (((qh[l] >> j) & 1) ? 16 : 0);
            y[32 * j + l] = d1 * (float)v - m1;
        }
    }
}

static void q5_k_unit(const uint8_t *b, int j, st_unit *o)
{
    int sc, m;
    st_k4_scale_min(j, ST_FIELD(b, st_block_q5_k, scales), &sc, &m);
    o->W = st_w_q5_k(st_ldh(ST_FIELD(b, st_block_q5_k, d)), sc);
    o->M = st_m_q5_k(st_ldh(ST_FIELD(b, st_block_q5_k, dmin)), m);
    o->mf[0] = o->mf[1] = 1;
    o->has_min = true;
    const uint8_t *q = ST_FIELD(b, st_block_q5_k, qs) + 32 * (j / 2), *qh = ST_FIELD(b, st_block_q5_k, qh);
    for (int l = 0; l < 32; l++) o->w[l] = (int16_t)(((q[l] >> (4 * (j % 2))) & 15) | (((qh[l] >> j) & 1) << 4));
}

static void q5_k_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32), nb = (size_t)(k / 256);
    s->n = 5;
    s->per_row[0] = 2 * nb;
    s->per_row[1] = 16 * nu;
    s->per_row[2] = 2 * nb;
    s->per_row[3] = 12 * nb;
    s->per_row[4] = 4 * nu;
}

static void q5_k_scales(uint8_t *b, float d)
{
    st_put_f16(b + offsetof(st_block_q5_k, d), d);
    st_put_f16(b + offsetof(st_block_q5_k, dmin), d * 0.5f);
}

ST_FORMAT_OPS(Q5_K, q5_k)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_Q5_K_DEVICE)
#define ST_FMT_Q5_K_DEVICE
#include "formats/q5_0.h" /* st_q5_words */
#include "formats/q4_k.h" /* st_k4_head_dev */
/* The scale bytes as Q4_K's decoder takes them (written out rather than
 * shared: gfx1100 compiles Q4_K's inline form one instruction shorter). */
template <> struct st_unit_dec<ST_Q5_K> : st_unit_plain {
    static constexpr bool min = true;
    /* s_b = S[j], s_a = S[j + 4], s_c = S[j - 4] (j >= 4) of the 12 scale
     * bytes of the unit's block, j = unit within the block */
    struct raw {
        uint4 q;
        uint32_t qh;
        uint16_t d, dmin;
        uint8_t s_a, s_b, s_c;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        const int j = u & 7;
        const uint8_t *S = m.p[3] + rb * 12;
        r.s_b = S[j];
        r.s_a = S[j + 4];
        r.s_c = j >= 4 ? S[j - 4] : 0;
        r.d = ld_u16(m.p[0] + rb * 2);
        r.dmin = ld_u16(m.p[2] + rb * 2);
        r.q = *(const uint4 *)(m.p[1] + ru * 16);
        r.qh = *(const uint32_t *)(m.p[4] + ru * 4);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_Q5_K);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_q5_k;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_Q5_K, ST_BYTES_Q5_K>(m, row, u, j);
        static_assert(offsetof(B, dmin) == offsetof(B, d) + 2 && offsetof(B, scales) == offsetof(B, d) + 4,
                      "d, dmin, scales are one 16-byte load");
        st_k4_head_dev(ST_LDB(128, b, B, d, 0, 0), j, r);
        uint32_t q[8];
        ST_LDW(32, b, B, qs, 32, j / 2, q);
        r.q = st_nibbles_dev(q, 4 * (j % 2));
        uint32_t qh[8];
        ST_LDW(32, b, B, qh, 0, 0, qh);
        r.qh = st_bits_transposed_dev(qh, j);
    }
    ST_DEV void dec(const raw &r, int u, const st_grids &, st_dunit &o)
    {
        int sc, mn;
        if ((u & 7) < 4) {
            sc = r.s_b & 63;
            mn = r.s_a & 63;
        } else {
            sc = (r.s_a & 15) | ((r.s_c >> 6) << 4);
            mn = (r.s_a >> 4) | ((r.s_b >> 6) << 4);
        }
        o.W = st_w_q5_k(st_h2f(r.d), sc);
        o.M = st_m_q5_k(st_h2f(r.dmin), mn);
        st_q5_words(r.q, r.qh, o);
        o.f0 = o.f1 = 1;
    }
    ST_UNIT_GET
};
#endif
