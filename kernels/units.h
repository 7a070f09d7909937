/* Device decoding of one 32-weight unit of each format from the row-planar
 * layout (layout.h) into eight words of four int8 weights, plus the unit's
 * float factor W, integer half-factors f0/f1 and the min term's factors
 * (st_dunit), and the contract's float work around the exact int8 dots
 * (st_unit_fma, st_canon.h). The decoders themselves live in the formats'
 * homes (src/contract/formats/<fmt>.h, their ST_FORMAT_DEVICE part), which
 * this header includes for every format of ST_QTYPES. Integer work is exact
 * in any order; the float work is the contract's. */
#ifndef ST_UNITS_H
#define ST_UNITS_H

#include "st_gpu.h"
#include "layout.h"
#include "st_canon.h"
#include "grids.h"

/* The device copies of the lookup tables (grids.h ST_DEVICE_GRIDS), one
 * field each; the GPU backend uploads them once (st_gpu_open). */
typedef struct {
#define ST_GRID_FIELD_(name, type, table) const type *name;
    ST_DEVICE_GRIDS(ST_GRID_FIELD_)
#undef ST_GRID_FIELD_
} st_grids;

/* A decoded unit: 8 words of 4 int8 weights (values 4k..4k+3 in word k),
 * the float factor W, the integer factors f0/f1 of the two 16-value halves
 * (1 unless the format has sub-scales per 16), and for a min term the float
 * factor M and the integer min factors g0/g1 (st_unit_plain's traits say
 * which are used). */
struct st_dunit {
    uint32_t w[8];
    float W, M;
    int f0, f1;
    int g0, g1;
};

/* Negates the bytes of G (magnitudes 1..127) whose bit in the low 4 bits
 * of NIB is set: bit-parallel, no per-byte loop. */
ST_DEV uint32_t st_apply_signs4(uint32_t g, uint32_t nib)
{
    const uint32_t m = ((nib * 0x00204081u) & 0x01010101u) * 0xffu;
    return (g ^ m) + (m & 0x01010101u);
}

/* The same with the signs of group K transposed (formats/iq3_s.h): bit
 * K + 8t of T is the sign of byte t. */
ST_DEV uint32_t st_apply_signs_t(uint32_t g, uint32_t t, int k)
{
    const uint32_t b = (t >> k) & 0x01010101u;
    return (g ^ (b * 0xffu)) + b;
}

ST_DEV uint16_t ld_u16(const uint8_t *p) { return *(const uint16_t *)p; }

/* Byte-wise V - C as int8, for bytes of V in 0..127 and of C in 0..128:
 * with bit 7 set first no byte borrows from the next. */
ST_DEV uint32_t st_sub_bytes(uint32_t v, uint32_t c) { return ((v | 0x80808080u) - c) ^ 0x80808080u; }

/* ---- the in-place layout (layout.h, rb != 0) ------------------------------
 * ggml's blocks where the engine holds them: row r at p[0] + r * rb, unit u
 * in block u / (QK/32) at sub-unit u % (QK/32). The wrap guarantees that
 * p[0] and rb are multiples of ST_BLK_ALIGN(block bytes), so a field at
 * offset OFF of a block is aligned to st_align_of(A, OFF); the loads below
 * are the widest that allows (st_ld_at: a GPU faults on a misaligned load,
 * and the host emulation checks it). Each home's LOAD_BLK reads a unit's
 * bytes with them and rebuilds in registers the raw that LOAD reads from
 * the planes (the lossless transforms of st_io_<ID>), so DEC serves both
 * layouts unchanged. */

/* The alignment of a field at offset OFF of a block aligned to A. */
ST_HD constexpr int st_align_of(int a, int off) { return off % a == 0 ? a : (off & -off); }

/* The block holding unit U of row ROW, and the unit's index in it (J). */
template <int QK, int BYTES>
ST_DEV const uint8_t *st_blk_of(const st_mat_dev &m, int64_t row, int u, int &j)
{
    constexpr unsigned per = QK / 32;
    j = (int)((unsigned)u % per);
    return m.p[0] + row * m.rb + (int64_t)((unsigned)u / per * (unsigned)BYTES);
}

