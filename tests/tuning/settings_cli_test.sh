#!/usr/bin/env bash
# tune_decode settings against a stand-in for llama-server
# (fake_llama_server.py, told through its environment what to do): token
# identity, the refusal of a setting whose tokens differ with its first
# differing position, adoption only beyond the threshold, "cannot decide"
# under noise, the profile, the report and its page, the profile refused
# for another engine build or model, Ctrl-C (engine ended, nothing
# written), a missing and a failing engine (one line with its last words),
# a setting the engine fails on; the output folder before the engine
# starts (made when missing, refused when read-only or too full for the
# outputs, locked against a second run, the litter of dead runs swept).
# Usage: settings_cli_test.sh TUNE_DECODE FAKE_SERVER MODEL WORKDIR
set -uo pipefail
td=${1:?usage: settings_cli_test.sh TUNE_DECODE FAKE_SERVER MODEL WORKDIR}
fake_src=${2:?fake server}
model=${3:?model file}
dir=${4:?work directory}
command -v python3 > /dev/null || { echo "SKIP: python3 is missing (the fake server is a Python script)"; exit 77; }
rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/out"
fake=$dir/bin/llama-server
cp "$fake_src" "$fake"
chmod +x "$fake"
printf 'The quick brown fox\nOnce upon a time\nIn the beginning\n' > "$dir/prompts.txt"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# json FILE EXPR: the Python expression EXPR on the document j
json() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }

# 1. one setting faster (ngram-mod: 0.7 of the time), draft-max=8 changes
#    prompt 2's token at position 5: adopted ngram-mod, the two draft-max=8
#    points refused with the position, ngram-simple kept out (no faster)
out=$dir/out/a
mkdir -p "$out"
FAKE_LLAMA_SPEED="--spec-type=ngram-mod:0.7" FAKE_LLAMA_CHANGE="--spec-draft-n-max=8@2:5" \
  "$td" settings "$model" --engine "$fake" --prompts "$dir/prompts.txt" --sweep spec-type=ngram-simple,ngram-mod \
  --sweep draft-max=default,8 --n-predict 16 --rounds 3 --out "$out" > "$dir/a.out" 2> "$dir/a.err"
rc=$?
[ $rc = 0 ] || { fail "run a: exit $rc"; cat "$dir/a.out" "$dir/a.err"; }
grep -q '^settings: adopted spec-type=ngram-mod: 30.0% faster' "$dir/a.out" || fail "run a: not adopted: $(head -1 "$dir/a.out")"
grep -q "^command: $fake -m $model --spec-type ngram-mod$" "$dir/a.out" || fail "run a: command line: $(grep ^command "$dir/a.out")"
grep -q 'ETA' "$dir/a.err" || fail "run a: no progress line with an ETA"
grep -q 'refused: its tokens differ from the defaults. on prompt 2 at position 5' "$dir/a.err" ||
  fail "run a: the refusal names no position"
p=$out/strata-settings-tiny-moe.profile.json
r=$out/strata-settings-tiny-moe.json
h=$out/strata-settings-tiny-moe.html
for f in "$p" "$r" "$h"; do [ -s "$f" ] || fail "run a: $f missing"; done
[ "$(json "$p" 'j["decision"], j["settings"]["flags"], j["identity"]["model"], len(j["identity"]["engine_sha256"]), j["identity"]["engine_version"][:13]')" = \
  "adopted ['--spec-type', 'ngram-mod'] tiny-moe.gguf 64 version: 9999" ] || fail "run a: profile: $(cat "$p")"
[ "$(json "$r" '[(s["label"], s["state"], s.get("first_difference", {}).get("position")) for s in j["settings"]]')" = \
  "[('defaults', 'measured', None), ('spec-type=ngram-simple', 'measured', None), ('spec-type=ngram-simple draft-max=8', 'refused', 5), ('spec-type=ngram-mod', 'measured', None), ('spec-type=ngram-mod draft-max=8', 'refused', 5)]" ] ||
  fail "run a: report settings: $(json "$r" 'j["settings"]')"
