#!/usr/bin/env bash
# Self-test of scripts/check_format.sh: a file written in kiln's style passes, one that is not
# (wrong spacing, pointer on the right, a line over 100 columns) fails with exit 1 and is named.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf 'int* twice(int* x) { return x + 2; }\n' >"$dir/good.cc"
printf 'int *twice( int *x ){return x+2;}\n' >"$dir/bad.cc"
"$root/scripts/check_format.sh" "$dir/good.cc" || { echo "FAIL: a formatted file was refused"; exit 1; }
set +e
out=$("$root/scripts/check_format.sh" "$dir/good.cc" "$dir/bad.cc" 2>&1)
rc=$?
set -e
[ "$rc" = 1 ] || { echo "FAIL: an unformatted file gave exit $rc, not 1"; exit 1; }
grep -q "$dir/bad.cc" <<<"$out" || { echo "FAIL: the unformatted file is not named: $out"; exit 1; }
if grep -q "$dir/good.cc" <<<"$out"; then echo "FAIL: the formatted file is named: $out"; exit 1; fi
echo "check_format self-test passed"
