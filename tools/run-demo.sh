#!/usr/bin/env bash
# The main job (README.md): installs missing dependencies, builds (CUDA when
# nvcc and an NVIDIA GPU are present, else the CPU backend), then tunes the
# demo model shipped in tests/data with tune_decode: the table, its report
# (JSON and HTML page) and the folder's index tables.json in build/tables,
# the table checked in a fresh process, the folder listed, coverage listed.
# It ends with the tuner's verdict: installed, or not installed and why (the
# gate measured the table slower, or could not decide: documented outcomes,
# exit 0); it fails only when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
preset=cpu
if command -v nvcc >/dev/null 2>&1 && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  preset=cuda
fi
echo "run-demo: building preset '$preset'" >&2
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j"$(nproc)"
bin=build/$preset/tools/tune_decode
model=tests/data/gguf/tiny-moe.gguf
out=build/tables
mkdir -p "$out"
"$bin" identity
"$bin" shapes "$model"
quick=()
[ "$preset" = cpu ] && quick=(--quick)   # the CPU backend is the slow reference: fewer rounds
log=$out/run-demo-tune.log
set +e
"$bin" tune "$model" --out "$out" --force "${quick[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
why=$(grep -E '^tune: the table was NOT installed' "$log" | tail -1 || true)
case $rc in
  0)
    table=$(sed -n 's/^table:  \(.*\) (installed.*/\1/p' "$log" | tail -1)
    "$bin" table check "$table"
    "$bin" table list "$out"
    "$bin" coverage "$model" "$table"
    if grep -q '^tune: gate: PASS' "$log"; then
      how="the end-to-end gate passed it ($(grep '^tune: gate: PASS' "$log" | tail -1 | cut -c13-))"
    elif grep -q '^tuned [0-9]* shapes: 0 kept a variant' "$log"; then
      how="every shape kept the default, so the table names no variant and needs no gate"
    else
      how="the gate was skipped"
    fi
    echo "run-demo: verdict: installed $table: $how" ;;
  3|4) # the gate could not decide (3) or measured the table slower (4)
    echo "run-demo: verdict: no table installed this run (a documented outcome): ${why#tune: the table was NOT installed: }" ;;
  *) echo "run-demo: tune_decode tune failed (exit $rc)" >&2
     exit "$rc" ;;
esac
