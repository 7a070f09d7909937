#!/usr/bin/env bash
# Applies strata-tune's integration to a llama.cpp source tree:
#
#   integrations/llama.cpp/apply.sh LLAMA_CPP_DIR [--check]
#
# It copies ggml-strata.cu / ggml-strata.cuh into ggml/src/ggml-cuda/ (ggml-hip
# compiles that folder too) and applies llama.cpp-80fb11a.patch: the CMake
# option GGML_CUDA_STRATA (default OFF: the tree then builds as stock) and
# the six hooks in ggml-cuda.cu (MUL_MAT, MUL_MAT_ID, ggml's own mmvq fusion
# leaves what strata-tune takes, the MoE FFN as one call at the top of
# ggml_cuda_try_fuse, graph_optimize keeps that FFN's inputs allocated until
# its output is made, a stream's context ends with the stream), and a test
# case of test-backend-ops, MOE_FFN (the FFN subgraph llama.cpp builds).
# --check only tells whether it applies (nothing changes). Applying twice
# is refused with one line; nothing is changed when the patch does not apply.
# Then build llama.cpp with -DGGML_CUDA_STRATA=ON and
# -DCMAKE_PREFIX_PATH=<where strata-tune is installed> (docs/USER_GUIDE.md,
# "llama.cpp").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: apply.sh LLAMA_CPP_DIR [--check]" >&2; exit 2; }
dir=$1
check=0
[ "${2:-}" = --check ] && check=1
cu="$dir/ggml/src/ggml-cuda"
[ -f "$cu/ggml-cuda.cu" ] || { echo "apply.sh: $dir is not a llama.cpp tree (no ggml/src/ggml-cuda/ggml-cuda.cu)" >&2; exit 1; }
patch="$here/llama.cpp-80fb11a.patch"
# git apply inside another repository's work tree would skip every path
# outside the current directory: stop git's search at the tree itself (a
# llama.cpp checkout is found; a plain tree is patched as files)
dir=$(cd "$dir" && pwd)
export GIT_CEILING_DIRECTORIES=$(dirname "$dir")
if (cd "$dir" && git apply --reverse --check "$patch" 2> /dev/null); then
  echo "apply.sh: $dir already has the integration" >&2
  exit 1
fi
if ! err=$(cd "$dir" && git apply --check "$patch" 2>&1); then
  echo "apply.sh: the patch does not apply to $dir (made for llama.cpp 80fb11a): $(echo "$err" | head -1)" >&2
  exit 1
fi
if [ "$check" = 1 ]; then
  echo "apply.sh: the integration applies to $dir"
  exit 0
fi
(cd "$dir" && git apply "$patch")
cp "$here/ggml-strata.cu" "$here/ggml-strata.cuh" "$cu/"
echo "apply.sh: applied to $dir; build it with -DGGML_CUDA_STRATA=ON -DCMAKE_PREFIX_PATH=<strata-tune's install prefix>"
