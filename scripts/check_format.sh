#!/usr/bin/env bash
# Checks that every tracked C++ file (src/, tools/, tests/, bench/) is formatted as .clang-format
# says; lists the files that are not and exits 1. With --fix, formats them in place instead.
# Usage: scripts/check_format.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$clang_format" ]; then
  echo "check_format: clang-format is not installed (scripts/setup.sh installs it)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files -- 'src/*.cc' 'src/*.h' 'tools/*.cc' 'tools/*.h' \
  'tests/*.cc' 'tests/*.h' 'bench/*.cc' 'bench/*.h')
if [ "${1:-}" = "--fix" ]; then
  "$clang_format" -i --style=file "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$clang_format" --style=file --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "check_format: ${#bad[@]} of ${#files[@]} files are not formatted as .clang-format says:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "run scripts/check_format.sh --fix (or clang-format -i FILE) and commit the result" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
