#!/usr/bin/env bash
# Runs a command with TMPDIR set to a fresh, empty DIR, then fails if anything is left in DIR: a test
# that forgets to remove its scratch files (modules of 100 MB and more) fills the disk of whoever
# runs the suite again and again, CI's included. `make test` and `make sanitize` run ctest through
# it. The command's own exit status wins when it failed; otherwise leftovers give exit 3, each
# named. KILN_KEEP_TEST_DIRS=1 (tests keep their folders for a look) skips the check.
# Usage: scripts/no_leftovers.sh DIR -- COMMAND [ARG...]
set -uo pipefail
usage() {
  echo "usage: scripts/no_leftovers.sh DIR -- COMMAND [ARG...]" >&2
  exit 2
}
(($# >= 3)) && [ "$2" = "--" ] || usage
dir=$1
shift 2
rm -rf "$dir" && mkdir -p "$dir" || exit 2
TMPDIR=$(cd "$dir" && pwd) "$@"
rc=$?
[ "${KILN_KEEP_TEST_DIRS:-}" = 1 ] && exit "$rc"
mapfile -t left < <(find "$dir" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort)
if ((${#left[@]})); then
  echo "no_leftovers: the command left ${#left[@]} entries in its TMPDIR ($dir); whatever made" \
    "them must remove them:" >&2
  for name in "${left[@]}"; do
    echo "  $name ($(du -sh "$dir/$name" 2>/dev/null | cut -f1))" >&2
  done
  ((rc)) && exit "$rc"
  exit 3
fi
rmdir "$dir"
exit "$rc"