[ "$(grep -c '<figure class="shape setting"' "$h")" = 4 ] || fail "run a: the page has not one chart per setting"
grep -q 'refused: its tokens differ' "$h" || fail "run a: the page does not say why a setting was refused"
ls "$out" | grep -q tmp && fail "run a: a temporary file was left: $(ls "$out")"
# the run's manifest lists the three files it wrote, each with its bytes' SHA-256
mf=$out/strata-settings-tiny-moe.manifest
[ "$(head -1 "$mf")" = "strata-tune manifest 1" ] || fail "run a: no manifest: $(ls "$out")"
for e in "report:$r" "page:$h" "profile:$p"; do
  f=${e#*:}
  grep -qx "${e%%:*}	$(sha256sum "$f" | cut -d' ' -f1)	$(basename "$f")" "$mf" || fail "run a: the manifest does not list $f: $(cat "$mf")"
done
[ "$(grep -vc '^#' "$mf")" = 4 ] || fail "run a: the manifest lists more than the three files: $(cat "$mf")"
"$td" report "$r" -o "$dir/again.html" > /dev/null || fail "report: the settings JSON is not rendered again"
cmp -s "$h" "$dir/again.html" || fail "report: the page rendered again differs"

# 2. the profile applies to this engine and model, and is refused for
#    another build (one byte more) or another model, with one line
cmd=$("$td" settings apply "$p" "$model" --engine "$fake") || fail "apply: refused its own engine and model"
[ "$cmd" = "$fake -m $model --spec-type ngram-mod" ] || fail "apply: command '$cmd'"
cp "$fake" "$dir/bin/llama-server-other"
echo "# another build" >> "$dir/bin/llama-server-other"
"$td" settings apply "$p" "$model" --engine "$dir/bin/llama-server-other" > /dev/null 2> "$dir/apply.err" && fail "apply: another engine build accepted"
[ "$(wc -l < "$dir/apply.err")" = 1 ] && grep -q 'made for another engine build' "$dir/apply.err" || fail "apply: $(cat "$dir/apply.err")"
head -c 4096 "$model" > "$dir/other.gguf"
"$td" settings apply "$p" "$dir/other.gguf" --engine "$fake" > /dev/null 2> "$dir/apply2.err" && fail "apply: another model accepted"
[ "$(wc -l < "$dir/apply2.err")" = 1 ] && grep -q 'made for the model tiny-moe.gguf' "$dir/apply2.err" || fail "apply: $(cat "$dir/apply2.err")"

# 3. noise wider than the threshold: the candidate measures 10% faster but
#    its samples spread +-50%: cannot decide (exit 3), the defaults kept
out=$dir/out/c
mkdir -p "$out"
FAKE_LLAMA_SPEED="--spec-type=ngram-mod:0.9" FAKE_LLAMA_NOISE=0.5 \
  "$td" -q settings "$model" --engine "$fake" --prompts "$dir/prompts.txt" --sweep spec-type=ngram-mod \
  --n-predict 8 --rounds 2 --out "$out" > "$dir/c.out" 2> "$dir/c.err"
rc=$?
[ $rc = 3 ] || fail "run c: exit $rc, not 3 (cannot decide): $(cat "$dir/c.out" "$dir/c.err")"
grep -q '^settings: cannot decide: spec-type=ngram-mod measured 10.0% faster, but its interval .* reaches inside the 1.0% threshold' "$dir/c.out" || fail "run c: $(head -1 "$dir/c.out")"
grep -q "^command: $fake -m $model$" "$dir/c.out" || fail "run c: the command is not the defaults'"
[ "$(json "$out/strata-settings-tiny-moe.profile.json" 'j["decision"]')" = "cannot decide" ] || fail "run c: profile decision"

# 3b. too few samples for a 95% interval (one round of three prompts): a
#     setting 30% faster is not adopted; cannot decide, and why
out=$dir/out/c2
mkdir -p "$out"
FAKE_LLAMA_SPEED="--spec-type=ngram-mod:0.7" \
  "$td" -q settings "$model" --engine "$fake" --prompts "$dir/prompts.txt" --sweep spec-type=ngram-mod \
  --n-predict 8 --rounds 1 --out "$out" > "$dir/c2.out" 2> "$dir/c2.err"
rc=$?
[ $rc = 3 ] && grep -q '^settings: cannot decide: spec-type=ngram-mod measured 30.0% faster, but 3 samples are too few for a 95% interval (1 setting compared): run more --rounds' "$dir/c2.out" ||
  fail "run c2: exit $rc: $(head -1 "$dir/c2.out")"

# 4. a setting the engine fails on: named with the engine's last words;
#    the run goes on
out=$dir/out/d
mkdir -p "$out"
FAKE_LLAMA_DIE="--spec-type=ngram-cache" \
  "$td" -q settings "$model" --engine "$fake" --prompts "$dir/prompts.txt" --sweep spec-type=ngram-cache,ngram-mod \
  --n-predict 8 --rounds 1 --out "$out" > "$dir/d.out" 2> "$dir/d.err"
[ "$(json "$out/strata-settings-tiny-moe.json" '[s["why"] for s in j["settings"] if s["state"] == "failed"][0]')" = \
  "failed: engine $fake ended while starting: llama_model_load: error loading model: fake failure for this setting" ] ||
  fail "run d: $(cat "$dir/d.out" "$dir/d.err")"

# 5. a missing engine and one that fails on the defaults: one line each,
#    the second with the engine's own last words; nothing written
out=$dir/out/e
mkdir -p "$out"
"$td" -q settings "$model" --engine "$dir/bin/none" --prompts "$dir/prompts.txt" --sweep threads=1 --out "$out" \
  > /dev/null 2> "$dir/e.err"
rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$dir/e.err")" = 1 ] && grep -q "engine $dir/bin/none: not found" "$dir/e.err" ||
  fail "missing engine: exit $rc: $(cat "$dir/e.err")"
