#!/usr/bin/env bash
# NVIDIA compute-sanitizer over every GPU test, in one device call: builds
# the CUDA configuration when build/device lacks it (tools/device-check.sh
# with SKIP_TESTS=1; --no-build skips that), lists the GPU tests as ctest
# does (`ctest -N -L gpu`), then runs each tool (memcheck, racecheck,
# synccheck, initcheck) over each test in its sanitizer size
# (STRATA_GPU_TEST_SIZE=sanitizer: fewer shapes, every kernel still
# launched; tests/gpu/parity_util.h).
#
#   tools/device-sanitize.sh [--no-build | --prebuilt ARCHIVE] [--tools "memcheck racecheck ..."]
#       [--tests "iq_parity_test ..."] [--timeout S] [--timeout-for TEST=S]...
#       [--shards TEST=N]... [--deadline S] [--jobs N] [--race-jobs N] [--gpus N]
#
# Prebuilt. --prebuilt ARCHIVE (made here by tools/device-prebuilt.sh from a
# CUDA build of this tree, carried under .device/): the GPU tests are
# unpacked at the build path they were made in (a link to a folder of
# /tmp; a path that stands and is not such a link is refused), the source
# path they name made a link to this tree when absent, and nothing is
# built: the whole call is the sanitizers' (a fresh machine's build took
# 145-185 s of a 600 s call).
#
# Shards. --shards TEST=N runs TEST as N runs per tool, each with
# STRATA_GPU_TEST_SHARD=k/N (tests/common/gpu_test_size.h: the test runs its
# k-th slice of formats or shapes; the N slices together are the whole
# test; a test of several cmocka cases may shard by case), so a long
# test's sanitizer runs go side by side; the default shards the parity
# sweeps (batch invariance 8, iq_multi_parity 10, native_grouped 8,
# iq_parity 4: slices of formats and shapes) and the two engine tests by
# cmocka case (engine_ops 13: its in-place sweep is nine cases,
# engine_runtime 4: TEST_SHARD_CASES). Each run also sees STRATA_SANITIZER_TOOL,
# the tool's name. A test that exits 77 (multi_device_test on one GPU) is
# reported skipped, not counted as a failure.
#
# Time. The whole sweep (every tool over every gpu test) fits one 600 s
# device call on one H100 with --prebuilt (2026-12-06, the thirteenth
# session: 509 s, every run clean, docs/sanitize-h100-2026-12-06g.txt):
# memcheck, synccheck and initcheck about 130 s at 14 side by side,
# racecheck 4390 job-seconds at 14 side by side, its longest run 190 s.
# That took the racecheck size (tests/common/gpu_test_size.h: a launch
# that repeats a kernel is left out, racecheck_repeat; racecheck's cost is
# per launch and per shared-memory access, not per row) and the shards
# above; the history of each trim is in docs/PERFORMANCE.md. A build in
# the call (145-185 s on a fresh machine) does not leave room for it:
# --tests and --tools split the sweep over calls then.
#
# Scheduling. gpu_faults_test runs first and alone, its four tools one
# after the other: it allocates the device's memory away and provokes
# runtime errors on purpose, so a run beside it would lose its memory (and
# its own exhaustion would be someone else's), and every tool runs it with
# --report-api-errors no (the errors it provokes are its test; every other
# test keeps the default, which reports them). Then two phases, each the
# longest limits first: the other tools' runs, JOBS at a time (--jobs,
# default: the CPUs less two, at least 2), then racecheck's, RACE_JOBS at a
# time (--race-jobs, default 14, at most the CPUs per GPU: on an H100,
# 2026-12-06, 12 side by side finished about twice the work of 6 in the
# same time, each run as fast, and 14 fitted the whole sweep in one call;
# racecheck's runs wait on the host's checking more than on the GPU, so
# the default stays under the 16 CPUs of a device machine). Run side by
# side with the others it starved
# them: alone, memcheck, synccheck and initcheck over every test took 120 s
# (the ninth session); beside racecheck's pool, in 562 s, synccheck's runs
# never started and memcheck's of three tests were cut (2026-12-06,
# docs/PERFORMANCE.md). Hence the light tools first, racecheck with what
# is left of the deadline. Each run has its own timeout
# (--timeout S for all, default 300; --timeout-for TEST=S for one, as often
# as needed; by default the long parity sweeps and the engine tests have
# limits of 380-430 s in the order of their measured racecheck cost,
# native_grouped first, so that the longest runs start first: the
# thirteenth session's one-call sweep), cut to what is left of the whole
# call's deadline (--deadline S from the start of this script, default
# 575: the sweep alone in a 600 s device call; give less when the call
# does more); a run the deadline leaves no time for is reported "not run
# (deadline)", never silently dropped.
#
# Several GPUs (--gpus N, default every GPU: those CUDA_VISIBLE_DEVICES
# names when it is set, else those nvidia-smi lists; the phases below are
# per GPU). The runs,
# longest limits first, are dealt to the GPUs in turn (run i to GPU i % N),
# and each GPU has the two phases above (JOBS and RACE_JOBS runs at a time:
# per GPU; --jobs's default is then the CPUs less two, shared by the GPUs),
# each run seeing its GPU alone (CUDA_VISIBLE_DEVICES) but
# multi_device_test, which sees them all (it needs two); --race-jobs's
# default is then 14 or the CPUs per GPU, whichever is fewer. One GPU
# holds the whole sweep in one call (Time, above); more GPUs leave room
# for a build in the call.
#
# Output. Per tool and test one line on stdout: tool, test, seconds, the
# sanitizer's summary ("ERROR SUMMARY: 0 errors", "RACECHECK SUMMARY: 0
# hazards displayed ..."), the test's own verdict, and "clean" or what is
# wrong. All logs go into one archive under $OUT (the tar.gz named at the end, with the
# summary table inside it and beside it). Exit status 0 only
# when every run was made, the test passed and the sanitizer found nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
T_START=$(date +%s)
OUT=${OUT:-build/device-logs}
B=${BUILD_DIR:-$PWD/build/device}
TOOLS="memcheck racecheck synccheck initcheck"
TESTS=""
TIMEOUT=300
DEADLINE=575
JOBS=""
RACE_JOBS=""
GPUS=""
BUILD=1
PREBUILT=""
ALONE="gpu_faults_test"
ALL_GPUS="multi_device_test" # sees every GPU, the others one each
# the default limits (--timeout-for overrides one): the longest racecheck
# runs first (2026-12-06, an H100: native_grouped 89-190 s a shard,
# batch invariance 75-145, iq_parity 79-80, iq_multi 90-112, engine_ops
# 6-100, engine_runtime 9-94)
declare -A TFOR=([native_grouped_parity_test]=430 [batch_invariance_gpu_test]=420 [iq_parity_test]=410
                 [iq_multi_parity_test]=400 [engine_ops_gpu_test]=390 [engine_runtime_test]=380)
