#!/usr/bin/env bash
# tools/check-layers.sh passes on this tree and its built libraries, and
# refuses, one line each, a scratch tree where the CLI includes an internal
# header (quoted and through "../"), the engine includes a tools header
# (quoted and angled), the tools library includes an engine-internal
# header; and refuses an engine library that needs libcjson, one that needs
# the tools library, one that leaves a cJSON_ name undefined, a tools
# library that does not link the engine library, and a tree with no sources.
# usage: check_layers_test.sh SOURCE_DIR LIBSTRATA_TUNE LIBSTRATA_TOOLS [CC]
set -euo pipefail
SRC=$1 ENGINE=$2 TOOLS=$3 CC_=${4:-cc}
bash "$SRC/tools/check-layers.sh" "$SRC" "$ENGINE" "$TOOLS"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
T=$W/tree
mkdir -p "$T/tools/tune_decode" "$T/src/common" "$T/src/contract" "$T/src/runtime" "$T/src/tuning" "$T/kernels" \
         "$T/include/strata/tools"
cp "$SRC/include/strata/decode.h" "$T/include/strata/"
cp "$SRC/include/strata/tools/model.h" "$T/include/strata/tools/"
printf '#include "commands.h"\n#include "strata/decode.h"\n#include "table_internal.h"\n#include "strata/../../src/runtime/ctx_internal.h"\n' \
  > "$T/tools/tune_decode/x.c"
printf '#include "strata/decode.h"\n#include "strata/tools/model.h"\n#include <strata/tools/model.h>\n' > "$T/src/runtime/y.c"
printf '#include "strata/tools/model.h"\n#include "ctx_internal.h"\n' > "$T/src/tuning/z.c"
printf 'int lib_fn(void);\nint lib_fn(void) { return 0; }\n' > "$W/m.c"
printf 'int cJSON_Parse(void);\nint use(void);\nint use(void) { return cJSON_Parse(); }\n' > "$W/u.c"
# stand-ins for libcjson and the tools library, so nothing here depends on
# what the machine has installed
"$CC_" -shared -fPIC -o "$W/libcjson.so" -Wl,-soname,libcjson.so.1 "$W/m.c"
"$CC_" -shared -fPIC -o "$W/libstrata_tools.so" -Wl,-soname,libstrata_tools.so.0 "$W/m.c"
"$CC_" -shared -fPIC -o "$W/clean.so" "$W/m.c"

expect() { # NAME WANT... : the last run refused, with a line holding each WANT
  local name=$1; shift
  for want in "$@"; do
    grep -qF -- "$want" "$W/err" || { cat "$W/err"; echo "FAIL: $name: no line holding: $want"; exit 1; }
  done
}
refuse() { # NAME ARGS...: check-layers must fail
  local name=$1; shift
  if bash "$SRC/tools/check-layers.sh" "$@" 2> "$W/err"; then
    cat "$W/err"; echo "FAIL: $name: check-layers passed"; exit 1
  fi
}

refuse "sources" "$T" "$W/clean.so"
expect "sources" 'tools/tune_decode/x.c:3: includes "table_internal.h"' 'tools/tune_decode/x.c:4: includes "strata/../../src/runtime/ctx_internal.h": no include climbs' \
  'src/runtime/y.c:2: includes "strata/tools/model.h"' 'src/runtime/y.c:3: includes <strata/tools/model.h>' \
  'src/tuning/z.c:2: includes "ctx_internal.h"'
[ "$(grep -c '^check-layers: ' "$W/err")" = 5 ] || { cat "$W/err"; echo "FAIL: expected exactly 5 lines"; exit 1; }

rm -f "$T/tools/tune_decode/x.c" "$T/src/runtime/y.c" "$T/src/tuning/z.c"
refuse "an empty tree" "$T"
expect "an empty tree" "no includes found in the CLI"

# a clean tree: the source files of this one
T2=$W/clean
mkdir -p "$T2"
(cd "$SRC" && cp -r --parents include src/common src/contract src/runtime src/tuning kernels tools/tune_decode "$T2/")
bash "$SRC/tools/check-layers.sh" "$T2" "$W/clean.so" "$TOOLS" > /dev/null

"$CC_" -shared -fPIC -o "$W/needs_cjson.so" "$W/m.c" -L"$W" -Wl,--no-as-needed -lcjson
refuse "an engine that needs cJSON" "$T2" "$W/needs_cjson.so"
expect "an engine that needs cJSON" "needs: libcjson.so.1"

"$CC_" -shared -fPIC -o "$W/needs_tools.so" "$W/m.c" -L"$W" -Wl,--no-as-needed -lstrata_tools
refuse "an engine that needs the tools library" "$T2" "$W/needs_tools.so"
expect "an engine that needs the tools library" "needs: libstrata_tools.so.0"

"$CC_" -shared -fPIC -o "$W/undef.so" "$W/u.c"
refuse "an engine with a cJSON_ name undefined" "$T2" "$W/undef.so"
expect "an engine with a cJSON_ name undefined" "leaves undefined: cJSON_Parse"

refuse "a tools library without the engine library" "$T2" "$ENGINE" "$W/clean.so"
expect "a tools library without the engine library" "clean.so does not link libstrata_tune"
echo "ok: check-layers refuses each breach with its line"
