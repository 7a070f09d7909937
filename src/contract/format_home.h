/* What every weight format's home (src/contract/formats/<fmt>.h) builds on.
 *
 * One home per format holds everything about it:
 *   - its ggml block as a named-field struct, st_block_<fmt>, shared by host
 *     and device code (byte offsets come from offsetof, nowhere else) and
 *     checked against the list's block size;
 *   - its canonical per-unit factors (st_w_<fmt>, st_m_<fmt>, written with
 *     st_canon.h's operations) and the comment that states the formula;
 *   - the host part (ST_FORMAT_HOST, compiled once, by format_ops.c): ggml's
 *     dequantizer bit for bit, the CPU unit decoder, the device layout (its
 *     planes) and the repack of one block, the scale fields of random test
 *     blocks; bundled as the st_format_ops table st_format_<ID>;
 *   - the device part (ST_FORMAT_DEVICE, defined by kernels/units.h): the GPU
 *     unit decoder st_unit_dec<ST_<ID>>, split into LOAD and DEC.
 * Each part has its own include guard, so a file may take the shared part
 * first and a part later. The list of formats is ST_QTYPES
 * (include/strata/formats.h); the build generates st_format_homes.h, which
 * includes every listed home (cmake/StrataFormats.cmake).
 *
 * The per-unit contract (st_canon.h): a unit is 32 values; its exact integer
 * weights w[j] times the q8_1 values q[j] give isum = sum w[j] q[j]
 * (w carries every integer sub-scale: per 16 values through the factors
 * f0/f1 of the two halves), and
 *   acc = st_canon_unit(W, da, isum, acc)           fma(W*da, isum, acc)
 *   acc = st_canon_unit_min(M, da, qm, acc)          fma(-(M*da), qm, acc)
 * where the second line is there only for formats with a min term, qm =
 * g0 * sum(q[0..15]) + g1 * sum(q[16..31]) with integer min factors g0/g1
 * (1 and 1 when the min is per 32 values) and M the float min factor
 * (negated for an additive min, so the same formula serves y = d q + m). */
#ifndef ST_FORMAT_HOME_H
#define ST_FORMAT_HOME_H

#include "strata/formats.h"
#include "layout.h"
#include "st_canon.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
#define ST_STATIC_ASSERT(c, msg) static_assert(c, msg)
#else
#define ST_STATIC_ASSERT(c, msg) _Static_assert(c, msg)
#endif

/* The list's numbers as constants: ST_QK_<ID>, ST_BYTES_<ID>. */
enum {
#define ST_FMT_CONST_(id, name, ggml, qk, bytes) ST_QK_##id = qk, ST_BYTES_##id = bytes,
    ST_QTYPES(ST_FMT_CONST_)
#undef ST_FMT_CONST_
};

