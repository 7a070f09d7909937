#!/usr/bin/env bash
# Installs what a CPU build and its tests need on Debian/Ubuntu, when missing:
# a C compiler, CMake, cJSON, CMocka and gumbo (the HTML5 parser the
# report's test uses). Pass --hip to add the gfx1100
# compile-check toolchain (clang-19 + HIP headers + gfx11 device libraries).
set -euo pipefail
need=()
command -v cc >/dev/null || need+=(build-essential)
command -v cmake >/dev/null || need+=(cmake)
[ -f /usr/include/cjson/cJSON.h ] || need+=(libcjson-dev)
[ -f /usr/include/cmocka.h ] || need+=(libcmocka-dev)
[ -f /usr/include/gumbo.h ] || need+=(libgumbo-dev)   # the HTML5 parser of the report's test
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v python3 >/dev/null || need+=(python3)   # tools/peer-compare.py's test, the gfx1100 check's reports
command -v zstd >/dev/null || need+=(zstd)   # tools/device-prebuilt.sh's test (its archives)
if [ "${1:-}" = "--hip" ]; then
  command -v clang++-19 >/dev/null || need+=(clang-19)
  [ -x /usr/lib/llvm-19/bin/ld.lld ] || need+=(lld-19)
  [ -x /usr/lib/llvm-19/bin/clang-offload-bundler ] || need+=(clang-tools-19)
  [ -f /usr/include/hip/hip_runtime.h ] || need+=(libamdhip64-dev)
fi
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "install-deps: installing ${need[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
