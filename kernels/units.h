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