/* The alignment of field F of block TYPE plus a multiple of STEP bytes,
 * inside a home's decoder (its blk_align in scope). */
#define ST_ALIGN_AT(type, f, step) st_align_of(st_align_of(blk_align, (int)offsetof(type, f)), step)
/* BITS (16, 32, 64 or 128) bits at field F of block B plus STEP * I bytes,
 * with the widest loads its alignment allows. */
#define ST_LDB(bits, b, type, f, step, i) \
    st_ld##bits##a<ST_ALIGN_AT(type, f, step)>(ST_FIELD(b, type, f) + (step) * (i))

/* 2, 4, 8 or 16 little-endian bytes at P, aligned to A (a power of two). */
template <int A> ST_DEV uint16_t st_ld16a(const uint8_t *p)
{
    if constexpr (A >= 2)
        return st_ld_at<uint16_t>(p);
    else
        return (uint16_t)(p[0] | (p[1] << 8));
}

template <int A> ST_DEV uint32_t st_ld32a(const uint8_t *p)
{
    if constexpr (A >= 4)
        return st_ld_at<uint32_t>(p);
    else
        return (uint32_t)st_ld16a<A>(p) | ((uint32_t)st_ld16a<A>(p + 2) << 16);
}

template <int A> ST_DEV uint2 st_ld64a(const uint8_t *p)
{
    if constexpr (A >= 8) {
        return st_ld_at<uint2>(p);
    } else {
        uint2 r;
        r.x = st_ld32a<A>(p);
        r.y = st_ld32a<A>(p + 4);
        return r;
    }
}

template <int A> ST_DEV uint4 st_ld128a(const uint8_t *p)
{
    if constexpr (A >= 16) {
        return st_ld_at<uint4>(p);
    } else {
        const uint2 a = st_ld64a<A>(p), b = st_ld64a<A>(p + 8);
        uint4 r;
        r.x = a.x;
        r.y = a.y;
        r.z = b.x;
        r.w = b.y;
        return r;
    }
}

/* N bytes (a multiple of 4) at P, aligned to A, as words (word i = bytes
 * 4i..4i+3); HEADROOM bytes before P are in the block too. At A = 2 with
 * ST_FUNNEL_LOADS (st_gpu.h) the words come from 4-aligned u32 loads and a
 * funnel shift by P's place in its word (0 or 16 bits): N/4 + 1 loads
 * instead of N/2 u16 loads. The last two bytes are a u16 load, so nothing
 * after P + N is read; the first word reads the two bytes before P when P
 * is not 4-aligned, which needs HEADROOM >= 2 (else two u16 loads make
 * it). */
template <int A, int N, int HEADROOM> ST_DEV void st_ld_words(const uint8_t *p, uint32_t (&w)[N / 4])
{
    static_assert(N % 4 == 0 && N >= 8, "whole words");
    if constexpr (A >= 16 && N % 16 == 0) {
#pragma unroll
        for (int i = 0; i < N / 16; i++) {
            const uint4 v = st_ld_at<uint4>(p + 16 * i);
            w[4 * i] = v.x;
            w[4 * i + 1] = v.y;
            w[4 * i + 2] = v.z;
            w[4 * i + 3] = v.w;
        }
    } else if constexpr (A >= 8 && N % 8 == 0) {
#pragma unroll
        for (int i = 0; i < N / 8; i++) {
            const uint2 v = st_ld_at<uint2>(p + 8 * i);
            w[2 * i] = v.x;
            w[2 * i + 1] = v.y;
        }
    } else if constexpr (A >= 4) {
#pragma unroll
        for (int i = 0; i < N / 4; i++) w[i] = st_ld_at<uint32_t>(p + 4 * i);
    } else if (A == 2 && ST_FUNNEL_LOADS) {
        const uint32_t sh = ((uint32_t)(uintptr_t)p & 2u) * 8u;
        const uint8_t *q = p - (sh >> 3); /* 4-aligned */
        uint32_t a[N / 4 + 1];
        if constexpr (HEADROOM >= 2) {
            a[0] = st_ld_at<uint32_t>(q);
        } else {
            const uint32_t h0 = st_ld_at<uint16_t>(p), h1 = st_ld_at<uint16_t>(p + 2);
            a[0] = sh ? h0 << 16 : h0 | (h1 << 16);
        }
#pragma unroll
        for (int i = 1; i < N / 4; i++) a[i] = st_ld_at<uint32_t>(q + 4 * i);
        a[N / 4] = st_ld_at<uint16_t>(p + N - 2);
#pragma unroll
        for (int i = 0; i < N / 4; i++) w[i] = st_funnel_r(a[i], a[i + 1], sh);
    } else {
#pragma unroll
        for (int i = 0; i < N / 4; i++) w[i] = st_ld32a<A>(p + 4 * i);
    }
}

