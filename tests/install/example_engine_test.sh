#!/usr/bin/env bash
# The installed package, end to end, as an engine sees it:
#   1. cmake --install of this build tree into <build>/test-install, and the
#      layout checked (both libraries + SONAME links, headers, tune_decode,
#      CMake package, pkg-config files; no cJSON in the public headers; the
#      engine library needs no libcjson and no tools library);
#   2. examples/engine configured against that prefix alone
#      (find_package(strata_tune) through CMAKE_PREFIX_PATH) and built;
#   3. a table made with the installed tune_decode (CPU backend, --quick), and
#      the example run on tests/data/gguf/tiny-moe.gguf on the CPU backend:
#      without a table, with the tables directory as an argument, through
#      STRATA_DECODE_TUNING, and with a hand-written table whose rows must be
#      hit; exit 0, the engagement line, and the same checksums every time
#      (the exactness contract: a table changes speed, never bytes);
#   4. pkg-config --cflags --libs strata_tune compiles and links a tiny C
#      program that calls st_version() with the engine library alone, and
#      strata_tools' flags one that reads a model.
# With a sanitizer build (STRATA_SANITIZE), the example and the pkg-config
# program are compiled with the same -fsanitize flags, so the sanitizer
# runtime that libstrata_tune needs is loaded first.
#
# usage: example_engine_test.sh --build DIR --source DIR --cc CC [--sanitize LIST]
#        [--libdir LIBDIR] [--build-type T] [--generator G] [--cmake CMAKE]
set -euo pipefail

BUILD='' SRC='' CC_='' SAN='' LIBDIR=lib BTYPE='' GEN='' CMAKE=cmake
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --source) SRC=$2; shift 2 ;;
    --cc) CC_=$2; shift 2 ;;
    --sanitize) SAN=$2; shift 2 ;;
    --libdir) LIBDIR=$2; shift 2 ;;
    --build-type) BTYPE=$2; shift 2 ;;
    --generator) GEN=$2; shift 2 ;;
    --cmake) CMAKE=$2; shift 2 ;;
    *) echo "example_engine_test: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [ -z "$BUILD" ] || [ -z "$SRC" ] || [ -z "$CC_" ]; then
  echo "example_engine_test: --build, --source and --cc are required" >&2
  exit 2
fi

P=$BUILD/test-install          # the install prefix
W=$BUILD/test-example          # everything else this test makes
MODEL=$SRC/tests/data/gguf/tiny-moe.gguf
rm -rf "$P" "$W"
mkdir -p "$W"

# No table or knob from the caller's environment may leak in.
for v in $(env | sed -n 's/^\(STRATA_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

SANFLAGS=
if [ -n "$SAN" ]; then
  SANFLAGS="-fsanitize=$SAN -fno-omit-frame-pointer -fno-sanitize-recover=all"
fi

# ---- 1. install ----------------------------------------------------------
step "cmake --install $BUILD --prefix $P"
"$CMAKE" --install "$BUILD" --prefix "$P" > "$W/install.log" || { cat "$W/install.log"; fail "cmake --install"; }
L=$P/$LIBDIR
for f in include/strata/strata.h include/strata/decode.h include/strata/table.h include/strata/tools.h \
         include/strata/tools/model.h include/strata/tools/tuner.h include/strata/tools/bench.h \
         bin/tune_decode "$LIBDIR/cmake/strata_tune/strata_tuneConfig.cmake" \
         "$LIBDIR/cmake/strata_tune/strata_tuneConfigVersion.cmake" \
         "$LIBDIR/cmake/strata_tune/strata_tuneTargets.cmake" "$LIBDIR/pkgconfig/strata_tune.pc" \
         "$LIBDIR/pkgconfig/strata_tools.pc"; do
  [ -e "$P/$f" ] || fail "not installed: $f"
done
SHARED=0
for lib in strata_tune strata_tools; do
  if [ -e "$L/lib$lib.so" ]; then
    SHARED=1
    real=$(readlink -f "$L/lib$lib.so")
    case "$(basename "$real")" in lib$lib.so.*.*.*) ;; *) fail "lib$lib.so -> $real is not versioned" ;; esac
    soname=$(objdump -p "$real" | awk '$1 == "SONAME" {print $2}')
    case "$soname" in lib$lib.so.*) ;; *) fail "lib$lib has no SONAME ($soname)" ;; esac
    [ -L "$L/$soname" ] || fail "no SONAME link $soname in $L"
    echo "shared: lib$lib.so -> $soname -> $(basename "$real")"
  elif [ -e "$L/lib$lib.a" ]; then
    echo "static: $L/lib$lib.a"
  else
    fail "no lib$lib in $L"
  fi
