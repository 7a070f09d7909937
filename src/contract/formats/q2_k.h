/* Q2_K (ggml type 10): 256 values per 84-byte block, 16 sub-blocks of 16
 * with a 4-bit scale sc and a 4-bit min m each:
 * y = (d * sc) * q - (dmin * m), q = 0..3.
 * Canonical unit (32 values = sub-blocks 2j, 2j+1 of the block): the scales
 * and mins are integer half-factors: w = q, f0/f1 = sc of the two halves,
 * W = d; the min term has M = dmin and min factors g0/g1 = m of the halves;
 *   isum = f0 * sum(q q8)[0..15] + f1 * sum(q q8)[16..31],
 *   qm = g0 * sum(q8)[0..15] + g1 * sum(q8)[16..31],
 *   acc = fma(d * da, isum, acc);  acc = fma(-(dmin * da), qm, acc).
 * Device layout: 0: dm u32[R][nb] (d | dmin << 16, adjacent in ggml)
 * 1: qs u8[R][nu][8], the unit's 32 two-bit values regrouped
 * (st_io_crumbs: byte 4h + t = values 16h + 4k + t at bits 2k)
 * 2: scales u8[R][nu][2] (bytes 2j, 2j+1 of ggml's scales). */
#ifndef ST_FMT_Q2_K_H
#define ST_FMT_Q2_K_H
#include "format_home.h"

typedef struct {
    uint8_t scales[16]; /* byte s: low nibble scale, high nibble min of sub-block s */
    uint8_t qs[64];     /* half n: bytes 32n..32n+31, 2 bits per value at shift 2j */
    uint16_t d;         /* f16 scale of the scales */
    uint16_t dmin;      /* f16 scale of the mins */
} st_block_q2_k;
ST_BLOCK_CHECK(Q2_K, st_block_q2_k);

ST_HD float st_w_q2_k(float d) { return d; }
ST_HD float st_m_q2_k(float dmin) { return dmin; }

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_Q2_K(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_q2_k, d), 4); /* d and dmin, adjacent */
    for (int j = 0; j < 8; j++) {
        st_io_crumbs(io, 1, bi * 8 + j, b + offsetof(st_block_q2_k, qs) + 32 * (j / 4), 2 * (j % 4));
        st_io_field(io, 2, bi * 8 + j, b + offsetof(st_block_q2_k, scales) + 2 * j, 2);
    }
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_Q2_K_HOST)
#define ST_FMT_Q2_K_HOST
static void q2_k_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_q2_k, d)), dmin = st_ldh(ST_FIELD(b, st_block_q2_k, dmin));
    const uint8_t *scales = ST_FIELD(b, st_block_q2_k, scales), *qs = ST_FIELD(b, st_block_q2_k, qs);
    for (int s = 0; s < 16; s++) {
        const float dl = d * (float)(scales[s] & 15), ml = dmin * (float)(scales[s] >> 4);
        const int n = s / 8, shift = 2 * ((s % 8) / 2);
        const uint8_t *q = qs + 32 * n + 16 * (s % 2);
        for (int l = 0; l < 16; l++) y[16 * s + l] = dl * (float)((q[l] >> shift) & 3) - ml;
    }
}

static void q2_k_unit(const uint8_t *b, int j, st_unit *o)
{
    const uint8_t *scales = ST_FIELD(b, st_block_q2_k, scales);
    const uint8_t *q = ST_FIELD(b, st_block_q2_k, qs) + 32 * (j / 4);
    const int shift = 2 * (j % 4);
    o->W = st_w_q2_k(st_ldh(ST_FIELD(b, st_block_q2_k, d)));
    o->M = st_m_q2_k(st_ldh(ST_FIELD(b, st_block_q2_k, dmin)));
    o->has_min = true;
    for (int h = 0; h < 2; h++) {
        const int sc = scales[2 * j + h];
        o->mf[h] = (int16_t)(sc >> 4);
        for (int l = 16 * h; l < 16 * h + 16; l++) o->w[l] = (int16_t)(((q[l] >> shift) & 3) * (sc & 15));
    }
}

static void q2_k_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32), nb = (size_t)(k / 256);
    s->n = 3;
    s->per_row[0] = 4 * nb;
    s->per_row[1] = 8 * nu;
    s->per_row[2] = 2 * nu;
}

static void q2_k_scales(uint8_t *b, float d)
{
    st_put_f16(b + offsetof(st_block_q2_k, d), d);
    st_put_f16(b + offsetof(st_block_q2_k, dmin), d * 0.5f);
}

ST_FORMAT_OPS(Q2_K, q2_k)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_Q2_K_DEVICE)
#define ST_FMT_Q2_K_DEVICE
/* The 32 two-bit values of a unit regrouped by st_io_crumbs (P: the 8 plane
 * bytes) as 8 words of values 0..3. */
ST_DEV void st_crumb_words(const uint2 &p, uint32_t (&w)[8])
{
#pragma unroll
    for (int k = 0; k < 4; k++) {
        w[k] = (p.x >> (2 * k)) & 0x03030303u;
        w[k + 4] = (p.y >> (2 * k)) & 0x03030303u;
    }
}

template <> struct st_unit_dec<ST_Q2_K> : st_unit_plain {
    static constexpr bool halves = true, min = true, min_halves = true;
    struct raw {
        uint2 q;
        uint32_t dm;
        uint16_t sc;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        r.q = *(const uint2 *)(m.p[1] + ru * 8);
        r.sc = ld_u16(m.p[2] + ru * 2);
        r.dm = *(const uint32_t *)(m.p[0] + rb * 4);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_Q2_K);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_q2_k;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_Q2_K, ST_BYTES_Q2_K>(m, row, u, j);
        uint32_t q[8];
        ST_LDW(32, b, B, qs, 32, j / 4, q);
        r.q = st_crumbs_dev(q, 2 * (j % 4));
        r.sc = ST_LDB(16, b, B, scales, 2, j);
        static_assert(offsetof(B, dmin) == offsetof(B, d) + 2, "d | dmin << 16 is one word");
        r.dm = ST_LDB(32, b, B, d, 0, 0);
    }
    ST_DEV void dec(const raw &r, int, const st_grids &, st_dunit &o)
    {
        o.W = st_w_q2_k(st_h2f((uint16_t)(r.dm & 0xffffu)));
        o.M = st_m_q2_k(st_h2f((uint16_t)(r.dm >> 16)));
        st_crumb_words(r.q, o.w);
        o.f0 = r.sc & 15;
        o.g0 = (r.sc >> 4) & 15;
        o.f1 = (r.sc >> 8) & 15;
        o.g1 = r.sc >> 12;
    }
    ST_UNIT_GET
};
#endif
