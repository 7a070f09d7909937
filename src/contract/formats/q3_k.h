/* Q3_K (ggml type 11): 256 values per 110-byte block, 16 sub-blocks of 16
 * with 6-bit signed scales sc (-32..31):
 * y = (d * sc) * q, q = 2 low bits - (high bit ? 0 : 4), -4..3.
 * Canonical unit (32 values = sub-blocks 2j, 2j+1): the scales are integer
 * half-factors: w = q, f0/f1 = sc of the two halves, W = d;
 *   isum = f0 * sum(q q8)[0..15] + f1 * sum(q q8)[16..31],
 *   acc = fma(d * da, isum, acc).
 * Device layout: 0: d u16[R][nb]   1: qs u8[R][nu][8], the unit's 2-bit
 * values regrouped (st_io_crumbs)   2: hmask u32[R][nu], the unit's 32 high
 * bits transposed (value 4k + t at bit k + 8t)   3: scales u8[R][nb][12]
 * (as ggml: two 16-bit loads give a unit's two 6-bit scales). */
#ifndef ST_FMT_Q3_K_H
#define ST_FMT_Q3_K_H
#include "format_home.h"

typedef struct {
    uint8_t hmask[32];  /* high bits: bit 4n + j of byte l for value 128n + 32j + l */
    uint8_t qs[64];     /* low 2 bits, as Q2_K's */
    uint8_t scales[12]; /* 16 six-bit scales, packed (st_q3_k_scale) */
    uint16_t d;         /* f16 scale */
} st_block_q3_k;
ST_BLOCK_CHECK(Q3_K, st_block_q3_k);

ST_HD float st_w_q3_k(float d) { return d; }

/* The 6-bit scale of sub-block S (0..15) minus 32, from the 12 bytes. */
ST_HD int st_q3_k_scale(const uint8_t *S, int s)
{
    const int lo = s < 8 ? (S[s] & 15) : (S[s - 8] >> 4);
    const int hi = (S[8 + s % 4] >> (2 * (s / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_Q3_K(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_q3_k, d), 2);
    for (int j = 0; j < 8; j++) {
        st_io_crumbs(io, 1, bi * 8 + j, b + offsetof(st_block_q3_k, qs) + 32 * (j / 4), 2 * (j % 4));
        st_io_bits_transposed(io, 2, bi * 8 + j, b + offsetof(st_block_q3_k, hmask), 4 * (j / 4) + j % 4);
    }
    st_io_field(io, 3, bi, b + offsetof(st_block_q3_k, scales), 12);
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_Q3_K_HOST)
#define ST_FMT_Q3_K_HOST
/* The 32 values (-4..3) of unit J. */
static void q3_k_values(const uint8_t *b, int j, int *v)
{
    const uint8_t *q = ST_FIELD(b, st_block_q3_k, qs) + 32 * (j / 4), *hm = ST_FIELD(b, st_block_q3_k, hmask);
    const int shift = 2 * (j % 4), hbit = 4 * (j / 4) + j % 4;
    for (int l = 0; l < 32; l++) v[l] = ((q[l] >> shift) & 3) - (((hm[l] >> hbit) & 1) ? 0 : 4);
}

static void q3_k_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_q3_k, d));
    const uint8_t *S = ST_FIELD(b, st_block_q3_k, scales);
    for (int j = 0; j < 8; j++) {
        int v[32];
        q3_k_values(b, j, v);
        for (int h = 0; h < 2; h++) {
            const float dl = d * (float)st_q3_k_scale(S, 2 * j + h);
            for (int l = 16 * h; l < 16 * h + 16; l++) y[32 * j + l] = dl * (float)v[l];
        }
    }
}

static void q3_k_unit(const uint8_t *b, int j, st_unit *o)
{
    const uint8_t *S = ST_FIELD(b, st_block_q3_k, scales);
    int v[32];
    q3_k_values(b, j, v);
    o->W = st_w_q3_k(st_ldh(ST_FIELD(b, st_block_q3_k, d)));
    for (int l = 0; l < 32; l++) o->w[l] = (int16_t)(v[l] * st_q3_k_scale(S, 2 * j + l / 16));
}

static void q3_k_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32), nb = (size_t)(k / 256);
    s->n = 4;
    s->per_row[0] = 2 * nb;
    s->per_row[1] = 8 * nu;
    s->per_row[2] = 4 * nu;
    s->per_row[3] = 12 * nb;
}

static void q3_k_scales(uint8_t *b, float d) { st_put_f16(b + offsetof(st_block_q3_k, d), d); }

ST_FORMAT_OPS(Q3_K, q3_k)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_Q3_K_DEVICE)
#define ST_FMT_Q3_K_DEVICE
#include "formats/q2_k.h" /* st_crumb_words */
template <> struct st_unit_dec<ST_Q3_K> : st_unit_plain {
    static constexpr bool halves = true;
    /* lo: scale bytes 2(j%4), +1 (low nibbles for j < 4, high for j >= 4);
     * hi: bytes 8 + 2(j%2), +1 (2 bits at 2(j/2)) */
    struct raw {
        uint2 q;
        uint32_t hm;
        uint16_t d, lo, hi;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        const int j = u & 7;
        r.q = *(const uint2 *)(m.p[1] + ru * 8);
        r.hm = *(const uint32_t *)(m.p[2] + ru * 4);
        r.lo = ld_u16(m.p[3] + rb * 12 + 2 * (j & 3));
        r.hi = ld_u16(m.p[3] + rb * 12 + 8 + 2 * (j & 1));
        r.d = ld_u16(m.p[0] + rb * 2);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_Q3_K);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_q3_k;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_Q3_K, ST_BYTES_Q3_K>(m, row, u, j);
        uint32_t q[8], hm[8];
        ST_LDW(32, b, B, qs, 32, j / 4, q);
        ST_LDW(32, b, B, hmask, 0, 0, hm);
        r.q = st_crumbs_dev(q, 2 * (j % 4));
        r.hm = st_bits_transposed_dev(hm, j); /* st_io_Q3_K's shift 4 (j / 4) + j % 4 */
        r.lo = ST_LDB(16, b, B, scales, 2, j & 3);
        r.hi = ST_LDB(16, b, B, scales, 2, 4 + (j & 1));
        r.d = ST_LDB(16, b, B, d, 0, 0);
    }
    ST_DEV void dec(const raw &r, int u, const st_grids &, st_dunit &o)
    {
        const int j = u & 7, sl = 4 * (j >> 2), sh = 2 * (j >> 1);
        o.W = st_w_q3_k(st_h2f(r.d));
        o.f0 = (int)(((r.lo >> sl) & 15u) | (((uint32_t)(r.hi >> sh) & 3u) << 4)) - 32;
        o.f1 = (int)(((r.lo >> (8 + sl)) & 15u) | (((uint32_t)(r.hi >> (8 + sh)) & 3u) << 4)) - 32;
        st_crumb_words(r.q, o.w);
#pragma unroll
        for (int k = 0; k < 8; k++)
            o.w[k] = st_sub_bytes(o.w[k] | (((r.hm >> k) & 0x01010101u) << 2), 0x04040404u);
        o.M = 0.0f;
    }
    ST_UNIT_GET
};
#endif
