/* Internal: the model description's state, shared by model.c (the tensors)
 * and model_meta.c (the MoE metadata and the checks against it). */
#ifndef STRATA_MODEL_INTERNAL_H
#define STRATA_MODEL_INTERNAL_H

#include "gguf.h"
#include "tools_internal.h"
#include "strata/tools/model.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* Expert tensor slots of one layer: the merged gate, up, down tensors, a
 * fused gate_up tensor, and the first of a split (one per expert) layout. */
enum { ST_EXP_GATE, ST_EXP_UP, ST_EXP_DOWN, ST_EXP_FUSED, ST_EXP_SPLIT, ST_EXP_SLOTS };

struct st_model {
    st_gguf *g;
    char *arch, *name;
    st_model_moe moe;
    bool has_expert_count; /* <arch>.expert_count present (0 is a value) */
    st_model_expert_layer *layers;
    size_t n_layers, cap_layers;
    st_model_matrix *mats;
    size_t n_mats, cap_mats;
    st_model_matrix *skipped;
    size_t n_skipped, cap_skipped;
    st_model_omission *omitted;
    size_t n_omitted, cap_omitted;
    size_t *omit_order; /* tensor index of each omission, for the order */
    size_t cap_omit_order;
    st_model_expert_shape *eshapes;
    size_t n_eshapes, cap_eshapes;
    st_model_mmvq_shape *mshapes;
    size_t n_mshapes, cap_mshapes;
};

st_status st_model_grow(void **arr, size_t *cap, size_t need, size_t elem);
/* ggml's name of a type id ("q5_1"), or "type 200". */
void st_model_type_label(char *dst, size_t n, uint32_t ggml_type);

/* Appends an omission of LAYER (tensor index ORDER: its place in the list)
 * named NAME, the reason from FMT. */
st_status st_model_omit(st_model *m, int layer, size_t order, const char *name, const char *fmt, ...)
    ST_PRINTF(5, 6);
/* Sorts the omissions by layer, ties by tensor index. */
void st_model_sort_omitted(st_model *m);

/* Reads <arch>.* into m->moe and refuses values beyond the limits. */
st_status st_model_read_moe(st_model *m);
/* The shared-expert FFN matrices against the metadata. */
st_status st_model_check_shared(const st_model *m);

#endif