done
if [ "$SHARED" = 1 ]; then
  # the engine library needs neither cJSON nor the tools library; the tools
  # library is built on the engine library
  needed=$(objdump -p "$(readlink -f "$L/libstrata_tune.so")" | awk '$1 == "NEEDED" {print $2}' | tr '\n' ' ')
  echo "libstrata_tune needs: $needed"
  if echo "$needed" | grep -q -i -e cjson -e strata_tools; then fail "libstrata_tune needs $needed"; fi
  objdump -p "$(readlink -f "$L/libstrata_tools.so")" | awk '$1 == "NEEDED" {print $2}' | grep -q '^libstrata_tune\.so' ||
    fail "libstrata_tools does not link libstrata_tune"
fi
if grep -rl -i cjson "$P/include"; then fail "an installed header names cJSON"; fi
(cd "$P" && find . -type f -o -type l | sort) > "$W/layout.txt"
cat "$W/layout.txt"
"$P/bin/tune_decode" --version || fail "the installed tune_decode does not run"

# ---- 2. the example, against the installed package only -------------------
step "configure and build examples/engine against $P"
cfg=(-S "$SRC/examples/engine" -B "$W/build" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_C_COMPILER="$CC_")
[ -n "$GEN" ] && cfg+=(-G "$GEN")
[ -n "$BTYPE" ] && cfg+=(-DCMAKE_BUILD_TYPE="$BTYPE")
[ -n "$SANFLAGS" ] && cfg+=(-DCMAKE_C_FLAGS="$SANFLAGS" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=$SAN")
"$CMAKE" "${cfg[@]}" > "$W/configure.log" 2>&1 || { cat "$W/configure.log"; fail "configuring examples/engine"; }
grep "strata_tune .* from $P/" "$W/configure.log" || { cat "$W/configure.log"; fail "find_package(strata_tune) did not use $P"; }
"$CMAKE" --build "$W/build" > "$W/build.log" 2>&1 || { cat "$W/build.log"; fail "building examples/engine"; }
EX=$W/build/strata_engine_example
[ -x "$EX" ] || fail "no $EX"
if [ "$SHARED" = 1 ]; then
  # every call the example makes into the tools library reads its model
  # (st_model_*); its decode calls resolve in the engine library
  nm -D --defined-only "$(readlink -f "$L/libstrata_tools.so")" | awk '{print $3}' | sort -u > "$W/tools.syms"
  nm -D --undefined-only "$EX" | awk '{print $2}' | sed 's/@.*//' | grep '^st_' | sort -u > "$W/example.syms"
  from_tools=$(comm -12 "$W/example.syms" "$W/tools.syms" | tr '\n' ' ')
  echo "the example's calls into libstrata_tools: $from_tools"
  for f in $from_tools; do
    case "$f" in st_model_*) ;; *) fail "the example calls the tools library beyond reading its model: $f" ;; esac
  done
  grep -q '^st_iq_mmvq$' "$W/example.syms" || fail "the example makes no st_iq_mmvq call"
fi

# ---- 3. tables, and the example runs ------------------------------------
step "tune_decode --backend cpu tune (installed binary)"
mkdir -p "$W/tables"
"$P/bin/tune_decode" -q --backend cpu tune "$MODEL" --quick --no-verify --out "$W/tables" > "$W/tune.log" 2>&1 ||
  { cat "$W/tune.log"; fail "tune_decode tune"; }
cat "$W/tune.log"
ls "$W/tables"/*.table > /dev/null || fail "tune wrote no table"

# A hand-written table with a row for every shape the example runs (1 and 4
# tokens), so the counters must show table hits.
header=$("$P/bin/tune_decode" --backend cpu identity | head -n 1)
mkdir -p "$W/hand"
cat > "$W/hand/hand.table" <<EOF
$header
# hand-written for example_engine_test.sh
expert iq3_s iq4_nl 256 64 1 4 4
expert iq3_s iq4_nl 256 64 4 8 8
mmvq q8_0 512 256 2
mmvq iq3_s 256 256 8
EOF

run_example() { # NAME ARGS... ; output in $W/NAME.out
  local name=$1; shift
  step "strata_engine_example $*"
  local rc=0
  "$EX" --backend cpu "$@" > "$W/$name.out" 2>&1 || rc=$?
  cat "$W/$name.out"
  [ "$rc" = 0 ] || fail "$name: exit status $rc"
  grep -q '^backend: cpu' "$W/$name.out" || fail "$name: no 'backend: cpu' line"
  grep -q '^identity: ' "$W/$name.out" || fail "$name: no identity line"
  [ "$(grep -c 'checksum' "$W/$name.out")" = 6 ] || fail "$name: expected 6 checksum lines"
  grep -q '^launches: table hits' "$W/$name.out" || fail "$name: no launch counters"
  grep 'checksum' "$W/$name.out" > "$W/$name.sums"
}
expect_engaged() {
  grep -q 'decode tuning:' "$W/$1.out" || fail "$1: no 'decode tuning:' line"
  grep -q 'shapes from' "$W/$1.out" || fail "$1: the table did not engage ('shapes from' missing)"
  grep -q '^table: [0-9]* shapes engaged' "$W/$1.out" || fail "$1: st_ctx_table() is NULL"
}

run_example none "$MODEL"
if grep -q 'decode tuning:' "$W/none.out"; then fail "none: a table line without a table"; fi
grep -q '^table: none engaged' "$W/none.out" || fail "none: a table engaged"

run_example dir "$MODEL" "$W/tables"
expect_engaged dir
# the tuner measured every shape the example runs: each is a row or a tuned
# default, none a miss
grep -q 'table misses 0,' "$W/dir.out" || fail "dir: table misses for shapes the tuner measured"

STRATA_DECODE_TUNING=$W/tables run_example env "$MODEL"
expect_engaged env

run_example hand "$MODEL" "$W/hand/hand.table"
expect_engaged hand
grep -q '4 shapes from' "$W/hand.out" || fail "hand: expected 4 shapes"
hits=$(sed -n 's/^launches: table hits \([0-9]*\),.*/\1/p' "$W/hand.out")
if [ -z "$hits" ] || [ "$hits" -le 0 ]; then fail "hand: no table hits"; fi
grep -q 'table misses 0,' "$W/hand.out" || fail "hand: table misses for shapes the table has"