/* 16 bytes at P, aligned to 1 only, with one byte of the block before P
 * and none after (MXFP4's qs). With ST_FUNNEL_LOADS: the three 4-aligned
 * words inside the span, the head and the tail word each from two loads at
 * addresses chosen by P's place in its word (always aligned and in the
 * block, so no branch), and a funnel shift: 7 loads instead of 16 bytes. */
ST_DEV uint4 st_ld128_a1_head1(const uint8_t *p)
{
    if (!ST_FUNNEL_LOADS) return st_ld128a<1>(p);
    const uint32_t o = (uint32_t)(uintptr_t)p & 3u;
    const uint8_t *q = p - o; /* 4-aligned */
    /* head: bytes q..q+3 from P on; o <= 1: the word at q (o = 1: with the
     * byte before P); o >= 2: the two bytes at q + 2 (o = 3: with it) */
    const uint32_t h32 = st_ld_at<uint32_t>(o <= 1 ? q : q + 4), h16 = st_ld_at<uint16_t>(q + 2);
    const uint32_t head = o <= 1 ? h32 : h16 << 16;
    /* tail: the O bytes at q + 16 (q + 12 and P are harmless stand-ins) */
    const uint32_t t16 = st_ld_at<uint16_t>(o >= 2 ? q + 16 : q + 12);
    const uint32_t t8 = *(o == 1 ? q + 16 : o == 3 ? q + 18 : p);
    const uint32_t tail = o == 1 ? t8 : o == 2 ? t16 : t16 | (t8 << 16);
    const uint32_t a1 = st_ld_at<uint32_t>(q + 4), a2 = st_ld_at<uint32_t>(q + 8), a3 = st_ld_at<uint32_t>(q + 12);
    const uint32_t sh = 8 * o;
    uint4 r;
    r.x = st_funnel_r(head, a1, sh);
    r.y = st_funnel_r(a1, a2, sh);
    r.z = st_funnel_r(a2, a3, sh);
    r.w = st_funnel_r(a3, tail, sh);
    return r;
}

/* N bytes at field F of block B plus STEP * I bytes as words (above). */
#define ST_LDW(n, b, type, f, step, i, w) \
    st_ld_words<ST_ALIGN_AT(type, f, step), n, (int)offsetof(type, f)>(ST_FIELD(b, type, f) + (step) * (i), w)

ST_DEV uint4 st_uint4(const uint32_t *w)
{
    uint4 r;
    r.x = w[0];
    r.y = w[1];
    r.z = w[2];
    r.w = w[3];
    return r;
}

ST_DEV uint2 st_uint2(const uint32_t *w)
{
    uint2 r;
    r.x = w[0];
    r.y = w[1];
    return r;
}

/* st_transpose_bits(X, 1) in registers: bit 4k + t -> bit k + 8t is the
 * 5-bit bit index rotated by two places, four swaps of index bits
 * (0-1, 0-2, 1-3, 2-4), each one delta swap. */
ST_DEV uint32_t st_transpose_bits_dev(uint32_t x)
{
    uint32_t t;
    t = (x ^ (x >> 1)) & 0x22222222u; x ^= t ^ (t << 1);
    t = (x ^ (x >> 3)) & 0x0a0a0a0au; x ^= t ^ (t << 3);
    t = (x ^ (x >> 6)) & 0x00cc00ccu; x ^= t ^ (t << 6);
    t = (x ^ (x >> 12)) & 0x0000f0f0u; x ^= t ^ (t << 12);
    return x;
}

