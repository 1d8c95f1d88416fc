#!/usr/bin/env bash
# Checks that C++ files are formatted as .clang-format says: the FILEs given, else every tracked
# C++ file (src/, tools/, tests/, bench/). Lists the files that are not and exits 1. With --fix,
# formats them in place instead. The ctest `format_check` runs it on the tree.
# Usage: scripts/check_format.sh [--fix] [FILE...]
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$clang_format" ]; then
  echo "check_format: clang-format is not installed (scripts/setup.sh installs it)" >&2
  exit 2
fi
fix=0
if [ "${1:-}" = "--fix" ]; then
  fix=1
  shift
fi
if (($#)); then
  files=("$@")
else
  mapfile -t files < <(git ls-files -- 'src/*.cc' 'src/*.h' 'include/*.h' 'tools/*.cc' 'tools/*.h' \
    'tests/*.cc' 'tests/*.h' 'tests/*.c' 'bench/*.cc' 'bench/*.h' 'bench/*.c' 'examples/*.c' \
    'python/*.cc')
fi
if ((fix)); then
  "$clang_format" -i --style=file "${files[@]}"
  exit 0
fi
# One clang-format process per batch of files (a process per file took over a minute), two at a
# time; a file that is not formatted shows as "FILE:LINE:COL: error: ..." in the output.
status=0
output=$(printf '%s\0' "${files[@]}" |
  xargs -0 -n 64 -P 2 "$clang_format" --style=file:.clang-format --dry-run --Werror 2>&1) ||
  status=$?
mapfile -t bad < <(grep -o '^[^:]*:[0-9]*:[0-9]*: error' <<<"$output" | cut -d: -f1 | sort -u)
if ((status != 0 && ${#bad[@]} == 0)); then
  echo "check_format: clang-format failed:" >&2
  echo "$output" >&2
  exit 2
fi
if ((${#bad[@]})); then
  echo "check_format: ${#bad[@]} of ${#files[@]} files are not formatted as .clang-format says:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "run scripts/check_format.sh --fix (or clang-format -i FILE) and commit the result" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
