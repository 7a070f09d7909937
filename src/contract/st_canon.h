/* The exactness contract's float arithmetic, shared by the CPU reference
 * (C11, built with -ffp-contract=off) and the GPU kernels (HIP/CUDA, built
 * with contraction off and written with explicit _rn intrinsics). Every
 * float operation that reaches an output goes through these functions, so
 * all backends perform the same IEEE operations in the same order.
 * docs/DESIGN.md section 2; the constants are in include/strata/variants.h. */
#ifndef ST_CANON_H
#define ST_CANON_H

#include "strata/variants.h"

#include <stdint.h>
#include <string.h>
#if !defined(__CUDACC__) && !defined(__HIPCC__) && !defined(__HIP__)
#include <math.h>
#endif

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define ST_HD static __host__ __device__ inline
#else
#define ST_HD static inline
#endif

#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define ST_DEVICE_PASS 1
#else
#define ST_DEVICE_PASS 0
#endif

ST_HD uint32_t st_f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

ST_HD float st_u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- the four contract operations ------------------------------------ */
ST_HD float st_fmul(float a, float b)
{
#if ST_DEVICE_PASS
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

ST_HD float st_fadd(float a, float b)
{
#if ST_DEVICE_PASS
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

ST_HD float st_fma(float a, float b, float c)
{
#if ST_DEVICE_PASS
    return __fmaf_rn(a, b, c);
#else
    return fmaf(a, b, c);
#endif
}

ST_HD float st_fdiv(float a, float b)
{
#if ST_DEVICE_PASS
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

/* ---- binary16 --------------------------------------------------------- */
ST_HD float st_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        if (mant == 0) return st_u2f(sign);
        uint32_t e = 113;
        while (!(mant & 0x400u)) {
            mant <<= 1;
            e--;
        }
        return st_u2f(sign | (e << 23) | ((mant & 0x3ffu) << 13));
    }
    if (exp == 31) return st_u2f(sign | 0x7f800000u | (mant << 13));
    return st_u2f(sign | ((exp + 112u) << 23) | (mant << 13));
}

/* Round to nearest even, as __float2half_rn. */
ST_HD uint16_t st_float_to_half(float f)
{
    uint32_t x = st_f2u(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf, nan (quiet, payload kept where it fits) */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? (0x200u | ((ax >> 13) & 0x3ffu)) : 0u));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 -> inf */
    if (ax >= 0x38800000u) {                                  /* normal half */
        ax += 0xc8000fffu + ((ax >> 13) & 1u);
        return (uint16_t)(sign | (ax >> 13));
    }
    uint32_t e = ax >> 23;
    if (e < 102) return (uint16_t)sign; /* below 2^-25: rounds to zero */
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

/* ---- exp and silu from +, *, fma only ----------------------------------
 * Not a library transcendental: the same sequence of IEEE operations on
 * every backend. Accuracy about 2 ulp on the range that matters. */
ST_HD float st_exp2i(int n) /* 2^n for n in [-126, 127] */
{
    return st_u2f((uint32_t)(n + 127) << 23);
}

ST_HD float st_expf(float x)
{
    if (!(x == x)) return x;                 /* nan */
    if (x > 88.72283f) return st_u2f(0x7f800000u);
    if (x < -103.97208f) return 0.0f;
    const float magic = 12582912.0f;        /* 1.5 * 2^23: rounds to integer */
    float kf = st_fadd(st_fmul(x, 1.44269504f), magic);
    kf = st_fadd(kf, -magic);
    float r = st_fma(kf, -0.693145752f, x); /* ln2 high part, exact product */
    r = st_fma(kf, -1.42860677e-6f, r);     /* ln2 low part */
    float p = 1.38888889e-3f;               /* Taylor to degree 6 */
    p = st_fma(p, r, 8.33333333e-3f);
    p = st_fma(p, r, 4.16666667e-2f);
    p = st_fma(p, r, 1.66666667e-1f);
    p = st_fma(p, r, 0.5f);
    p = st_fma(p, r, 1.0f);
    p = st_fma(p, r, 1.0f);
    int n = (int)kf;
    int n1 = n / 2;
    return st_fmul(st_fmul(p, st_exp2i(n1)), st_exp2i(n - n1));
}

/* silu(g) * u, the gate-up combine of expert_grouped. */
ST_HD float st_silu_mul(float g, float u)
{
    float s = st_fdiv(g, st_fadd(1.0f, st_expf(-g)));
    return st_fmul(s, u);
}

/* gelu(g) * u, the GEGLU combine (ggml's gelu, the tanh form):
 * gelu(g) = g/2 (1 + tanh(z)) = g / (1 + exp(-2z)), z = sqrt(2/pi) (g +
 * 0.044715 g^3), in this order of operations:
 *   c = fma(0.044715 * g, g * g, g)   (g + 0.044715 g^3)
 *   e = exp(-2 sqrt(2/pi) * c)
 *   gelu = g / (1 + e);  result = gelu * u. */
ST_HD float st_gelu_mul(float g, float u)
{
    const float c = st_fma(st_fmul(0.044715f, g), st_fmul(g, g), g);
    const float e = st_expf(st_fmul(-1.59576912f, c));
    return st_fmul(st_fdiv(g, st_fadd(1.0f, e)), u);
}

/* gpt-oss's swiglu (ggml's swiglu_oai) with ALPHA and LIMIT: the gate
 * clamped from above, the up value to [-LIMIT, LIMIT] (comparisons: a NaN
 * stays NaN), then
 *   glu = g / (1 + exp(-(g * alpha)));  result = glu * (u + 1). */
ST_HD float st_swiglu_oai_mul(float g, float u, float alpha, float limit)
{
    g = g > limit ? limit : g;
    u = u > limit ? limit : u < -limit ? -limit : u;
    const float glu = st_fdiv(g, st_fadd(1.0f, st_expf(-st_fmul(g, alpha))));
    return st_fmul(glu, st_fadd(u, 1.0f));
}

/* ---- one unit's contribution to a stream ------------------------------
 * A unit is 32 weights (one q8_1 activation block). With isum the exact
 * integer dot of its integer weights with the q8_1 values, da the q8_1
 * block's f16 d as f32 and W the unit's float factor:
 *   acc = fma(W * da, isum, acc)
 * and, for a format with a min term (M its float factor, qm the integer
 * dot of the min factors with the q8_1 values):
 *   acc = fma(-(M * da), qm, acc).
 * Each format's W and M (st_w_<fmt>, st_m_<fmt>) and how it forms isum and
 * qm are in its home, src/contract/formats/<fmt>.h (format_home.h). */
ST_HD float st_canon_unit(float W, float da, int isum, float acc)
{
    return st_fma(st_fmul(W, da), (float)isum, acc);
}

ST_HD float st_canon_unit_min(float M, float da, int qm, float acc)
{
    return st_fma(-st_fmul(M, da), (float)qm, acc);
}

/* The same two operations taken apart, for kernels that form a unit's
 * factors in one thread and add them to the stream in another (the split
 * iq_mmvq, kernels/mmvq_split.h): st_canon_unit(W, da, isum, acc) ==
 * st_canon_add(st_canon_factor(W, da), (float)isum, acc), and
 * st_canon_unit_min(M, da, qm, acc) ==
 * st_canon_add(-st_canon_factor(M, da), (float)qm, acc), bit for bit (the
 * same IEEE operations on the same values; the int -> float conversion is
 * exact rounding to nearest wherever it runs). */
ST_HD float st_canon_factor(float W, float da) { return st_fmul(W, da); }

ST_HD float st_canon_add(float p, float fi, float acc) { return st_fma(p, fi, acc); }

/* The fixed butterfly over the 32 stream partials of a group: pairs i, i^16
 * first, down to i, i^1. V is overwritten; returns the group's value. */
ST_HD float st_canon_combine32(float *v)
{
    for (int h = 16; h >= 1; h >>= 1)
        for (int i = 0; i < h; i++) v[i] = st_fadd(v[i], v[i + h]);
    return v[0];
}

/* The stream groups of a row of NU units under iq_mmvq: 1 (32 streams), or
 * ST_CANON_WIDE_GROUPS (128 streams, stream s = u % 128 in group s / 32)
 * for rows of ST_CANON_WIDE_UNITS units or more. The expert kernels' rows
 * keep one group. (The constants are in include/strata/variants.h.) */
#if ST_CANON_WIDE_GROUPS != 4
#error "st_canon_groups4 combines exactly 4 groups"
#endif
ST_HD int st_canon_mmvq_groups(int64_t nu) { return nu >= ST_CANON_WIDE_UNITS ? ST_CANON_WIDE_GROUPS : 1; }

/* The row's value from its NG group values (NG 1 or 4): the butterfly over
 * the groups, (g0 + g2) + (g1 + g3). */
ST_HD float st_canon_groups4(float g0, float g1, float g2, float g3)
{
    return st_fadd(st_fadd(g0, g2), st_fadd(g1, g3));
}

#endif