/* A home's block struct must be exactly the list's block. */
#define ST_BLOCK_CHECK(id, type) \
    ST_STATIC_ASSERT(sizeof(type) == ST_BYTES_##id, #type " does not have the block size of ST_QTYPES")

/* Field F of block struct TYPE inside the bytes at B (any alignment). */
#define ST_FIELD(b, type, f) ((const uint8_t *)(b) + offsetof(type, f))

/* Little-endian loads, independent of the host's byte order and alignment. */
ST_HD uint16_t st_ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
ST_HD uint32_t st_ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
ST_HD float st_ldh(const uint8_t *p) { return st_half_to_float(st_ld16(p)); }

/* One decoded unit on the CPU: w[j] already carries any integer sub-scale
 * (w = f * q), so isum = sum w[j] q[j]; M and mf[] are the min term
 * (has_min), mf the integer min factors of the two halves. */
typedef struct {
    int16_t w[32];
    float W;
    float M;
    int16_t mf[2];
    bool has_min;
} st_unit;

/* Copies a block between its ggml bytes and the device layout's planes. */
typedef struct {
    uint8_t *plane[ST_MAX_PLANES]; /* base of each plane */
    int to_packed;                 /* 1: ggml -> planes, 0: planes -> ggml */
} st_repack_io;

/* The block repack's helpers, host and device (the homes' st_io_<ID>). */
/* N bytes of a block field <-> element IDX (of N bytes) of plane PL. */
ST_HD void st_io_field(const st_repack_io *io, int pl, int64_t idx, uint8_t *field, size_t n)
{
    uint8_t *dst = io->plane[pl] + (size_t)idx * n;
    for (size_t i = 0; i < n; i++) {
        if (io->to_packed)
            dst[i] = field[i];
        else
            field[i] = dst[i];
    }
}

/* Element IDX of N bytes of plane PL, for fields a repack transforms. */
ST_HD uint8_t *st_io_elem(const st_repack_io *io, int pl, int64_t idx, size_t n)
{
    return io->plane[pl] + (size_t)idx * n;
}

/* A unit's 32 sign-like bits transposed for word-wise extraction: bit 4k+t
 * (value t of group k of 4 values) <-> bit k + 8t, so the decoder gets group
 * k's four bits, one per byte, with a shift and a mask. Used for the IQ3_S
 * signs and the 5th bits of Q5_0/Q5_1/Q5_K. */
ST_HD uint32_t st_transpose_bits(uint32_t in, int to_packed)
{
    uint32_t out = 0;
    for (int k = 0; k < 8; k++)
        for (int t = 0; t < 4; t++) {
            const int a = 4 * k + t, b = k + 8 * t;
            if (to_packed ? (in >> a) & 1u : (in >> b) & 1u) out |= 1u << (to_packed ? b : a);
        }
    return out;
}

/* The same on 4 little-endian bytes: FROM (ggml side or plane) -> TO. */
ST_HD void st_io_transposed32(const st_repack_io *io, int pl, int64_t idx, uint8_t *field)
{
    uint8_t *dst = st_io_elem(io, pl, idx, 4);
    const uint8_t *from = io->to_packed ? field : dst;
    uint8_t *to = io->to_packed ? dst : field;
    const uint32_t out = st_transpose_bits(st_ld32(from), io->to_packed);
    for (int i = 0; i < 4; i++) to[i] = (uint8_t)(out >> (8 * i));
}

/* 32 four-bit values (SRC[l] >> SHIFT) & 15, l = 0..31, <-> 16 plane bytes
 * (element IDX of plane PL): byte i = value i | value i+16 << 4, the IQ4_NL
 * order, so the decoder splits each word with one mask and one shift.
 * Unpacking merges the bits into SRC, which the caller zeroed. The K formats'
 * low bits. */
ST_HD void st_io_nibbles(const st_repack_io *io, int pl, int64_t idx, uint8_t *src, int shift)
{
    uint8_t *u = st_io_elem(io, pl, idx, 16);
    if (io->to_packed) {
        for (int i = 0; i < 16; i++) u[i] = (uint8_t)(((src[i] >> shift) & 15) | (((src[i + 16] >> shift) & 15) << 4));
    } else {
        for (int i = 0; i < 16; i++) {
            src[i] = (uint8_t)(src[i] | ((u[i] & 15) << shift));
            src[i + 16] = (uint8_t)(src[i + 16] | ((u[i] >> 4) << shift));
        }
    }
}

/* 32 two-bit values (SRC[l] >> SHIFT) & 3, l = 0..31, <-> 8 plane bytes
 * (element IDX of plane PL): byte 4h + t holds values 16h + 4k + t at bits
 * 2k..2k+1 (k = 0..3), so the decoder gets the word of values 4k..4k+3 of
 * each half as (half >> 2k) & 0x03030303. Unpacking merges the bits into
 * SRC, which the caller zeroed. Used for Q2_K's and Q3_K's quants and Q6_K's
 * high bits. */
ST_HD void st_io_crumbs(const st_repack_io *io, int pl, int64_t idx, uint8_t *src, int shift)
{
    uint8_t *p = st_io_elem(io, pl, idx, 8);
    for (int h = 0; h < 2; h++)
        for (int t = 0; t < 4; t++) {
            if (io->to_packed) {
                uint8_t v = 0;
                for (int k = 0; k < 4; k++) v = (uint8_t)(v | (((src[16 * h + 4 * k + t] >> shift) & 3) << (2 * k)));
                p[4 * h + t] = v;
            } else {
                for (int k = 0; k < 4; k++)
                    src[16 * h + 4 * k + t] = (uint8_t)(src[16 * h + 4 * k + t] | (((p[4 * h + t] >> (2 * k)) & 3) << shift));
            }
        }
}

/* 32 one-bit values (SRC[l] >> SHIFT) & 1 <-> a 32-bit plane element,
 * transposed as st_transpose_bits (value 4k + t at bit k + 8t). Unpacking
 * merges into SRC, which the caller zeroed. Q3_K's high bits. */
ST_HD void st_io_bits_transposed(const st_repack_io *io, int pl, int64_t idx, uint8_t *src, int shift)
{
    uint8_t *p = st_io_elem(io, pl, idx, 4);
    if (io->to_packed) {
        uint32_t v = 0;
        for (int l = 0; l < 32; l++) v |= (uint32_t)((src[l] >> shift) & 1) << l;
        v = st_transpose_bits(v, 1);
        for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
    } else {
        const uint32_t v = st_transpose_bits(st_ld32(p), 0);
        for (int l = 0; l < 32; l++) src[l] = (uint8_t)(src[l] | (((v >> l) & 1) << shift));
    }
}

/* What the host needs of one format. */
typedef struct {
    int qk, bytes; /* values and bytes per block (ST_QTYPES) */
    /* One block of QK values, bit for bit as ggml's to_float. */
    void (*deq)(const uint8_t *blk, float *y);
    /* Unit J (0 .. QK/32-1) of one block (st_unit above). */
    void (*unit)(const uint8_t *blk, int j, st_unit *o);
    /* The device layout: planes and their bytes per row of K values. */
    void (*planes)(int64_t k, st_plane_spec *s);
    /* Block BI (row * blocks per row + block) <-> the planes. */
    void (*io)(const st_repack_io *io, int64_t bi, uint8_t *blk);
    /* Random test blocks (st_block_set_scales, src/tuning/randgen.c): overwrites the random
     * bytes of BLK's float scale fields so the block is finite and sane,
     * from D (a value of magnitude about 1e-3, either sign). */
    void (*scales)(uint8_t *blk, float d);
} st_format_ops;

#ifdef ST_FORMAT_HOST
static inline void st_put_f16(uint8_t *p, float v)
{
    const uint16_t h = st_float_to_half(v);
    p[0] = (uint8_t)(h & 0xff);
    p[1] = (uint8_t)(h >> 8);
}

/* The st_format_ops of a home: ST_FORMAT_OPS(ID, prefix) after the host
 * part, whose functions are prefix_deq, _unit, _planes, _scales, and the
 * shared part's st_io_ID. */
#define ST_FORMAT_OPS(id, p) \
    static const st_format_ops st_format_##id = {ST_QK_##id, ST_BYTES_##id, p##_deq, p##_unit, p##_planes, st_io_##id, p##_scales};
#endif

#endif
