#!/usr/bin/env bash
# Packs a CUDA build made here (no GPU needed: the toolkit's nvcc) for a
# device call, so that the call spends none of its time building (a fresh
# machine took 145-185 s of a 600 s call, 2026-12-06): the GPU tests
# (`ctest -N -L gpu` of the build), stripped, every CTestTestfile.cmake, and
# tools/tune_decode with the shared libraries it loads (for bench and tune),
# in one tar compressed with zstd's long window (the tests are one static
# library each: eleven copies of 200 MB become 58 MB). Beside them
# prebuilt.env records the build's and the source tree's absolute paths,
# which the tests hold (their data, ctest's commands):
# tools/device-sanitize.sh --prebuilt ARCHIVE unpacks it there, the source
# path made a link to the tree the call runs in when it is absent.
#
#   tools/device-prebuilt.sh BUILD_DIR ARCHIVE.tar.zst
#   tools/device-prebuilt.sh unpack ARCHIVE.tar.zst     (on the device)
#
# unpack: into a new folder of /tmp, linked from the build path the archive
# names (a path that stands and is not such a link is refused, nothing
# changed), the source path made a link to this tree when absent, the
# cJSON/CMocka .debs of .device/debs unpacked into /tmp/deps (the tests'
# LD_LIBRARY_PATH, as tools/device-check.sh does); prints the build path.
# zstd: the machine's, else one carried in .device/bin with its libraries.
#
# BUILD_DIR: a build of this tree's cuda configuration with the device's
# toolkit version (cmake -S . -B BUILD_DIR -DSTRATA_GPU_BACKEND=CUDA
# -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release; the GPU
# tests built). 90-real: machine code only, no PTX beside it (with it, 58
# MB; without, a third: an object of the kernels compressed 1055 -> 360
# KB). ARCHIVE must be under .device/ (git-ignored) to travel with `carry`,
# whose limit of 64 MiB counts the working tree too: this script refuses
# an archive over 40 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = unpack ]; then
  [ $# = 2 ] && [ -f "$2" ] || { echo "device-prebuilt: unpack ARCHIVE: no such file '${2:-}'" >&2; exit 2; }
  ZSTD=(zstd)
  command -v zstd > /dev/null || ZSTD=(env LD_LIBRARY_PATH="$PWD/.device/bin" "$PWD/.device/bin/zstd")
  P=$(mktemp -d /tmp/strata-prebuilt.XXXXXX)
  "${ZSTD[@]}" -d -q --long=31 -c "$2" | tar -C "$P" -xf - || { echo "device-prebuilt: $2: cannot unpack it" >&2; rm -rf "$P"; exit 1; }
  [ -f "$P/prebuilt.env" ] || { echo "device-prebuilt: $2 has no prebuilt.env: not an archive of this script" >&2; rm -rf "$P"; exit 1; }
  PB_BUILD=$(sed -n 's/^BUILD=//p' "$P/prebuilt.env")
  PB_SRC=$(sed -n 's/^SRC=//p' "$P/prebuilt.env")
  case "$PB_BUILD" in /?*) ;; *) echo "device-prebuilt: $2 names no build path" >&2; rm -rf "$P"; exit 1 ;; esac
  case "$PB_SRC" in /?*) ;; *) echo "device-prebuilt: $2 names no source path" >&2; rm -rf "$P"; exit 1 ;; esac
  old=""
  if [ -e "$PB_BUILD" ] || [ -L "$PB_BUILD" ]; then
    case "$(readlink "$PB_BUILD" 2> /dev/null)" in
      /tmp/strata-prebuilt.*) old=$(readlink "$PB_BUILD") ;; # ours: replaced, its folder removed
      *) echo "device-prebuilt: $PB_BUILD stands and is not a link this script made: not replaced" >&2
         rm -rf "$P"
         exit 1 ;;
    esac
  fi
  if [ ! -e "$PB_SRC" ] && [ -L "$PB_SRC" ]; then
    echo "device-prebuilt: $PB_SRC is a broken link: not replaced" >&2
    rm -rf "$P"
    exit 1
  fi
  { mkdir -p "$(dirname "$PB_BUILD")" && ln -sfn "$P" "$PB_BUILD"; } ||
    { echo "device-prebuilt: cannot link $PB_BUILD" >&2; rm -rf "$P"; exit 1; }
  [ -n "$old" ] && [ "$old" != "$P" ] && rm -rf "$old"
  if [ ! -e "$PB_SRC" ]; then
    { mkdir -p "$(dirname "$PB_SRC")" && ln -s "$PWD" "$PB_SRC"; } ||
      { echo "device-prebuilt: cannot link $PB_SRC to this tree" >&2; exit 1; }
  fi
  mkdir -p /tmp/deps
  for f in .device/debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" /tmp/deps; done
  echo "$PB_BUILD"
  exit 0
fi
[ $# = 2 ] || { echo "usage: tools/device-prebuilt.sh BUILD_DIR ARCHIVE.tar.zst" >&2; exit 2; }
B=$(cd "$1" && pwd)
A=$2
command -v zstd > /dev/null || { echo "device-prebuilt: zstd not found (apt-get install zstd)" >&2; exit 1; }
[ -f "$B/CMakeCache.txt" ] || { echo "device-prebuilt: $B is not a build folder" >&2; exit 1; }
grep -q '^STRATA_GPU_BACKEND:[A-Z]*=CUDA$' "$B/CMakeCache.txt" || { echo "device-prebuilt: $B is not a CUDA build" >&2; exit 1; }
grep -q '^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=[0-9]*-real$' "$B/CMakeCache.txt" ||
  echo "device-prebuilt: $B keeps PTX beside the machine code (CMAKE_CUDA_ARCHITECTURES is not NN-real): three times the archive" >&2
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
# tune_decode and the shared libraries it loads (bench, tune: their
# kernels are the tests' bytes again, which the long window finds)
if [ -x "$B/tools/tune_decode" ]; then
  mkdir -p "$S/tools" "$S/src"
  strip --strip-unneeded -o "$S/tools/tune_decode" "$B/tools/tune_decode"
  for l in "$B"/src/libstrata_*.so*; do
    [ -e "$l" ] || [ -L "$l" ] || continue # none (a static build): tune_decode alone
    if [ -L "$l" ]; then cp -P "$l" "$S/src/"; else strip --strip-unneeded -o "$S/src/$(basename "$l")" "$l"; fi
  done
fi
printf 'BUILD=%s\nSRC=%s\nTESTS="%s"\nCOMMIT=%s\n' "$B" "$SRC" "$(echo $TESTS)" "$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$SRC" diff --quiet HEAD 2>/dev/null || echo ' (and changes not committed)')" > "$S/prebuilt.env"
mkdir -p "$(dirname "$A")"
if ! tar -C "$S" -cf - . | zstd --ultra -22 --long=31 -T0 -q -f -o "$A"; then
  echo "device-prebuilt: packing $A failed" >&2
  rm -f "$A"
  exit 1
fi
size=$(stat -c %s "$A")
if [ "$size" -gt $((40 << 20)) ]; then
  echo "device-prebuilt: $A is $size bytes, over 40 MiB (carry's 64 MiB counts the working tree too)" >&2
  rm -f "$A"
  exit 1
fi
echo "device-prebuilt: $A ($size bytes): $(echo $TESTS | wc -w) GPU tests of $B (source $SRC)"
