#!/usr/bin/env bash
# The MoE FFN matcher of the llama.cpp integration
# (ggml_strata_match_moe_ffn, integrations/llama.cpp/ggml-strata.cu) on
# graphs built by ggml itself (llama_ffn_match_test.cpp): built against the
# shipped tree's headers and the libggml-base of a llama.cpp build of that
# tree, and strata-tune's library. The build: LLAMA_CPP_BIN (the bin folder
# tools/build-llama-server.sh prints) or the CMake variable
# STRATA_LLAMA_CPP_BIN; the tree: LLAMA_CPP_DIR, LLAMA_CPP_TARBALL or the
# shipped tarball beside the project. Either missing: skipped (77) with the
# line saying how to name it.
# Usage: llama_ffn_match_test.sh SOURCE_DIR WORKDIR STRATA_LIB "CXXFLAGS" [LLAMA_BIN]
set -uo pipefail
src=${1:?usage: llama_ffn_match_test.sh SOURCE_DIR WORKDIR STRATA_LIB CXXFLAGS [LLAMA_BIN]}
work=${2:?work directory}
lib=${3:?the strata_tune library}
flags=${4:-}
bin=${5:-}
[ -n "$bin" ] || bin=${LLAMA_CPP_BIN:-}
if [ -z "$bin" ] || ! ls "$bin"/libggml-base.so > /dev/null 2>&1; then
  echo "SKIP: no libggml-base: set LLAMA_CPP_BIN (or configure with -DSTRATA_LLAMA_CPP_BIN=) to the bin folder of a"
  echo "      llama.cpp build of the shipped tree (tools/build-llama-server.sh ../shared/engines/llama.cpp-80fb11a.tar.xz DIR)"
  exit 77
fi
tarball=${LLAMA_CPP_TARBALL:-$src/../shared/engines/llama.cpp-80fb11a.tar.xz}
rm -rf "$work"
mkdir -p "$work"
if [ -n "${LLAMA_CPP_DIR:-}" ]; then
  t=$LLAMA_CPP_DIR
elif [ -f "$tarball" ]; then
  tar -xJf "$tarball" -C "$work" --wildcards '*/ggml/include/*' '*/ggml/src/*.h' || { echo "FAIL: extract $tarball"; exit 1; }
  t=$(ls -d "$work"/*/ | head -1)
else
  echo "SKIP: no llama.cpp tree (set LLAMA_CPP_DIR to a checkout or LLAMA_CPP_TARBALL to the shipped tarball)"
  exit 77
fi
# shellcheck disable=SC2086 # the flags are words
g++ -std=c++17 -Wall -Wextra -Werror $flags -DGGML_CUDA_STRATA -isystem "$t/ggml/include" -isystem "$t/ggml/src" \
  -I"$src/include" -I"$src/integrations/llama.cpp" -x c++ "$src/integrations/llama.cpp/ggml-strata.cu" \
  -x c++ "$src/tests/integrations/llama_ffn_match_test.cpp" -x none -L"$bin" -lggml-base -lggml-cpu -Wl,-rpath,"$bin" \
  "$lib" -Wl,-rpath,"$(dirname "$lib")" -o "$work/ffn_match" || { echo "FAIL: the matcher test does not build"; exit 1; }
"$work/ffn_match"
