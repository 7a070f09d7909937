/* ggml block rows <-> the row-planar device layout (layout.h). Each format's
 * home says which planes it has (its planes()) and how one block's fields
 * go to them (its io(): plain copies, or a lossless regrouping such as
 * Q4_K's nibbles or IQ3_S's transposed signs). */
#include "repack.h"
#include "format_ops.h"
#include "internal.h"
#include "layout.h"

#include <string.h>

typedef struct {
    const st_format_ops *f;
    int64_t rows, nb;
    size_t off[ST_MAX_PLANES];
    st_plane_spec spec;
} plan;

static st_status make_plan(st_qtype t, int64_t rows, int64_t cols, plan *p, size_t *total)
{
    const size_t rb = st_qtype_row_bytes(t, cols);
    p->f = st_format_ops_of(t);
    if (!p->f || rows <= 0 || rb == 0)
        return st_fail(ST_ERR_INVALID_ARG, "repack: bad %s matrix %lld x %lld", st_qtype_name(t),
                       (long long)rows, (long long)cols);
    memset(&p->spec, 0, sizeof p->spec);
    p->f->planes(cols, &p->spec);
    p->rows = rows;
    p->nb = cols / p->f->qk;
    const size_t s = st_plane_offsets(&p->spec, rows, p->off);
    if (total) *total = s;
    return ST_OK;
}

size_t st_repack_size(st_qtype t, int64_t rows, int64_t cols)
{
    plan p;
    size_t total = 0;
    return make_plan(t, rows, cols, &p, &total) == ST_OK ? total : 0;
}

int st_repack_planes(st_qtype t, int64_t rows, int64_t cols, size_t off[ST_MAX_PLANES])
{
    plan p;
    if (make_plan(t, rows, cols, &p, NULL) != ST_OK) return 0;
    memcpy(off, p.off, sizeof p.off);
    return p.spec.n;
}

static st_status run(st_qtype t, int64_t rows, int64_t cols, uint8_t *ggml, uint8_t *packed, int to_packed)
{
    plan p;
    size_t total = 0;
    ST_TRY(make_plan(t, rows, cols, &p, &total));
    const size_t bb = (size_t)p.f->bytes, rb = st_qtype_row_bytes(t, cols);
    /* zeroed first: the alignment padding, and the fields an unpack merges
     * bits into */
    if (to_packed)
        memset(packed, 0, total);
    else
        memset(ggml, 0, (size_t)rows * rb);
    st_repack_io io;
    memset(&io, 0, sizeof io);
    io.to_packed = to_packed;
    for (int i = 0; i < p.spec.n; i++) io.plane[i] = packed + p.off[i];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < p.nb; b++) p.f->io(&io, r * p.nb + b, ggml + (size_t)r * rb + (size_t)b * bb);
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
    return run(t, rows, cols, ggml, (uint8_t *)(uintptr_t)packed, 0);
}
