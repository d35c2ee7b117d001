#!/usr/bin/env bash
# The main job on a built-in example: find the best FPGA accelerator for YOLO-v1's first conv layer
# (7x7, stride 2, 3 -> 64 channels at 448x448) on AWS F1's VU9P, write its Vitis HLS project and report
# to example_out/, and C-simulate the project with g++ against torch's result.
# Sets the environment up first when needed (scripts/bootstrap.sh). Extra arguments go to explore.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
HETERO_DSE="$(dirname "$VENV_PY")/hetero_dse"
"$HETERO_DSE" explore --op conv2d --shape yolo:C1 --board vu9p --out example_out --force --csim "$@"
