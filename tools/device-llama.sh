#!/usr/bin/env bash
# The llama.cpp integration on the GPU machine, in one call: builds and
# installs strata-tune (the cuda configuration), applies
# integrations/llama.cpp to the shipped tree (.device/llama/, carried) and
# builds llama.cpp with GGML_CUDA=ON GGML_CUDA_STRATA=ON (FlashAttention
# kernels off, both sides the same build: GGML_STRATA=0 is stock ggml),
# generating the random-weight qwen3moe models meanwhile (gguf_gen --llama:
# a tiny one and one of realistic layer sizes); then, each with the
# integration off and on: test-backend-ops -o MUL_MAT / MUL_MAT_ID,
# llama-bench -p 0 -n 128, llama-batched-bench (1..32 sequences) and a
# greedy generation of 128 tokens (the tokens compared); test-backend-ops
# -o MOE_FFN, llama-bench and greedy both with the fused FFN (the
# integration's default) and per op (GGML_STRATA_FFN=0); BACKEND_OPS picks
# the test-backend-ops ops. Step "tune" makes
# a table for the generated model with `tune_decode tune --in-place
# --ntok-mix 1` (the layout the integration runs, the token count its plain
# decoding runs; TUNE_MIX=1,2,4,8 for another mix, which the gate may
# refuse); "bench" and "greedy" then also run with it
# engaged (STRATA_DECODE_TUNING): llama-bench alternates no table / table
# on the integration's default path, the fused FFN (the gate in the real
# engine: the paired change of tokens per second),
# greedy compares the tokens with and without it. STEPS picks parts:
# "build" (both builds, the models, and with "gputests" the gpu tests and
# the in-place bench meanwhile), then "backend bench batched greedy" (a
# second call on the same warm machine may run these on the first call's
# builds under build/), and "settings" (tune_decode settings on the
# integrated llama-server: not in the default STEPS). Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/device-logs}
STEPS=${STEPS:-build gputests tune backend bench batched greedy}
LAYERS=${LAYERS:-16}
mkdir -p "$OUT"
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
B=$PWD/build/device
P=$PWD/build/strata-p
L=$PWD/build/llama
T=$(ls .device/llama/llama.cpp-*.tar.xz | head -1)
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:$P/lib:${LD_LIBRARY_PATH:-}
V=tests/data/gguf/ggml-vocab-qwen2.gguf
M=$PWD/build/qwen3moe-real.gguf
if has build; then
  SKIP_TESTS=1 tools/device-check.sh > "$OUT/strata-build.txt" 2>&1 || { tail -30 "$OUT/strata-build.txt"; exit 1; }
  rm -rf "$P"
  cmake --install "$B" --prefix "$P" > "$OUT/strata-install.txt" 2>&1 || { tail "$OUT/strata-install.txt"; exit 1; }
  el "strata-tune built and installed"
  (
    rm -rf "$L" && mkdir -p "$L" && tar -xJf "$T" -C "$L" && integrations/llama.cpp/apply.sh "$L/llama.cpp" &&
    cmake -S "$L/llama.cpp" -B "$L/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DGGML_CUDA=ON -DGGML_CUDA_STRATA=ON \
      -DGGML_CUDA_FA=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DCMAKE_PREFIX_PATH="$P;/tmp/deps/usr" &&
    cmake --build "$L/build" -j"$(nproc)" --target test-backend-ops llama-bench llama-batched-bench llama-simple llama-server
  ) > "$OUT/llama-build.txt" 2>&1 &
  lb=$!
  ( "$B/tests/gguf_gen" --llama "$PWD/build/qwen3moe-tiny.gguf" "$V" 2 256 256 8 2 &&
    "$B/tests/gguf_gen" --llama "$M" "$V" "$LAYERS" 2048 768 128 8 ) > "$OUT/gguf-gen.txt" 2>&1 &
  gg=$!
  if has gputests; then
    (cd "$B" && timeout 420 ctest -L gpu -j1 -V ${CTEST_ARGS:-}) > "$OUT/ctest-gpu.log" 2>&1
    el "gpu tests: rc=$?"
    grep -E "comparisons|compares|mismatches|MISMATCH|tests passed|tests failed|\*\*\*|in place" "$OUT/ctest-gpu.log" | sed 's/^[0-9]*: //' | head -40
    # the in-place layout beside the repacked one (an in-place row per default)
    timeout 150 "$B/tools/tune_decode" bench --no-suite --shape 'mmvq iq3_s 4096 14336' --shape 'mmvq iq4_xs 14336 4096' \
      --shape 'mmvq q4_K 4096 4096' --shape 'expert iq3_s iq4_nl 2560 640 1' --shape 'expert iq3_s iq4_nl 2560 640 8' --shape 'expert iq3_s iq4_nl 2560 640 32' > "$OUT/bench-in-place.txt" 2>&1
    el "in-place bench: rc=$?"; grep -E "^(mmvq|expert) .* (default|in-place) " "$OUT/bench-in-place.txt" | head -60
  fi
  wait $gg; el "models: rc=$? $(ls -la build/qwen3moe-*.gguf 2> /dev/null | awk '{print $5, $9}' | tr '\n' ' ')"
  wait $lb; rc=$?
  el "llama.cpp build: rc=$rc"
  [ $rc = 0 ] || { grep -E "error|Error" "$OUT/llama-build.txt" | head -30; exit 1; }
