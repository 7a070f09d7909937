/* A decode-step model on a context: a GGUF model's expert layers and dense
 * matrices, or a synthetic one from shapes, with inputs and routing ready.
 * Shared by the gate (verify.c) and the benchmark (vmodel.c). Internal to
 * the tools library. */
#ifndef ST_VMODEL_H
#define ST_VMODEL_H

#include "strata/tools/model.h"
#include "strata/tools/verify.h"

#include <stddef.h>

typedef struct st_vmodel st_vmodel;

/* st_model_open with the path in the message ("PATH: reason"). */
st_status st_vmodel_open_gguf(const char *path, st_model **m);
/* Uses model_path, or shapes/n_layers/n_expert/topk of O. */
st_status st_vmodel_open(st_ctx *c, const st_verify_options *o, st_vmodel **out);
/* The same for model M, already open (the caller keeps it open while the
 * decode model is used: the weights are copied, the names are not needed),
 * IN_PLACE as st_verify_options.in_place. */
st_status st_vmodel_open_model(st_ctx *c, const st_model *m, bool in_place, st_vmodel **out);
void st_vmodel_close(st_ctx *c, st_vmodel *vm);
/* Queues one decode step (every operation) for NT tokens. */
st_status st_vmodel_step(st_ctx *c, const st_vmodel *vm, int nt);
/* Waits for the step and copies every operation's output for NT tokens,
 * in operation order, to DST (host memory of st_vmodel_output_floats). */
st_status st_vmodel_outputs(st_ctx *c, const st_vmodel *vm, int nt, float *dst);
size_t st_vmodel_output_floats(const st_vmodel *vm, int nt);
/* Fills every operation's output for NT tokens with 0xff bytes (NaN), so a
 * run that leaves one unwritten is seen. */
st_status st_vmodel_poison_outputs(st_ctx *c, const st_vmodel *vm, int nt);
/* Operations per step; EXPERT_LAYERS gets the expert layers. */
int st_vmodel_ops(const st_vmodel *vm, int *expert_layers);
/* Operation I of the step: its name ("blk.0.ffn_*_exps", "blk.3.attn_q")
 * and its outputs per token (floats). */
int st_vmodel_op_count(const st_vmodel *vm);
const char *st_vmodel_op_name(const st_vmodel *vm, int i);
size_t st_vmodel_op_out(const st_vmodel *vm, int i);
/* Weight bytes a step for NT tokens reads: dense matrices whole, experts
 * only those the routing picks (unique per layer). */
size_t st_vmodel_weight_bytes(st_ctx *c, const st_vmodel *vm, int nt);

#endif
