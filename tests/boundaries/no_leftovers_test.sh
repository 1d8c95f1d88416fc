#!/usr/bin/env bash
# Self-test of scripts/no_leftovers.sh: a command that cleans up passes and its TMPDIR goes; one
# that leaves a file in TMPDIR fails with exit 3 and the file named; a failing command keeps its own
# exit status.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
check="$root/scripts/no_leftovers.sh"

"$check" "$work/clean" -- sh -c 'f=$(mktemp); rm "$f"' ||
  { echo "FAIL: a command that removed its temporary file was refused"; exit 1; }
[ ! -e "$work/clean" ] || { echo "FAIL: the empty TMPDIR was not removed"; exit 1; }

set +e
out=$("$check" "$work/left" -- sh -c 'mkdir "$TMPDIR/scratch_42"; touch "$TMPDIR/scratch_42/m"' 2>&1)
rc=$?
set -e
[ "$rc" = 3 ] || { echo "FAIL: a leftover gave exit $rc, not 3: $out"; exit 1; }
grep -q "scratch_42" <<<"$out" || { echo "FAIL: the leftover is not named: $out"; exit 1; }

set +e
"$check" "$work/failed" -- sh -c 'touch "$TMPDIR/x"; exit 7' 2>/dev/null
rc=$?
set -e
[ "$rc" = 7 ] || { echo "FAIL: a failing command's exit 7 became $rc"; exit 1; }
echo "no_leftovers self-test passed"
