#!/usr/bin/env bash
# One whole cycle on the GPU machine, in one call: build the cuda
# configuration and run the gpu tests (tools/device-check.sh), install the
# build and run the example engine against the installed package (its own
# stream, a captured and replayed decode step), then `tune_decode bench`
# and the peer harness (.device/peer/run-peer.sh, ggml's CUDA kernels)
# side by side, and the comparison table (tools/peer-compare.py); "devices":
# `tune --device all` on the tiny GGUF and the demo set (every GPU of the
# machine into one folder: the several-GPU run of docs/USER_GUIDE.md). STEPS
# picks parts: "tests example bench peer devices" (default all). Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/device-logs}
STEPS=${STEPS:-tests example bench peer devices}
mkdir -p "$OUT"
export OUT
B=${BUILD_DIR:-$PWD/build/device}
export BUILD_DIR=$B
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
t0=$(date +%s)
if has tests; then SKIP_TESTS=0 tools/device-check.sh; else SKIP_TESTS=1 tools/device-check.sh; fi
echo "== build + tests: $(( $(date +%s) - t0 )) s"
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
if has example; then
  rm -rf /tmp/strata-p /tmp/strata-ex
  cmake --install "$B" --prefix /tmp/strata-p > "$OUT/install.log" 2>&1 &&
  cmake -S examples/engine -B /tmp/strata-ex -DCMAKE_PREFIX_PATH="/tmp/strata-p;/tmp/deps/usr" > "$OUT/example-build.log" 2>&1 &&
  cmake --build /tmp/strata-ex >> "$OUT/example-build.log" 2>&1 || { tail -20 "$OUT/example-build.log"; }
  /tmp/strata-ex/strata_engine_example tests/data/gguf/tiny-moe.gguf > "$OUT/example.txt" 2>&1
  echo "== example engine: rc=$?"; grep -E "backend|context:|graph|launches|checksum" "$OUT/example.txt" | head -20
fi
if has bench; then
  t1=$(date +%s)
  "$B/tools/tune_decode" bench ${BENCH_ARGS:-} > "$OUT/bench.txt" 2>&1
  echo "== bench: rc=$? $(( $(date +%s) - t1 )) s"
fi
if has peer; then
  t1=$(date +%s)
  # the peer at every token count the bench suite measures (1..8 for the
  # MoE layer, 1 2 4 8 for the dense shapes, 16 24 32 for both)
  PEER_NT=${PEER_NT:-1,2,3,4,5,6,7,8,16,24,32} bash .device/peer/run-peer.sh > "$OUT/peer.txt" 2>&1
  echo "== peer: rc=$? $(( $(date +%s) - t1 )) s"
fi
if has devices; then
  t1=$(date +%s)
  rm -rf "$OUT/devices"
  "$B/tools/tune_decode" --device all tune tests/data/gguf/tiny-moe.gguf --quick --out "$OUT/devices" > "$OUT/devices-tiny.txt" 2>&1
  echo "== tune --device all, tiny GGUF: rc=$?"; grep -E "^device|^devices" "$OUT/devices-tiny.txt"
  "$B/tools/tune_decode" --device all tune --quick --out "$OUT/devices" > "$OUT/devices-demo.txt" 2>&1
  echo "== tune --device all, demo set: rc=$? $(( $(date +%s) - t1 )) s"; grep -E "^device|^devices" "$OUT/devices-demo.txt"
fi
if [ -f "$OUT/bench.txt" ] && [ -f "$OUT/peer.txt" ]; then
  python3 tools/peer-compare.py "$OUT/bench.txt" "$OUT/peer.txt" | tee "$OUT/compare.txt"
elif [ -f "$OUT/bench.txt" ]; then
  grep -E "^(device|read|step)" "$OUT/bench.txt" | head -40
fi
echo "== total: $(( $(date +%s) - t0 )) s"
