/* Q4_K (ggml type 12): 256 values per 144-byte block, 8 sub-blocks of 32
 * with a 6-bit scale sc and a 6-bit min m each:
 * y = (d * sc) * q - (dmin * m), q = 0..15.
 * Canonical unit (a sub-block): w = q, W = d * sc, M = dmin * m (min
 * factors g0 = g1 = 1);
 *   acc = fma(W * da, isum, acc);  acc = fma(-(M * da), sum(q8), acc).
 * Device layout: 0: d u16[R][nb]   1: qs u8[R][nu][16] (the unit's 32
 * nibbles regrouped: byte i = value i | value i+16 << 4)   2: dmin u16[R][nb]
 * 3: scales u8[R][nb][12] (as ggml). */
#ifndef ST_FMT_Q4_K_H
#define ST_FMT_Q4_K_H
#include "format_home.h"

typedef struct {
    uint16_t d;         /* f16 scale of the 6-bit sub-block scales */
    uint16_t dmin;      /* f16 scale of the 6-bit sub-block mins */
    uint8_t scales[12]; /* 8 scales and 8 mins, 6 bits each, packed (st_k4_scale_min) */
    uint8_t qs[128];    /* group g (32 bytes): sub-block 2g low nibbles, 2g+1 high */
} st_block_q4_k;
ST_BLOCK_CHECK(Q4_K, st_block_q4_k);

/* Q4_K: 6-bit scale and min. */
ST_HD float st_w_q4_k(float d, int sc) { return st_fmul(d, (float)sc); }
ST_HD float st_m_q4_k(float dmin, int m) { return st_fmul(dmin, (float)m); }

/* The 6-bit scale and min of sub-block J of the 12 packed bytes S (Q4_K
 * and Q5_K). */
ST_HD void st_k4_scale_min(int j, const uint8_t *s, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* One block <-> the device layout's planes (host and device repack). The
 * 32 nibbles of sub-block J of a Q4_K/Q5_K qs array <-> 16 plane bytes
 * (byte i = value i | value i+16 << 4). */
ST_HD void st_k4_nibbles_io(const st_repack_io *io, int pl, int64_t unit, uint8_t *qs, int j)
{
    st_io_nibbles(io, pl, unit, qs + 32 * (j / 2), 4 * (j % 2));
}
ST_HD void st_io_Q4_K(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_q4_k, d), 2);
    st_io_field(io, 2, bi, b + offsetof(st_block_q4_k, dmin), 2);
    st_io_field(io, 3, bi, b + offsetof(st_block_q4_k, scales), 12);
    for (int j = 0; j < 8; j++) st_k4_nibbles_io(io, 1, bi * 8 + j, b + offsetof(st_block_q4_k, qs), j);
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_Q4_K_HOST)
#define ST_FMT_Q4_K_HOST
static void q4_k_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_q4_k, d)), dmin = st_ldh(ST_FIELD(b, st_block_q4_k, dmin));
    const uint8_t *scales = ST_FIELD(b, st_block_q4_k, scales), *qs = ST_FIELD(b, st_block_q4_k, qs);
    for (int g = 0; g < 4; g++) {
        const uint8_t *q = qs + 32 * g;
        for (int h = 0; h < 2; h++) {
            int sc, m;
            st_k4_scale_min(2 * g + h, scales, &sc, &m);
            const float d1 = d * (float)sc;
            const float m1 = dmin * (float)m;
            float *o = y + 64 * g + 32 * h;
            for (int l = 0; l < 32; l++) {
                const int nib = h ? (q[l] >> 4) : (q[l] & 15);
                o[l] = d1 * (float)nib - m1;
            }
        }
    }
}

static void q4_k_unit(const uint8_t *b, int j, st_unit *o)
{
    int sc, m;
    st_k4_scale_min(j, ST_FIELD(b, st_block_q4_k, scales), &sc, &m);
    o->W = st_w_q4_k(st_ldh(ST_FIELD(b, st_block_q4_k, d)), sc);
    o->M = st_m_q4_k(st_ldh(ST_FIELD(b, st_block_q4_k, dmin)), m);
    o->mf[0] = o->mf[1] = 1;
    o->has_min = true;
    const uint8_t *q = ST_FIELD(b, st_block_q4_k, qs) + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; l++) o->w[l] = (int16_t)((q[l] >> shift) & 15);
}

static void q4_k_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32), nb = (size_t)(k / 256);
    s->n = 4;
    s->per_row[0] = 2 * nb;
    s->per_row[1] = 16 * nu;
    s->per_row[2] = 2 * nb;
    s->per_row[3] = 12 * nb;
}

static void q4_k_scales(uint8_t *b, float d)
{
    st_put_f16(b + offsetof(st_block_q4_k, d), d);
    st_put_f16(b + offsetof(st_block_q4_k, dmin), d * 0.5f);
}

ST_FORMAT_OPS(Q4_K, q4_k)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_Q4_K_DEVICE)
#define ST_FMT_Q4_K_DEVICE
/* The in-place raw's factors of unit J of a Q4_K/Q5_K block from its first
 * 16 bytes H (d | dmin << 16, then the 12 scale bytes S in h.y, h.z, h.w):
 * s_b = S[j], s_a = S[j + 4], s_c = S[j - 4] (0 for j < 4), as LOAD reads
 * them from the planes. */
template <typename R> ST_DEV void st_k4_head_dev(const uint4 &h, int j, R &r)
{
    r.d = (uint16_t)(h.x & 0xffffu);
    r.dmin = (uint16_t)(h.x >> 16);
    const int sb = 8 * (j & 3);
    r.s_b = (uint8_t)((j < 4 ? h.y : h.z) >> sb);
    r.s_a = (uint8_t)((j < 4 ? h.z : h.w) >> sb);
    r.s_c = j < 4 ? (uint8_t)0 : (uint8_t)(h.y >> sb);
}

template <> struct st_unit_dec<ST_Q4_K> : st_unit_plain {
    static constexpr bool min = true;
    /* s_b = S[j], s_a = S[j + 4], s_c = S[j - 4] (j >= 4) of the 12 scale
     * bytes of the unit's block, j = unit within the block */
    struct raw {
        uint4 q;
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
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_Q4_K);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_q4_k;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_Q4_K, ST_BYTES_Q4_K>(m, row, u, j);
        static_assert(offsetof(B, dmin) == offsetof(B, d) + 2 && offsetof(B, scales) == offsetof(B, d) + 4,
                      "d, dmin, scales are one 16-byte load");
        st_k4_head_dev(ST_LDB(128, b, B, d, 0, 0), j, r);
        uint32_t q[8];
        ST_LDW(32, b, B, qs, 32, j / 2, q);
        r.q = st_nibbles_dev(q, 4 * (j % 2));
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
        o.W = st_w_q4_k(st_h2f(r.d), sc);
        o.M = st_m_q4_k(st_h2f(r.dmin), mn);
        const uint4 q = r.q;
        o.w[0] = q.x & 0x0f0f0f0fu; o.w[1] = q.y & 0x0f0f0f0fu;
        o.w[2] = q.z & 0x0f0f0f0fu; o.w[3] = q.w & 0x0f0f0f0fu;
        o.w[4] = (q.x >> 4) & 0x0f0f0f0fu; o.w[5] = (q.y >> 4) & 0x0f0f0f0fu;
        o.w[6] = (q.z >> 4) & 0x0f0f0f0fu; o.w[7] = (q.w >> 4) & 0x0f0f0f0fu;
        o.f0 = o.f1 = 1;
    }
    ST_UNIT_GET
};
#endif
