#!/usr/bin/env bash
# The random-weight qwen3moe that llama.cpp runs (gguf_gen --llama): made
# with the qwen2 vocabulary of tests/data/gguf and read back by tune_decode
# shapes, which must find its two expert layers (IQ3_S gate-up and down,
# 8 experts, top-2), the 151936-row output and the attention matrices. When
# LLAMA_CPP_BIN names the bin folder of a llama.cpp build, llama.cpp also
# loads it and generates 16 tokens greedily, twice: the same text both times.
# Usage: llama_model_test.sh GGUF_GEN TUNE_DECODE VOCAB WORKDIR
set -uo pipefail
gen=${1:?usage: llama_model_test.sh GGUF_GEN TUNE_DECODE VOCAB WORKDIR}
td=${2:?tune_decode}
vocab=${3:?vocabulary GGUF}
dir=${4:?work directory}
rm -rf "$dir"
mkdir -p "$dir"
m=$dir/qwen3moe-random.gguf
"$gen" --llama "$m" "$vocab" 2 256 256 8 2 > /dev/null || { echo "FAIL: gguf_gen --llama"; exit 1; }
"$td" shapes "$m" > "$dir/shapes.txt" 2>&1 || { echo "FAIL: tune_decode shapes"; cat "$dir/shapes.txt"; exit 1; }
fails=0
want() {
  grep -Eq "$1" "$dir/shapes.txt" || { echo "FAIL: shapes has no line matching '$1'"; fails=$((fails + 1)); }
}
want '^arch: qwen3moe$'
want '^ +iq3_s +iq3_s +256 +256 +8 +2$'
want '^ +q6_K +151936 +256 +1 +output\.weight$'
want '^ +q4_K +256 +256 +8 +blk\.\*\.attn_q\.weight'
if [ -n "${LLAMA_CPP_BIN:-}" ]; then
  for i in 1 2; do
    "$LLAMA_CPP_BIN/llama-simple" -m "$m" -n 16 "The quick brown fox" > "$dir/simple$i.txt" 2> "$dir/simple$i.log" ||
      { echo "FAIL: llama-simple run $i"; tail -5 "$dir/simple$i.log"; fails=$((fails + 1)); }
  done
  [ -s "$dir/simple1.txt" ] || { echo "FAIL: llama-simple printed nothing"; fails=$((fails + 1)); }
  cmp -s "$dir/simple1.txt" "$dir/simple2.txt" || { echo "FAIL: two greedy runs differ"; fails=$((fails + 1)); }
  grep -E "decoded [0-9]+ tokens" "$dir/simple1.log" | tail -1
fi
[ $fails = 0 ] && echo "llama_model_test: ok ($(stat -c %s "$m") bytes${LLAMA_CPP_BIN:+, llama.cpp ran it})"
exit $((fails > 0))
