#!/usr/bin/env bash
# tools/check-exports.sh must fail on a library that exports one name the
# public headers do not declare (and pass on one that exports exactly them).
set -euo pipefail
CC=$1 SRC=$2
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# for each library: its own API passes; one name more, or one of the other
# library's names, is refused by name; one name less is refused by name
for lib in strata_tune strata_tools; do
  if [ $lib = strata_tune ]; then mine=("$SRC"/include/strata/*.h); other=("$SRC"/include/strata/tools/*.h);
  else mine=("$SRC"/include/strata/tools.h "$SRC"/include/strata/tools/*.h); other=("$SRC"/include/strata/*.h); fi
  names() { grep -hv '^#define ST_API' "$@" | tr '\n' ' ' | grep -o 'ST_API [^;(]*(' |
            sed -E 's/.*[ *]([A-Za-z_][A-Za-z0-9_]*)[ ]*\($/\1/' | sort -u; }
  names "${mine[@]}" > "$W/mine"
  [ -s "$W/mine" ] || { echo "FAIL: no ST_API names in lib$lib's headers"; exit 1; }
  sed 's/.*/void &(void) {}/' "$W/mine" > "$W/ok.c"
  mkdir -p "$W/ok" "$W/extra" "$W/cross" "$W/less"
  "$CC" -shared -fPIC -o "$W/ok/lib$lib.so" "$W/ok.c"
  bash "$SRC/tools/check-exports.sh" "$W/ok/lib$lib.so" || { echo "FAIL: lib$lib with exactly its API was refused"; exit 1; }
  { cat "$W/ok.c"; echo "void st_internal_helper(void) {}"; } > "$W/extra.c"
  "$CC" -shared -fPIC -o "$W/extra/lib$lib.so" "$W/extra.c"
  if bash "$SRC/tools/check-exports.sh" "$W/extra/lib$lib.so" 2> "$W/err"; then
    echo "FAIL: check-exports passed lib$lib exporting st_internal_helper"; exit 1
  fi
  grep -q st_internal_helper "$W/err" || { cat "$W/err"; echo "FAIL: the refusal does not name the extra symbol"; exit 1; }
  cross=$(names "${other[@]}" | head -1)
  { cat "$W/ok.c"; echo "void $cross(void) {}"; } > "$W/cross.c"
  "$CC" -shared -fPIC -o "$W/cross/lib$lib.so" "$W/cross.c"
  if bash "$SRC/tools/check-exports.sh" "$W/cross/lib$lib.so" 2> "$W/err"; then
    echo "FAIL: check-exports passed lib$lib exporting the other library's $cross"; exit 1
  fi
  grep -q "$cross" "$W/err" || { cat "$W/err"; echo "FAIL: the refusal does not name $cross"; exit 1; }
  dropped=$(head -1 "$W/mine")
  grep -v "^void $dropped(void)" "$W/ok.c" > "$W/less.c"
  "$CC" -shared -fPIC -o "$W/less/lib$lib.so" "$W/less.c"
  if bash "$SRC/tools/check-exports.sh" "$W/less/lib$lib.so" 2> "$W/err"; then
    echo "FAIL: check-exports passed lib$lib without $dropped"; exit 1
  fi
  grep -q "$dropped" "$W/err" || { cat "$W/err"; echo "FAIL: the refusal does not name $dropped"; exit 1; }
  echo "ok: lib$lib: its API passes; st_internal_helper, $cross (the other library's) and a missing $dropped are refused"
done
