#!/usr/bin/env bash
# A shared library exports its public API and nothing else: every dynamic
# symbol it defines must be a function its public headers declare with
# ST_API, and every such function must be exported.
#   tools/check-exports.sh libstrata_tune.so   the engine library: include/strata/*.h
#   tools/check-exports.sh libstrata_tools.so  the tools library: include/strata/tools.h, include/strata/tools/*.h
#   tools/check-exports.sh LIB HEADER...       any library against the headers given
# The library is told by its file name unless headers are given.
set -euo pipefail
lib=${1:?usage: check-exports.sh LIB.so [HEADER...]}
shift
top=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$lib" ] || { echo "check-exports: $lib: no such file" >&2; exit 2; }
headers=("$@")
if [ ${#headers[@]} -eq 0 ]; then
  case "$(basename "$lib")" in
    libstrata_tune.so*) headers=("$top"/include/strata/*.h) ;;
    libstrata_tools.so*) headers=("$top"/include/strata/tools.h "$top"/include/strata/tools/*.h) ;;
    *) echo "check-exports: $lib: which library is it? name its headers" >&2; exit 2 ;;
  esac
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Defined dynamic symbols (functions and data), without version suffixes.
nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u > "$tmp/exported"
# Names the headers declare: "ST_API <type> [*]name(".
grep -hv "^#define ST_API" "${headers[@]}" | tr '\n' ' ' | grep -o 'ST_API [^;(]*(' |
  sed -E 's/.*[ *]([A-Za-z_][A-Za-z0-9_]*)[ ]*\($/\1/' | sort -u > "$tmp/declared"
extra=$(comm -23 "$tmp/exported" "$tmp/declared")
missing=$(comm -13 "$tmp/exported" "$tmp/declared")
status=0
if [ -n "$extra" ]; then
  echo "check-exports: $lib exports names that are not its public API:" >&2
  echo "$extra" | sed 's/^/  /' >&2
  status=1
fi
if [ -n "$missing" ]; then
  echo "check-exports: its public headers declare names $lib does not export:" >&2
  echo "$missing" | sed 's/^/  /' >&2
  status=1
fi
[ $status -eq 0 ] && echo "check-exports: $(basename "$lib"): $(wc -l < "$tmp/exported") exported names, all of them its public API"
exit $status