FAKE_LLAMA_DIE_ALL=1 "$td" -q settings "$model" --engine "$fake" --prompts "$dir/prompts.txt" --sweep threads=1 \
  --out "$out" > /dev/null 2> "$dir/e2.err"
rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$dir/e2.err")" = 1 ] && grep -q 'error loading model: fake failure' "$dir/e2.err" ||
  fail "failing engine: exit $rc: $(cat "$dir/e2.err")"
[ -z "$(ls -A "$out")" ] || fail "a failed run wrote $(ls -A "$out")"

# 6. Ctrl-C while a completion runs: exit 130, the engine ended, nothing
#    written (no profile, no report, no temporary file)
out=$dir/out/f
mkdir -p "$out"
pids=$dir/pids
: > "$pids"
# (env --default-signal: a background job of a script starts with SIGINT
# ignored, and the tool keeps a signal it was started with ignored, as nohup
# wants; Ctrl-C in a terminal reaches a foreground run)
FAKE_LLAMA_SLOW=30 FAKE_LLAMA_PIDFILE="$pids" env --default-signal=INT \
  "$td" -q settings "$model" --engine "$fake" --prompts "$dir/prompts.txt" --sweep threads=1 --out "$out" \
  > /dev/null 2> "$dir/f.err" &
tdpid=$!
for _ in $(seq 200); do [ -s "$pids" ] && break; sleep 0.1; done
sleep 0.5
kill -INT $tdpid
wait $tdpid
rc=$?
[ $rc = 130 ] || fail "Ctrl-C: exit $rc, not 130: $(cat "$dir/f.err")"
grep -q 'interrupted by Interrupt; the engine was ended, nothing was written' "$dir/f.err" || fail "Ctrl-C: $(cat "$dir/f.err")"
epid=$(head -1 "$pids")
[ -n "$epid" ] && kill -0 "$epid" 2> /dev/null && { fail "Ctrl-C: the engine $epid still runs"; kill "$epid"; }
[ -z "$(ls -A "$out")" ] || fail "Ctrl-C: files were written: $(ls -A "$out")"