declare -A SHARDS=([batch_invariance_gpu_test]=8 [iq_multi_parity_test]=10 [native_grouped_parity_test]=8 [iq_parity_test]=4
                  [engine_ops_gpu_test]=13 [engine_runtime_test]=4)
# a whole number from 1 (no sign, no leading zero: bash reads 08 as octal)
posint() {
  case "$2" in [1-9] | [1-9]*[0-9]) case "$2" in *[!0-9]*) ;; *) return 0 ;; esac ;; esac
  echo "device-sanitize: $1 '$2': expected a whole number from 1" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --prebuilt) PREBUILT="$2"; shift ;;
    --tools) TOOLS="$2"; shift ;;
    --tests) TESTS="$2"; shift ;;
    --timeout) TIMEOUT="$2"; shift ;;
    --timeout-for)
      case "$2" in *=*) ;; *) echo "device-sanitize: --timeout-for TEST=SECONDS" >&2; exit 2 ;; esac
      posint --timeout-for "${2#*=}"; TFOR[${2%%=*}]=${2#*=}
      shift ;;
    --shards)
      case "$2" in *=*) ;; *) echo "device-sanitize: --shards TEST=N (N >= 1)" >&2; exit 2 ;; esac
      posint --shards "${2#*=}"; SHARDS[${2%%=*}]=${2#*=}
      shift ;;
    --deadline) DEADLINE="$2"; shift ;;
    --jobs) JOBS="$2"; shift ;;
    --race-jobs) posint --race-jobs "$2"; RACE_JOBS="$2"; shift ;;
    --gpus) GPUS="$2"; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed -n 's/^# \{0,1\}//p'; exit 0 ;;
    *) echo "device-sanitize: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
