#!/usr/bin/env bash
# The main job (README.md): installs missing dependencies, builds (CUDA when
# nvcc and an NVIDIA GPU are present, else the CPU backend), then tunes the
# demo model shipped in tests/data with tune_decode: the table, its report
# (JSON and HTML page) and the folder's index tables.json in build/tables,
# the table checked in a fresh process, the folder listed, coverage listed.
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
"$bin" tune "$model" --out "$out" --force "${quick[@]}"
"$bin" table check "$out"
"$bin" table list "$out"
"$bin" coverage "$model" "$out"