# 7. usage: a sweep that is no NAME=V list, a grid too large
"$td" settings "$model" --engine "$fake" --prompts "$dir/prompts.txt" --sweep threads > /dev/null 2> "$dir/g.err"
[ $? = 1 ] && grep -q "expected NAME=V1,V2" "$dir/g.err" || fail "bad sweep: $(cat "$dir/g.err")"
"$td" settings "$model" --engine "$fake" --prompts "$dir/prompts.txt" --sweep threads=1,2,3,4,5 --sweep draft-max=1,2,3,4,5 \
  > /dev/null 2> "$dir/g2.err"
[ $? = 1 ] && grep -q "more than 23" "$dir/g2.err" || fail "large grid: $(cat "$dir/g2.err")"

# 8. every output path is checked before the engine runs (issue 26): a
#    FIFO where the profile goes is refused in one line at once (the engine
#    never started), and no report is left without its profile
out=$dir/out/h
mkdir -p "$out"
mkfifo "$out/strata-settings-tiny-moe.profile.json"
pids=$dir/pids-h
: > "$pids"
FAKE_LLAMA_PIDFILE="$pids" timeout 120 \
  "$td" -q settings "$model" --engine "$fake" --prompts "$dir/prompts.txt" --sweep threads=1 --n-predict 4 --rounds 2 \
  --out "$out" > /dev/null 2> "$dir/h.err"
rc=$?
[ $rc = 1 ] || fail "FIFO profile: exit $rc, not 1: $(cat "$dir/h.err")"
[ "$(wc -l < "$dir/h.err")" = 1 ] && grep -q 'is a FIFO: not replaced' "$dir/h.err" || fail "FIFO profile: $(cat "$dir/h.err")"
[ -s "$pids" ] && fail "FIFO profile: the engine ran before the outputs were checked"
[ "$(ls -A "$out")" = strata-settings-tiny-moe.profile.json ] || fail "FIFO profile: files were written: $(ls -A "$out")"
[ -p "$out/strata-settings-tiny-moe.profile.json" ] || fail "FIFO profile: the FIFO was replaced"
# ... and the model itself is never an output (here a hard link of it
#    where the report goes)
cp "$model" "$dir/m.gguf"
rm -f "$out/strata-settings-tiny-moe.profile.json"
ln "$dir/m.gguf" "$out/strata-settings-m.json"
"$td" -q settings "$dir/m.gguf" --engine "$fake" --prompts "$dir/prompts.txt" --sweep threads=1 \
  --n-predict 4 --rounds 2 --out "$out" > /dev/null 2> "$dir/h2.err"
rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$dir/h2.err")" = 1 ] && grep -q 'is the input' "$dir/h2.err" ||
  fail "model as output: exit $rc: $(cat "$dir/h2.err")"
cmp -s "$model" "$dir/m.gguf" || fail "model as output: the model was changed"

# 9. the output folder before the engine starts (issue 26). A missing
#    --out is made, and holds the four outputs and nothing else (no lock,
#    no probe left)
out=$dir/out/i
FAKE_LLAMA_SPEED="--spec-type=ngram-mod:0.7" \
  "$td" -q settings "$model" --engine "$fake" --prompts "$dir/prompts.txt" --sweep spec-type=ngram-mod \
  --n-predict 4 --rounds 3 --out "$out" > /dev/null 2> "$dir/i.err"
rc=$?
[ $rc = 0 ] || fail "missing folder: exit $rc: $(cat "$dir/i.err")"
[ "$(ls -A "$out" | tr '\n' ' ')" = "strata-settings-tiny-moe.html strata-settings-tiny-moe.json strata-settings-tiny-moe.manifest strata-settings-tiny-moe.profile.json " ] ||
  fail "missing folder: it holds $(ls -A "$out" 2>&1)"

