#!/usr/bin/env bash
# Fetches the gfx11 amdgcn device-library bitcode (Debian trixie's
# rocm-device-libs-17) into build/devlibs without installing anything from
# trixie; bookworm's rocm-device-libs has no gfx11 bitcode. Prints the
# bitcode folder. Needs root for apt. Recipe: the shared TOOLCHAIN notes.
#
# The package comes from the archive this system's apt is configured with:
# the first configured source that serves this release (VERSION_CODENAME of
# /etc/os-release) with component main, read from the deb822 files
# (/etc/apt/sources.list.d/*.sources) and the one-line lists
# (/etc/apt/sources.list, /etc/apt/sources.list.d/*.list). No archive is
# assumed: without such a source the script stops with one line saying so.
#
#   --print-archive   print the archive chosen and stop (no apt, no root)
# STRATA_APT_ROOT (tests only) is a folder that stands in for / when the
# sources and os-release are read.
set -euo pipefail
cd "$(dirname "$0")/.."
root=${STRATA_APT_ROOT:-}

fail() { echo "fetch-gfx11-devlibs: $*" >&2; exit 1; }

codename=$( (. "$root/etc/os-release" 2>/dev/null && echo "${VERSION_CODENAME:-}") || true)
[ -n "$codename" ] || fail "cannot tell this system's release (no VERSION_CODENAME in $root/etc/os-release)"

archive() {
  local f
  for f in "$root"/etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822: one paragraph per source; the first URI of an enabled "deb"
    # source whose Suites hold the release and whose Components hold main
    awk -v want="$codename" '
      function flush() {
        if (uri != "" && types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " want " ") &&
            (" " comps " ") ~ / main / && enabled != "no") print uri
        uri = types = suites = comps = ""; enabled = "yes"
      }
      BEGIN { enabled = "yes" }
      /^[ \t]*$/ { flush(); next }
      /^[ \t]*#/ { next }
      { key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^[ \t]+/, ""); val = $0 }
      key == "types" { types = val } key == "suites" { suites = val } key == "components" { comps = val }
      key == "enabled" { enabled = tolower(val) } key == "uris" { split(val, u, /[ \t]+/); uri = u[1] }
      END { flush() }' "$f"
  done
  for f in "$root"/etc/apt/sources.list "$root"/etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # one-line: deb [options] URI SUITE COMPONENT...
    awk -v want="$codename" '
      $1 == "deb" {
        i = 2
        if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        main = 0
        for (k = i + 2; k <= NF; k++) if ($k == "main") main = 1
        if ($(i + 1) == want && main) print $i
      }' "$f"
  done
}

uri=$(archive | head -n 1)
[ -n "$uri" ] || fail "no configured apt source serves '$codename' with component main (read $root/etc/apt/sources.list and $root/etc/apt/sources.list.d): add the archive of your distribution, or fetch rocm-device-libs-17 from trixie by hand (TOOLCHAIN.md)"
if [ "${1:-}" = "--print-archive" ]; then
  echo "$uri"
  exit 0
fi

out=build/devlibs
bc=$out/usr/lib/llvm-17/lib/clang/17/amdgcn/bitcode
if [ ! -f "$bc/ocml.bc" ]; then
  mkdir -p "$out"
  src=/etc/apt/sources.list.d/strata-trixie-devlibs.sources
  pref=/etc/apt/preferences.d/strata-trixie-devlibs.pref
  printf 'Types: deb\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uri" > "$src"
  printf 'Package: *\nPin: release n=trixie\nPin-Priority: -10\n' > "$pref"
  trap 'rm -f "$src" "$pref"; apt-get update -qq >/dev/null 2>&1 || true' EXIT
  apt-get update -qq >/dev/null || fail "apt-get update failed with trixie from $uri (does that archive carry trixie?)"
  (cd "$out" && apt-get download -qq rocm-device-libs-17/trixie >/dev/null && dpkg -x rocm-device-libs-17_*_amd64.deb .) ||
    fail "cannot download rocm-device-libs-17 (trixie) from $uri"
fi
echo "$PWD/$bc"
