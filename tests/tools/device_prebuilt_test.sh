#!/usr/bin/env bash
# tools/device-prebuilt.sh on a machine without a GPU: a stand-in CUDA
# build folder (its cache, ctest's file listing a gpu test and a cpu test,
# small ELF programs for the test, tune_decode and a shared library with
# its link), packed, then unpacked as on the device: refused while the
# build path stands as a folder of its own (nothing changed), unpacked at
# the build path through a link into /tmp once it is gone, the source path
# made a link to the tree, ctest there listing the gpu test, the programs
# runnable, the library's link kept; unpacked again over its own link;
# a build that is not CUDA, or an archive that is not one, refused.
#   device_prebuilt_test.sh PROJECT_SOURCE_DIR
set -uo pipefail
SRC=${1:?usage: device_prebuilt_test.sh PROJECT_SOURCE_DIR}
T=$(mktemp -d)
made=()
cleanup() { for p in "${made[@]}"; do rm -rf "$p"; done; rm -rf "$T"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
P="$SRC/tools/device-prebuilt.sh"
B="$T/b"
mkdir -p "$B/tests" "$B/tools" "$B/src"
cat > "$B/CMakeCache.txt" <<EOF
STRATA_GPU_BACKEND:STRING=CUDA
CMAKE_CUDA_ARCHITECTURES:STRING=90-real
CMAKE_HOME_DIRECTORY:INTERNAL=$T/src-tree
EOF
cat > "$B/CTestTestfile.cmake" <<EOF
add_test(a_gpu_test "$B/tests/a_gpu_test")
set_tests_properties(a_gpu_test PROPERTIES LABELS "gpu")
add_test(a_cpu_test "$B/tests/a_cpu_test")
set_tests_properties(a_cpu_test PROPERTIES LABELS "cpu")
EOF
TRUE=$(type -P true)
cp "$TRUE" "$B/tests/a_gpu_test"
cp "$TRUE" "$B/tests/a_cpu_test"
cp "$TRUE" "$B/tools/tune_decode"
cp "$TRUE" "$B/src/libstrata_tune.so.0.4.0"
ln -s libstrata_tune.so.0.4.0 "$B/src/libstrata_tune.so"
A="$T/a.tar.zst"
out=$("$P" "$B" "$A" 2>&1) || fail "pack: $out"
[ -s "$A" ] || fail "pack wrote no archive"
case "$out" in *"1 GPU tests of $B"*) ;; *) fail "pack's line: $out" ;; esac
# the build path stands as a real folder: refused, nothing made
before=$(ls -d /tmp/strata-prebuilt.* 2> /dev/null | wc -l)
if out=$(cd "$SRC" && "$P" unpack "$A" 2>&1); then fail "unpack over a real build folder: $out"; fi
case "$out" in *"stands and is not a link this script made"*) ;; *) fail "the refusal: $out" ;; esac
[ -d "$B" ] && [ ! -L "$B" ] || fail "the build folder changed"
[ "$(ls -d /tmp/strata-prebuilt.* 2> /dev/null | wc -l)" = "$before" ] || fail "a refused unpack left a folder in /tmp"
[ -e "$T/src-tree" ] && fail "a refused unpack made the source link"
mv "$B" "$T/b.orig"
# a broken link there that this script did not make: refused too
ln -s /nonexistent "$B"
if out=$(cd "$SRC" && "$P" unpack "$A" 2>&1); then fail "unpack over a broken link: $out"; fi
case "$out" in *"stands and is not a link this script made"*) ;; *) fail "the broken link's refusal: $out" ;; esac
[ "$(readlink "$B")" = /nonexistent ] || fail "the broken link changed"
rm "$B"
# gone: unpacked there through a link into /tmp
got=$(cd "$SRC" && "$P" unpack "$A" 2> "$T/err") || fail "unpack: $(cat "$T/err")"
[ "$got" = "$B" ] || fail "unpack printed '$got', not the build path"
[ -L "$B" ] || fail "the build path is not a link"
target=$(readlink "$B")
made+=("$target")
case "$target" in /tmp/strata-prebuilt.*) ;; *) fail "the link goes to $target" ;; esac
[ "$(readlink "$T/src-tree")" = "$SRC" ] || fail "the source path is not a link to the tree: $(readlink "$T/src-tree")"
[ -x "$B/tests/a_gpu_test" ] && "$B/tests/a_gpu_test" || fail "the gpu test is not there or does not run"
[ -e "$B/tests/a_cpu_test" ] && fail "a cpu test was packed"
[ -x "$B/tools/tune_decode" ] || fail "tune_decode is not there"
[ "$(readlink "$B/src/libstrata_tune.so")" = libstrata_tune.so.0.4.0 ] || fail "the library's link was not kept"
listed=$(cd "$B" && ctest -N -L gpu)
case "$listed" in *a_gpu_test*) ;; *) fail "ctest -N -L gpu in the unpacked build does not list the test: $listed" ;; esac
grep -q "^BUILD=$B$" "$B/prebuilt.env" || fail "prebuilt.env: $(cat "$B/prebuilt.env")"
# again, over its own link
got=$(cd "$SRC" && "$P" unpack "$A" 2> "$T/err") || fail "unpack over its own link: $(cat "$T/err")"
made+=("$(readlink "$B")")
[ "$(readlink "$B")" != "$target" ] || fail "the second unpack did not make a new folder"
[ -e "$target" ] && fail "the second unpack left the first one's folder in /tmp"
# refusals: not CUDA, not an archive
rm "$B"
mkdir -p "$T/c"
echo "STRATA_GPU_BACKEND:STRING=CPU" > "$T/c/CMakeCache.txt"
if out=$("$P" "$T/c" "$T/c.tar.zst" 2>&1); then fail "a CPU build was packed"; fi
case "$out" in *"is not a CUDA build"*) ;; *) fail "the CPU build's refusal: $out" ;; esac
echo junk > "$T/junk.tar.zst"
if out=$(cd "$SRC" && "$P" unpack "$T/junk.tar.zst" 2>&1); then fail "junk unpacked"; fi
case "$out" in *"cannot unpack it"*) ;; *) fail "junk's refusal: $out" ;; esac
[ -e "$B" ] && fail "a refused unpack made the build link"
echo "device_prebuilt_test: ok"
