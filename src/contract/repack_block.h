/* One ggml block <-> the row-planar device layout (layout.h), written once
 * for the host (src/contract/repack.c: st_repack, st_unpack) and the device
 * (kernels/repack.hip: the repack of weights an engine already holds in
 * device memory), so both produce the same bytes by construction. Each block
 * field is copied to its plane; Q4_K's nibbles are regrouped so a unit's 32
 * values sit in 16 bytes (byte i = value i | value i+16 << 4), and IQ3_S's 32
 * sign bits of a unit are transposed (the sign of value 4k + t moves from bit
 * 4k + t to bit k + 8t). Lossless. Plain integer code, no library calls. */
#ifndef ST_REPACK_BLOCK_H
#define ST_REPACK_BLOCK_H

#include "layout.h"
#include "st_canon.h" /* ST_HD */

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t rows, nb, nu;
    size_t off[ST_MAX_PLANES];
    st_plane_spec spec;
} st_repack_plan;

/* N bytes at BLK <-> element IDX (of N bytes) of plane PLANE. */
ST_HD void st_rp_field(uint8_t *packed, uint8_t *blk, const st_repack_plan *p, int plane, int64_t idx, size_t n,
                       int to_packed)
{
    uint8_t *dst = packed + p->off[plane] + (size_t)idx * n;
    for (size_t i = 0; i < n; i++) {
        if (to_packed)
            dst[i] = blk[i];
        else
            blk[i] = dst[i];
    }
}

/* IQ3_S signs: bit 4k + t <-> bit k + 8t of the unit's 32-bit sign word
 * (little-endian bytes), k = group of 4 values, t = value in the group. */
ST_HD void st_rp_iq3s_signs(uint8_t *packed, uint8_t *blk, const st_repack_plan *p, int64_t unit, int to_packed)
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

/* Copies block BI (row-major block index) of type T (its ggml id) between
 * the ggml bytes BLK and the planes. Unpacking Q4_K needs BLK's nibble area
 * zeroed first (the low and high nibbles come from different units). */
ST_HD void st_rp_block(int t, const st_repack_plan *p, int64_t bi, uint8_t *blk, uint8_t *packed, int to_packed)
{
    switch (t) {
    case 8: /* Q8_0 */
        st_rp_field(packed, blk, p, 0, bi, 2, to_packed);
        st_rp_field(packed, blk + 2, p, 1, bi, 32, to_packed);
        break;
    case 20: /* IQ4_NL */
        st_rp_field(packed, blk, p, 0, bi, 2, to_packed);
        st_rp_field(packed, blk + 2, p, 1, bi, 16, to_packed);
        break;
    case 23: /* IQ4_XS */
        st_rp_field(packed, blk, p, 0, bi, 2, to_packed);
        st_rp_field(packed, blk + 2, p, 2, bi, 2, to_packed);
        st_rp_field(packed, blk + 4, p, 3, bi, 4, to_packed);
        for (int ib = 0; ib < 8; ib++) st_rp_field(packed, blk + 8 + 16 * ib, p, 1, bi * 8 + ib, 16, to_packed);
        break;
    case 21: /* IQ3_S */
        st_rp_field(packed, blk, p, 0, bi, 2, to_packed);
        for (int ib = 0; ib < 8; ib++) {
            st_rp_field(packed, blk + 2 + 8 * ib, p, 1, bi * 8 + ib, 8, to_packed);
            st_rp_field(packed, blk + 66 + ib, p, 2, bi * 8 + ib, 1, to_packed);
            st_rp_iq3s_signs(packed, blk + 74 + 4 * ib, p, bi * 8 + ib, to_packed);
        }
        st_rp_field(packed, blk + 106, p, 4, bi, 4, to_packed);
        break;
    case 18: /* IQ3_XXS */
        st_rp_field(packed, blk, p, 0, bi, 2, to_packed);
        for (int ib = 0; ib < 8; ib++) {
            st_rp_field(packed, blk + 2 + 8 * ib, p, 1, bi * 8 + ib, 8, to_packed);
            st_rp_field(packed, blk + 66 + 4 * ib, p, 2, bi * 8 + ib, 4, to_packed);
        }
        break;
    case 22: /* IQ2_S */
        st_rp_field(packed, blk, p, 0, bi, 2, to_packed);
        for (int ib = 0; ib < 8; ib++) {
            st_rp_field(packed, blk + 2 + 4 * ib, p, 1, bi * 8 + ib, 4, to_packed);
            st_rp_field(packed, blk + 34 + 4 * ib, p, 2, bi * 8 + ib, 4, to_packed);
            st_rp_field(packed, blk + 66 + ib, p, 3, bi * 8 + ib, 1, to_packed);
            st_rp_field(packed, blk + 74 + ib, p, 4, bi * 8 + ib, 1, to_packed);
        }
        break;
    case 12: { /* Q4_K */
        st_rp_field(packed, blk, p, 0, bi, 2, to_packed);
        st_rp_field(packed, blk + 2, p, 2, bi, 2, to_packed);
        st_rp_field(packed, blk + 4, p, 3, bi, 12, to_packed);
        for (int j = 0; j < 8; j++) {
            uint8_t *u = packed + p->off[1] + (size_t)(bi * 8 + j) * 16;
            uint8_t *q = blk + 16 + 32 * (j / 2);
            const int sh = 4 * (j % 2);
            for (int i = 0; i < 16; i++) {
                if (to_packed) {
                    u[i] = (uint8_t)(((q[i] >> sh) & 15) | (((q[i + 16] >> sh) & 15) << 4));
                } else {
                    q[i] = (uint8_t)((q[i] & ~(15 << sh)) | ((u[i] & 15) << sh));
                    q[i + 16] = (uint8_t)((q[i + 16] & ~(15 << sh)) | ((u[i] >> 4) << sh));
                }
            }
        }
        break;
    }
    default: break;
    }
}

#endif
