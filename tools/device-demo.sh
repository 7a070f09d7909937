#!/usr/bin/env bash
# Run after tools/device-check.sh on a GPU machine (same BUILD_DIR): the
# figures and demonstrations the issues ask for, logs under $OUT.
#  1. the benchmark suite (docs/PERFORMANCE.md; DEMO_BENCH=0 skips it);
#  2. tune of the demo set, twice (the second run reports changed choices),
#     the table checked in a fresh process; tune of the tiny GGUF; verify;
#  3. the gate refusing a deliberately slow table;
#  4. a test build with a deliberately wrong variant: the tuner reports it as
#     a bug and the gate refuses a table that names it;
#  5. the example engine built against the installed package, on the GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-$PWD/build/device}
T=$B/tools/tune_decode
M=tests/data/gguf/tiny-moe.gguf
OUT=${OUT:-build/device-logs}
D=/tmp/strata-demo
rm -rf "$D"; mkdir -p "$D"/a "$D"/tiny "$D"/slow "$D"/wrong "$OUT"
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
if [ "${DEMO_BENCH:-1}" = 1 ]; then echo "== bench"; timeout 200 "$T" bench > "$OUT/bench.txt" 2>&1; echo "bench rc=$?"; fi
echo "== tune demo (twice)"
timeout 120 "$T" tune --out "$D/a" > "$OUT/tune-demo.log" 2>&1; echo "tune rc=$?"
grep -E "gate|^decode tuning|^tuned|BUG" "$OUT/tune-demo.log" | tail -4
timeout 120 "$T" tune --out "$D/a" 2>&1 | grep -E "changed|^tuned|BUG" | tail -6
echo "== fresh process"; "$T" table check "$D/a"
echo "== tiny GGUF"; timeout 60 "$T" tune "$M" --out "$D/tiny" 2>&1 | tail -3
"$T" verify "$M" "$D/tiny" 2>&1 | tail -1; "$T" coverage "$M" "$D/tiny" | tail -2
echo "== gate vs a deliberately slow table"
{ "$T" identity | head -1; for n in 1 2 3 4 5 6 7 8; do echo "expert iq3_s iq4_nl 2560 640 $n 1 1"; done; } > "$D/slow/slow.table"
"$T" verify --synthetic 'expert iq3_s iq4_nl 2560 640 1' --rounds 11 "$D/slow/slow.table" 2>&1 | tail -2
echo "== deliberately wrong variant (test build)"
cmake -S . -B /tmp/bw -DSTRATA_GPU_BACKEND=CUDA -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  -DSTRATA_BUILD_TESTS=OFF -DSTRATA_TEST_WRONG_VARIANT=ON -DCMAKE_PREFIX_PATH=/tmp/deps/usr > /tmp/bw.log 2>&1
cmake --build /tmp/bw -j"$(nproc)" --target tune_decode >> /tmp/bw.log 2>&1 || tail -20 /tmp/bw.log
W=/tmp/bw/tools/tune_decode
timeout 60 "$W" tune --shape 'mmvq iq3_s 4096 4096' --quick --no-verify --out "$D/wrong" 2>&1 | grep -E "BUG|differed" | head -3
{ "$W" identity | head -1; echo "mmvq iq3_s 4096 4096 16"; } > "$D/wrong/wrong.table"
"$W" verify --synthetic 'mmvq iq3_s 4096 4096' --rounds 5 "$D/wrong/wrong.table" 2>&1 | tail -1
echo "== example engine (installed package, GPU)"
cmake --install "$B" --prefix /tmp/strata-inst > /tmp/inst.log 2>&1 || tail -5 /tmp/inst.log
cmake -S examples/engine -B /tmp/ex -DCMAKE_PREFIX_PATH="/tmp/strata-inst;/tmp/deps/usr" > /tmp/ex.log 2>&1 && \
  cmake --build /tmp/ex >> /tmp/ex.log 2>&1 || tail -20 /tmp/ex.log
LD_LIBRARY_PATH=/tmp/strata-inst/lib:$LD_LIBRARY_PATH /tmp/ex/strata_engine_example "$M" "$D/tiny" 2>&1 | tail -12