# refused [LABEL ERR PATTERN]: the run just made (its stderr ERR, its
# engine's pid file $pids) failed with exit 1 and one line matching
# PATTERN, the engine never started
refused() {
  [ "$rc" = 1 ] && [ "$(wc -l < "$2")" = 1 ] && grep -q "$3" "$2" || fail "$1: exit $rc: $(cat "$2")"
  [ -s "$pids" ] && fail "$1: the engine ran before the folder was checked"
}
run_h() { # run_h OUT ERR [WRAPPER...]: a two-point run into OUT, its engine's pid to $pids
  local o=$1 e=$2
  shift 2
  : > "$pids"
  "$@" env FAKE_LLAMA_PIDFILE="$pids" timeout 300 "$td" -q settings "$model" --engine "$fake" --prompts "$dir/prompts.txt" \
    --sweep threads=1 --n-predict 4 --rounds 2 --out "$o" > /dev/null 2> "$e"
  rc=$?
}
pids=$dir/pids-ro

# 10. a read-only folder (and one to be made in it): refused in one line
#     before the engine starts, nothing left. Root ignores permissions:
#     there this case is skipped (11 covers a read-only file system)
if [ "$(id -u)" != 0 ]; then
  ro=$dir/out/ro
  mkdir -p "$ro"
  chmod 555 "$ro"
  run_h "$ro" "$dir/ro.err"
  refused "read-only folder" "$dir/ro.err" 'settings: cannot write in the output folder .*: Permission denied'
  run_h "$ro/sub" "$dir/ro2.err"
  refused "folder in a read-only folder" "$dir/ro2.err" 'settings: cannot create the output folder .*/ro/sub: Permission denied'
  [ -z "$(ls -A "$ro")" ] || fail "read-only folder: it holds $(ls -A "$ro")"
  chmod 755 "$ro"
else
  echo "settings_cli_test: case 10 (read-only folder) skipped: running as root, which ignores permissions"
fi

# 11. in a mount namespace of its own (root, or user namespaces): a
#     read-only file system, and one too full for the outputs (16 KiB: the
#     two-point run's four files take 24 KiB in its 4 KiB blocks, so
#     without the probe every engine run would happen before the write
#     failed). Each refused in one line before the engine starts.
ns=(unshare -m)
[ "$(id -u)" = 0 ] || ns=(unshare -rm)
if "${ns[@]}" true 2> /dev/null; then
  mnt=$dir/out/mnt
  mkdir -p "$mnt"
  # in_mount OPTS CMD...: CMD with a tmpfs of OPTS at $mnt (gone when CMD
  # ends); what it left there listed in $dir/mnt.ls
  in_mount() {
    local opts=$1
    shift
    "${ns[@]}" sh -c 'mount -t tmpfs -o "$1" tmpfs "$2" || exit 99; m=$2; l=$3; shift 3; "$@"; e=$?; (cd "$m" && find . -mindepth 1) > "$l"; exit $e' \
      sh "$opts" "$mnt" "$dir/mnt.ls" "$@"
  }
  run_h "$mnt/out" "$dir/rofs.err" in_mount ro,size=1m
  refused "read-only file system" "$dir/rofs.err" 'settings: cannot create the output folder .*: Read-only file system'
  run_h "$mnt" "$dir/rofs2.err" in_mount ro,size=1m
  refused "read-only file system (folder there)" "$dir/rofs2.err" 'settings: cannot write in the output folder .*: Read-only file system'
  run_h "$mnt/out" "$dir/full.err" in_mount size=16k
  refused "full file system" "$dir/full.err" 'settings: cannot write the outputs in .*/mnt/out (a probe of [0-9]* bytes, .*): No space left on device'
  [ "$(cat "$dir/mnt.ls")" = ./out ] || fail "full file system: left $(cat "$dir/mnt.ls") (only the folder it made may stay)"
  # ... with room the same run writes its set there, and nothing else
  run_h "$mnt/out" "$dir/room.err" in_mount size=1m
  [ $rc = 0 ] && [ "$(grep -c '^./out/strata-settings-tiny-moe\.' "$dir/mnt.ls")" = 4 ] && [ "$(wc -l < "$dir/mnt.ls")" = 5 ] ||
    fail "room: exit $rc: $(cat "$dir/room.err" "$dir/mnt.ls")"
