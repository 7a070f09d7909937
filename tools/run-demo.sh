#!/usr/bin/env bash
# The main job (README.md): installs missing dependencies, builds (CUDA when
# nvcc and an NVIDIA GPU are present, else the CPU backend), then runs
# tune_decode on the demo model shipped in tests/data.
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
"$bin" identity
"$bin" shapes "$model"
"$bin" vectors tests/data/vectors/*.stqv
