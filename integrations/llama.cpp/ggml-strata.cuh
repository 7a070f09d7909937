// strata-tune in ggml-cuda (and ggml-hip, which compiles the same sources):
// decode MUL_MAT and MUL_MAT_ID of the weight types strata-tune runs, on its
// kernels, reading ggml's own weight bytes in place (st_matrix_wrap: no
// second copy). Built when GGML_CUDA_STRATA is defined (the CMake option
// GGML_CUDA_STRATA=ON); from strata-tune's integrations/llama.cpp, applied
// by its apply.sh. Part of strata-tune, not of llama.cpp.
#pragma once

#include "ggml.h"

// DST = MUL_MAT(SRC0, SRC1) on strata-tune when it takes the case (a
// weight type it runs, in a weights buffer, 1..32 tokens, f32 in and out);
// true when done, false to leave it to ggml. STREAM: the op's stream.
bool ggml_strata_mul_mat(int device, void * stream, const ggml_tensor * src0, const ggml_tensor * src1, ggml_tensor * dst);

// The same for MUL_MAT_ID (DST's sources: the expert weights, the
// activations, the ids).
bool ggml_strata_mul_mat_id(int device, void * stream, ggml_tensor * dst);

// The MoE FFN of a decode step as llama.cpp's graph spells it, from the
// node at I: the gate and up MUL_MAT_IDs (either order) on one input and one
// ids tensor, their GLU (swiglu or geglu, split form), the down MUL_MAT_ID,
// the MUL by the routing weights, then the views of the top-k slots and
// the chain of ADDs that sums them (views before or among the adds). Every
// intermediate is used only inside (ggml_can_fuse_subgraph). On a match:
// the tensors of the call and the number of nodes it stands for.
struct ggml_strata_ffn_match {
    const ggml_tensor * gate = nullptr, * up = nullptr, * down = nullptr; // the expert weights
    const ggml_tensor * x = nullptr, * ids = nullptr, * weights = nullptr;
    ggml_tensor *       out = nullptr;  // the last ADD
    int                 geglu = 0;      // 0: swiglu (silu), 1: geglu (gelu, tanh form)
    int                 n_nodes = 0;
};
bool ggml_strata_match_moe_ffn(const ggml_cgraph * cgraph, int i, ggml_strata_ffn_match & m);

// The matched FFN at node I as one strata-tune call (st_expert_ffn on the
// weights in place); the number of nodes it stood for, or 0 when it did not
// take them (no match, a type or size the library does not run, a refusal:
// nothing queued, ggml runs the nodes). Off with GGML_STRATA_FFN=0 in the
// environment: the per-op hooks serve the FFN then.
int ggml_strata_moe_ffn(int device, void * stream, const ggml_cgraph * cgraph, int i);

// ggml-cuda's graph_optimize: for each FFN the fused call will take, the
// inputs (x, ids, weights) are kept allocated until its output is made
// (ADD_DEP(USER, tensor, until): the scheduler's add_alloc_dep), so the
// output never lands on their memory.
void ggml_strata_graph_optimize(ggml_cgraph * cgraph, void (*add_dep)(void *, ggml_tensor *, ggml_tensor *), void * user);

// Whether ggml_strata_mul_mat(_id) takes NODE, so ggml's own fusions leave
// it alone.
bool ggml_strata_takes(const ggml_tensor * node);

// STREAM is about to be destroyed: the strata-tune context on it goes too.
void ggml_strata_stream_destroyed(void * stream);
