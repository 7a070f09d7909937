#!/usr/bin/env bash
# tools/check-layers.sh passes on this tree and its built libraries, and
# refuses, one line each, a scratch tree where the CLI includes an internal
# header, the engine includes a tools header, the tools library includes an
# engine-internal header, and an engine library that needs libcjson.
# usage: check_layers_test.sh SOURCE_DIR LIBSTRATA_TUNE LIBSTRATA_TOOLS
set -euo pipefail
SRC=$1 ENGINE=$2 TOOLS=$3
bash "$SRC/tools/check-layers.sh" "$SRC" "$ENGINE" "$TOOLS"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/tools/tune_decode" "$W/src/common" "$W/src/contract" "$W/src/runtime" "$W/src/tuning" "$W/kernels" \
         "$W/include/strata/tools"
cp "$SRC/include/strata/decode.h" "$W/include/strata/"
cp "$SRC/include/strata/tools/model.h" "$W/include/strata/tools/"
printf '#include "commands.h"\n#include "strata/decode.h"\n#include "table_internal.h"\n' > "$W/tools/tune_decode/x.c"
printf '#include "strata/decode.h"\n#include "strata/tools/model.h"\n' > "$W/src/runtime/y.c"
printf '#include "strata/tools/model.h"\n#include "ctx_internal.h"\n' > "$W/src/tuning/z.c"
printf 'int main(void) { return 0; }\n' > "$W/m.c"
"${CC:-cc}" -shared -fPIC -o "$W/libstrata_tune.so" "$W/m.c" -lm
if bash "$SRC/tools/check-layers.sh" "$W" "$W/libstrata_tune.so" 2> "$W/err"; then
  echo "FAIL: check-layers passed a tree that breaks every rule"; exit 1
fi
cat "$W/err"
for want in 'tools/tune_decode/x.c:3: includes "table_internal.h"' 'src/runtime/y.c:2: includes "strata/tools/model.h"' \
            'src/tuning/z.c:2: includes "ctx_internal.h"'; do
  grep -qF "$want" "$W/err" || { echo "FAIL: no line for: $want"; exit 1; }
done
[ "$(grep -c '^check-layers: ' "$W/err")" = 3 ] || { echo "FAIL: expected exactly 3 lines"; exit 1; }
# an engine library that needs cJSON
if ls /usr/lib/*/libcjson.so /usr/lib/libcjson.so > /dev/null 2>&1; then
  rm -f "$W/tools/tune_decode/x.c" "$W/src/runtime/y.c" "$W/src/tuning/z.c"
  "${CC:-cc}" -shared -fPIC -o "$W/libstrata_tune.so" "$W/m.c" -Wl,--no-as-needed -lcjson
  if bash "$SRC/tools/check-layers.sh" "$W" "$W/libstrata_tune.so" 2> "$W/err2"; then
    echo "FAIL: check-layers passed an engine library that needs cJSON"; exit 1
  fi
  grep -q 'needs:.*cjson' "$W/err2" || { cat "$W/err2"; echo "FAIL: the refusal does not name cjson"; exit 1; }
fi
echo "ok: check-layers refuses each breach with its line"
