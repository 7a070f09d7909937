/* strata-tune: what a GGUF model file asks of the decode kernels.
 *
 * st_model_open() reads a llama.cpp/ggml GGUF file (v2 or v3) and describes
 * the weights one decode step multiplies: the MoE expert layers (for the
 * expert_grouped kernels) and the dense matrices (for iq_mmvq), plus the
 * deduplicated shapes the tuner sweeps. The file stays mapped read-only while
 * the model is open; every data pointer below points into that mapping and
 * is valid until st_model_close(). The file format itself stays private.
 */
#ifndef STRATA_MODEL_H
#define STRATA_MODEL_H

#include "strata/version.h"

#include "strata/formats.h"
#include "strata/status.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct st_model st_model;

/* One MoE layer's expert weights: blk.N.ffn_{gate,up,down}_exps.weight.
 * gate and up are [n_expert][n_ff][n_embd] (ggml ne = {n_embd, n_ff,
 * n_expert}); down is [n_expert][n_embd][n_ff] (ne = {n_ff, n_embd,
 * n_expert}). Rows are stored in the types' ggml block formats. */
typedef struct {
    int layer;                /* N of blk.N */
    st_qtype gu_type;         /* gate and up (always the same type) */
    st_qtype down_type;
    int n_embd, n_ff, n_expert;
    int n_expert_used;        /* st_model_expert_used() */
    const void *gate, *up, *down;
    size_t gu_bytes;          /* bytes of the whole gate tensor (= up) */
    size_t down_bytes;        /* bytes of the whole down tensor */
} st_model_expert_layer;

/* A dense weight the decode multiplies by the activations: n_rows outputs,
 * each a dot product of n_cols values (n_cols = ggml ne0 = K, n_rows = ne1). */
typedef struct {
    char name[96];            /* tensor name (cut if longer); the tied output is
                                 "token_embd.weight (tied output)" */
    st_qtype type;            /* ST_QTYPE_NONE when the kernels cannot run it */
    int ggml_type;            /* the type id the file stores */
    char type_name[24];       /* ggml's name ("q5_1"), or "type 200" */
    int layer;                /* N of blk.N; -1 outside the blocks */
    int n_rows, n_cols;
    const void *data;         /* NULL when the type's layout is unknown */
    size_t bytes;             /* 0 when the type's layout is unknown */
} st_model_matrix;

/* A distinct expert shape: what an "expert" row of a tuning table keys on. */
typedef struct {
    st_qtype gu_type, down_type;
    int n_embd, n_ff;
    int n_expert;             /* of the first layer with the shape */
    int n_layers;             /* expert layers that have this shape */
    size_t first;             /* st_model_expert_layer_at() index of the first */
} st_model_expert_shape;

/* A distinct dense shape: what an "mmvq" row of a tuning table keys on. */
typedef struct {
    st_qtype type;
    int n_rows, n_cols;
    int n_matrices;           /* matrices that have this shape */
    size_t first;             /* st_model_matrix_at() index of the first */
} st_model_mmvq_shape;

/* Opens and maps the GGUF file PATH and builds its description into *OUT.
 * Fails (and *OUT is NULL, st_last_error() says why) when the file is not a
 * well-formed GGUF (ST_ERR_PARSE), cannot be read (ST_ERR_IO), or has an
 * expert layer that is incomplete, inconsistent (ST_ERR_PARSE) or stored in
 * a type the expert kernels do not support (ST_ERR_UNSUPPORTED). Dense
 * matrices of unsupported types do not fail: they are listed with type
 * ST_QTYPE_NONE. */
ST_API st_status st_model_open(const char *path, st_model **out);

/* Unmaps the file and frees everything. NULL is ok. */
ST_API void st_model_close(st_model *m);

/* general.architecture ("qwen3moe"); "" when the file names none. */
ST_API const char *st_model_arch(const st_model *m);

/* general.name; when absent, the file's base name without ".gguf". */
ST_API const char *st_model_name(const st_model *m);

/* <arch>.expert_used_count (experts each token picks); 0 if absent. */
ST_API int st_model_expert_used(const st_model *m);

/* The expert layers, in increasing layer order. _at returns NULL past the
 * end. */
ST_API size_t st_model_expert_layer_count(const st_model *m);
ST_API const st_model_expert_layer *st_model_expert_layer_at(const st_model *m, size_t i);

/* The dense matrices in file order: blk.N.attn_*.weight,
 * blk.N.ffn_{gate,up,down}[_shexp].weight, a router blk.N.ffn_gate_inp.weight
 * only when its type is a supported quant type, and output.weight (or, when
 * the file has none, token_embd.weight as the tied output). 1-D tensors
 * (norms) are never listed. _at returns NULL past the end. */
ST_API size_t st_model_matrix_count(const st_model *m);
ST_API const st_model_matrix *st_model_matrix_at(const st_model *m, size_t i);

/* 2-D weights the decode multiplies in float rather than through the quant
 * kernels, so they are no decode shape: routers (blk.N.ffn_gate_inp.weight)
 * stored as f32/f16/any unsupported type. Listed so tools can say so. */
ST_API size_t st_model_skipped_count(const st_model *m);
ST_API const st_model_matrix *st_model_skipped_at(const st_model *m, size_t i);

/* The deduplicated decode shapes the tuner consumes, in first-seen order.
 * Expert shapes are keyed by (gu_type, down_type, n_embd, n_ff), in layer
 * order; mmvq shapes by (type, n_rows, n_cols) over the matrices whose type
 * is supported, in matrix order. _at returns NULL past the end. */
ST_API size_t st_model_expert_shape_count(const st_model *m);
ST_API const st_model_expert_shape *st_model_expert_shape_at(const st_model *m, size_t i);
ST_API size_t st_model_mmvq_shape_count(const st_model *m);
ST_API const st_model_mmvq_shape *st_model_mmvq_shape_at(const st_model *m, size_t i);

#ifdef __cplusplus
}
#endif
#endif