else
  echo "settings_cli_test: case 11 (read-only and full file systems) skipped: no mount namespace here"
fi

# 12. the folder's lock: while a run holds it (its engine answers slowly),
#     a second settings run and a tune of the folder are refused at once
#     in one line naming the holder, the second engine never starts; the
#     first, stopped, leaves nothing (no lock file)
out=$dir/out/l
mkdir -p "$out"
pids=$dir/pids-l
: > "$pids"
FAKE_LLAMA_SLOW=30 FAKE_LLAMA_PIDFILE="$pids" env --default-signal=INT \
  "$td" -q settings "$model" --engine "$fake" --prompts "$dir/prompts.txt" --sweep threads=1 --out "$out" \
  > /dev/null 2> "$dir/l.err" &
first=$!
for _ in $(seq 300); do [ -s "$pids" ] && break; sleep 0.1; done
[ -s "$pids" ] || fail "lock: the first run's engine did not start: $(cat "$dir/l.err")"
pids=$dir/pids-l2
t0=$SECONDS
run_h "$out" "$dir/l2.err"
refused "second run" "$dir/l2.err" "settings: another settings run is writing to $out (process $first holds $out/.strata-tune.lock): wait for it to end, or use another --out"
[ $((SECONDS - t0)) -le 10 ] || fail "second run: refused after $((SECONDS - t0)) s, not at once"
"$td" --backend cpu -q tune "$model" --quick --out "$out" > /dev/null 2> "$dir/l3.err"
rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$dir/l3.err")" = 1 ] && grep -q "tune: another settings run is writing to $out" "$dir/l3.err" ||
  fail "tune of a folder a settings run holds: exit $rc: $(cat "$dir/l3.err")"
kill -INT $first
wait $first
rc=$?
[ $rc = 130 ] || fail "lock: the first run: exit $rc: $(cat "$dir/l.err")"
[ -z "$(ls -A "$out")" ] || fail "lock: left $(ls -A "$out")"

# 13. under the lock, before the engine starts, what dead runs left is
#     removed (a settings run's temporary files of each output, a probe)
#     and nothing else: not a live process's temporary file, not another
#     name with the pattern, not a folder or a link of the pattern
out=$dir/out/m
mkdir -p "$out"
sh -c 'exit 0' &
dead=$!
wait $dead
b=$out/strata-settings-tiny-moe
gone=("$b.json.tmp.$dead.0" "$b.html.tmp.$dead.3" "$b.profile.json.tmp.$dead.1" "$b.manifest.tmp.$dead.2" "$out/.strata-tune-probe.$dead")
kept=("$b.json.tmp.$$.0" "$out/notes.json.tmp.$dead.0" "$b.txt.tmp.$dead.0" "$b.json.tmp.$dead.x" "$out/precious")
for f in "${gone[@]}" "${kept[@]}"; do echo litter > "$f"; done
mkdir "$b.json.tmp.$dead.5"
ln -s precious "$b.html.tmp.$dead.6"
pids=$dir/pids-m
run_h "$out" "$dir/m.err"
[ $rc = 0 ] || fail "litter: exit $rc: $(cat "$dir/m.err")"
for f in "${gone[@]}"; do [ -e "$f" ] && fail "litter: $f was not removed"; done
for f in "${kept[@]}" "$b.json.tmp.$dead.5" "$b.html.tmp.$dead.6"; do [ -e "$f" ] || [ -L "$f" ] || fail "litter: $f was removed"; done
[ "$(cat "$out/precious")" = litter ] || fail "litter: a link's target changed"

[ $fails = 0 ] && echo "settings_cli_test: ok"
exit $((fails > 0))
