#!/usr/bin/env bash
# The shared library exports the public API and nothing else: every dynamic
# symbol libstrata_tune defines must be a function the headers in
# include/strata declare with ST_API, and every such function must be
# exported. Usage: tools/check-exports.sh path/to/libstrata_tune.so
set -euo pipefail
lib=${1:?usage: check-exports.sh LIBSTRATA_TUNE.so}
top=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$lib" ] || { echo "check-exports: $lib: no such file" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Defined dynamic symbols (functions and data), without version suffixes.
nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u > "$tmp/exported"
# Names the public headers declare: "ST_API <type> [*]name(".
grep -hv "^#define ST_API" "$top"/include/strata/*.h | tr '\n' ' ' | grep -o 'ST_API [^;(]*(' |
  sed -E 's/.*[ *]([A-Za-z_][A-Za-z0-9_]*)[ ]*\($/\1/' | sort -u > "$tmp/declared"
extra=$(comm -23 "$tmp/exported" "$tmp/declared")
missing=$(comm -13 "$tmp/exported" "$tmp/declared")
status=0
if [ -n "$extra" ]; then
  echo "check-exports: $lib exports names that are not public API:" >&2
  echo "$extra" | sed 's/^/  /' >&2
  status=1
fi
if [ -n "$missing" ]; then
  echo "check-exports: the public headers declare names $lib does not export:" >&2
  echo "$missing" | sed 's/^/  /' >&2
  status=1
fi
[ $status -eq 0 ] && echo "check-exports: $(wc -l < "$tmp/exported") exported names, all of them public API"
exit $status
