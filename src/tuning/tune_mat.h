/* A matrix of the tools library's runs in either layout (tune_mat.c):
 * repacked (st_matrix_create: the library's copy) or in place
 * (st_matrix_wrap over ggml's blocks uploaded to a buffer of the context,
 * as an engine holds them). The tuner, the gate and the benchmark make
 * their matrices here, so a table can be tuned and gated for the layout
 * the engine runs. Internal to the tools library. */
#ifndef ST_TUNE_MAT_H
#define ST_TUNE_MAT_H

#include "strata/decode.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    st_matrix *m;
    void *raw; /* in place: the uploaded blocks the matrix reads (the run's); NULL repacked */
} st_tune_mat;

/* HOST holds ROWS x COLS ggml blocks of TYPE (the caller's, read during
 * the call only: in place they are copied to a buffer of the context
 * first). On failure nothing is held and *OUT is zeroed. */
st_status st_tune_mat_make(st_ctx *c, st_qtype type, int64_t rows, int64_t cols, const void *host, bool in_place,
                           st_tune_mat *out);
/* Frees what st_tune_mat_make made (a zeroed one is fine). */
void st_tune_mat_free(st_ctx *c, st_tune_mat *t);

#endif
