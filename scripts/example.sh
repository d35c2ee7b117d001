#!/usr/bin/env bash
# The main job on a built-in example: FlexTensor's static analysis of YOLO-v1's first conv layer
# (7x7, stride 2, 3 -> 64 channels at 448x448) and the board it will be explored for, AWS F1's VU9P.
# Sets the environment up first when needed (scripts/bootstrap.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
HETERO_DSE="$(dirname "$VENV_PY")/hetero_dse"
"$HETERO_DSE" analyze --op conv2d --shape yolo:C1
"$HETERO_DSE" boards vu9p