posint --timeout "$TIMEOUT"
posint --deadline "$DEADLINE"
# the GPUs: CUDA_VISIBLE_DEVICES's list when it is set (its items without
# blanks, empty ones dropped; set but empty: no GPU, refused), else
# nvidia-smi's
if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
  IFS=, read -ra items <<< "$CUDA_VISIBLE_DEVICES"
  GPU_IDS=()
  for id in "${items[@]}"; do
    id=${id//[[:space:]]/}
    [ -n "$id" ] && GPU_IDS+=("$id")
  done
  if [ "${#GPU_IDS[@]}" = 0 ]; then
    echo "device-sanitize: CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' shows no GPU" >&2
    exit 2
  fi
else
  n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  GPU_IDS=()
  for ((g = 0; g < n; g++)); do GPU_IDS+=("$g"); done
fi
[ "${#GPU_IDS[@]}" -ge 1 ] || GPU_IDS=(0)
[ -n "$GPUS" ] || GPUS=${#GPU_IDS[@]}
posint --gpus "$GPUS"
if [ "$GPUS" -gt "${#GPU_IDS[@]}" ]; then
  echo "device-sanitize: --gpus $GPUS: this machine shows ${#GPU_IDS[@]} GPU(s)" >&2
  exit 2
fi
if [ -z "$JOBS" ]; then
  JOBS=$(( ($(nproc) - 2) / GPUS ))
  [ "$JOBS" -ge 2 ] || JOBS=2
fi
posint --jobs "$JOBS"
if [ -z "$RACE_JOBS" ]; then
  RACE_JOBS=$(( $(nproc) / GPUS ))
  [ "$RACE_JOBS" -le 14 ] || RACE_JOBS=14
  [ "$RACE_JOBS" -ge 1 ] || RACE_JOBS=1
fi
for tool in $TOOLS; do
  case "$tool" in memcheck | racecheck | synccheck | initcheck) ;;
    *) echo "device-sanitize: --tools: '$tool' is not one of memcheck racecheck synccheck initcheck" >&2; exit 2 ;; esac
done
# each tool and test once (two runs of one would write one log)
TOOLS=$(printf '%s\n' $TOOLS | awk 'NF && !seen[$0]++' | tr '\n' ' ' | sed 's/ $//')
DEADLINE_AT=$((T_START + DEADLINE))
export PATH=/usr/local/cuda/bin:$PATH
# (COMPUTE_SANITIZER: another one, e.g. the stand-in of the CPU test,
# tests/tools/device_sanitize_test.sh)
CS=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)}
[ -n "$CS" ] || { echo "device-sanitize: compute-sanitizer not found (CUDA toolkit)" >&2; exit 1; }
if [ -n "$PREBUILT" ]; then
  B=$(tools/device-prebuilt.sh unpack "$PREBUILT") || exit 1
  BUILD=0
  echo "device-sanitize: prebuilt $(sed -n 's/^COMMIT=//p' "$B/prebuilt.env") at $B"
fi
if [ "$BUILD" = 1 ] && ! ls "$B"/tests/gpu_faults_test > /dev/null 2>&1; then
  SKIP_TESTS=1 tools/device-check.sh || { echo "device-sanitize: the CUDA build failed" >&2; exit 1; }
