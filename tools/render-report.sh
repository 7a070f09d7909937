#!/usr/bin/env bash
# Renders an HTML report with headless Chromium (Debian's chromium package,
# installed with apt-get when missing) into a PNG, then checks what a person
# would see: the page is not blank (enough distinct colours: the charts'
# bars, bands and text), and the DOM's <title> is the expected one.
#   tools/render-report.sh PAGE.html OUT.png 'expected title prefix' [WIDTHxHEIGHT]
# Runs as root in CI, hence --no-sandbox; nothing is fetched (the page is
# self-contained; networking features are off).
set -euo pipefail
page=$1 png=$2 want=$3 size=${4:-1100x2600}
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "render-report: installing chromium" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --user-data-dir="$profile" --window-size="${size/x/,}")
url="file://$(cd "$(dirname "$page")" && pwd)/$(basename "$page")"
chromium "${flags[@]}" --screenshot="$png" "$url" >/dev/null 2>&1
[ -s "$png" ] || { echo "render-report: chromium wrote no screenshot" >&2; exit 1; }
title=$(chromium "${flags[@]}" --dump-dom "$url" 2>/dev/null | grep -o '<title>[^<]*</title>' | head -1 | sed 's/<[^>]*>//g')
case "$title" in
  "$want"*) ;;
  *) echo "render-report: title '$title' does not start with '$want'" >&2; exit 1 ;;
esac
python3 "$(dirname "$0")/png_colours.py" "$png" --min 12
echo "render-report: $png: title '$title'"
