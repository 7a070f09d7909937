/* Repacking ggml rows into the device layout (layout.h) and back.
 * Plain C on the host: the GPU backend uploads what st_repack produces, and
 * the CPU tests check the round trip. Internal. */
#ifndef ST_REPACK_H
#define ST_REPACK_H

#include "strata/formats.h"
#include "strata/status.h"
#include "layout.h"

#include <stddef.h>
#include <stdint.h>

/* Bytes of the device layout of ROWS x COLS of type T (0 when invalid). */
size_t st_repack_size(st_qtype t, int64_t rows, int64_t cols);
/* Byte offset of each plane inside the packed buffer; returns plane count. */
int st_repack_planes(st_qtype t, int64_t rows, int64_t cols, size_t off[ST_MAX_PLANES]);
/* ggml rows -> device layout (DST has st_repack_size bytes). */
st_status st_repack(st_qtype t, int64_t rows, int64_t cols, const void *ggml, void *dst);
/* device layout -> ggml rows (the inverse, for tests). */
st_status st_unpack(st_qtype t, int64_t rows, int64_t cols, const void *packed, void *ggml);

#endif
