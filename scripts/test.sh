#!/usr/bin/env bash
# The whole test suite. Sets the environment up first when needed (scripts/bootstrap.sh).
# Extra arguments go to pytest (e.g. scripts/test.sh -k analysis -x), in one parallel pass.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
# one worker per core, at most 4 (a TVM build takes a GiB or more), each test file on one worker (its shared
# fixtures are built once); -n 0 runs in one process. The tests that assert on times taken here (marked
# "timing") run afterwards, alone: beside another worker, torch's threads waiting on a busy core made a
# small product's time 6x a large one's.
workers=$(nproc 2>/dev/null || echo 2)
[ "$workers" -gt 4 ] && workers=4

run() {
  local status=0
  "$VENV_PY" -m pytest "$@" || status=$?
  if [ "$status" -eq 5 ]; then
    echo "test.sh: pytest collected no test: that is a failure, not a pass" >&2
    return 1
  fi
  return "$status"
}

if [ "$#" -gt 0 ]; then
  run -n "$workers" --dist loadfile "$@"
  exit $?
fi
status=0
run -n "$workers" --dist loadfile -m "not timing" || status=$?
run -m timing -p no:xdist || { s=$?; [ "$status" -eq 0 ] && status=$s; }
exit "$status"
