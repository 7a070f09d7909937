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

// Whether ggml_strata_mul_mat(_id) takes NODE, so ggml's own fusions leave
// it alone.
bool ggml_strata_takes(const ggml_tensor * node);

// STREAM is about to be destroyed: the strata-tune context on it goes too.
void ggml_strata_stream_destroyed(void * stream);
