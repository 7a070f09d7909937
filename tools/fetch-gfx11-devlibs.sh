#!/usr/bin/env bash
# Fetches the gfx11 amdgcn device-library bitcode (Debian trixie's
# rocm-device-libs-17) into build/devlibs without installing anything from
# trixie; bookworm's rocm-device-libs has no gfx11 bitcode. Prints the
# bitcode folder. Needs root for apt. Recipe: shared docs TOOLCHAIN.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/devlibs
bc=$out/usr/lib/llvm-17/lib/clang/17/amdgcn/bitcode
if [ ! -f "$bc/ocml.bc" ]; then
  mkdir -p "$out"
  src=/etc/apt/sources.list.d/strata-trixie-devlibs.sources
  pref=/etc/apt/preferences.d/strata-trixie-devlibs.pref
  uris=$(sed -n 's/^URIs: //p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  [ -n "$uris" ] || uris=http://deb.debian.org/debian
  printf 'Types: deb\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uris" > "$src"
  printf 'Package: *\nPin: release n=trixie\nPin-Priority: -10\n' > "$pref"
  trap 'rm -f "$src" "$pref"; apt-get update -qq >/dev/null 2>&1 || true' EXIT
  apt-get update -qq >/dev/null
  (cd "$out" && apt-get download -qq rocm-device-libs-17/trixie >/dev/null && dpkg -x rocm-device-libs-17_*_amd64.deb .)
fi
echo "$PWD/$bc"
