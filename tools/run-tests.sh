#!/usr/bin/env bash
# The project's test command (README.md, .ci/run): installs missing
# dependencies, builds the CPU configuration with ASan+UBSan, runs every
# CPU test (GPU tests are labelled gpu and need a device).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake --preset cpu-asan >/dev/null
cmake --build --preset cpu-asan -j"$(nproc)"
ctest --preset cpu-asan