fi
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
# every GPU test, as ctest lists them (the gpu label)
if [ -z "$TESTS" ]; then
  TESTS=$(cd "$B" && ctest -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *\([A-Za-z0-9_]*\).*/\1/p' | sort | tr '\n' ' ')
fi
TESTS=$(printf '%s\n' $TESTS | awk 'NF && !seen[$0]++' | tr '\n' ' ' | sed 's/ $//')
[ -n "$TESTS" ] || { echo "device-sanitize: ctest -N -L gpu lists no test in $B" >&2; exit 1; }
# the runs: each test, or its shards
RUNS=""
for test in $TESTS; do
  n=${SHARDS[$test]:-1}
  if [ "$n" -gt 1 ] && [ "$test" != "$ALONE" ]; then
    for k in $(seq 0 $((n - 1))); do RUNS="$RUNS $test@$k/$n"; done
  else
    RUNS="$RUNS $test"
  fi
done
L="$OUT/sanitize"
rm -rf "$L"
mkdir -p "$L"

# One run: TOOL TEST -> $L/TOOL.TEST.log, its exit status in .rc, its seconds
# in .s; TEST is a ctest name or NAME@k/n, the k-th of n shards of NAME
# (logs NAME.shard-k-of-n)
run_one() {
  local tool=$1 spec=$2 test=${2%%@*} shard="" tag=$2 extra=()
  case "$spec" in *@*) shard=${spec#*@}; tag="$test.shard-${shard%/*}-of-${shard#*/}" ;; esac
  local log="$L/$tool.$tag.log" limit=${TFOR[$test]:-$TIMEOUT}
  local left=$((DEADLINE_AT - $(date +%s) - 5))
  # not run: a mark of its own (timeout's exit statuses are the run's)
  if [ "$left" -lt 15 ]; then echo "not run (deadline)" > "$log"; : > "$log.deadline"; echo 0 > "$log.s"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  case "$tool" in
    racecheck) extra=(--racecheck-report hazard) ;;
  esac
  # the faults test provokes runtime errors on purpose (it is the test)
  [ "$test" = "$ALONE" ] && extra+=(--report-api-errors no)
  local t0
  t0=$(date +%s)
  if [ -x "$B/tests/$test" ]; then
    # on several GPUs (SAN_GPU set) the run sees its own, multi_device_test all
    local vis=()
    [ -n "${SAN_GPU:-}" ] && [ "$test" != "$ALL_GPUS" ] && vis=(CUDA_VISIBLE_DEVICES="$SAN_GPU")
    (cd "$B/tests" && env ${vis[@]+"${vis[@]}"} STRATA_GPU_TEST_SIZE=sanitizer STRATA_GPU_TEST_SHARD=$shard STRATA_SANITIZER_TOOL=$tool \
       CUDA_MODULE_LOADING=LAZY CMOCKA_MESSAGE_OUTPUT=STDOUT timeout -k 10 "$limit" "$CS" --tool "$tool" "${extra[@]}" --print-limit 20 "./$test") > "$log" 2>&1
    echo $? > "$log.rc"
  else
    echo "no executable $B/tests/$test" > "$log"
    echo 127 > "$log.rc"
  fi
  echo $(( $(date +%s) - t0 )) > "$log.s"
  echo "$limit" > "$log.limit"
}
export -f run_one
export CS B L TIMEOUT DEADLINE_AT ALONE ALL_GPUS
# associative arrays do not cross into xargs' shells: the per-test limits as a string
TFOR_LIST=""
for k in "${!TFOR[@]}"; do TFOR_LIST="$TFOR_LIST $k=${TFOR[$k]}"; done
export TFOR_LIST
run_listed() { declare -A TFOR=(); local kv; for kv in $TFOR_LIST; do TFOR[${kv%%=*}]=${kv#*=}; done; run_one "$@"; }
export -f run_listed

# 1. the faults test alone, tool after tool
for test in $TESTS; do
  [ "$test" = "$ALONE" ] || continue
  for tool in $TOOLS; do run_listed "$tool" "$test"; done
done
# 2. the rest in two phases: the other tools' runs JOBS at a time, then
# racecheck's RACE_JOBS at a time; the longest limits first
runs_of() { # "race" or "other": the pool's runs, "TOOL RUN" per line
  for run in $RUNS; do
    [ "$run" = "$ALONE" ] && continue
    for tool in $TOOLS; do
      [ "$tool" = racecheck ] && [ "$1" = other ] && continue
      [ "$tool" != racecheck ] && [ "$1" = race ] && continue
      case $tool in initcheck) r=3 ;; memcheck) r=2 ;; *) r=1 ;; esac
      echo "${TFOR[${run%%@*}]:-$TIMEOUT} $r $tool $run"
    done
  done | sort -rn -s -k1,1 -k2,2 | cut -d' ' -f3-
}
# (on several GPUs: the runs dealt in turn, the two phases per GPU)
pool_pids=()
# racecheck's deal goes on where the other tools' stopped (so GPU 0 does
# not take the longest run of both)
off=$(runs_of other | wc -l)
for g in $(seq 0 $((GPUS - 1))); do
  vis=""
  [ "$GPUS" -gt 1 ] && vis=${GPU_IDS[$g]}
  (
    runs_of other | awk -v n="$GPUS" -v g="$g" 'NR % n == g' |
      SAN_GPU=$vis xargs -r -P "$JOBS" -L 1 bash -c 'run_listed "$0" "$1"'
    runs_of race | awk -v n="$GPUS" -v g="$g" -v off="$off" '(NR + off) % n == g' |
      SAN_GPU=$vis xargs -r -P "$RACE_JOBS" -L 1 bash -c 'run_listed "$0" "$1"'
  ) &
  pool_pids+=($!)
