/* Device decoding of one 32-weight unit of each format from the row-planar
 * layout (layout.h) into eight words of four int8 weights, plus the unit's
 * float factor W (st_canon.h), integer half-factors F0/F1 (IQ2_S) and the
 * Q4_K min factor M. Integer work is exact in any order; the float work is
 * the contract's. */
#ifndef ST_UNITS_H
#define ST_UNITS_H

#include "st_gpu.h"
#include "layout.h"
#include "../src/st_canon.h"

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

ST_DEV uint16_t ld_u16(const uint8_t *p) { return *(const uint16_t *)p; }

template <int TYPE> struct st_unit_dec;

template <> struct st_unit_dec<T_Q8_0> {
    ST_DEV void get(const st_mat_dev &m, int64_t row, int u, const st_grids &, st_dunit &o)
    {
        const int64_t ru = row * m.nu + u;
        o.W = st_w_q8_0(st_h2f(ld_u16(m.p[0] + ru * 2)));
        const uint4 a = *(const uint4 *)(m.p[1] + ru * 32);
        const uint4 b = *(const uint4 *)(m.p[1] + ru * 32 + 16);
        o.w[0] = a.x; o.w[1] = a.y; o.w[2] = a.z; o.w[3] = a.w;
        o.w[4] = b.x; o.w[5] = b.y; o.w[6] = b.z; o.w[7] = b.w;
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
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
    ST_DEV void get(const st_mat_dev &m, int64_t row, int u, const st_grids &, st_dunit &o)
    {
        const int64_t ru = row * m.nu + u;
        o.W = st_w_iq4_nl(st_h2f(ld_u16(m.p[0] + ru * 2)));
        st_nl_words(*(const uint4 *)(m.p[1] + ru * 16), o);
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
};

template <> struct st_unit_dec<T_IQ4_XS> {
    ST_DEV void get(const st_mat_dev &m, int64_t row, int u, const st_grids &, st_dunit &o)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        const int ib = u & 7;
        const uint32_t sh = ld_u16(m.p[2] + rb * 2);
        const uint32_t sl = m.p[3][rb * 4 + ib / 2];
        const int ls = (int)(((sl >> (4 * (ib & 1))) & 15u) | (((sh >> (2 * ib)) & 3u) << 4));
        o.W = st_w_iq4_xs(st_h2f(ld_u16(m.p[0] + rb * 2)), ls);
        st_nl_words(*(const uint4 *)(m.p[1] + ru * 16), o);
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
};

template <> struct st_unit_dec<T_IQ3_S> {
    ST_DEV void get(const st_mat_dev &m, int64_t row, int u, const st_grids &g, st_dunit &o)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        const int ib = u & 7;
        const uint2 qs = *(const uint2 *)(m.p[1] + ru * 8);
        const uint32_t qh = m.p[2][ru];
        const uint32_t sg = *(const uint32_t *)(m.p[3] + ru * 4);
        const uint32_t sc = (m.p[4][rb * 4 + ib / 2] >> (4 * (ib & 1))) & 15u;
        o.W = st_w_iq3_s(st_h2f(ld_u16(m.p[0] + rb * 2)), (int)sc);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const uint32_t lo = ((k < 4 ? qs.x : qs.y) >> (8 * (k & 3))) & 0xffu;
            const uint32_t grid = g.iq3s[lo | (((qh >> k) & 1u) << 8)];
            o.w[k] = st_apply_signs4(grid, (sg >> (4 * k)) & 15u);
        }
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
};

template <> struct st_unit_dec<T_IQ3_XXS> {
    ST_DEV void get(const st_mat_dev &m, int64_t row, int u, const st_grids &g, st_dunit &o)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        const uint2 qs = *(const uint2 *)(m.p[1] + ru * 8);
        const uint32_t a = *(const uint32_t *)(m.p[2] + ru * 4);
        o.W = st_w_iq3_xxs(st_h2f(ld_u16(m.p[0] + rb * 2)), (int)(a >> 28));
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint32_t s7 = (a >> (7 * l)) & 127u;
            const uint32_t s8 = s7 | ((uint32_t)(st_popc(s7) & 1) << 7);
            const uint32_t q = l < 2 ? qs.x : qs.y;
            const uint32_t i1 = (q >> (16 * (l & 1))) & 0xffu, i2 = (q >> (16 * (l & 1) + 8)) & 0xffu;
            o.w[2 * l] = st_apply_signs4(g.iq3xxs[i1], s8 & 15u);
            o.w[2 * l + 1] = st_apply_signs4(g.iq3xxs[i2], s8 >> 4);
        }
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
};

template <> struct st_unit_dec<T_IQ2_S> {
    ST_DEV void get(const st_mat_dev &m, int64_t row, int u, const st_grids &g, st_dunit &o)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        const uint32_t qs = *(const uint32_t *)(m.p[1] + ru * 4);
        const uint32_t sg = *(const uint32_t *)(m.p[2] + ru * 4);
        const uint32_t qh = m.p[3][ru];
        const uint32_t sc = m.p[4][ru];
        o.W = st_w_iq2_s(st_h2f(ld_u16(m.p[0] + rb * 2)));
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint32_t idx = ((qs >> (8 * l)) & 0xffu) | (((qh >> (2 * l)) & 3u) << 8);
            const uint2 gv = g.iq2s[idx];
            const uint32_t s = (sg >> (8 * l)) & 0xffu;
            o.w[2 * l] = st_apply_signs4(gv.x, s & 15u);
            o.w[2 * l + 1] = st_apply_signs4(gv.y, s >> 4);
        }
        o.f0 = 2 * (int)(sc & 15u) + 1;
        o.f1 = 2 * (int)(sc >> 4) + 1;
        o.M = 0.0f;
    }
};

template <> struct st_unit_dec<T_Q4_K> {
    ST_DEV void get(const st_mat_dev &m, int64_t row, int u, const st_grids &, st_dunit &o)
    {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        const int j = u & 7;
        const uint8_t *S = m.p[3] + rb * 12;
        int sc, mn;
        if (j < 4) {
            sc = S[j] & 63;
            mn = S[j + 4] & 63;
        } else {
            sc = (S[j + 4] & 15) | ((S[j - 4] >> 6) << 4);
            mn = (S[j + 4] >> 4) | ((S[j] >> 6) << 4);
        }
        o.W = st_w_q4_k(st_h2f(ld_u16(m.p[0] + rb * 2)), sc);
        o.M = st_m_q4_k(st_h2f(ld_u16(m.p[2] + rb * 2)), mn);
        const uint4 q = *(const uint4 *)(m.p[1] + ru * 16);
        o.w[0] = q.x & 0x0f0f0f0fu; o.w[1] = q.y & 0x0f0f0f0fu;
        o.w[2] = q.z & 0x0f0f0f0fu; o.w[3] = q.w & 0x0f0f0f0fu;
        o.w[4] = (q.x >> 4) & 0x0f0f0f0fu; o.w[5] = (q.y >> 4) & 0x0f0f0f0fu;
        o.w[6] = (q.z >> 4) & 0x0f0f0f0fu; o.w[7] = (q.w >> 4) & 0x0f0f0f0fu;
        o.f0 = o.f1 = 1;
    }
};

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