/* st_io_nibbles' plane element of the 32 bytes W at SHIFT: byte i =
 * (byte i >> SHIFT) & 15 | ((byte i + 16 >> SHIFT) & 15) << 4. */
ST_DEV uint4 st_nibbles_dev(const uint32_t (&w)[8], int shift)
{
    uint32_t q[4];
#pragma unroll
    for (int k = 0; k < 4; k++) q[k] = ((w[k] >> shift) & 0x0f0f0f0fu) | (((w[k + 4] >> shift) & 0x0f0f0f0fu) << 4);
    uint4 r;
    r.x = q[0];
    r.y = q[1];
    r.z = q[2];
    r.w = q[3];
    return r;
}

/* st_io_crumbs' plane element of the 32 bytes W at SHIFT: byte 4h + t =
 * the 2-bit values (byte 16h + 4k + t >> SHIFT) & 3 at bits 2k. */
ST_DEV uint2 st_crumbs_dev(const uint32_t (&w)[8], int shift)
{
    uint2 r;
    r.x = r.y = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        r.x |= ((w[k] >> shift) & 0x03030303u) << (2 * k);
        r.y |= ((w[k + 4] >> shift) & 0x03030303u) << (2 * k);
    }
    return r;
}

/* st_io_bits_transposed's plane element of the 32 bytes W at SHIFT: bit
 * k + 8t = bit SHIFT of byte 4k + t. */
ST_DEV uint32_t st_bits_transposed_dev(const uint32_t (&w)[8], int shift)
{
    uint32_t r = 0;
#pragma unroll
    for (int k = 0; k < 8; k++) r |= ((w[k] >> shift) & 0x01010101u) << k;
    return r;
}

/* Each decoder is split in two: LOAD fetches the unit's raw bytes (all of
 * its global loads, nothing that depends on them), DEC turns them into
 * st_dunit (grid lookups and integer work). The row dot issues the loads of
 * several units before decoding any, so each lane keeps several requests in
 * flight instead of one latency per unit. GET = LOAD + DEC. LOAD_BLK fills
 * the same raw from the in-place layout (above). */
template <int TYPE> struct st_unit_dec;

#define ST_UNIT_GET                                                                        \
    ST_DEV void get(const st_mat_dev &m, int64_t row, int u, const st_grids &g, st_dunit &o) \
    {                                                                                      \
        raw r;                                                                             \
        load(m, row, u, r);                                                                \
        dec(r, u, g, o);                                                                   \
    }

/* The 16-entry int8 lookup (st_lut16) of the 32 nibbles of a unit: Q's
 * byte i holds value i (low nibble) and value i + 16 (high nibble). */
ST_DEV void st_lut_words(const uint4 q, const uint32_t tab[4], st_dunit &o)
{
    st_lut16(q.x, tab, o.w[0], o.w[4]);
    st_lut16(q.y, tab, o.w[1], o.w[5]);
    st_lut16(q.z, tab, o.w[2], o.w[6]);
    st_lut16(q.w, tab, o.w[3], o.w[7]);
}

/* What st_unit_fma and the grid staging need to know of a format; a
 * decoder derives from this and overrides what differs:
 *   halves      isum = f0 * (dot of values 0..15) + f1 * (16..31)
 *   min         a min term acc = fma(-(M * da), qm, acc) follows
 *   min_halves  qm = g0 * sum(q[0..15]) + g1 * sum(q[16..31]), else sum(q)
 *   grid_bytes  the lookup table to stage in LDS (0: none), with grid() and
 *               set_grid() naming its st_grids field */
struct st_unit_plain {
    static constexpr bool halves = false, min = false, min_halves = false;
    static constexpr int grid_bytes = 0;
    ST_DEV const uint32_t *grid(const st_grids &) { return nullptr; }
    ST_DEV void set_grid(st_grids &, const uint32_t *) {}
};