# A refused table is no error for an engine: the line, then the defaults.
printf 'gfx0000 1 0 %s\nmmvq q8_0 512 256 2\n' "$(echo "$header" | awk '{print $4}')" > "$W/other.table"
run_example refused "$MODEL" "$W/other.table"
grep -q 'decode tuning: .*made for gfx0000' "$W/refused.out" || fail "refused: no refusal line"
grep -q '^table: none engaged' "$W/refused.out" || fail "refused: a table engaged"

for n in dir env hand refused; do
  cmp -s "$W/none.sums" "$W/$n.sums" || { diff "$W/none.sums" "$W/$n.sums" || true; fail "$n: checksums differ from the run without a table"; }
done
echo "checksums identical without a table, with the tuned table, through the environment, with the hand-written table and after a refusal"

# ---- 4. pkg-config -------------------------------------------------------
step "pkg-config --cflags --libs strata_tune"
if ! command -v pkg-config > /dev/null; then
  echo "pkg-config not installed: that check is skipped"
  exit 0
fi
export PKG_CONFIG_PATH=$L/pkgconfig
pcargs=(--cflags --libs)
[ "$SHARED" = 1 ] || pcargs=(--static --cflags --libs)
flags=$(pkg-config "${pcargs[@]}" strata_tune) || fail "pkg-config strata_tune"
echo "pkg-config ${pcargs[*]} strata_tune: $flags"
[ "$(pkg-config --modversion strata_tune)" = "$("$P/bin/tune_decode" --version | awk '{print $2}')" ] ||
  fail "pkg-config --modversion differs from tune_decode --version"
cat > "$W/pc.c" <<'EOF'
#include <strata/strata.h>
#include <stdio.h>
int main(void)
{
    printf("st_version %s\n", st_version());
    return st_version()[0] ? 0 : 1;
}
EOF
# shellcheck disable=SC2086
"$CC_" -std=c11 $SANFLAGS "$W/pc.c" -o "$W/pc" $flags -Wl,-rpath,"$L" || fail "compiling with pkg-config's flags"
"$W/pc" | tee "$W/pc.out"
grep -q "^st_version $(pkg-config --modversion strata_tune)\$" "$W/pc.out" || fail "st_version() is not the package version"
if [ "$SHARED" = 1 ] && objdump -p "$W/pc" | awk '$1 == "NEEDED" {print $2}' | grep -q strata_tools; then
  fail "strata_tune's flags link the tools library"
fi
step "pkg-config --cflags --libs strata_tools"
tflags=$(pkg-config "${pcargs[@]}" strata_tools) || fail "pkg-config strata_tools"
echo "pkg-config ${pcargs[*]} strata_tools: $tflags"
cat > "$W/pt.c" <<'CEOF'
#include <strata/tools.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    st_model *m = NULL;
    if (argc < 2 || st_model_open(argv[1], &m) != ST_OK) return 1;
    printf("model %s: %zu expert layers\n", st_model_name(m), st_model_expert_layer_count(m));
    st_model_close(m);
    return 0;
}
CEOF
# shellcheck disable=SC2086
"$CC_" -std=c11 $SANFLAGS "$W/pt.c" -o "$W/pt" $tflags -Wl,-rpath,"$L" || fail "compiling with strata_tools' flags"
"$W/pt" "$MODEL" | tee "$W/pt.out"
grep -q "expert layers" "$W/pt.out" || fail "the strata_tools program did not read the model"
echo "example_engine_test: OK"