done
wait "${pool_pids[@]}"

# the summary: one line per tool and test
bad=0
{
  printf '%-10s %-42s %5s  %-58s %s\n' tool test secs "sanitizer summary" "test / verdict"
  for tool in $TOOLS; do
    for run in $RUNS; do
      case "$run" in *@*) s=${run#*@}; test="${run%%@*}.shard-${s%/*}-of-${s#*/}" ;; *) test=$run ;; esac
      log="$L/$tool.$test.log"
      rc=$(cat "$log.rc" 2>/dev/null || echo none)
      [ -e "$log.deadline" ] && rc=deadline
      secs=$(cat "$log.s" 2>/dev/null || echo 0)
      sum=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" 2>/dev/null | tail -1 | sed 's/^========= //')
      [ -n "$sum" ] || sum="(no summary line)"
      tv=$(grep -oE "(PASSED|FAILED) +\] [0-9]+ test" "$log" 2>/dev/null | tail -1 | tr -s ' ')
      case "$rc" in
        0) grep -qE "SUMMARY: 0 (errors|hazards)" "$log" && verdict="clean" || verdict="SANITIZER FOUND SOMETHING" ;;
        124|137) verdict="TIMED OUT after $(cat "$log.limit" 2>/dev/null)s" ;;
        deadline) verdict="NOT RUN (deadline)" ;;
        none) verdict="NOT RUN (no record of it)" ;;
        77) verdict="skipped (exit 77: the reason in its log; multi_device_test needs two GPUs)" ;;
        127) verdict="NOT BUILT" ;;
        *) verdict="FAILED (exit $rc)" ;;
      esac
      case "$verdict" in clean|skipped*) ;; *) bad=$((bad + 1)) ;; esac
      printf '%-10s %-42s %5s  %-58s %s\n' "$tool" "$test" "$secs" "$sum" "${tv:-no cmocka verdict} / $verdict"
    done
  done
  case " $TESTS " in *" $ALONE "*) alone="; $ALONE alone, with --report-api-errors no" ;; *) alone="" ;; esac
  case " $TOOLS " in *" racecheck "*) pools="the others $JOBS at a time, then racecheck $RACE_JOBS" ;; *) pools="$JOBS at a time" ;; esac
  [ "$GPUS" -gt 1 ] && pools="$pools; per GPU, $GPUS GPUs"
  echo "device-sanitize: $(( $(date +%s) - T_START )) s; tools [$TOOLS] over [$TESTS] ($pools)$alone; $bad runs not clean"
} | tee "$OUT/sanitize-summary.txt"
bad=$(grep -c -vE "^tool |/ clean$|/ skipped |^device-sanitize:" "$OUT/sanitize-summary.txt")
cp "$OUT/sanitize-summary.txt" "$L/"
tar -czf "$OUT/sanitize-logs.tar.gz" -C "$OUT" sanitize && rm -rf "$L"
echo "device-sanitize: logs in $OUT/sanitize-logs.tar.gz"
[ "$bad" = 0 ]
