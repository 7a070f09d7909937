/* ggml block rows <-> the row-planar device layout. Each block field is
 * copied to its plane; Q4_K's nibbles are regrouped so a unit's 32 values
 * sit in 16 bytes (byte i = value i | value i+16 << 4), and IQ3_S's 32 sign
 * bits of a unit are transposed (the sign of value 4k + t moves from bit
 * 4k + t to bit k + 8t, so the decoder gets group k's four signs, one per
 * byte, with a shift and a mask). Lossless. */
#include "repack.h"
#include "layout.h"
#include "internal.h"

#include <string.h>

typedef struct {
    int64_t rows, nb, nu;
    size_t off[ST_MAX_PLANES];
    st_plane_spec spec;
} plan;

static st_status make_plan(st_qtype t, int64_t rows, int64_t cols, plan *p, size_t *total)
{
    size_t rb = st_qtype_row_bytes(t, cols);
    if (!st_qtype_valid(t) || rows <= 0 || rb == 0)
        return st_fail(ST_ERR_INVALID_ARG, "repack: bad %s matrix %lld x %lld", st_qtype_name(t),
                       (long long)rows, (long long)cols);
    if (st_plane_spec_of((int)t, cols, &p->spec) != 0)
        return st_fail(ST_ERR_UNSUPPORTED, "repack: no device layout for %s", st_qtype_name(t));
    p->rows = rows;
    p->nu = cols / 32;
    p->nb = cols / st_qtype_block_values(t);
    size_t s = st_plane_offsets(&p->spec, rows, p->off);
    if (total) *total = s;
    return ST_OK;
}

size_t st_repack_size(st_qtype t, int64_t rows, int64_t cols)
{
    plan p;
    size_t total = 0;
    return make_plan(t, rows, cols, &p, &total) == ST_OK ? total : 0;
}

int st_repack_planes(st_qtype t, int64_t rows, int64_t cols, size_t off[5])
{
    plan p;
    if (make_plan(t, rows, cols, &p, NULL) != ST_OK) return 0;
    memcpy(off, p.off, sizeof p.off);
    return p.spec.n;
}

/* One field: N bytes at offset FOFF inside each block <-> plane I, stored per
 * unit/block index IDX with element size N. */
static void field(uint8_t *packed, uint8_t *blk, const plan *p, int plane, int64_t idx, size_t n,
                  int to_packed)
{
    uint8_t *dst = packed + p->off[plane] + (size_t)idx * n;
    if (to_packed)
        memcpy(dst, blk, n);
    else
        memcpy(blk, dst, n);
}

/* IQ3_S signs: bit 4k + t <-> bit k + 8t of the unit's 32-bit sign word
 * (little-endian bytes), k = group of 4 values, t = value in the group. */
static void iq3s_signs(uint8_t *packed, uint8_t *blk, const plan *p, int64_t unit, int to_packed)
{
    uint8_t *dst = packed + p->off[3] + (size_t)unit * 4;
    const uint8_t *from = to_packed ? blk : dst;
    uint8_t *to = to_packed ? dst : blk;
    uint32_t in = 0, out = 0;
    for (int i = 0; i < 4; i++) in |= (uint32_t)from[i] << (8 * i);
    for (int k = 0; k < 8; k++)
        for (int t = 0; t < 4; t++) {
            const int a = 4 * k + t, b = k + 8 * t;
            if (to_packed ? (in >> a) & 1u : (in >> b) & 1u) out |= 1u << (to_packed ? b : a);
        }
    for (int i = 0; i < 4; i++) to[i] = (uint8_t)(out >> (8 * i));
}

