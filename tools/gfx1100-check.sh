#!/usr/bin/env bash
# gfx1100 build check (no AMD card needed): compiles every kernel source for
# gfx1100 with clang-19 (kernels/*.hip and the per-format instantiations
# generated from ST_QTYPES, cmake/StrataFormats.cmake), prints the per-kernel
# resource table (VGPR, SGPR, scratch, LDS, occupancy) from
# -Rpass-analysis=kernel-resource-usage, and fails when a kernel uses scratch
# (spills) or when a format's kernels lack the int8 dot instruction
# v_dot4_i32_iu8. Usage: tools/gfx1100-check.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh --hip
BC=${ROCM_DEVICE_LIB_PATH:-$(tools/fetch-gfx11-devlibs.sh | tail -1)}
OUT=${1:-build/gfx1100}
mkdir -p "$OUT/gen"
cmake -DST_SOURCE_DIR="$PWD" -DST_OUT="$OUT/gen" -P cmake/StrataFormats.cmake
cat > "$OUT/gen/st_build_info.h" <<'H'
#define ST_VERSION_STRING "check"
#define ST_HOST_COMPILER_HASH "check"
#define ST_GPU_COMPILER_HASH "check"
#define ST_GPU_BACKEND_NAME "hip"
H
CXX=${HIP_CXX:-clang++-19}
FLAGS=(-xhip --offload-arch=gfx1100 --rocm-path=/usr "--rocm-device-lib-path=$BC" -O3 -std=c++17
       -ffp-contract=off -Iinclude -Isrc/contract -Ikernels "-I$OUT/gen")
pids=()
for f in kernels/*.hip "$OUT"/gen/*.hip; do
  n=$(basename "$f" .hip)
  ( "$CXX" "${FLAGS[@]}" --cuda-device-only -S -Rpass-analysis=kernel-resource-usage "$f" -o "$OUT/$n.s" \
      2> "$OUT/$n.remarks" || { echo "gfx1100-check: $f failed to compile:" >&2; cat "$OUT/$n.remarks" >&2; exit 1; } ) &
  pids+=($!)
  if [ ${#pids[@]} -ge "$(nproc)" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p"; done
python3 tools/gfx1100_report.py "$OUT"
# The llama.cpp integration's own source (host code beside ggml-hip's
# kernels), against the shipped tree's headers when the tree is here
# (LLAMA_CPP_DIR, LLAMA_CPP_TARBALL or ../shared/engines).
LT=${LLAMA_CPP_TARBALL:-../shared/engines/llama.cpp-80fb11a.tar.xz}
if [ -n "${LLAMA_CPP_DIR:-}" ] || [ -f "$LT" ]; then
  LD=${LLAMA_CPP_DIR:-$OUT/llama.cpp}
  [ -n "${LLAMA_CPP_DIR:-}" ] || [ -d "$LD/ggml" ] || tar -xJf "$LT" -C "$OUT"
  "$CXX" -xhip --offload-arch=gfx1100 --rocm-path=/usr --cuda-host-only -std=c++17 -Wall -Werror -DGGML_CUDA_STRATA \
    -isystem "$LD/ggml/include" -isystem "$LD/ggml/src" -Iinclude -c integrations/llama.cpp/ggml-strata.cu \
    -o "$OUT/ggml-strata.o" || { echo "gfx1100-check: integrations/llama.cpp/ggml-strata.cu failed to compile for gfx1100" >&2; exit 1; }
  echo "gfx1100-check: integrations/llama.cpp/ggml-strata.cu compiles for gfx1100 (HIP host code)"
else
  echo "gfx1100-check: no llama.cpp tree here (LLAMA_CPP_DIR / LLAMA_CPP_TARBALL): the integration's compile is skipped"
fi
# Vector instructions per 32-weight unit of each format (decode + dot + accumulate).
"$CXX" "${FLAGS[@]}" --cuda-device-only -S tools/isa/unit_probe.hip -o "$OUT/unit_probe.s"
python3 tools/isa_count.py "$OUT/unit_probe.s"
