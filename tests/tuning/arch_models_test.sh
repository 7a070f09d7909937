#!/usr/bin/env bash
# The tiny GGUF of each MoE architecture (tests/tuning/gguf_gen.c: llama.cpp's
# key and tensor names) through tune_decode on the CPU backend: shapes (text
# and JSON), tune --quick, verify and coverage, each must succeed; what a
# model leaves out is said in one line per item, in every command.
# Usage: arch_models_test.sh GGUF_GEN TUNE_DECODE WORKDIR
set -uo pipefail
gen=${1:?usage: arch_models_test.sh GGUF_GEN TUNE_DECODE WORKDIR}
td=${2:?tune_decode}
dir=${3:?work directory}
rm -rf "$dir"
mkdir -p "$dir"
"$gen" "$dir" > "$dir/models.txt" || { echo "FAIL: gguf_gen"; exit 1; }
fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}
# run NAME CMD...: runs CMD with output in $dir/NAME.log; fails unless it exits 0
run() {
  local name=$1
  shift
  if ! "$@" > "$dir/$name.log" 2>&1; then
    fail "$name: $* (exit $?)"
    sed 's/^/    /' "$dir/$name.log" | tail -20
    return 1
  fi
}
while read -r model; do
  arch=$(basename "$model" .gguf)
  start=$SECONDS
  run "$arch-shapes" "$td" --backend cpu shapes "$model" || continue
  run "$arch-shapes-json" "$td" --backend cpu --json shapes "$model" || continue
  grep -q "^arch: $arch\$" "$dir/$arch-shapes.log" || fail "$arch: shapes does not name the architecture"
  grep -q '"omitted"' "$dir/$arch-shapes-json.log" || fail "$arch: shapes --json has no omitted list"
  # The end-to-end gate is the verify below, on the table tune wrote: its
  # timing half is noise on shared CI cores (steps of a few milliseconds,
  # spreads past 50%, and the CPU backend's variants run the same code as
  # its default), so the slowdown limit is wide there and the assertion is
  # the bytes: PASS says every output byte of every step (n_tokens 1..8) was
  # identical with the table. tune's own gate, with its fixed 2% limit,
  # would make this test flaky without testing anything more. One timed
  # round per candidate: the decisions are noise here anyway (and tables
  # that name variants give verify table launches to compare).
  run "$arch-tune" "$td" --backend cpu tune "$model" --quick --rounds 6 --no-verify --out "$dir/$arch" --force || continue
  run "$arch-verify" "$td" --backend cpu verify "$model" "$dir/$arch" --rounds 6 --max-slowdown 400% || continue
  grep -q "^verify: PASS: .* byte-identical with the table" "$dir/$arch-verify.log" || fail "$arch: verify did not pass"
  run "$arch-coverage" "$td" --backend cpu coverage "$model" "$dir/$arch" || continue
  # every item the model leaves out: one line in shapes, tune, verify and coverage
  n_omit=$(sed -n '/^omitted: /,/^$/p' "$dir/$arch-shapes.log" | grep -c '^  ')
  n_unsup=$(sed -n '/^unsupported: /,/^$/p' "$dir/$arch-shapes.log" | grep -c '^  [a-z0-9_]* *[0-9]')
  want=$((n_omit + n_unsup))
  for cmd in tune verify; do
    got=$(grep -c "^$cmd: .* skipped: " "$dir/$arch-$cmd.log")
    [ "$got" -eq "$want" ] || fail "$arch: $cmd printed $got skipped lines, shapes lists $want"
  done
  got=$(grep -c "^skipped: " "$dir/$arch-coverage.log")
  [ "$got" -eq "$want" ] || fail "$arch: coverage printed $got skipped lines, shapes lists $want"
  echo "$arch: shapes, tune --quick, verify, coverage ok ($want skipped; $((SECONDS - start)) s)"
done < "$dir/models.txt"
# the mixtral-style model's f16 expert layer and f16 matrix are the ones left out
grep -q "blk.1 experts: blk.1.ffn_gate_exps.weight has type f16" "$dir/llama-shapes.log" ||
  fail "llama: the f16 expert layer is not listed as omitted"
grep -q "^tune: blk.1.attn_output.weight skipped: type f16 has no decode kernel" "$dir/llama-tune.log" ||
  fail "llama: tune does not say it skips the f16 matrix"
# the 512-expert top-10 layout tuned its expert shapes
grep -q "expert iq4_xs iq4_nl 256 32 8" "$dir/qwen3next-tune.log" || grep -rq "expert iq4_xs iq4_nl 256 32" "$dir/qwen3next" ||
  fail "qwen3next: no expert shape tuned"
n=$(wc -l < "$dir/models.txt")
[ "$n" -ge 7 ] || fail "gguf_gen wrote $n models, expected 7"
if [ "$fails" -ne 0 ]; then
  echo "arch_models_test: $fails failures"
  exit 1
fi
echo "arch_models_test: $n architectures passed"
