/* The shapes a tune measures (tuner_shapes.c): from a model, the demo set
 * or the command line, one per decode shape, with their keys as a table
 * row writes them. Internal to the tools library. */
#ifndef ST_TUNER_SHAPES_H
#define ST_TUNER_SHAPES_H

#include "strata/tools/model.h"
#include "strata/tools/tuner.h"

#include <stddef.h>

typedef enum { ST_SHAPE_MMVQ = 0, ST_SHAPE_EXPERT = 1 } st_shape_kind;

typedef struct {
    st_shape_kind kind;
    st_qtype type, down_type;   /* mmvq: type; expert: gate-up type, down type */
    int rows, cols;             /* mmvq */
    int n_embd, n_ff, n_tokens; /* expert (n_tokens is part of the key) */
    int n_expert, topk;
    const void *w[3];           /* the model's weights, or NULL: random valid blocks */
    char source[96];            /* "blk.0.attn_q.weight", "demo", "--shape" */
} st_tune_shape;

/* Builds the shape list for OPT (model, hand-given shapes or demo set). */
st_status st_tune_shapes(const st_tune_options *opt, const st_model *model, st_tune_shape **out, int *n);
/* The shape's key as a table row writes it ("mmvq iq3_s 4096 14336",
 * "expert iq3_s iq4_nl 2560 640 1": st_mmvq_key_text, st_expert_key_text). */
const char *st_tune_shape_key(const st_tune_shape *s, char *buf, size_t n);
/* Parses "expert GU DN N_EMBD N_FF N_TOKENS" / "mmvq TYPE ROWS COLS". */
st_status st_tune_parse_shape(const char *text, int n_expert, int topk, st_tune_shape *s);
#endif
