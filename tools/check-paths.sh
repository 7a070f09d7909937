#!/usr/bin/env bash
# Every repository path a comment or a doc names exists: CI runs this as the
# ctest check_paths, so a renamed or deleted file cannot stay named. How names
# are read and judged: tools/check-paths.py; the exceptions (other projects'
# files, files written at run time): tools/check-paths.allow.
# Usage: tools/check-paths.sh [--list] [ROOT]
set -euo pipefail
command -v python3 >/dev/null || { echo "check-paths: python3 is missing: tools/install-deps.sh installs it" >&2; exit 2; }
exec python3 "$(dirname "$0")/check-paths.py" "$@"
