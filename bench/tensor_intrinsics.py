"""A tensor-core candidate's first build in a fresh process (what every builder of a search does first): TVM's
wmma intrinsics from its own tables (the baseline: importing ``tvm.s_tir.tensor_intrin`` registers every
target's intrinsics), from our cache on disk when it is cold (generated and written) and when it is warm.

    python bench/tensor_intrinsics.py --layer C13 --repeat 3 --json bench/data/tensor_intrinsics.json

Each timing is a fresh Python process from its start to its first module built (TVM's lowering and CUDA code
generation, no nvcc); the three kinds alternate, so the machine's load falls on all of them alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: run in the fresh process: the first candidate of the layer's space, applied and built for the H100
FIRST_BUILD = """
import sys, time
start = float(sys.argv[1])
if sys.argv[3] == "tables":
    import tvm.s_tir.tensor_intrin.cuda  # noqa: F401 - what every process paid before the cache
import numpy as np
from hetero_dse.analysis import analyze
from hetero_dse.hardware.gpus import get_device
from hetero_dse.ops import get_builtin
from hetero_dse.space.tensorcore import TensorCoreSpace
from gpu_cpu.schedule import apply_gpu, build_cuda
device = get_device("h100")
op = get_builtin("conv2d").instantiate(shape="yolo:" + sys.argv[2]).with_dtype("float16")
space = TensorCoreSpace(analyze(op), device)
point = space.decode(space.sample(1, np.random.default_rng(0))[0])
build_cuda(apply_gpu(op, point), device, compile_here=False)
print(time.time() - start)
"""


def first_build(layer: str, kind: str, cache: str) -> float:
    env = {**os.environ, "HETERO_DSE_CACHE": cache, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", FIRST_BUILD, str(time.time()), layer, kind], env=env,
                         capture_output=True, text=True, check=True)
    return float(run.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layer", default="C13")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"tables": [], "cold": [], "warm": []}
    for _ in range(args.repeat):
        # a directory each: the tables' process writes the cache too (its registrations then cost nothing)
        with tempfile.TemporaryDirectory() as tables, tempfile.TemporaryDirectory() as cold, \
                tempfile.TemporaryDirectory() as warm:
            first_build(args.layer, "cold", warm)  # fills the warm one, untimed
            for kind, cache in (("tables", tables), ("cold", cold), ("warm", warm)):
                times[kind].append(first_build(args.layer, kind, cache))
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    for kind, values in times.items():
        print(f"{kind:>6}: median {medians[kind]:.2f} s of {', '.join(f'{v:.2f}' for v in values)}; "
              f"{medians['tables'] / medians[kind]:.2f}x the tables' speed", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"layer": args.layer, "times_s": times, "median_s": medians,
                                         "warm_vs_tables": medians["tables"] / medians["warm"]}, indent=2))


if __name__ == "__main__":
    main()
