#!/usr/bin/env bash
# One whole build-test-measure cycle on a machine with an NVIDIA GPU and no
# package access (the device recipe of the shared TOOLCHAIN notes): extracts
# the cJSON/CMocka .debs carried in .device/debs into a private prefix,
# builds the cuda configuration, runs the gpu tests, then any extra command
# given as arguments. Logs go to $OUT (or build/device-logs).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/device-logs}
mkdir -p "$OUT" /tmp/deps build
for f in .device/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
B=${BUILD_DIR:-$PWD/build/device}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1
t0=$(date +%s)
cmake -S . -B "$B" -DSTRATA_GPU_BACKEND=CUDA -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH=/tmp/deps/usr > "$B.configure.log" 2>&1 || { tail -30 "$B.configure.log"; exit 1; }
cmake --build "$B" -j"$(nproc)" > "$B.build.log" 2>&1 || { grep -E "error" "$B.build.log" | head -40; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  (cd "$B" && ctest -L gpu -V -j1 ${CTEST_ARGS:-} > "$B.ctest-gpu.log" 2>&1)
  rc=$?
  cp "$B.ctest-gpu.log" "$OUT/ctest-gpu.log"
  grep -E "device:|comparisons|MISMATCH|table hits|tests passed|tests failed|Passed|Failed|\*\*\*" "$B.ctest-gpu.log" | sed 's/^[0-9]*: //' | head -60 | tee "$OUT/gpu-tests.txt"
  echo "ctest -L gpu: rc=$rc"
fi
if [ $# -gt 0 ]; then
  PATH=$B/tools:$PATH "$@"
fi