fi
bin=$L/build/bin
TD=$PWD/build/llama-tables
if has tune; then
  rm -rf "$TD"
  timeout ${TUNE_TIMEOUT:-300} "$B/tools/tune_decode" tune "$M" --in-place --ntok-mix ${TUNE_MIX:-1} --out "$TD" > "$OUT/tune-in-place.txt" 2>&1
  el "tune --in-place: rc=$?"; grep -vE "^tune: \[" "$OUT/tune-in-place.txt" | tail -25
fi
TAB=$(ls "$TD"/*.table 2> /dev/null | head -1)
# with the fused FFN on (GGML_STRATA_FFN unset or 1): did it run (the
# context-end counter)?
ffn_taken() {
  n=$(grep -oE "[0-9]+ MoE FFN" "$1" | awk '{s += $1} END {print s + 0}')
  if [ "$2" = 1 ]; then
    [ "$n" -gt 0 ] && el "fused FFN taken $n times ($(basename "$1"))" || el "FUSED FFN NOT TAKEN ($(basename "$1"))"
  else # GGML_STRATA_FFN=0: per op, never the fused call
    [ "$n" = 0 ] && el "per op: the fused FFN not taken ($(basename "$1"))" || el "PER OP TOOK THE FUSED FFN $n times ($(basename "$1"))"
  fi
}
if has backend; then
  # MOE_FFN (the patch's test case): the FFN subgraph, with the fused call
  # (GGML_STRATA_FFN=1) and without
  for op in ${BACKEND_OPS:-MUL_MAT MUL_MAT_ID MOE_FFN}; do
    for on in ${BACKEND_STRATA:-1}; do
      for ffn in $([ $op = MOE_FFN ] && echo "0 1" || echo 0); do
        GGML_STRATA=$on GGML_STRATA_FFN=$ffn timeout ${BACKEND_TIMEOUT:-120} "$bin/test-backend-ops" -o $op -b CUDA0 \
          > "$OUT/backend-ops-$op-strata$on-ffn$ffn.txt" 2>&1
        el "test-backend-ops -o $op GGML_STRATA=$on GGML_STRATA_FFN=$ffn: rc=$? $(grep -E 'tests passed' "$OUT/backend-ops-$op-strata$on-ffn$ffn.txt" | tail -1)"
        grep -E "FAIL|ggml_strata: a context ends" "$OUT/backend-ops-$op-strata$on-ffn$ffn.txt" | head -5
        ffn_taken "$OUT/backend-ops-$op-strata$on-ffn$ffn.txt" $ffn
      done
    done
  done
fi
if has bench; then
  # stock, ours per op (GGML_STRATA_FFN=0), ours with the fused FFN (the default)
  for mode in stock perop ffn; do
    GGML_STRATA=$([ $mode = stock ] && echo 0 || echo 1) GGML_STRATA_FFN=$([ $mode = perop ] && echo 0 || echo 1) \
      timeout 90 "$bin/llama-bench" -m "$M" -p 0 -n 128 -r ${BENCH_REPS:-3} -o md > "$OUT/llama-bench-$mode.txt" 2>&1
    el "llama-bench $mode: rc=$?"; grep -E "^\|" "$OUT/llama-bench-$mode.txt" | tail -2
  done
  if [ -n "$TAB" ]; then
    # the gate in the engine: rounds of (no table, table) in alternating order
    for r in $(seq 1 ${GATE_ROUNDS:-6}); do
      for t in $([ $((r % 2)) = 1 ] && echo "0 1" || echo "1 0"); do
        if [ $t = 1 ]; then export STRATA_DECODE_TUNING=$TAB; else unset STRATA_DECODE_TUNING; fi
        timeout 60 "$bin/llama-bench" -m "$M" -p 0 -n 128 -r 3 -o csv 2> "$OUT/gate-$r-$t.log" |
          python3 -c 'import csv,sys; r=list(csv.DictReader(sys.stdin)); print(r[-1]["avg_ts"])' > "$OUT/gate-$r-$t.txt"
      done
    done
    unset STRATA_DECODE_TUNING
    python3 - "$OUT" ${GATE_ROUNDS:-6} <<'PY'
import sys, statistics as st, math
d, n = sys.argv[1], int(sys.argv[2])
a = [float(open(f"{d}/gate-{r}-0.txt").read()) for r in range(1, n + 1)]
b = [float(open(f"{d}/gate-{r}-1.txt").read()) for r in range(1, n + 1)]
ch = [bb / aa - 1 for aa, bb in zip(a, b)]  # + : faster with the table
m, s = st.mean(ch), st.stdev(ch)
t = {3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 7: 2.447, 8: 2.365, 9: 2.306, 10: 2.262}.get(n, 2.0)
lo, hi = m - t * s / math.sqrt(n), m + t * s / math.sqrt(n)
print("engine gate: tg128 t/s without table", " ".join(f"{x:.1f}" for x in a))
print("engine gate: tg128 t/s with table   ", " ".join(f"{x:.1f}" for x in b))
v = "PASS (not slower than 2%)" if lo > -0.02 else ("FAIL (slower than 2%)" if hi < -0.02 else "cannot decide")
print(f"engine gate: paired change {100*m:+.2f}% (95% interval {100*lo:+.2f}% .. {100*hi:+.2f}%): {v}")
PY
    grep -hE "decode tuning|ggml_strata: a context ends" "$OUT"/gate-1-1.log | head -4
  fi
fi
if has batched; then
  for on in 0 1; do
    GGML_STRATA=$on timeout 200 "$bin/llama-batched-bench" -m "$M" -c 8192 -b 2048 -ub 512 -npp 128 -ntg 64 \
      -npl 1,2,4,8,16,32 > "$OUT/batched-strata$on.txt" 2>&1
    el "llama-batched-bench GGML_STRATA=$on: rc=$?"; grep -E "^\|" "$OUT/batched-strata$on.txt" | tail -7
  done
fi
if has greedy; then
  # stock ggml, ours per op (GGML_STRATA_FFN=0), ours as it comes (the fused
  # FFN: its top-k sum is the library's fixed order, not ggml's chain of
  # adds, so its bytes are its own); each twice, the same tokens each time
  for mode in stock perop ffn; do
    for i in 1 2; do
      GGML_STRATA=$([ $mode = stock ] && echo 0 || echo 1) GGML_STRATA_FFN=$([ $mode = perop ] && echo 0 || echo 1) \
        timeout 60 "$bin/llama-simple" -m "$M" -n 128 "The quick brown fox" > "$OUT/greedy-$mode-$i.txt" 2> "$OUT/greedy-$mode-$i.log"
      el "llama-simple $mode run $i: rc=$?"
    done
    cmp -s "$OUT/greedy-$mode-1.txt" "$OUT/greedy-$mode-2.txt" && el "$mode: two greedy runs identical" || el "$mode: greedy runs DIFFER"
  done
  grep -E "ggml_strata: a context ends" "$OUT/greedy-ffn-1.log" | head -2
  ffn_taken "$OUT/greedy-ffn-1.log" 1
  ffn_taken "$OUT/greedy-perop-1.log" 0
  # the two paths' bytes: the fused top-k sum is its own order, so they may
  # differ; said, not judged
  cmp -s "$OUT/greedy-perop-1.txt" "$OUT/greedy-ffn-1.txt" && el "per op and fused: the same tokens" ||
    el "per op and fused: different tokens (the fused top-k sum's own order)"
  if [ -n "$TAB" ]; then
    # the table on the integration's default path (the fused FFN) and per op
    for mode in ffn perop; do
      STRATA_DECODE_TUNING=$TAB GGML_STRATA_FFN=$([ $mode = perop ] && echo 0 || echo 1) timeout 60 "$bin/llama-simple" -m "$M" \
        -n 128 "The quick brown fox" > "$OUT/greedy-table-$mode.txt" 2> "$OUT/greedy-table-$mode.log"
      el "llama-simple $mode with the table: rc=$?"
      cmp -s "$OUT/greedy-$mode-1.txt" "$OUT/greedy-table-$mode.txt" && el "$mode: greedy with the table identical to without" ||
        el "$mode: greedy with the table DIFFERS"
    done
    grep -E "decode tuning|ggml_strata: a context ends" "$OUT/greedy-table-ffn.log" | head -4
  fi
  grep -E "ggml_strata|model buffer|CUDA0 compute|decode|eval time" "$OUT/greedy-ffn-1.log" | head -12
fi
if has settings; then
  # the settings layer (tune_decode settings) on the integrated llama-server
  # (GGML_STRATA=1; SETTINGS_STOCK=1 adds the same sweep on stock ggml):
  # the n-gram kinds and a K cache of q8_0, then the tiny model as a draft
  # with the draft length and floor; the report and profile under $OUT
  printf '%s\n' 'The quick brown fox jumps over the lazy dog. The quick brown fox' \
    'def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\ndef fib' \
    'One, two, three, four, five, six, seven, eight, nine, ten, one, two, three,' > "$OUT/prompts.txt"
  ea="-ngl 99 -c 4096 -np 1 --no-webui"
  for on in 1 ${SETTINGS_STOCK:+0}; do
    mkdir -p "$OUT/settings-strata$on"
    GGML_STRATA=$on timeout 280 "$B/tools/tune_decode" settings "$M" --engine "$bin/llama-server" --prompts "$OUT/prompts.txt" \
      --engine-args "$ea" --sweep spec-type=default,ngram-simple,ngram-map-k,ngram-mod --sweep cache-type-k=default,q8_0 \
      --n-predict ${SETTINGS_NPREDICT:-96} --rounds ${SETTINGS_ROUNDS:-3} --device-name H200 --out "$OUT/settings-strata$on" \
      > "$OUT/settings-ngram-strata$on.txt" 2> "$OUT/settings-ngram-strata$on.log"
    el "settings n-gram GGML_STRATA=$on: rc=$?"; cat "$OUT/settings-ngram-strata$on.txt"
    mkdir -p "$OUT/settings-draft-strata$on"
    GGML_STRATA=$on timeout 280 "$B/tools/tune_decode" settings "$M" --engine "$bin/llama-server" --prompts "$OUT/prompts.txt" \
      --engine-args "$ea -ngld 99" --draft-model "$PWD/build/qwen3moe-tiny.gguf" --sweep spec-type=draft-simple \
      --sweep draft-max=4,16 --sweep draft-p-min=default,0.7 --n-predict ${SETTINGS_NPREDICT:-96} \
      --rounds ${SETTINGS_ROUNDS:-3} --device-name H200 --out "$OUT/settings-draft-strata$on" \
      > "$OUT/settings-draft-strata$on.txt" 2> "$OUT/settings-draft-strata$on.log"
    el "settings draft GGML_STRATA=$on: rc=$?"; cat "$OUT/settings-draft-strata$on.txt"
  done
  python3 - "$OUT"/settings-*strata*/strata-settings-*.json <<'PY' 2> /dev/null
import json, sys
for f in sys.argv[1:]:
    if f.endswith(".profile.json"): continue
    j = json.load(open(f))
    print("==", f, "|", j["identity"].get("strata_log", ""))
    for s in j["settings"]:
        print("  %-50s %-8s %8s tok/s  %s" % (s["label"], s["state"], "%.1f" % s["tok_s"] if "tok_s" in s else "-", s["why"]))
PY
fi
el "done"
