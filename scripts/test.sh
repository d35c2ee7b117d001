#!/usr/bin/env bash
# The whole test suite. Sets the environment up first when needed (scripts/bootstrap.sh).
# Extra arguments go to pytest (e.g. scripts/test.sh -k analysis -x).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
status=0
# one worker per core, at most 4 (a TVM build takes a GiB or more), each test file on one worker (its shared
# fixtures are built once); -n 0 runs the suite in one process. The timings tests take are guarded by the
# measurement lock and its load flag.
workers=$(nproc 2>/dev/null || echo 2)
[ "$workers" -gt 4 ] && workers=4
"$VENV_PY" -m pytest -n "$workers" --dist loadfile "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "test.sh: pytest collected no test: that is a failure, not a pass" >&2
  exit 1
fi
exit "$status"
