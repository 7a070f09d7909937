/* The device layout of quantized weights: row-planar. A matrix of R rows is
 * stored as up to ST_MAX_PLANES planes, each holding one field of every block, rows back
 * to back, so that a lane reading unit u of a row makes aligned, coalesced
 * loads (8 or 16 bytes of quants per unit) instead of 2-byte-aligned reads
 * inside 110-byte blocks. Lossless: the same bytes as ggml plus at most 15
 * bytes of alignment per plane. Part of the kernel-selection space.
 *
 * Each format's planes (what they hold, their element sizes) are listed in
 * its home, src/contract/formats/<fmt>.h, next to the repack of one block
 * (its io()) and the GPU decoder that reads them (nb = blocks per row,
 * nu = 32-value units per row).
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
    /* The in-place layout (st_matrix_wrap): ggml's blocks as the engine
     * holds them, row r at p[0] + r * rb, read by each home's load_blk;
     * 0 in the row-planar layout. */
    int64_t rb;
} st_mat_dev;

/* The in-place layout's alignment guarantee for blocks of BYTES bytes: the
 * largest power of two dividing BYTES, at most 16 (IQ3_S's 110 -> 2, Q4_K's
 * 144 -> 16, IQ4_XS's 136 -> 8, MXFP4's 17 -> 1). The wrap requires p[0] and
 * rb to be multiples of it, so every block starts aligned to it; the
 * homes' load_blk issue only loads that alignment allows (a GPU faults on a
 * misaligned load) and name their format's value blk_align. */
#define ST_BLK_ALIGN(bytes) \
    ((bytes) % 16 == 0 ? 16 : (bytes) % 8 == 0 ? 8 : (bytes) % 4 == 0 ? 4 : (bytes) % 2 == 0 ? 2 : 1)

/* A format's planes: N of them, PER_ROW bytes of each per row. */
typedef struct {
    int n;
    size_t per_row[ST_MAX_PLANES]; /* bytes of each plane per row */
} st_plane_spec;

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
