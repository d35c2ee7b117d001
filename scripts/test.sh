#!/usr/bin/env bash
# The whole test suite. Sets the environment up first when needed (scripts/bootstrap.sh).
# Extra arguments go to pytest (e.g. scripts/test.sh -k analysis -x).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
status=0
"$VENV_PY" -m pytest "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "test.sh: pytest collected no test: that is a failure, not a pass" >&2
  exit 1
fi
exit "$status"
