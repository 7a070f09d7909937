#!/usr/bin/env bash
# tools/check-exports.sh must fail on a library that exports one name the
# public headers do not declare (and pass on one that exports exactly them).
set -euo pipefail
CC=$1 SRC=$2
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
names=$(grep -hv '^#define ST_API' "$SRC"/include/strata/*.h | tr '\n' ' ' | grep -o 'ST_API [^;(]*(' |
        sed -E 's/.*[ *]([A-Za-z_][A-Za-z0-9_]*)[ ]*\($/\1/' | sort -u)
for n in $names; do echo "void $n(void) {}"; done > "$W/ok.c"
"$CC" -shared -fPIC -o "$W/libok.so" "$W/ok.c"
bash "$SRC/tools/check-exports.sh" "$W/libok.so" || { echo "FAIL: a library with exactly the API was refused"; exit 1; }
{ cat "$W/ok.c"; echo "void st_internal_helper(void) {}"; } > "$W/extra.c"
"$CC" -shared -fPIC -o "$W/libextra.so" "$W/extra.c"
if bash "$SRC/tools/check-exports.sh" "$W/libextra.so" 2> "$W/err"; then
  echo "FAIL: check-exports passed a library exporting st_internal_helper"; exit 1
fi
grep -q st_internal_helper "$W/err" || { cat "$W/err"; echo "FAIL: the refusal does not name the extra symbol"; exit 1; }
echo "ok: the extra name was refused: $(grep st_internal_helper "$W/err")"
