#!/usr/bin/env bash
# tune_decode settings on the real llama.cpp: llama-server built from the
# shipped tree (tools/build-llama-server.sh ../shared/engines/llama.cpp-*.tar.xz
# DIR prints its bin folder), found through the fifth argument (CMake's
# STRATA_LLAMA_CPP_BIN) or the environment variable LLAMA_CPP_BIN; skipped
# (77) when neither names a folder with llama-server. On a random-weight
# qwen3moe (gguf_gen --llama, the qwen2 vocabulary) and a smaller draft
# model of the same vocabulary it sweeps
#   a. the n-gram speculation kinds, the thread count, a K cache of q4_0
#      (it changes the attention arithmetic) and a logit bias (a sampler
#      setting that forces a token): every point either keeps the defaults'
#      tokens on every prompt or is refused with its first differing
#      position; the logit bias must be refused; threads=2 must keep them;
#   b. the draft model with the draft length and floor grid;
#   c. a loaded machine (busy loops beside it), the defaults at -t 2
#      against -t 1 and ngram-mod with one round: "cannot decide" (exit 3);
# and checks the profile and the report of each run.
# Usage: settings_engine_test.sh TUNE_DECODE GGUF_GEN VOCAB WORKDIR [LLAMA_BIN]
set -uo pipefail
td=${1:?usage: settings_engine_test.sh TUNE_DECODE GGUF_GEN VOCAB WORKDIR [LLAMA_BIN]}
gen=${2:?gguf_gen}
vocab=${3:?vocabulary GGUF}
dir=${4:?work directory}
bin=${5:-}
[ -n "$bin" ] || bin=${LLAMA_CPP_BIN:-}
if [ -z "$bin" ] || [ ! -x "$bin/llama-server" ]; then
  echo "SKIP: no llama-server: set LLAMA_CPP_BIN (or configure with -DSTRATA_LLAMA_CPP_BIN=) to the bin folder of a"
  echo "      llama.cpp build; tools/build-llama-server.sh ../shared/engines/llama.cpp-80fb11a.tar.xz DIR builds one"
  exit 77
fi
command -v python3 > /dev/null || { echo "SKIP: python3 is missing (the checks read the JSON with it)"; exit 77; }
server=$bin/llama-server
rm -rf "$dir"
mkdir -p "$dir"
m=$dir/qwen3moe-random.gguf
d=$dir/qwen3moe-draft.gguf
"$gen" --llama "$m" "$vocab" 2 256 256 8 2 > /dev/null || { echo "FAIL: gguf_gen --llama (model)"; exit 1; }
"$gen" --llama "$d" "$vocab" 1 256 256 4 2 > /dev/null || { echo "FAIL: gguf_gen --llama (draft)"; exit 1; }
printf '%s\n' 'The quick brown fox jumps over the lazy dog. The quick brown fox' \
  'def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\ndef fib' \
  'One, two, three, four, five, six, seven, eight, nine, ten, one, two, three,' > "$dir/prompts.txt"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
json() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }
# every point: measured (tokens kept on every prompt), refused with a first
# difference, or failed with the engine's words; printed for the log
table() {
  json "$1" '"\n".join("  %-48s %-8s %8s tok/s  %s" % (s["label"], s["state"], "%.1f" % s["tok_s"] if "tok_s" in s else "-", s["why"]) for s in j["settings"])'
  json "$1" 'all(s["state"] == "measured" or (s["state"] == "refused" and "position" in s["first_difference"]) or (s["state"] == "failed" and s["why"]) for s in j["settings"])' | grep -q True ||
    fail "$1: a point neither measured, refused with its position, nor failed with a reason"
}
state() { json "$1" "[s['state'] for s in j['settings'] if s['label'] == '$2'][0]"; }
# one thread for the target and the draft: on a machine shared with other
# work (CI), ggml's threads spin at their barrier while a peer is
# descheduled: -t 2 measured 27x to 134x slower than -t 1 in three runs
# here (2026-12-03)
eargs="-c 1024 -np 1 --no-webui -t 1 -td 1"
start=$(date +%s)

# a. n-gram kinds, threads, a K cache type, a sampler setting
out=$dir/a
mkdir -p "$out"
"$td" settings "$m" --engine "$server" --prompts "$dir/prompts.txt" --engine-args "$eargs" \
  --sweep spec-type=default,ngram-simple,ngram-map-k,ngram-mod --sweep cache-type-k=default,q4_0 \
  --n-predict 32 --rounds 2 --out "$out" > "$dir/a.out" 2> "$dir/a.err"
rc=$?
{ [ $rc = 0 ] || [ $rc = 3 ]; } || { fail "run a: exit $rc"; tail -5 "$dir/a.err"; }
r=$out/strata-settings-qwen3moe-random.json
for f in "$r" "$out/strata-settings-qwen3moe-random.html" "$out/strata-settings-qwen3moe-random.profile.json"; do
  [ -s "$f" ] || fail "run a: $f missing"
