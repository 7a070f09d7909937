#!/usr/bin/env bash
# The llama.cpp integration against the shipped tree (integrations/llama.cpp):
# apply.sh --check says it applies, apply.sh applies it (the option, the
# hooks, the two sources in ggml/src/ggml-cuda), a second apply is refused
# with one line and changes nothing, a tree that is not llama.cpp is refused;
# then ggml-strata.cu compiles against that tree's headers and ours: as host
# C++ (g++, -Wall -Wextra -Werror), for gfx1100 (clang++-19 -x hip, the HIP
# check's compiler) and for CUDA (nvcc) where those compilers are here.
#
# The tree: $LLAMA_CPP_DIR (a llama.cpp checkout, copied, never changed),
# else $LLAMA_CPP_TARBALL, else the shipped tarball beside the project
# (../shared/engines/llama.cpp-80fb11a.tar.xz). None: skipped (77) with a
# line saying how to point the test at one.
# Usage: llama_patch_test.sh SOURCE_DIR WORKDIR
set -uo pipefail
src=${1:?usage: llama_patch_test.sh SOURCE_DIR WORKDIR}
work=${2:?work directory}
tarball=${LLAMA_CPP_TARBALL:-$src/../shared/engines/llama.cpp-80fb11a.tar.xz}
rm -rf "$work"
mkdir -p "$work"
if [ -n "${LLAMA_CPP_DIR:-}" ]; then
  cp -r "$LLAMA_CPP_DIR" "$work/llama.cpp" || { echo "FAIL: copy $LLAMA_CPP_DIR"; exit 1; }
elif [ -f "$tarball" ]; then
  tar -xJf "$tarball" -C "$work" || { echo "FAIL: extract $tarball"; exit 1; }
else
  echo "SKIP: no llama.cpp tree (set LLAMA_CPP_DIR to a checkout or LLAMA_CPP_TARBALL to the shipped tarball)"
  exit 77
fi
t=$work/llama.cpp
apply=$src/integrations/llama.cpp/apply.sh
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
sum() { (cd "$t" && find ggml -type f | sort | xargs sha256sum) | sha256sum; }

mkdir -p "$work/not-llama"
out=$("$apply" "$work/not-llama" 2>&1) && fail "a tree without ggml-cuda was accepted"
[ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q "not a llama.cpp tree" || fail "refusal of a non-tree: '$out'"

before=$(sum)
"$apply" "$t" --check > "$work/check.txt" 2>&1 || { fail "apply.sh --check"; cat "$work/check.txt"; }
[ "$(sum)" = "$before" ] || fail "--check changed the tree"
"$apply" "$t" > "$work/apply.txt" 2>&1 || { fail "apply.sh"; cat "$work/apply.txt"; }
for f in ggml-strata.cu ggml-strata.cuh; do
  cmp -s "$src/integrations/llama.cpp/$f" "$t/ggml/src/ggml-cuda/$f" || fail "$f not in ggml/src/ggml-cuda"
done
grep -q 'option(GGML_CUDA_STRATA' "$t/ggml/CMakeLists.txt" || fail "no GGML_CUDA_STRATA option"
n=$(grep -c 'ggml_strata_' "$t/ggml/src/ggml-cuda/ggml-cuda.cu")
[ "$n" = 6 ] || fail "ggml-cuda.cu has $n hooks, expected 6"
after=$(sum)
out=$("$apply" "$t" 2>&1) && fail "a second apply was accepted"
echo "$out" | grep -q "already has the integration" || fail "second apply: '$out'"
[ "$(sum)" = "$after" ] || fail "the refused second apply changed the tree"
lines=$(wc -l < "$src/integrations/llama.cpp/llama.cpp-80fb11a.patch")
echo "patch: $lines lines; applies to $(basename "$tarball" .tar.xz)"

I=(-DGGML_CUDA_STRATA -isystem "$t/ggml/include" -isystem "$t/ggml/src" "-I$src/include")
g++ -std=c++17 -x c++ -Wall -Wextra -Werror "${I[@]}" -c "$t/ggml/src/ggml-cuda/ggml-strata.cu" -o "$work/strata-host.o" ||
  fail "ggml-strata.cu does not compile as host C++"
if command -v clang++-19 > /dev/null; then
  clang++-19 -x hip --offload-arch=gfx1100 --cuda-host-only -nogpuinc -nogpulib -std=c++17 -Wall -Werror "${I[@]}" \
    -c "$t/ggml/src/ggml-cuda/ggml-strata.cu" -o "$work/strata-gfx1100.o" && echo "compiled for gfx1100 (clang++-19 -x hip)" ||
    fail "ggml-strata.cu does not compile for gfx1100"
else
  echo "note: no clang++-19 here: the gfx1100 compile is the HIP check's (tools/gfx1100-check.sh)"
fi
if command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  NV=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  "$NV" -std=c++17 -x cu "${I[@]}" -c "$t/ggml/src/ggml-cuda/ggml-strata.cu" -o "$work/strata-cuda.o" &&
    echo "compiled for CUDA (nvcc)" || fail "ggml-strata.cu does not compile with nvcc"
fi
[ "$fails" = 0 ] && echo "llama.cpp integration: PASS" || echo "llama.cpp integration: $fails failures"
[ "$fails" = 0 ]
