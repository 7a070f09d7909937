#!/usr/bin/env bash
# tools/peer-compare.py: the side-by-side table of `tune_decode bench` and
# the peer harness. Checks the speedups, the slower count and the spreads'
# verdict (ahead / cannot tell / behind) on crafted outputs, the refusal of
# unusable input, and the stored H200 pair of docs/PERFORMANCE.md's fourth
# run (its summary as that file states it).
set -euo pipefail
SRC=${1:?usage: peer_compare_test.sh SOURCE_DIR}
PC="python3 $SRC/tools/peer-compare.py"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
check() { # description, then a command that must succeed
  local d=$1; shift
  if "$@"; then echo "ok: $d"; else echo "FAIL: $d"; fails=$((fails + 1)); fi
}
cat > "$T/bench.txt" <<'B'
read bandwidth 4000 GB/s (streaming read, 1 GiB); copy 3900 GB/s (read + write); launch overhead 4.00 us
mmvq   iq4_xs 4096x14336                 1 default       10.00   1.0%   2018.0   90.2%   65.5%      -
mmvq   iq4_xs 4096x14336                 2 default       17.00   1.0%   1677.1   74.9%   54.4%  1.70x
mmvq   iq4_xs 4096x14336                 4 default       30.00   1.0%   1418.8   63.4%   46.2%  3.00x
mmvq   iq4_xs 4096x14336                 4 graph         26.00   0.1%   1486.4   66.4%   48.4%      -
mmvq   iq4_nl 4096x14336                 1 default       10.00   1.0%   2018.0   90.2%   65.5%      -
B
cat > "$T/peer.txt" <<'P'
peer device NVIDIA H200 ggml 0.21.0
peer mmvq iq4_xs 4096x14336 nt 1 us 12.00 p25 11.90 p75 12.10
peer mmvq iq4_xs 4096x14336 nt 2 us 17.05 p25 17.00 p75 17.10
peer mmvq iq4_xs 4096x14336 nt 4 us 25.00 p25 24.90 p75 25.10
P
$PC "$T/bench.txt" "$T/peer.txt" > "$T/out.txt"
cat "$T/out.txt"
has() { grep -qF -- "$1" "$T/out.txt"; }
check "four cells, the case the peer lacks left out" has "4 cells (read 4000 GB/s): speedup 0.83x .. 1.20x; 2 slower than the peer"
check "nt 1 ahead: 10.00 +- 0.10 is below the peer's p25 11.90" grep -qE "^mmvq iq4_xs 4096x14336 +1 +10.00 +12.00 +1.20x .* ahead$" "$T/out.txt"
check "nt 2 cannot tell: 17.00 +- 0.17 overlaps 17.00..17.10, though 1.00x" grep -qE "^mmvq iq4_xs 4096x14336 +2 +17.00 +17.05 +1.00x .* cannot tell$" "$T/out.txt"
check "nt 4 behind and slower" grep -qE "^mmvq iq4_xs 4096x14336 +4 +30.00 +25.00 +0.83x .* behind$" "$T/out.txt"
check "the graph row against the same peer cell" grep -qE "^mmvq iq4_xs 4096x14336 \(graph\) +4 +26.00 +25.00 +0.96x .* behind$" "$T/out.txt"
check "the spreads' summary" has "spreads of this run: 1 ahead, 1 cannot tell (the intervals overlap), 2 behind"
check "the cell that cannot be told named" has "  cannot tell: mmvq iq4_xs 4096x14336 nt 2: 17.00 vs 17.05 us"
check "the slower cells named" has "  slower: mmvq iq4_xs 4096x14336 nt 4: 0.83x"
$PC "$T/bench.txt" "$T/peer.txt" --markdown > "$T/md.txt"
check "markdown rows carry the verdict" grep -qF "| mmvq iq4_xs 4096x14336 | 2 | 17.00 | 17.05 | 1.00x | 74.9% | 54.4% | cannot tell |" "$T/md.txt"
# unusable input: one line on stderr, exit 2, nothing on stdout
refuses() { # expected message, args...
  local want=$1; shift
  local rc=0
  $PC "$@" > "$T/r.out" 2> "$T/r.err" || rc=$?
  [ "$rc" = 2 ] && [ ! -s "$T/r.out" ] && grep -qF -- "$want" "$T/r.err" && [ "$(wc -l < "$T/r.err")" = 1 ]
}
printf 'nothing here\n' > "$T/empty.txt"
check "no common case refused" refuses "no case appears in both files" "$T/bench.txt" "$T/empty.txt"
check "a missing file refused with its name" refuses "$T/missing.txt: No such file or directory" "$T/bench.txt" "$T/missing.txt"
check "a wrong argument count refused" refuses "usage: peer-compare.py BENCH.txt PEER.txt" "$T/bench.txt"
# the stored pair of the fourth run (docs/PERFORMANCE.md)
$PC "$SRC/docs/bench-h200-2026-12-01d.txt" "$SRC/docs/peer-h200-2026-12-01d.txt" > "$T/h200.txt"
check "the fourth run: 72 cells, none slower" grep -qF "72 cells (read 4286 GB/s): speedup 1.01x .. 1.56x; 0 slower than the peer" "$T/h200.txt"
check "the fourth run: every cell apart from the peer's beyond both spreads" grep -qF "spreads of this run: 72 ahead, 0 cannot tell" "$T/h200.txt"
[ "$fails" = 0 ] || { echo "peer_compare_test: $fails failed"; exit 1; }
echo "peer_compare_test: all passed"
