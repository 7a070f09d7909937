/* The device layout of quantized weights: row-planar. A matrix of R rows is
 * stored as up to 6 planes, each holding one field of every block, rows back
 * to back, so that a lane reading unit u of a row makes aligned, coalesced
 * loads (8 or 16 bytes of quants per unit) instead of 2-byte-aligned reads
 * inside 110-byte blocks. Lossless: the same bytes as ggml plus at most 15
 * bytes of alignment per plane. Part of the kernel-selection space.
 *
 * Planes per type (nb = blocks per row, nu = 32-value units per row):
 *   Q8_0    0: d u16[R][nu]      1: qs i8[R][nu][32]
 *   IQ4_NL  0: d u16[R][nu]      1: qs u8[R][nu][16]
 *   IQ4_XS  0: d u16[R][nb]      1: qs u8[R][nu][16]  2: scales_h u16[R][nb]  3: scales_l u8[R][nb][4]
 *   IQ3_S   0: d u16[R][nb]      1: qs u8[R][nu][8]   2: qh u8[R][nu]  3: signs u32[R][nu]  4: scales u8[R][nb][4]
 *           (signs transposed: value 4k + t's sign at bit k + 8t)
 *   IQ3_XXS 0: d u16[R][nb]      1: qs u8[R][nu][8]   2: scales_and_signs u32[R][nu]
 *   IQ2_S   0: d u16[R][nb]      1: qs u8[R][nu][4]   2: signs u8[R][nu][4]  3: qh u8[R][nu]  4: scales u8[R][nu]
 *   Q4_K    0: d u16[R][nb]      1: qs u8[R][nu][16] (unit's 32 nibbles: byte i = elem i | elem i+16 << 4)
 *           2: dmin u16[R][nb]   3: scales u8[R][nb][12]
 */
#ifndef ST_LAYOUT_H
#define ST_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_PLANES 5

typedef struct {
    const uint8_t *p[ST_MAX_PLANES];
    int64_t rows;
    int nb; /* blocks per row */
    int nu; /* units per row */
} st_mat_dev;

typedef struct {
    int n;
    size_t per_row[ST_MAX_PLANES]; /* bytes of each plane per row */
} st_plane_spec;

/* Plane sizes of type T (ggml id) for rows of K values. */
static inline int st_plane_spec_of(int t, int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32), nb256 = (size_t)(k / 256);
    s->n = 0;
    switch (t) {
    case 8: /* Q8_0 */ s->n = 2; s->per_row[0] = 2 * nu; s->per_row[1] = 32 * nu; break;
    case 20: /* IQ4_NL */ s->n = 2; s->per_row[0] = 2 * nu; s->per_row[1] = 16 * nu; break;
    case 23: /* IQ4_XS */
        s->n = 4; s->per_row[0] = 2 * nb256; s->per_row[1] = 16 * nu; s->per_row[2] = 2 * nb256;
        s->per_row[3] = 4 * nb256; break;
    case 21: /* IQ3_S */
        s->n = 5; s->per_row[0] = 2 * nb256; s->per_row[1] = 8 * nu; s->per_row[2] = nu;
        s->per_row[3] = 4 * nu; s->per_row[4] = 4 * nb256; break;
    case 18: /* IQ3_XXS */
        s->n = 3; s->per_row[0] = 2 * nb256; s->per_row[1] = 8 * nu; s->per_row[2] = 4 * nu; break;
    case 22: /* IQ2_S */
        s->n = 5; s->per_row[0] = 2 * nb256; s->per_row[1] = 4 * nu; s->per_row[2] = 4 * nu;
        s->per_row[3] = nu; s->per_row[4] = nu; break;
    case 12: /* Q4_K */
        s->n = 4; s->per_row[0] = 2 * nb256; s->per_row[1] = 16 * nu; s->per_row[2] = 2 * nb256;
        s->per_row[3] = 12 * nb256; break;
    default: return -1;
    }
    return 0;
}

static inline size_t st_align16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Byte offset of each plane for R rows; returns the total size. */
static inline size_t st_plane_offsets(const st_plane_spec *s, int64_t rows, size_t off[ST_MAX_PLANES])
{
    size_t total = 0;
    for (int i = 0; i < s->n; i++) {
        off[i] = total;
        total = st_align16(total + s->per_row[i] * (size_t)rows);
    }
    return total;
}

#endif
