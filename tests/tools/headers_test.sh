#!/usr/bin/env bash
# Every public header compiles on its own, as C11 and as C++ (the engines
# that include them are often C++), with warnings as errors: it includes
# what it uses, and its extern "C" guards balance.
# usage: headers_test.sh SOURCE_DIR CC [CXX]
set -euo pipefail
SRC=$1 CC_=$2 CXX_=${3:-}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
n=0
for h in "$SRC"/include/strata/*.h "$SRC"/include/strata/tools/*.h; do
  rel=${h#"$SRC"/include/}
  printf '#include "%s"\n#include "%s"\nint strata_header_check(void);\nint strata_header_check(void) { return 0; }\n' "$rel" "$rel" > "$W/h.c"
  "$CC_" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$SRC/include" "$W/h.c" || { echo "FAIL: $rel does not compile alone as C11"; exit 1; }
  if [ -n "$CXX_" ]; then
    cp "$W/h.c" "$W/h.cpp"
    "$CXX_" -std=c++17 -Wall -Wextra -Werror -fsyntax-only -I"$SRC/include" "$W/h.cpp" ||
      { echo "FAIL: $rel does not compile alone as C++"; exit 1; }
  fi
  n=$((n + 1))
done
echo "ok: $n public headers compile alone as C11${CXX_:+ and C++}, twice included"
