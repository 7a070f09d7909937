#!/usr/bin/env bash
# The two libraries and the CLI keep their places (docs/DESIGN.md section 0):
#   - tune_decode (tools/tune_decode) includes only its own commands.h, the
#     public headers (strata/... under include/) and system headers: it uses
#     the public API of the two libraries and nothing else;
#   - the engine library's sources (src/common, src/contract, src/runtime,
#     kernels) include no strata/tools/ header (their layers also compile
#     with ST_ENGINE_LAYER, which makes such an include an #error);
#   - the tools library's sources (src/tuning) include only their own
#     folder's headers, src/common's and the public ones (its include
#     directories allow no other; this says which line when one slips in);
#   - no quoted include climbs folders ("../"): each layer reaches another
#     only through its include directories;
#   - given the built libraries: the engine library needs neither cJSON nor
#     the tools library (no such NEEDED entry, no cJSON_ symbol left
#     undefined), and the tools library links the engine library.
# Usage: tools/check-layers.sh [SOURCE_DIR] [libstrata_tune.so libstrata_tools.so]
# One line per breach; exit 1 if any, else one summary line and exit 0.
set -euo pipefail
src=${1:-$(cd "$(dirname "$0")/.." && pwd)}
engine_lib=${2:-}
tools_lib=${3:-}
bad=0
say() { echo "check-layers: $*" >&2; bad=1; }

# quoted includes of FILES: "file:line:name"; angled ones: angled
quoted() { grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$@" 2>/dev/null |
           sed -E 's/^([^:]*):([0-9]+):.*#[[:space:]]*include[[:space:]]*"([^"]*)".*/\1:\2:\3/' || true; }
angled() { grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*<' "$@" 2>/dev/null |
           sed -E 's/^([^:]*):([0-9]+):.*#[[:space:]]*include[[:space:]]*<([^>]*)>.*/\1:\2:\3/' || true; }
climbs() { case "$1" in ../* | */../* | *.. | ..) return 0 ;; esac; return 1; }

n_cli=0
while IFS=: read -r f l inc; do
  [ -n "$f" ] || continue
  n_cli=$((n_cli + 1))
  if climbs "$inc"; then say "${f#$src/}:$l: includes \"$inc\": no include climbs folders"; continue; fi
  case "$inc" in
    commands.h) ;;
    strata/*) [ -f "$src/include/$inc" ] || say "${f#$src/}:$l: includes \"$inc\", which is no public header" ;;
    *) say "${f#$src/}:$l: includes \"$inc\": the CLI uses the public headers (strata/...) only" ;;
  esac
done < <(quoted "$src"/tools/tune_decode/*.c "$src"/tools/tune_decode/*.h)
while IFS=: read -r f l inc; do
  [ -n "$f" ] || continue
  case "$inc" in strata/*) [ -f "$src/include/$inc" ] || say "${f#$src/}:$l: includes <$inc>, which is no public header" ;; esac
done < <(angled "$src"/tools/tune_decode/*.c "$src"/tools/tune_decode/*.h)

engine_files=$(find "$src/src/common" "$src/src/contract" "$src/src/runtime" "$src/kernels" -type f \
                 \( -name '*.c' -o -name '*.h' -o -name '*.hip' -o -name '*.in' \) 2>/dev/null)

n_engine=0
while IFS=: read -r f l inc; do
  [ -n "$f" ] || continue
  n_engine=$((n_engine + 1))
  if climbs "$inc"; then say "${f#$src/}:$l: includes \"$inc\": no include climbs folders"; continue; fi
  case "$inc" in
    strata/tools*) say "${f#$src/}:$l: includes \"$inc\": the engine library cannot see the tools library" ;;
  esac
done < <(quoted $engine_files)
while IFS=: read -r f l inc; do
  [ -n "$f" ] || continue
  case "$inc" in strata/tools*) say "${f#$src/}:$l: includes <$inc>: the engine library cannot see the tools library" ;; esac
done < <(angled $engine_files)

n_tools=0
while IFS=: read -r f l inc; do
  [ -n "$f" ] || continue
  n_tools=$((n_tools + 1))
  if climbs "$inc"; then say "${f#$src/}:$l: includes \"$inc\": no include climbs folders"; continue; fi
  case "$inc" in
    strata/*) [ -f "$src/include/$inc" ] || say "${f#$src/}:$l: includes \"$inc\", which is no public header" ;;
    st_source_commit.h) ;; # generated beside the sources (src/tuning/source_commit.h.in)
    *) [ -f "$src/src/tuning/$inc" ] || [ -f "$src/src/common/$inc" ] ||
         say "${f#$src/}:$l: includes \"$inc\": the tools library sees its own headers and the public ones" ;;
  esac
done < <(quoted "$src"/src/tuning/*.c "$src"/src/tuning/*.h)

for n in "$n_cli:the CLI (tools/tune_decode)" "$n_engine:the engine library's sources" "$n_tools:the tools library's sources (src/tuning)"; do
  [ "${n%%:*}" -gt 0 ] || say "no includes found in ${n#*:}: is this the source tree?"
done
if [ -n "$engine_lib" ]; then
  needed=$(objdump -p "$engine_lib" | awk '$1 == "NEEDED" {print $2}' | tr '\n' ' ')
  case "$needed" in
    *cjson* | *strata_tools*) say "$(basename "$engine_lib") needs: $needed (the engine library needs no cJSON and no tools library)" ;;
  esac
  undef=$(nm -D --undefined-only "$engine_lib" | awk '{print $2}' | grep -E '^(cJSON_|st_(tune|verify|bench|model|report|tables|devices|stqv|text)_)' | tr '\n' ' ' || true)
  [ -z "$undef" ] || say "$(basename "$engine_lib") leaves undefined: $undef (names of cJSON or the tools library)"
fi
if [ -n "$tools_lib" ]; then
  objdump -p "$tools_lib" | awk '$1 == "NEEDED" {print $2}' | grep -q '^libstrata_tune\.so' ||
    say "$(basename "$tools_lib") does not link libstrata_tune"
fi
[ $bad -eq 0 ] || exit 1
echo "check-layers: ok ($n_cli CLI includes, $n_engine engine includes, $n_tools tools includes${engine_lib:+, the dependencies of both libraries})"
