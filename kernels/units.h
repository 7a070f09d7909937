/* Device decoding of one 32-weight unit of each format from the row-planar
 * layout (layout.h) into eight words of four int8 weights, plus the unit's
 * float factor W (st_canon.h), integer half-factors F0/F1 (IQ2_S) and the
 * Q4_K min factor M. Integer work is exact in any order; the float work is
 * the contract's. */
#ifndef ST_UNITS_H
#define ST_UNITS_H

#include "st_gpu.h"
#include "layout.h"
#include "st_canon.h"

/* ggml type ids */
enum { T_Q8_0 = 8, T_Q4_K = 12, T_IQ3_XXS = 18, T_IQ4_NL = 20, T_IQ3_S = 21, T_IQ2_S = 22, T_IQ4_XS = 23 };

typedef struct {
    const uint32_t *iq3s;   /* 512 */
    const uint32_t *iq3xxs; /* 256 */
    const uint2 *iq2s;      /* 1024 */
} st_grids;

struct st_dunit {
    uint32_t w[8];
    float W, M;
    int f0, f1;
};

/* Negates the bytes of G (magnitudes 1..127) whose bit in the low 4 bits
 * of NIB is set: bit-parallel, no per-byte loop. */
ST_DEV uint32_t st_apply_signs4(uint32_t g, uint32_t nib)
{
    const uint32_t m = ((nib * 0x00204081u) & 0x01010101u) * 0xffu;
    return (g ^ m) + (m & 0x01010101u);
}

/* The same with the signs of group K transposed (layout.h, IQ3_S): bit
 * K + 8t of T is the sign of byte t. */
ST_DEV uint32_t st_apply_signs_t(uint32_t g, uint32_t t, int k)
{
    const uint32_t b = (t >> k) & 0x01010101u;
    return (g ^ (b * 0xffu)) + b;
}

ST_DEV uint16_t ld_u16(const uint8_t *p) { return *(const uint16_t *)p; }

/* Each decoder is split in two: LOAD fetches the unit's raw bytes (all of
 * its global loads, nothing that depends on them), DEC turns them into
 * st_dunit (grid lookups and integer work). The row dot issues the loads of
 * several units before decoding any, so each lane keeps several requests in
 * flight instead of one latency per unit. GET = LOAD + DEC. */
template <int TYPE> struct st_unit_dec;

#define ST_UNIT_GET                                                                        \
    ST_DEV void get(const st_mat_dev &m, int64_t row, int u, const st_grids &g, st_dunit &o) \
    {                                                                                      \
        raw r;                                                                             \
        load(m, row, u, r);                                                                \
        dec(r, u, g, o);                                                                   \
    }