/* The in-place layout (st_matrix_wrap: ggml's blocks where the engine
 * holds them, row r at m.p[0] + r * m.rb): kernel type number
 * ST_IN_PLACE + T is format T's decoder with the loads of its blocks (the
 * home's load_blk, which fills the same raw as load), so every kernel
 * template takes the in-place layout as one more type and the decoded
 * units, hence the bytes out, are the planar layout's. */
constexpr int ST_IN_PLACE = 64;
ST_HD constexpr bool st_in_place(int type) { return type >= ST_IN_PLACE; }
ST_HD constexpr int st_base_type(int type) { return type >= ST_IN_PLACE ? type - ST_IN_PLACE : type; }

template <int TYPE> struct st_unit_dec : st_unit_dec<TYPE - ST_IN_PLACE> {
    static_assert(TYPE >= ST_IN_PLACE, "a format without a decoder");
    using B = st_unit_dec<TYPE - ST_IN_PLACE>;
    using raw = typename B::raw;
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r) { B::load_blk(m, row, u, r); }
    ST_DEV void get(const st_mat_dev &m, int64_t row, int u, const st_grids &g, st_dunit &o)
    {
        raw r;
        load(m, row, u, r);
        B::dec(r, u, g, o);
    }
};

/* The formats' decoders, from their homes (src/contract/formats/). */
#define ST_FORMAT_DEVICE 1
#include "st_format_homes.h"
#undef ST_UNIT_GET

/* The exact integer parts of one unit against one activation block: ISUM
 * (with the format's half factors) and, for a min term, QM. */
template <int TYPE>
ST_DEV void st_unit_isums(const st_dunit &un, const int4 &a, const int4 &b, int &isum, int &qm)
{
    int s0 = st_dot4_i8((int)un.w[0], a.x, 0);
    s0 = st_dot4_i8((int)un.w[1], a.y, s0);
    s0 = st_dot4_i8((int)un.w[2], a.z, s0);
    s0 = st_dot4_i8((int)un.w[3], a.w, s0);
    int s1 = st_dot4_i8((int)un.w[4], b.x, 0);
    s1 = st_dot4_i8((int)un.w[5], b.y, s1);
    s1 = st_dot4_i8((int)un.w[6], b.z, s1);
    s1 = st_dot4_i8((int)un.w[7], b.w, s1);
    using D = st_unit_dec<TYPE>;
    isum = D::halves ? un.f0 * s0 + un.f1 * s1 : s0 + s1;
    qm = 0;
    if (D::min && D::min_halves) {
        int q0 = st_dot4_i8(0x01010101, a.x, 0);
        q0 = st_dot4_i8(0x01010101, a.y, q0);
        q0 = st_dot4_i8(0x01010101, a.z, q0);
        q0 = st_dot4_i8(0x01010101, a.w, q0);
        int q1 = st_dot4_i8(0x01010101, b.x, 0);
        q1 = st_dot4_i8(0x01010101, b.y, q1);
        q1 = st_dot4_i8(0x01010101, b.z, q1);
        q1 = st_dot4_i8(0x01010101, b.w, q1);
        qm = un.g0 * q0 + un.g1 * q1;
    } else if (D::min) {
        int q = st_dot4_i8(0x01010101, a.x, 0);
        q = st_dot4_i8(0x01010101, a.y, q);
        q = st_dot4_i8(0x01010101, a.z, q);
        q = st_dot4_i8(0x01010101, a.w, q);
        q = st_dot4_i8(0x01010101, b.x, q);
        q = st_dot4_i8(0x01010101, b.y, q);
        q = st_dot4_i8(0x01010101, b.z, q);
        q = st_dot4_i8(0x01010101, b.w, q);
        qm = q;
    }
}

/* One unit's contribution to one stream: the contract's float operations
 * (st_canon.h) around an exact integer dot. */
template <int TYPE>
ST_DEV float st_unit_fma(const st_dunit &un, const int4 &a, const int4 &b, float da, float acc)
{
    int isum, qm;
    st_unit_isums<TYPE>(un, a, b, isum, qm);
    float v = st_canon_unit(un.W, da, isum, acc);
    if (st_unit_dec<TYPE>::min) v = st_canon_unit_min(un.M, da, qm, v);
    return v;
}

#endif
