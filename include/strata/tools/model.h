/* strata-tune: what a GGUF model file asks of the decode kernels.
 *
 * st_model_open() reads a llama.cpp/ggml GGUF file (v2 or v3) and describes
 * the weights one decode step multiplies: the MoE expert layers (for the
 * expert_grouped kernels) and the dense matrices (for iq_mmvq: attention,
 * dense and shared-expert FFN, linear-attention projections, routers stored
 * in a quant type, the output), plus the deduplicated shapes the tuner
 * sweeps, and the MoE layout the file's metadata declares. The tensor names
 * are llama.cpp's (qwen3moe, qwen2moe, qwen3next, deepseek2, olmoe,
 * mixtral-style llama, gpt-oss and any other architecture that uses them).
 *
 * One tensor never refuses the model: an expert layer whose tensors are of a
 * type the expert kernels do not support, or stored in a layout they do not
 * run, is left out and listed once (st_model_omitted_at) with the one line
 * that says why; a dense matrix of such a type is listed with type
 * ST_QTYPE_NONE. The file stays mapped read-only while the model is open;
 * every data pointer below points into that mapping and is valid until
 * st_model_close(). The file format itself stays private.
 */
#ifndef STRATA_MODEL_H
#define STRATA_MODEL_H

#include "strata/tools/base.h"

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

/* Something of the decode step the description leaves out, once per item,
 * with the one line that says why: an expert layer whose types the expert
 * kernels do not support (or whose gate and up types differ), experts
 * stored one tensor per expert (old mixtral files) or with gate and up fused
 * in one tensor, or a 3-D per-head weight (deepseek2 attn_k_b / attn_v_b).
 * Dense matrices of unsupported types are not here: they stay in the matrix
 * list with type ST_QTYPE_NONE. */
typedef struct {
    int layer;                /* N of blk.N; -1 outside the blocks */
    char name[96];            /* "blk.N experts" or the tensor name (cut if longer) */
    char reason[200];         /* "blk.3.ffn_down_exps.weight has type f16, which the
                                 expert kernels do not support" (one line) */
} st_model_omission;

/* The MoE layout the metadata declares: <arch>.<key>, 0 when the file has
 * none. st_model_open checks the tensors against it the way llama.cpp does
 * (a file that contradicts it is refused, ST_ERR_PARSE). */
typedef struct {
    int n_layer;              /* block_count */
    int n_embd;               /* embedding_length */
    int n_expert;             /* expert_count */
    int n_expert_used;        /* expert_used_count: the top-k */
    int n_expert_shared;      /* expert_shared_count: shared experts beside the
                                 routed ones (deepseek2) */
    int n_ff_expert;          /* expert_feed_forward_length: n_ff of a routed expert */
    int n_ff_shared;          /* expert_shared_feed_forward_length (qwen2moe,
                                 qwen3next); when 0, a shared FFN has
                                 n_ff_expert * n_expert_shared rows */
    int n_leading_dense;      /* leading_dense_block_count: blocks before the
                                 first MoE block (deepseek2) */
} st_model_moe;

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
 * Fails (and *OUT is NULL, st_last_error() says why, in one line) when the
 * file is not a well-formed GGUF (ST_ERR_PARSE), cannot be read (ST_ERR_IO),
 * has an expert layer that is incomplete or whose tensors disagree with each
 * other or with the metadata, or a shared-expert FFN or a leading dense
 * block that disagrees with the metadata (ST_ERR_PARSE: llama.cpp refuses
 * such a file too), or goes beyond the limits of strata/limits.h
 * (ST_ERR_UNSUPPORTED: more than ST_MAX_EXPERTS experts in a layer or
 * expert_count, expert_used_count above ST_MAX_TOPK; the line names the
 * limit and the model's value). Types never fail: see above. */
ST_API st_status st_model_open(const char *path, st_model **out);

/* Unmaps the file and frees everything. NULL is ok. */
ST_API void st_model_close(st_model *m);

/* general.architecture ("qwen3moe"); "" when the file names none. */
ST_API const char *st_model_arch(const st_model *m);

/* general.name; when absent, the file's base name without ".gguf". */
ST_API const char *st_model_name(const st_model *m);

/* <arch>.expert_used_count (experts each token picks); 0 if absent. */
ST_API int st_model_expert_used(const st_model *m);

/* The MoE metadata of the file (see st_model_moe); never NULL. */
ST_API const st_model_moe *st_model_moe_info(const st_model *m);

/* The expert layers, in increasing layer order. _at returns NULL past the
 * end. */
ST_API size_t st_model_expert_layer_count(const st_model *m);
ST_API const st_model_expert_layer *st_model_expert_layer_at(const st_model *m, size_t i);

/* The dense matrices in file order: 2-D blk.N.attn_*.weight,
 * blk.N.ffn_{gate,up,down}.weight (dense FFN blocks),
 * blk.N.ffn_{gate,up,down}_shexp.weight (the shared experts: dense matrices
 * of every decode step), blk.N.ssm_{in,out,ba}.weight (linear-attention
 * projections, qwen3next), a router blk.N.ffn_gate_inp.weight only when its
 * type is a supported quant type, and output.weight (or, when the file has
 * none, token_embd.weight as the tied output). 1-D tensors (norms, biases)
 * and convolution weights are never listed. _at returns NULL past the end. */
ST_API size_t st_model_matrix_count(const st_model *m);
ST_API const st_model_matrix *st_model_matrix_at(const st_model *m, size_t i);

/* 2-D weights the decode multiplies in float rather than through the quant
 * kernels, so they are no decode shape: routers (blk.N.ffn_gate_inp.weight)
 * stored as f32/f16/any unsupported type. Listed so tools can say so. */
ST_API size_t st_model_skipped_count(const st_model *m);
ST_API const st_model_matrix *st_model_skipped_at(const st_model *m, size_t i);

/* What the description leaves out (st_model_omission), in increasing layer
 * order (-1 first), ties in file order. _at returns NULL past the end. */
ST_API size_t st_model_omitted_count(const st_model *m);
ST_API const st_model_omission *st_model_omitted_at(const st_model *m, size_t i);

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
