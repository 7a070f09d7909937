#!/usr/bin/env bash
# tools/device-sanitize.sh's bookkeeping on a machine without a GPU: stand-ins
# for compute-sanitizer, nvidia-smi and the gpu tests (each prints what it
# saw), then the checks: every tool x run is made and reported once, the
# shards reach the tests, the runs are dealt over several GPUs each seeing
# its own (multi_device_test every one), one GPU sets no visibility,
# racecheck's runs come after the other tools' runs, a
# failed test, a sanitizer finding, a run cut by its limit and a skipped
# test are each reported as such, and the exit status follows them.
#   device_sanitize_test.sh PROJECT_SOURCE_DIR
set -uo pipefail
SRC=${1:?usage: device_sanitize_test.sh PROJECT_SOURCE_DIR}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$T/bin" "$T/b/tests"

# compute-sanitizer: runs the program (the last argument) and prints the
# summary line of its tool; FIND_HAZARD=1 reports one for racecheck
cat > "$T/bin/cs" <<'EOF'
#!/usr/bin/env bash
tool=""
while [ $# -gt 1 ]; do [ "$1" = --tool ] && tool=$2; shift; done
# the ledger: one line per run made (tool, shard, GPU, program)
echo "$tool ${STRATA_GPU_TEST_SHARD:-whole} ${CUDA_VISIBLE_DEVICES-unset} $1" >> "$LEDGER"
"$1"; rc=$?
if [ "$tool" = racecheck ]; then
  if [ "${FIND_HAZARD:-0}" = 1 ]; then echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"
  else echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"; fi
else
  echo "========= ERROR SUMMARY: 0 errors"
fi
exit $rc
EOF
# nvidia-smi -L: three GPUs
printf '#!/bin/sh\necho "GPU 0: Stand-in (UUID: a)"\necho "GPU 1: Stand-in (UUID: b)"\necho "GPU 2: Stand-in (UUID: c)"\n' > "$T/bin/nvidia-smi"
# a test: prints what it saw; FAIL_SHARD=k fails shard k, SLOW_TEST=name sleeps
cat > "$T/b/tests/a_test" <<'EOF'
#!/usr/bin/env bash
echo "saw tool=$STRATA_SANITIZER_TOOL size=$STRATA_GPU_TEST_SIZE shard=$STRATA_GPU_TEST_SHARD vis=${CUDA_VISIBLE_DEVICES-unset}"
echo "start $(date +%s%N)"
[ "${SLOW_TEST:-}" = a_test ] && sleep 30
sleep 0.2
echo "end $(date +%s%N)"
if [ -n "${FAIL_SHARD:-}" ] && [ "${STRATA_GPU_TEST_SHARD%/*}" = "$FAIL_SHARD" ]; then echo "[  FAILED  ] 1 test(s)"; exit 1; fi
echo "[  PASSED  ] 1 test(s)."
EOF
cp "$T/b/tests/a_test" "$T/b/tests/gpu_faults_test"
cat > "$T/b/tests/multi_device_test" <<'EOF'
#!/usr/bin/env bash
echo "saw vis=${CUDA_VISIBLE_DEVICES-unset}"
echo "multi_device_test needs two GPUs"; exit 77
EOF
chmod +x "$T/bin/"* "$T/b/tests/"*

# run ARGS...: device-sanitize with the stand-ins; OUT is $T/out.N; with
# VIS set, CUDA_VISIBLE_DEVICES is VIS, else unset
n_run=0
run() {
  n_run=$((n_run + 1))
  O="$T/out.$n_run"
  export LEDGER="$O.ledger"
  local vis=(-u CUDA_VISIBLE_DEVICES)
  [ -n "${VIS+set}" ] && vis=(CUDA_VISIBLE_DEVICES="$VIS")
  env "${vis[@]}" PATH="$T/bin:$PATH" COMPUTE_SANITIZER="$T/bin/cs" BUILD_DIR="$T/b" OUT="$O" "$@" > "$O.stdout" 2>&1
  rc=$?
  mkdir -p "$O/x" && tar -xzf "$O/sanitize-logs.tar.gz" -C "$O/x" 2>/dev/null
  return $rc
}
S="$SRC/tools/device-sanitize.sh"
# the GPUs the runs of LOGS saw, each once, blank-separated
gpus_used() { cat "$@" | sed -n 's/.*vis=\([^ ]*\)$/\1/p' | sort -u | tr '\n' ' '; }
TESTS="a_test multi_device_test gpu_faults_test"

# 1. three GPUs (nvidia-smi's), a_test in 4 shards: every tool x run once, clean
run bash "$S" --no-build --tests "$TESTS" --shards a_test=4 --deadline 120 --timeout 30 --jobs 2 --race-jobs 1 ||
  fail "clean sweep exited $rc: $(tail -5 "$O.stdout")"
sum="$O/sanitize-summary.txt"
[ "$(grep -cE '^(memcheck|racecheck|synccheck|initcheck) ' "$sum")" = 24 ] || fail "expected 24 runs (4 tools x 6): $(cat "$sum")"
[ "$(grep -c '/ clean$' "$sum")" = 20 ] || fail "expected 20 clean runs: $(cat "$sum")"
[ "$(grep -c 'skipped (exit 77' "$sum")" = 4 ] || fail "multi_device_test not reported skipped 4 times"
# what was run, not only reported: each tool x run once
[ "$(wc -l < "$LEDGER")" = 24 ] || fail "the sanitizer ran $(wc -l < "$LEDGER") times, not 24: $(cat "$LEDGER")"
[ -z "$(awk '{print $1, $2, $4}' "$LEDGER" | sort | uniq -d)" ] || fail "a run was made twice: $(cat "$LEDGER")"
grep -q "per GPU, 3 GPUs" "$sum" || fail "the summary does not name the 3 GPUs"
logs="$O/x/sanitize"
for k in 0 1 2 3; do
  for tool in memcheck racecheck synccheck initcheck; do
    grep -q "saw tool=$tool size=sanitizer shard=$k/4 vis=[012]$" "$logs/$tool.a_test.shard-$k-of-4.log" ||
      fail "$tool shard $k: $(cat "$logs/$tool.a_test.shard-$k-of-4.log")"
  done
done
used=$(gpus_used "$logs"/*.a_test.shard-*.log)
[ "$used" = "0 1 2 " ] || fail "the 16 shard runs used GPUs '$used', not all of 0 1 2"
grep -q "saw vis=unset" "$logs/memcheck.multi_device_test.log" || fail "multi_device_test did not see every GPU"

# 2. one GPU (--gpus 1): no visibility set; racecheck's runs start only
# after every other tool's run has ended
run bash "$S" --no-build --tests "a_test" --shards a_test=3 --gpus 1 --jobs 3 --race-jobs 2 --deadline 60 --timeout 30 ||
  fail "one-GPU sweep exited $rc"
grep -q "vis=unset" "$O/x/sanitize/memcheck.a_test.shard-0-of-3.log" || fail "one GPU set a visibility"
grep -q "per GPU" "$O/sanitize-summary.txt" && fail "one GPU's summary speaks of GPUs"
last_other=$(cat "$O"/x/sanitize/{memcheck,synccheck,initcheck}.a_test.*.log | sed -n 's/^end //p' | sort -n | tail -1)
first_race=$(cat "$O"/x/sanitize/racecheck.a_test.*.log | sed -n 's/^start //p' | sort -n | head -1)
[ -n "$last_other" ] && [ -n "$first_race" ] || fail "no run times in the logs"
[ "$first_race" -ge "$last_other" ] || fail "a racecheck run started before the other tools' runs had ended"

# racecheck's pool by default: 14 at a time, or the CPUs per GPU where
# fewer; a malformed --race-jobs: refused, one line, nothing run
want=$(nproc); [ "$want" -le 14 ] || want=14
run bash "$S" --no-build --tests "a_test" --gpus 1 --jobs 2 --deadline 60 --timeout 30 || fail "the default pools exited $rc"
grep -q "then racecheck $want)" "$O/sanitize-summary.txt" || fail "racecheck's default pool is not $want: $(tail -1 "$O/sanitize-summary.txt")"
for bad in "" 0 -3 08 x; do
  run bash "$S" --no-build --tests a_test --race-jobs "$bad" && fail "--race-jobs '$bad' was accepted"
  grep -q "race-jobs '$bad': expected a whole number from 1" "$O.stdout" || fail "--race-jobs '$bad': $(cat "$O.stdout")"
  [ -e "$O.ledger" ] && fail "--race-jobs '$bad' ran something"
done

# the default limits start the longest sweeps first: native_grouped
# (430 s), then engine_runtime (380), then a test of no default (300)
cp "$T/b/tests/a_test" "$T/b/tests/native_grouped_parity_test"
cp "$T/b/tests/a_test" "$T/b/tests/engine_runtime_test"
run bash "$S" --no-build --tests "a_test engine_runtime_test native_grouped_parity_test" --shards native_grouped_parity_test=1 \
  --shards engine_runtime_test=1 --tools racecheck --gpus 1 --race-jobs 1 || fail "the default limits exited $rc"
order=$(for t in a_test engine_runtime_test native_grouped_parity_test; do
  echo "$(sed -n 's/^start //p' "$O/x/sanitize/racecheck.$t.log") $t $(cat "$O/x/sanitize/racecheck.$t.log.limit")"
done | sort -n | cut -d' ' -f2- | tr '\n' ' ')
[ "$order" = "native_grouped_parity_test 430 engine_runtime_test 380 a_test 300 " ] || fail "the default limits' order: '$order'"
rm "$T/b/tests/native_grouped_parity_test" "$T/b/tests/engine_runtime_test"

# 3. CUDA_VISIBLE_DEVICES names the GPUs: the runs take those, blanks and
# empty items dropped (ids or UUIDs); set but empty: refused, nothing run
VIS="5,7" run bash "$S" --no-build --tests a_test --shards a_test=4 --tools memcheck --deadline 60 --timeout 30 ||
  fail "CUDA_VISIBLE_DEVICES=5,7 exited $rc"
used=$(gpus_used "$O/x/sanitize"/*.log)
[ "$used" = "5 7 " ] || fail "CUDA_VISIBLE_DEVICES=5,7: the runs used '$used'"
VIS=" GPU-aa, ,GPU-bb " run bash "$S" --no-build --tests a_test --shards a_test=4 --tools memcheck --deadline 60 --timeout 30 ||
  fail "CUDA_VISIBLE_DEVICES with blanks exited $rc"
used=$(gpus_used "$O/x/sanitize"/*.log)
[ "$used" = "GPU-aa GPU-bb " ] || fail "CUDA_VISIBLE_DEVICES=' GPU-aa, ,GPU-bb ': the runs used '$used'"
VIS="" run bash "$S" --no-build --tests a_test --tools memcheck && fail "an empty CUDA_VISIBLE_DEVICES was accepted"
grep -q "shows no GPU" "$O.stdout" || fail "an empty CUDA_VISIBLE_DEVICES: $(cat "$O.stdout")"
[ -e "$O.ledger" ] && fail "an empty CUDA_VISIBLE_DEVICES ran something"
# more GPUs than there are: refused, one line, nothing run
run bash "$S" --no-build --tests a_test --gpus 4 && fail "--gpus 4 on 3 GPUs was accepted"
grep -q "this machine shows 3 GPU" "$O.stdout" || fail "--gpus 4: $(cat "$O.stdout")"
[ -e "$O/sanitize-logs.tar.gz" ] && fail "--gpus 4 ran something"

# 4. a failed shard, a hazard, a run past its limit: each reported, exit 1
FAIL_SHARD=2 run bash "$S" --no-build --tests a_test --shards a_test=4 --tools memcheck --deadline 60 --timeout 30 &&
  fail "a failed shard exited 0"
grep -q "memcheck *a_test.shard-2-of-4 .*FAILED (exit 1)" "$O/sanitize-summary.txt" || fail "the failed shard: $(cat "$O/sanitize-summary.txt")"
[ "$(grep -c '/ clean$' "$O/sanitize-summary.txt")" = 3 ] || fail "the other shards are not clean"
FIND_HAZARD=1 run bash "$S" --no-build --tests a_test --tools racecheck --deadline 60 --timeout 30 && fail "a hazard exited 0"
grep -q "SANITIZER FOUND SOMETHING" "$O/sanitize-summary.txt" || fail "the hazard: $(cat "$O/sanitize-summary.txt")"
SLOW_TEST=a_test run bash "$S" --no-build --tests a_test --tools memcheck --deadline 60 --timeout 2 && fail "a run past its limit exited 0"
grep -q "TIMED OUT after 2s" "$O/sanitize-summary.txt" || fail "the timeout: $(cat "$O/sanitize-summary.txt")"
echo "device_sanitize_test: 11 cases passed"
