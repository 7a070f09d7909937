#!/usr/bin/env bash
# Packs a CUDA build made here (no GPU needed: the toolkit's nvcc) for a
# device call, so that the call spends none of its time building (a fresh
# machine took 145-185 s of a 600 s call, 2026-12-06): the GPU tests
# (`ctest -N -L gpu` of the build), stripped, and every CTestTestfile.cmake,
# in one tar compressed with zstd's long window (the tests are one static
# library each: eleven copies of 200 MB become 58 MB). Beside them
# prebuilt.env records the build's and the source tree's absolute paths,
# which the tests hold (their data, ctest's commands):
# tools/device-sanitize.sh --prebuilt ARCHIVE unpacks it there, the source
# path made a link to the tree the call runs in when it is absent.
#
#   tools/device-prebuilt.sh BUILD_DIR ARCHIVE.tar.zst
#
# BUILD_DIR: a build of this tree's cuda configuration with the device's
# toolkit version (cmake -S . -B BUILD_DIR -DSTRATA_GPU_BACKEND=CUDA
# -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release; the GPU tests
# built). ARCHIVE must be under .device/ (git-ignored) to travel with
# `carry`, whose limit is 64 MiB: this script refuses a larger archive.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# = 2 ] || { echo "usage: tools/device-prebuilt.sh BUILD_DIR ARCHIVE.tar.zst" >&2; exit 2; }
B=$(cd "$1" && pwd)
A=$2
command -v zstd > /dev/null || { echo "device-prebuilt: zstd not found (apt-get install zstd)" >&2; exit 1; }
[ -f "$B/CMakeCache.txt" ] || { echo "device-prebuilt: $B is not a build folder" >&2; exit 1; }
grep -q '^STRATA_GPU_BACKEND:[A-Z]*=CUDA$' "$B/CMakeCache.txt" || { echo "device-prebuilt: $B is not a CUDA build" >&2; exit 1; }
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$B/CMakeCache.txt")
TESTS=$(cd "$B" && ctest -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *\([A-Za-z0-9_]*\).*/\1/p' | sort)
[ -n "$TESTS" ] || { echo "device-prebuilt: ctest -N -L gpu lists no test in $B" >&2; exit 1; }
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
mkdir -p "$S/tests"
for t in $TESTS; do
  [ -x "$B/tests/$t" ] || { echo "device-prebuilt: $B/tests/$t is not built" >&2; exit 1; }
  strip --strip-unneeded -o "$S/tests/$t" "$B/tests/$t"
done
(cd "$B" && find . -name CTestTestfile.cmake -print0 | xargs -0 -I{} cp --parents {} "$S/")
printf 'BUILD=%s\nSRC=%s\nTESTS="%s"\nCOMMIT=%s\n' "$B" "$SRC" "$(echo $TESTS)" "$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$SRC" diff --quiet HEAD 2>/dev/null || echo ' (and changes not committed)')" > "$S/prebuilt.env"
mkdir -p "$(dirname "$A")"
tar -C "$S" -cf - . | zstd -19 --long=31 -T0 -q -f -o "$A"
size=$(stat -c %s "$A")
if [ "$size" -gt $((64 << 20)) ]; then
  echo "device-prebuilt: $A is $size bytes, over carry's 64 MiB" >&2
  rm -f "$A"
  exit 1
fi
echo "device-prebuilt: $A ($size bytes): $(echo $TESTS | wc -w) GPU tests of $B (source $SRC)"
