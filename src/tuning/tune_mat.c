/* Matrices in either layout for the tools library (tune_mat.h). */
#include "tune_mat.h"

#include <string.h>

st_status st_tune_mat_make(st_ctx *c, st_qtype type, int64_t rows, int64_t cols, const void *host, bool in_place,
                           st_tune_mat *out)
{
    memset(out, 0, sizeof *out);
    if (!in_place) return st_matrix_create(c, type, rows, cols, host, &out->m);
    const size_t n = (size_t)rows * st_qtype_row_bytes(type, cols);
    st_status s = st_ctx_alloc(c, n, &out->raw);
    if (s == ST_OK) s = st_ctx_upload(c, out->raw, host, n);
    if (s == ST_OK) s = st_matrix_wrap(c, type, rows, cols, out->raw, &out->m);
    if (s != ST_OK) st_tune_mat_free(c, out);
    return s;
}

void st_tune_mat_free(st_ctx *c, st_tune_mat *t)
{
    st_matrix_destroy(t->m); /* before the bytes it reads */
    if (t->raw) st_ctx_free(c, t->raw);
    memset(t, 0, sizeof *t);
}
