/* Q6_K (ggml type 14): 256 values per 210-byte block, 16 sub-blocks of 16
 * with int8 scales sc: y = (d * sc) * q, q = 6 bits - 32, -32..31.
 * Canonical unit (32 values = sub-blocks 2j, 2j+1): the scales are integer
 * half-factors: w = q, f0/f1 = sc of the two halves, W = d;
 *   isum = f0 * sum(q q8)[0..15] + f1 * sum(q q8)[16..31]
 *   (|isum| <= 2 * 128 * 16 * 32 * 127 < 2^24: exact as a float),
 *   acc = fma(d * da, isum, acc).
 * Device layout: 0: d u16[R][nb]   1: ql u8[R][nu][16], the unit's low 4
 * bits regrouped (st_io_nibbles)   2: qh u8[R][nu][8], its high 2 bits
 * regrouped (st_io_crumbs)   3: scales i8[R][nu][2] (as ggml's 16 per
 * block). */
#ifndef ST_FMT_Q6_K_H
#define ST_FMT_Q6_K_H
#include "format_home.h"

typedef struct {
    uint8_t ql[128];   /* low 4 bits: half n at 64n; value 128n + 32c + l in byte 64n + l + 32(c%2), nibble c/2 */
    uint8_t qh[64];    /* high 2 bits: value 128n + 32c + l in byte 32n + l at bits 2c */
    int8_t scales[16]; /* sub-block scales */
    uint16_t d;        /* f16 scale */
} st_block_q6_k;
ST_BLOCK_CHECK(Q6_K, st_block_q6_k);

ST_HD float st_w_q6_k(float d) { return d; }

/* Where unit J's low nibbles and high bits are: bytes and shifts. */
ST_HD const uint8_t *q6_k_low(const uint8_t *b, int j, int *shift)
{
    *shift = 4 * ((j % 4) / 2);
    return ST_FIELD(b, st_block_q6_k, ql) + 64 * (j / 4) + 32 * (j % 2);
}

ST_HD const uint8_t *q6_k_high(const uint8_t *b, int j, int *shift)
{
    *shift = 2 * (j % 4);
    return ST_FIELD(b, st_block_q6_k, qh) + 32 * (j / 4);
}

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_Q6_K(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_q6_k, d), 2);
    for (int j = 0; j < 8; j++) {
        int sl, sh;
        uint8_t *L = (uint8_t *)(uintptr_t)q6_k_low(b, j, &sl), *H = (uint8_t *)(uintptr_t)q6_k_high(b, j, &sh);
        st_io_nibbles(io, 1, bi * 8 + j, L, sl);
        st_io_crumbs(io, 2, bi * 8 + j, H, sh);
        st_io_field(io, 3, bi * 8 + j, b + offsetof(st_block_q6_k, scales) + 2 * j, 2);
    }
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_Q6_K_HOST)
#define ST_FMT_Q6_K_HOST
static void q6_k_values(const uint8_t *b, int j, int *v)
{
    int sl, sh;
    const uint8_t *L = q6_k_low(b, j, &sl), *H = q6_k_high(b, j, &sh);
    for (int l = 0; l < 32; l++) v[l] = (((L[l] >> sl) & 15) | (((H[l] >> sh) & 3) << 4)) - 32;
}

static void q6_k_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_q6_k, d));
    const int8_t *sc = (const int8_t *)ST_FIELD(b, st_block_q6_k, scales);
    for (int j = 0; j < 8; j++) {
        int v[32];
        q6_k_values(b, j, v);
        for (int l = 0; l < 32; l++) y[32 * j + l] = d * (float)sc[2 * j + l / 16] * (float)v[l];
    }
}

static void q6_k_unit(const uint8_t *b, int j, st_unit *o)
{
    const int8_t *sc = (const int8_t *)ST_FIELD(b, st_block_q6_k, scales);
    int v[32];
    q6_k_values(b, j, v);
    o->W = st_w_q6_k(st_ldh(ST_FIELD(b, st_block_q6_k, d)));
    for (int l = 0; l < 32; l++) o->w[l] = (int16_t)(v[l] * sc[2 * j + l / 16]);
}

static void q6_k_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32), nb = (size_t)(k / 256);
    s->n = 4;
    s->per_row[0] = 2 * nb;
    s->per_row[1] = 16 * nu;
    s->per_row[2] = 8 * nu;
    s->per_row[3] = 2 * nu;
}

static void q6_k_scales(uint8_t *b, float d) { st_put_f16(b + offsetof(st_block_q6_k, d), d); }

ST_FORMAT_OPS(Q6_K, q6_k)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_Q6_K_DEVICE)
#define ST_FMT_Q6_K_DEVICE
#include "formats/q2_k.h" /* st_crumb_words */
template <> struct st_unit_dec<ST_Q6_K> : st_unit_plain {
    static constexpr bool halves = true;
    struct raw {
        uint4 ql;
        uint2 qh;
        uint16_t d, sc;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        r.ql = *(const uint4 *)(m.p[1] + ru * 16);
        r.qh = *(const uint2 *)(m.p[2] + ru * 8);
        r.sc = ld_u16(m.p[3] + ru * 2);
        r.d = ld_u16(m.p[0] + rb * 2);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_Q6_K);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_q6_k;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_Q6_K, ST_BYTES_Q6_K>(m, row, u, j);
        int sl, sh;
        const uint8_t *L = q6_k_low(b, j, &sl), *H = q6_k_high(b, j, &sh);
        uint32_t ql[8], qh[8];
        st_ld_words<ST_ALIGN_AT(B, ql, 32), 32, (int)offsetof(B, ql)>(L, ql);
        st_ld_words<ST_ALIGN_AT(B, qh, 32), 32, (int)offsetof(B, qh)>(H, qh);
        r.ql = st_nibbles_dev(ql, sl);
        r.qh = st_crumbs_dev(qh, sh);
        r.sc = ST_LDB(16, b, B, scales, 2, j);
        r.d = ST_LDB(16, b, B, d, 0, 0);
    }
    ST_DEV void dec(const raw &r, int, const st_grids &, st_dunit &o)
    {
        o.W = st_w_q6_k(st_h2f(r.d));
        o.f0 = (int)(int8_t)(r.sc & 0xffu);
        o.f1 = (int)(int8_t)(r.sc >> 8);
        st_crumb_words(r.qh, o.w);
        const uint32_t q[4] = {r.ql.x, r.ql.y, r.ql.z, r.ql.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            o.w[k] = st_sub_bytes((q[k] & 0x0f0f0f0fu) | (o.w[k] << 4), 0x20202020u);
            o.w[k + 4] = st_sub_bytes(((q[k] >> 4) & 0x0f0f0f0fu) | (o.w[k + 4] << 4), 0x20202020u);
        }
        o.M = 0.0f;
    }
    ST_UNIT_GET
};
#endif
