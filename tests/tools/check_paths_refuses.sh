#!/usr/bin/env bash
# tools/check-paths.sh must refuse a tree whose comments or docs name a file
# it lacks: on a copy of the tracked files, a comment naming a missing
# header and a doc naming a missing test give exactly those two lines (their
# placeholders none) and exit 1; renaming a file that comments name is
# caught too; the unchanged copy passes.
set -euo pipefail
SRC=${1:?usage: check_paths_refuses.sh SOURCE_DIR}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
git -C "$SRC" ls-files -z | tar -C "$SRC" --null -T - -cf - | tar -C "$T" -xf -
git -C "$T" init -q
git -C "$T" add -A
CP="bash $T/tools/check-paths.sh $T"

$CP > "$T/out" || { cat "$T/out"; echo "FAIL: the unchanged copy was refused"; exit 1; }
echo "ok: the unchanged copy passes: $(cat "$T/out")"

cp "$T/kernels/common.h" "$T/common.h.orig"
cp "$T/docs/DESIGN.md" "$T/DESIGN.md.orig"
printf '/* see kernels/gone_helper.h; strata-<model>.table and DIR/... are placeholders */\n' >> "$T/kernels/common.h"
printf '\nThe test `vanished_test.c` covers it.\n' >> "$T/docs/DESIGN.md"
git -C "$T" add -A
rc=0
$CP > "$T/out" || rc=$?
{ # in the order of git ls-files
  echo "docs/DESIGN.md:$(wc -l < "$T/docs/DESIGN.md"): names vanished_test.c, which does not exist"
  echo "kernels/common.h:$(wc -l < "$T/kernels/common.h"): names kernels/gone_helper.h, which does not exist"
} > "$T/want"
[ "$rc" -eq 1 ] || { cat "$T/out"; echo "FAIL: exit $rc for a tree naming missing files, not 1"; exit 1; }
diff "$T/want" "$T/out" || { echo "FAIL: not exactly the two stale references"; exit 1; }
echo "ok: the missing files were refused, one line each"
mv "$T/common.h.orig" "$T/kernels/common.h"
mv "$T/DESIGN.md.orig" "$T/docs/DESIGN.md"
git -C "$T" add -A

git -C "$T" mv tools/check-exports.sh tools/check_exports.sh
rc=0
$CP > "$T/out" || rc=$?
[ "$rc" -eq 1 ] && grep -q ": names tools/check-exports.sh, which does not exist$" "$T/out" ||
  { cat "$T/out"; echo "FAIL: a renamed file that comments name was not caught (exit $rc)"; exit 1; }
echo "ok: the renamed file was caught: $(grep -c . "$T/out") line(s), e.g. $(head -1 "$T/out")"
