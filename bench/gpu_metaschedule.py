"""TVM MetaSchedule alone on YOLO-v1 conv layers on the CUDA device present: its best after ``--trials`` trials,
timed as our candidates are, beside torch's strict-FP32 cuDNN taken in the same run. For a lease too short to
run MetaSchedule inside bench/gpu_yolo.py: our figure at the same trial count is read off that run's curve.

    python bench/gpu_metaschedule.py --layers C15,C8 --trials 32 --json bench_gpu_ms.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_cpu.baselines import time_torch_cuda  # noqa: E402
from hetero_dse.analysis import analyze  # noqa: E402
from hetero_dse.hardware.gpus import present_gpu  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402

from yolo_common import metaschedule  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="C15,C8")
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    gpu = present_gpu()
    if gpu is None:
        sys.exit("no CUDA device is present: this bench measures, and the roofline estimate is not a measurement")
    rows = []
    for layer in args.layers.split(","):
        op = get_builtin("conv2d").instantiate(shape=f"yolo:{layer}")
        flops = analyze(op).flops
        ms_s, wall = metaschedule(op, args.trials, gpu.target)
        torch_s = time_torch_cuda(op)
        rows.append({"layer": layer, "flops": flops, "ms_trials": args.trials, "ms_gflops": flops / ms_s / 1e9,
                     "ms_wall_s": wall, "torch_gflops": flops / torch_s / 1e9})
        print(f"{layer}: MetaSchedule ({args.trials} trials) {rows[-1]['ms_gflops']:.0f} GFLOPS in {wall:.0f} s; "
              f"torch FP32 {rows[-1]['torch_gflops']:.0f}", flush=True)
        if args.json:
            args.json.write_text(json.dumps({"device": gpu.name, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
