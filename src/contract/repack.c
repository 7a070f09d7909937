/* ggml block rows <-> the row-planar device layout, on the host; the
 * per-block work is src/contract/repack_block.h, shared with the device. */
#include "repack.h"
#include "repack_block.h"
#include "internal.h"

#include <string.h>

typedef st_repack_plan plan;

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

st_status st_repack_plan_of(st_qtype t, int64_t rows, int64_t cols, st_repack_plan *p, size_t *total)
{
    return make_plan(t, rows, cols, p, total);
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

static st_status run(st_qtype t, int64_t rows, int64_t cols, uint8_t *ggml, uint8_t *packed, int to_packed)
{
    plan p;
    size_t total;
    ST_TRY(make_plan(t, rows, cols, &p, &total));
    if (to_packed) memset(packed, 0, total);
    const size_t bb = (size_t)st_qtype_block_bytes(t), rb = st_qtype_row_bytes(t, cols);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < p.nb; b++)
            st_rp_block((int)t, &p, r * p.nb + b, ggml + (size_t)r * rb + (size_t)b * bb, packed, to_packed);
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
