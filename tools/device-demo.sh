#!/usr/bin/env bash
# Run after tools/device-check.sh on a GPU machine (same BUILD_DIR): the
# figures and demonstrations the issues ask for, logs under $OUT.
#  1. the benchmark suite (docs/PERFORMANCE.md; DEMO_BENCH=0 skips it);
#  2. tune of the demo set, twice (the second run keeps the first run's
#     choices unless a new one wins beyond threshold and noise), the table
#     checked in a fresh process; tune of the tiny GGUF; verify;
#  3. the gate refusing a deliberately slow table (rows 1/1 everywhere);
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
# a table made by hand starts with what `identity` prints minus its comment:
# the header and, on a GPU, the device line
hdr() { "$1" identity | grep -v '^#'; }
echo "== identity"; "$T" identity
if [ "${DEMO_BENCH:-1}" = 1 ]; then echo "== bench"; timeout 200 "$T" bench > "$OUT/bench.txt" 2>&1; echo "bench rc=$?"; head -1 "$OUT/bench.txt"; fi
echo "== tune demo (twice)"
timeout 180 "$T" tune --out "$D/a" > "$OUT/tune-demo.log" 2>&1; echo "tune rc=$? (0 installed, 3 gate undecided, 4 gate: slower)"
grep -E "last-level cache|memory:|^tune: (expert|mmvq):|gate|NOT installed|^decode tuning|^tuned|^table|BUG" "$OUT/tune-demo.log" | tail -9
timeout 180 "$T" tune --out "$D/a" > "$OUT/tune-demo2.log" 2>&1; echo "second tune rc=$?"
grep -E "previous|changed|^tuned|^table|NOT installed|BUG" "$OUT/tune-demo2.log" | tail -8
echo "== fresh process"; "$T" table check "$D/a"
echo "== tiny GGUF"; timeout 60 "$T" tune "$M" --out "$D/tiny" 2>&1 | tail -3
"$T" verify "$M" "$D/tiny" 2>&1 | tail -1; echo "verify rc=$?"; "$T" coverage "$M" "$D/tiny" | tail -2
echo "== gate vs a deliberately slow table (expected: FAIL, exit 1)"
{ hdr "$T"; for n in 1 2 3 4 5 6 7 8; do echo "expert iq3_s iq4_nl 2560 640 $n 1 1"; done; } > "$D/slow/slow.table"
"$T" verify --synthetic 'expert iq3_s iq4_nl 2560 640 1' --rounds 11 "$D/slow/slow.table" > "$OUT/slow.log" 2>&1
echo "verify rc=$?"; tail -2 "$OUT/slow.log"
echo "== deliberately wrong variant (test build)"
cmake -S . -B /tmp/bw -DSTRATA_GPU_BACKEND=CUDA -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  -DSTRATA_BUILD_TESTS=OFF -DSTRATA_TEST_WRONG_VARIANT=ON -DCMAKE_PREFIX_PATH=/tmp/deps/usr > /tmp/bw.log 2>&1
cmake --build /tmp/bw -j"$(nproc)" --target tune_decode >> /tmp/bw.log 2>&1 || tail -20 /tmp/bw.log
W=/tmp/bw/tools/tune_decode
timeout 60 "$W" tune --shape 'mmvq iq3_s 4096 4096' --quick --no-verify --out "$D/wrong" 2>&1 | grep -E "BUG|differed" | head -3
{ hdr "$W"; echo "mmvq iq3_s 4096 4096 16"; } > "$D/wrong/wrong.table"
"$W" verify --synthetic 'mmvq iq3_s 4096 4096' --rounds 5 "$D/wrong/wrong.table" 2>&1 | tail -1
echo "== example engine (installed package, GPU)"
cmake --install "$B" --prefix /tmp/strata-inst > /tmp/inst.log 2>&1 || tail -5 /tmp/inst.log
cmake -S examples/engine -B /tmp/ex -DCMAKE_PREFIX_PATH="/tmp/strata-inst;/tmp/deps/usr" > /tmp/ex.log 2>&1 && \
  cmake --build /tmp/ex >> /tmp/ex.log 2>&1 || tail -20 /tmp/ex.log
LD_LIBRARY_PATH=/tmp/strata-inst/lib:$LD_LIBRARY_PATH /tmp/ex/strata_engine_example "$M" "$D/tiny" 2>&1 | tail -12