done
if [ -s "$r" ]; then
  echo "run a: $(head -1 "$dir/a.out")"
  table "$r"
  [ "$(json "$r" 'len(j["settings"])')" = 8 ] || fail "run a: not 8 settings"
fi
out=$dir/a2
mkdir -p "$out"
"$td" -q settings "$m" --engine "$server" --prompts "$dir/prompts.txt" --engine-args "$eargs" \
  --sweep threads=default,2 --sweep logit-bias=default,15+100 --n-predict 16 --rounds 1 --out "$out" > "$dir/a2.out" 2> "$dir/a2.err"
r=$out/strata-settings-qwen3moe-random.json
if [ -s "$r" ]; then
  echo "run a2: $(head -1 "$dir/a2.out")"
  table "$r"
  [ "$(state "$r" "threads=2")" = measured ] || fail "run a2: threads=2 changed the tokens"
  [ "$(state "$r" "logit-bias=15+100")" = refused ] || fail "run a2: the logit bias was not refused"
else
  fail "run a2: no report: $(cat "$dir/a2.err")"
fi

# b. a draft model, the draft length and floor
out=$dir/b
mkdir -p "$out"
"$td" settings "$m" --engine "$server" --prompts "$dir/prompts.txt" --engine-args "$eargs" --draft-model "$d" \
  --sweep spec-type=draft-simple --sweep draft-max=2,8 --sweep draft-p-min=default,0.9 \
  --n-predict 16 --rounds 1 --out "$out" > "$dir/b.out" 2> "$dir/b.err"
rc=$?
{ [ $rc = 0 ] || [ $rc = 3 ]; } || { fail "run b: exit $rc"; tail -5 "$dir/b.err"; }
r=$out/strata-settings-qwen3moe-random.json
if [ -s "$r" ]; then
  echo "run b: $(head -1 "$dir/b.out")"
  table "$r"
  json "$r" 'j["settings"][1]["flags"]' | grep -q -- "--spec-draft-model" || fail "run b: the draft model was not given"
  [ "$(json "$r" 'sum(s["state"] == "failed" for s in j["settings"])')" = 0 ] || fail "run b: the engine failed on a draft setting"
fi

# c. a loaded machine (busy loops beside the engine): the defaults at -t 2
#    against -t 1 and ngram-mod, one round: -t 1 measures far faster there
#    (ggml's spinning threads), but three samples a setting cannot give a
#    95% interval: "cannot decide" (exit 3), nothing adopted
out=$dir/c
mkdir -p "$out"
busy=()
for _ in 1 2 3; do (while :; do :; done) & busy+=($!); done
"$td" settings "$m" --engine "$server" --prompts "$dir/prompts.txt" --engine-args "${eargs/-t 1 /-t 2 }" \
  --sweep threads=default,1 --sweep spec-type=default,ngram-mod --n-predict 16 --rounds 1 --out "$out" \
  > "$dir/c.out" 2> "$dir/c.err" < /dev/null
rc=$?
kill "${busy[@]}" 2> /dev/null
wait "${busy[@]}" 2> /dev/null
echo "run c (loaded): exit $rc: $(head -1 "$dir/c.out")"
[ $rc = 3 ] && grep -q '^settings: cannot decide: .* measured .* faster' "$dir/c.out" ||
  fail "run c: exit $rc, not 3 (cannot decide): $(head -1 "$dir/c.out") $(tail -n 2 "$dir/c.err")"
[ -s "$out/strata-settings-qwen3moe-random.json" ] && table "$out/strata-settings-qwen3moe-random.json"
[ "$(json "$out/strata-settings-qwen3moe-random.profile.json" 'j["decision"]')" = "cannot decide" ] ||
  fail "run c: the profile does not say cannot decide"

# the profile holds for this build and model only
p=$dir/a/strata-settings-qwen3moe-random.profile.json
if [ -s "$p" ]; then
  "$td" settings apply "$p" "$m" --engine "$server" > /dev/null || fail "apply: refused its own engine and model"
  "$td" settings apply "$p" "$d" --engine "$server" > /dev/null 2> "$dir/apply.err" && fail "apply: another model accepted"
  grep -q 'was made for the model' "$dir/apply.err" || fail "apply: $(cat "$dir/apply.err")"
  json "$p" 'j["identity"]["engine_version"]'
fi
echo "settings_engine_test: $(( ($(date +%s) - start) / 60 )) min $(( ($(date +%s) - start) % 60 )) s of runs"
[ $fails = 0 ] && echo "settings_engine_test: ok"
exit $((fails > 0))
