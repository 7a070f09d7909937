/* Sizes against memory (mem_fit.c): what a shape, a decode model and a
 * whole tune need, checked before anything is allocated, so a run that
 * does not fit is refused with one line that gives the bytes. Internal to
 * the tools library. */
#ifndef ST_MEM_FIT_H
#define ST_MEM_FIT_H

#include "strata/decode.h"
#include "strata/tools/model.h"
#include "strata/tools/verify.h"
#include "tuner_shapes.h"

#include <stdbool.h>
#include <stddef.h>

/* Weight bytes of a shape (mmvq: the matrix; expert: gate, up and down of
 * every expert) and of its activations and outputs for ST_MAX_TOKENS;
 * SIZE_MAX when the product overflows. */
size_t st_tune_shape_weight_bytes(const st_tune_shape *s);
size_t st_tune_shape_io_bytes(const st_tune_shape *s);
/* Refuses (ST_ERR_NOMEM, one line giving the bytes) when HOST bytes of host
 * memory and DEV bytes of the context's memory (the same memory on the CPU
 * backend) exceed what is available now. WHAT starts the message. */
st_status st_mem_fit(st_ctx *c, const char *what, size_t host, size_t dev);
/* Every shape's set-up in the tuner (st_mem_fit). */
st_status st_tune_shapes_fit(st_ctx *c, const st_tune_shape *s, int n, const st_tune_options *o);


/* The free-memory check before the sweep: ST_OK when NEED bytes fit in
 * FREE_B, else the one line with both numbers (and what NEED is made of). */
st_status st_tune_check_memory(size_t need, size_t rot_max, size_t gate, size_t free_b, size_t total_b, bool gpu);


/* Whether the weights of M (or, M NULL, the synthetic layers of O) fit the
 * context's memory now; a refusal is one line with the bytes. */
st_status st_vmodel_fit(st_ctx *c, const st_verify_options *o, const st_model *m);
#endif
