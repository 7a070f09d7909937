#!/usr/bin/env bash
# Builds llama-server, and only it, from the llama.cpp tree the project
# ships (../shared/engines/llama.cpp-80fb11a.tar.xz), for the settings
# layer's real-engine test (tests/tuning/settings_engine_test.sh) and for a
# user who wants the same build: CPU backend, no curl, no OpenSSL, no web
# UI (neither built nor fetched), no tests or examples, -O1 (the test runs a
# tiny model; -O1 compiles faster than -O3 and the engine is compared with
# itself only), GGML_NATIVE=OFF (one CPU variant). Extra cmake arguments go
# after the folders (-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 for the
# H200; LLAMA_O3=1 in the environment compiles with -O3, as for measuring).
#
# Usage: tools/build-llama-server.sh TARBALL|TREE BUILD_DIR [-j N|-jN] [CMAKE_ARGS...]
# Prints the bin folder (LLAMA_CPP_BIN for the tests) on its last line.
# Measured on the 2-core CI machine, 2026-12-03, -j2, a fresh tree: 11 min
# 33 s with a load average of 2.6-4 from other work (655 s user + 138 s
# system of CPU: about 6.6 min on two free cores); 25 min at a load average
# of 8-11. A build folder kept between runs: a 7 s no-op.
set -euo pipefail
src=${1:?usage: build-llama-server.sh TARBALL|TREE BUILD_DIR [-j N] [CMAKE_ARGS...]}
out=${2:?build folder}
shift 2
jobs=2
case "${1:-}" in
  -j) jobs=$2; shift 2 ;;
  -j[0-9]*) jobs=${1#-j}; shift ;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -d "$src" ]; then
  tree=$(cd "$src" && pwd)
else
  tree=$out/llama.cpp
  if [ ! -f "$tree/.extracted-from" ] || [ "$(cat "$tree/.extracted-from")" != "$(sha256sum < "$src")" ]; then
    rm -rf "$tree"
    mkdir -p "$tree"
    tar -xJf "$src" -C "$tree" --strip-components=1
    sha256sum < "$src" > "$tree/.extracted-from"
  fi
fi
opt="-O1 -DNDEBUG"
[ "${LLAMA_O3:-0}" = 1 ] && opt="-O3 -DNDEBUG"
start=$(date +%s)
cmake -S "$tree" -B "$out/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS_RELEASE="$opt" -DCMAKE_CXX_FLAGS_RELEASE="$opt" -DCMAKE_CUDA_FLAGS_RELEASE="-O3 -DNDEBUG" \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF "$@" > "$out/configure.log" 2>&1 ||
  { tail -20 "$out/configure.log" >&2; exit 1; }
cmake --build "$out/build" -j"$jobs" --target llama-server > "$out/build.log" 2>&1 || { tail -30 "$out/build.log" >&2; exit 1; }
end=$(date +%s)
echo "build-llama-server: llama-server built in $(( (end - start) / 60 )) min $(( (end - start) % 60 )) s (-j$jobs)" >&2
echo "$out/build/bin"