template <> struct st_unit_dec<T_Q8_0> {
    struct raw {
        uint4 a, b;
        uint16_t d;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u;
        r.d = ld_u16(m.p[0] + ru * 2);
        r.a = *(const uint4 *)(m.p[1] + ru * 32);
        r.b = *(const uint4 *)(m.p[1] + ru * 32 + 16);
    }
    ST_DEV void dec(const raw &r, int, const st_grids &, st_dunit &o)
    {
        o.W = st_w_q8_0(st_h2f(r.d));
        o.w[0] = r.a.x; o.w[1] = r.a.y; o.w[2] = r.a.z; o.w[3] = r.a.w;
        o.w[4] = r.b.x; o.w[5] = r.b.y; o.w[6] = r.b.z; o.w[7] = r.b.w;
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};

ST_DEV void st_nl_words(const uint4 q, st_dunit &o)
{
    const uint32_t tab[4] = {0xbfad9881u, 0xf6eaddcfu, 0x26190d01u, 0x71594535u};
    st_lut16(q.x, tab, o.w[0], o.w[4]);
    st_lut16(q.y, tab, o.w[1], o.w[5]);
    st_lut16(q.z, tab, o.w[2], o.w[6]);
    st_lut16(q.w, tab, o.w[3], o.w[7]);
}

template <> struct st_unit_dec<T_IQ4_NL> {
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
    ST_DEV void dec(const raw &r, int, const st_grids &, st_dunit &o)
    {
        o.W = st_w_iq4_nl(st_h2f(r.d));
        st_nl_words(r.q, o);
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};

template <> struct st_unit_dec<T_IQ4_XS> {
    struct raw {
        uint4 q;
        uint16_t d, sh;
        uint8_t sl;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        r.sh = ld_u16(m.p[2] + rb * 2);
        r.sl = m.p[3][rb * 4 + (u & 7) / 2];
        r.d = ld_u16(m.p[0] + rb * 2);
        r.q = *(const uint4 *)(m.p[1] + ru * 16);
    }
    ST_DEV void dec(const raw &r, int u, const st_grids &, st_dunit &o)
    {
        const int ib = u & 7;
        const int ls = (int)((((uint32_t)r.sl >> (4 * (ib & 1))) & 15u) | ((((uint32_t)r.sh >> (2 * ib)) & 3u) << 4));
        o.W = st_w_iq4_xs(st_h2f(r.d), ls);
        st_nl_words(r.q, o);
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};

template <> struct st_unit_dec<T_IQ3_S> {
    struct raw {
        uint2 qs;
        uint32_t sg;
        uint16_t d;
        uint8_t qh, sc;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        r.qs = *(const uint2 *)(m.p[1] + ru * 8);
        r.qh = m.p[2][ru];
        r.sg = *(const uint32_t *)(m.p[3] + ru * 4);
        r.sc = m.p[4][rb * 4 + (u & 7) / 2];
        r.d = ld_u16(m.p[0] + rb * 2);
    }
    ST_DEV void dec(const raw &r, int u, const st_grids &g, st_dunit &o)
    {
        const uint32_t sc = ((uint32_t)r.sc >> (4 * (u & 1))) & 15u;
        o.W = st_w_iq3_s(st_h2f(r.d), (int)sc);
        /* qh's 8 bits as bytes of 0/1 (groups 0-3, 4-7), zipped with the qs
         * bytes into pairs of 9-bit grid indices */
        const uint32_t h[2] = {((r.qh & 15u) * 0x00204081u) & 0x01010101u,
                               (((uint32_t)r.qh >> 4) * 0x00204081u) & 0x01010101u};
#pragma unroll
        for (int k = 0; k < 8; k += 2) {
            const uint32_t ix = st_zip_bytes(k < 4 ? r.qs.x : r.qs.y, h[k / 4], (k / 2) & 1);
            o.w[k] = st_apply_signs_t(g.iq3s[ix & 0xffffu], r.sg, k);
            o.w[k + 1] = st_apply_signs_t(g.iq3s[ix >> 16], r.sg, k + 1);
        }
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};

template <> struct st_unit_dec<T_IQ3_XXS> {
    struct raw {
        uint2 qs;
        uint32_t a;
        uint16_t d;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        r.qs = *(const uint2 *)(m.p[1] + ru * 8);
        r.a = *(const uint32_t *)(m.p[2] + ru * 4);
        r.d = ld_u16(m.p[0] + rb * 2);
    }
    ST_DEV void dec(const raw &r, int, const st_grids &g, st_dunit &o)
    {
        o.W = st_w_iq3_xxs(st_h2f(r.d), (int)(r.a >> 28));
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint32_t s7 = (r.a >> (7 * l)) & 127u;
            const uint32_t s8 = s7 | ((uint32_t)(st_popc(s7) & 1) << 7);
            const uint32_t q = l < 2 ? r.qs.x : r.qs.y;
            const uint32_t i1 = (q >> (16 * (l & 1))) & 0xffu, i2 = (q >> (16 * (l & 1) + 8)) & 0xffu;
            o.w[2 * l] = st_apply_signs4(g.iq3xxs[i1], s8 & 15u);
            o.w[2 * l + 1] = st_apply_signs4(g.iq3xxs[i2], s8 >> 4);
        }
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};

template <> struct st_unit_dec<T_IQ2_S> {
    struct raw {
        uint32_t qs, sg;
        uint16_t d;
        uint8_t qh, sc;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        r.qs = *(const uint32_t *)(m.p[1] + ru * 4);
        r.sg = *(const uint32_t *)(m.p[2] + ru * 4);
        r.qh = m.p[3][ru];
        r.sc = m.p[4][ru];
        r.d = ld_u16(m.p[0] + rb * 2);
    }
    ST_DEV void dec(const raw &r, int, const st_grids &g, st_dunit &o)
    {
        o.W = st_w_iq2_s(st_h2f(r.d));
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint32_t idx = ((r.qs >> (8 * l)) & 0xffu) | ((((uint32_t)r.qh >> (2 * l)) & 3u) << 8);
            const uint2 gv = g.iq2s[idx];
            const uint32_t s = (r.sg >> (8 * l)) & 0xffu;
            o.w[2 * l] = st_apply_signs4(gv.x, s & 15u);
            o.w[2 * l + 1] = st_apply_signs4(gv.y, s >> 4);
        }
        o.f0 = 2 * (int)(r.sc & 15u) + 1;
        o.f1 = 2 * (int)(r.sc >> 4) + 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};

template <> struct st_unit_dec<T_Q4_K> {
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
#undef ST_UNIT_GET

/* One unit's contribution to one stream: the contract's float operations
 * (st_canon.h) around an exact integer dot. */
template <int TYPE>
ST_DEV float st_unit_fma(const st_dunit &un, const int4 &a, const int4 &b, float da, float acc)
{
    int s0 = st_dot4_i8((int)un.w[0], a.x, 0);
    s0 = st_dot4_i8((int)un.w[1], a.y, s0);
    s0 = st_dot4_i8((int)un.w[2], a.z, s0);
    s0 = st_dot4_i8((int)un.w[3], a.w, s0);
    int s1 = st_dot4_i8((int)un.w[4], b.x, 0);
    s1 = st_dot4_i8((int)un.w[5], b.y, s1);
    s1 = st_dot4_i8((int)un.w[6], b.z, s1);
    s1 = st_dot4_i8((int)un.w[7], b.w, s1);
    const int isum = (TYPE == T_IQ2_S) ? un.f0 * s0 + un.f1 * s1 : s0 + s1;
    float v = st_fma(st_fmul(un.W, da), (float)isum, acc);
    if (TYPE == T_Q4_K) {
        int q = st_dot4_i8(0x01010101, a.x, 0);
        q = st_dot4_i8(0x01010101, a.y, q);
        q = st_dot4_i8(0x01010101, a.z, q);
        q = st_dot4_i8(0x01010101, a.w, q);
        q = st_dot4_i8(0x01010101, b.x, q);
        q = st_dot4_i8(0x01010101, b.y, q);
        q = st_dot4_i8(0x01010101, b.z, q);
        q = st_dot4_i8(0x01010101, b.w, q);
        v = st_fma(-st_fmul(un.M, da), (float)q, v);
    }
    return v;
}

#endif
