#!/usr/bin/env bash
# tools/fetch-gfx11-devlibs.sh takes its archive from the system's apt
# sources only: the deb822 and one-line forms are read (disabled sources,
# deb-src, other releases and components skipped), no configured source
# means one clear line and exit 1, and the script names no archive host.
set -uo pipefail
script="$1/tools/fetch-gfx11-devlibs.sh"
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkroot() { # NAME: a fake / with os-release for bookworm
  mkdir -p "$w/$1/etc/apt/sources.list.d"
  echo 'VERSION_CODENAME=bookworm' > "$w/$1/etc/os-release"
}
pick() { STRATA_APT_ROOT="$w/$1" bash "$script" --print-archive 2>"$w/err"; }

mkroot deb822
cat > "$w/deb822/etc/apt/sources.list.d/a.sources" <<'S'
Types: deb-src
URIs: http://src.example/debian
Suites: bookworm
Components: main

Types: deb
URIs: http://off.example/debian
Suites: bookworm
Components: main
Enabled: no

Types: deb
URIs: http://other.example/debian
Suites: trixie
Components: main

Types: deb
# a comment inside the paragraph
URIs: http://mirror.example/debian http://second.example/debian
Suites: bookworm bookworm-updates
Components: main contrib
S
[ "$(pick deb822)" = "http://mirror.example/debian" ] || fail "deb822: picked '$(pick deb822)'"

mkroot oneline
cat > "$w/oneline/etc/apt/sources.list" <<'S'
# deb http://commented.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb http://sec.example/debian-security bookworm-security main
deb [arch=amd64 signed-by=/k.gpg] http://list.example/debian bookworm contrib main
S
[ "$(pick oneline)" = "http://list.example/debian" ] || fail "one-line: picked '$(pick oneline)'"

mkroot none
echo 'deb http://x.example/debian bookworm contrib' > "$w/none/etc/apt/sources.list"
out=$(pick none); rc=$?
[ $rc -eq 1 ] && [ -z "$out" ] || fail "no source: exit $rc, printed '$out'"
[ "$(wc -l < "$w/err")" -eq 1 ] && grep -q "no configured apt source serves 'bookworm'" "$w/err" ||
  fail "no source: the message was: $(cat "$w/err")"

# no archive host of its own, anywhere in the script
if grep -nE '://|\.(org|com|net|io)(/|\b)' "$script"; then fail "the script names a host"; fi
echo "fetch-gfx11-devlibs: sources picked as configured, refusal clear, no host named"
