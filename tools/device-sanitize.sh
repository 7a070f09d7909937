#!/usr/bin/env bash
# NVIDIA compute-sanitizer over every GPU test, in one call on the GPU
# machine: builds the CUDA configuration (tools/device-check.sh with
# SKIP_TESTS=1, unless build/device already has the tests or --no-build),
# then runs each tool (memcheck, racecheck, synccheck, initcheck) over each
# tests/gpu test in its sanitizer size (STRATA_GPU_TEST_SIZE=sanitizer:
# fewer shapes, every kernel still launched; tests/gpu/parity_util.h), a few
# runs at a time. Prints, per tool and test, the sanitizer's summary line
# and the test's own verdict; full logs go to $OUT/sanitize/. Exit status 0
# only when every run reports 0 errors / 0 hazards and every test passes.
#
#   tools/device-sanitize.sh [--no-build] [--tools "memcheck racecheck ..."]
#                            [--tests "iq_parity_test ..."] [--timeout S] [--jobs N]
#
# The runs go JOBS at a time (default 8 of the 16; the H200 machine has 16
# cores) with a TIMEOUT per run (default 300 s), so the whole call fits one
# device command. With the build done by an earlier call on the same warm
# machine (SKIP_TESTS=1 tools/device-check.sh), pass --no-build.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/device-logs}
B=${BUILD_DIR:-$PWD/build/device}
TOOLS="memcheck racecheck synccheck initcheck"
TESTS=""
TIMEOUT=300
JOBS=8
BUILD=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --tools) TOOLS="$2"; shift ;;
    --tests) TESTS="$2"; shift ;;
    --timeout) TIMEOUT="$2"; shift ;;
    --jobs) JOBS="$2"; shift ;;
    *) echo "device-sanitize: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
export PATH=/usr/local/cuda/bin:$PATH
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
[ -n "$CS" ] || { echo "device-sanitize: compute-sanitizer not found (CUDA toolkit)" >&2; exit 1; }
if [ "$BUILD" = 1 ] && ! ls "$B"/tests/*_parity_test > /dev/null 2>&1; then
  SKIP_TESTS=1 tools/device-check.sh || { echo "device-sanitize: the CUDA build failed" >&2; exit 1; }
fi
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
# every GPU test: the sources of tests/gpu
[ -n "$TESTS" ] || TESTS=$(ls tests/gpu/*_test.c tests/gpu/*_test.hip 2>/dev/null | xargs -n1 basename | sed 's/\.[a-z]*$//' |
  sort | tr '\n' ' ')
[ -n "$TESTS" ] || { echo "device-sanitize: no GPU tests in $B/tests" >&2; exit 1; }
L="$OUT/sanitize"
mkdir -p "$L"

# One run: TOOL TEST -> $L/TOOL.TEST.log, and its exit status in .rc
run_one() {
  local tool=$1 test=$2 log="$L/$1.$2.log" extra=()
  case "$tool" in
    racecheck) extra=(--racecheck-report hazard) ;;
    initcheck) extra=() ;;
  esac
  (cd "$B/tests" && STRATA_GPU_TEST_SIZE=sanitizer CMOCKA_MESSAGE_OUTPUT=STDOUT \
     timeout "$TIMEOUT" "$CS" --tool "$tool" "${extra[@]}" --print-limit 20 "./$test") > "$log" 2>&1
  echo $? > "$log.rc"
}
export -f run_one
export CS B L TIMEOUT
t0=$(date +%s)
for tool in $TOOLS; do for test in $TESTS; do echo "$tool $test"; done; done |
  xargs -P "$JOBS" -L 1 bash -c 'run_one "$0" "$1"'

printf '%-10s %-30s %-60s %s\n' tool test "sanitizer summary" test
for tool in $TOOLS; do
  for test in $TESTS; do
    log="$L/$tool.$test.log"
    rc=$(cat "$log.rc" 2>/dev/null || echo 1)
    sum=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazards? displayed" "$log" | tail -1 | sed 's/^========= //')
    verdict="$(grep -E "comparisons|table hits" "$log" | tail -1) $(grep -oE "(PASSED|FAILED) +\] [0-9]+ test" "$log" | tail -1)"
    [ "$rc" = 124 ] && verdict="TIMED OUT after ${TIMEOUT}s"
    [ -n "$sum" ] || sum="(no summary line)"
    printf '%-10s %-30s %-60s %s\n' "$tool" "$test" "$sum" "$verdict"
  done
done | tee "$OUT/sanitize-summary.txt"
# a run is clean when the test passed (rc 0) and the sanitizer says
# "ERROR SUMMARY: 0 errors" or "RACECHECK SUMMARY: 0 hazards displayed"
bad=0
for tool in $TOOLS; do for test in $TESTS; do
  log="$L/$tool.$test.log"
  if [ "$(cat "$log.rc" 2>/dev/null)" != 0 ] || ! grep -qE "SUMMARY: 0 (errors|hazards)" "$log"; then bad=$((bad + 1)); fi
done; done
echo "device-sanitize: $(( $(date +%s) - t0 )) s; $bad runs with errors, hazards, a failure or a timeout"
[ "$bad" = 0 ]