/* Copies block b of row r between the ggml bytes and the planes. */
static void block_io(st_qtype t, const plan *p, int64_t r, int64_t b, uint8_t *blk, uint8_t *packed, int to_packed)
{
    const int64_t bi = r * p->nb + b;     /* block index */
    switch (t) {
    case ST_Q8_0:
        field(packed, blk, p, 0, bi, 2, to_packed);
        field(packed, blk + 2, p, 1, bi, 32, to_packed);
        break;
    case ST_IQ4_NL:
        field(packed, blk, p, 0, bi, 2, to_packed);
        field(packed, blk + 2, p, 1, bi, 16, to_packed);
        break;
    case ST_IQ4_XS:
        field(packed, blk, p, 0, bi, 2, to_packed);
        field(packed, blk + 2, p, 2, bi, 2, to_packed);
        field(packed, blk + 4, p, 3, bi, 4, to_packed);
        for (int ib = 0; ib < 8; ib++) field(packed, blk + 8 + 16 * ib, p, 1, bi * 8 + ib, 16, to_packed);
        break;
    case ST_IQ3_S:
        field(packed, blk, p, 0, bi, 2, to_packed);
        for (int ib = 0; ib < 8; ib++) {
            field(packed, blk + 2 + 8 * ib, p, 1, bi * 8 + ib, 8, to_packed);
            field(packed, blk + 66 + ib, p, 2, bi * 8 + ib, 1, to_packed);
            iq3s_signs(packed, blk + 74 + 4 * ib, p, bi * 8 + ib, to_packed);
        }
        field(packed, blk + 106, p, 4, bi, 4, to_packed);
        break;
    case ST_IQ3_XXS:
        field(packed, blk, p, 0, bi, 2, to_packed);
        for (int ib = 0; ib < 8; ib++) {
            field(packed, blk + 2 + 8 * ib, p, 1, bi * 8 + ib, 8, to_packed);
            field(packed, blk + 66 + 4 * ib, p, 2, bi * 8 + ib, 4, to_packed);
        }
        break;
    case ST_IQ2_S:
        field(packed, blk, p, 0, bi, 2, to_packed);
        for (int ib = 0; ib < 8; ib++) {
            field(packed, blk + 2 + 4 * ib, p, 1, bi * 8 + ib, 4, to_packed);
            field(packed, blk + 34 + 4 * ib, p, 2, bi * 8 + ib, 4, to_packed);
            field(packed, blk + 66 + ib, p, 3, bi * 8 + ib, 1, to_packed);
            field(packed, blk + 74 + ib, p, 4, bi * 8 + ib, 1, to_packed);
        }
        break;
    case ST_Q4_K: {
        field(packed, blk, p, 0, bi, 2, to_packed);
        field(packed, blk + 2, p, 2, bi, 2, to_packed);
        field(packed, blk + 4, p, 3, bi, 12, to_packed);
        for (int j = 0; j < 8; j++) {
            uint8_t *u = packed + p->off[1] + (size_t)(bi * 8 + j) * 16;
            const uint8_t *q = blk + 16 + 32 * (j / 2);
            const int sh = 4 * (j % 2);
            if (to_packed) {
                for (int i = 0; i < 16; i++)
                    u[i] = (uint8_t)(((q[i] >> sh) & 15) | (((q[i + 16] >> sh) & 15) << 4));
            } else {
                uint8_t *qw = blk + 16 + 32 * (j / 2);
                for (int i = 0; i < 16; i++) {
                    qw[i] = (uint8_t)((qw[i] & ~(15 << sh)) | ((u[i] & 15) << sh));
                    qw[i + 16] = (uint8_t)((qw[i + 16] & ~(15 << sh)) | ((u[i] >> 4) << sh));
                }
            }
        }
        break;
    }
    default: break;
    }
}

static st_status run(st_qtype t, int64_t rows, int64_t cols, uint8_t *ggml, uint8_t *packed, int to_packed)
{
    plan p;
    size_t total;
    ST_TRY(make_plan(t, rows, cols, &p, &total));
    if (to_packed) memset(packed, 0, total);
    const size_t bb = (size_t)st_qtype_block_bytes(t), rb = st_qtype_row_bytes(t, cols);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < p.nb; b++) block_io(t, &p, r, b, ggml + (size_t)r * rb + (size_t)b * bb, packed, to_packed);
    return ST_OK;
}

st_status st_repack(st_qtype t, int64_t rows, int64_t cols, const void *ggml, void *dst)
{
    if (!ggml || !dst) return st_fail(ST_ERR_INVALID_ARG, "repack: NULL buffer");
    return run(t, rows, cols, (uint8_t *)(uintptr_t)ggml, dst, 1);
}

st_status st_unpack(st_qtype t, int64_t rows, int64_t cols, const void *packed, void *ggml)
{
    if (!ggml || !packed) return st_fail(ST_ERR_INVALID_ARG, "unpack: NULL buffer");
    if (t == ST_Q4_K) memset(ggml, 0, (size_t)rows * st_qtype_row_bytes(t, cols));
    return run(t, rows, cols, ggml, (uint8_t *)(uintptr_t)packed, 0);
}
