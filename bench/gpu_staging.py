"""The shared memory the generated CUDA declares against what the GPU space counts, on YOLO-v1's layers: for
points sampled from each layer's FP32 space (the whole space, no domain), the share whose code declares exactly
the model's bytes, the worst ratio, and the share beyond the H100's 48 KB a block (points nvcc refuses although
the model passes them). No GPU and no nvcc run: TVM generates the source.

    python bench/gpu_staging.py --points 24 --json bench/data/gpu_staging.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_cpu.schedule import ScheduleError, apply_gpu, build_cuda  # noqa: E402
from hetero_dse.analysis import analyze  # noqa: E402
from hetero_dse.hardware.gpus import get_device  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402
from hetero_dse.space.gpu import GpuSpace  # noqa: E402

try:
    from gpu_cpu.cuda_usage import declared_shared_bytes  # noqa: E402
except ImportError:  # before the helper existed: the same count, inline
    import re

    def declared_shared_bytes(source: str) -> int:
        sizes = {"float": 4, "half": 2, "int": 4, "int8_t": 1, "signed char": 1, "char": 1}
        return sum(sizes.get(t.strip(), 4) * int(n) for t, n in
                   re.findall(r"__shared__\s+(?:alignas\(\d+\)\s+)?([\w ]+?)\s+\w+\[(\d+)\]", source))


def valid_points(space: GpuSpace, count: int) -> list:
    """The first ``count`` valid points of a fixed stream of draws, judged point by point: the same points in
    every version of the tree, whatever its own sampler does."""
    rng, points = np.random.default_rng(0), []
    while len(points) < count:
        point = space.decode(rng.integers(0, space.cardinalities))
        if not space.violations(point):
            points.append(point)
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", default="C1,C2,C4,C8,C13,C15")
    parser.add_argument("--points", type=int, default=24)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    device = get_device("h100")
    rows = []
    for layer in args.layers.split(","):
        op = get_builtin("conv2d").instantiate(shape=f"yolo:{layer}")
        space = GpuSpace(analyze(op), device, domain=False)
        pairs, start = [], time.perf_counter()
        for point in valid_points(space, args.points):
            try:
                _, source = build_cuda(apply_gpu(op, point), device, compile_here=False)
            except ScheduleError:
                continue
            pairs.append((declared_shared_bytes(source), space.limits(point)["shared_bytes"]))
        ratios = [declared / model for declared, model in pairs]
        rows.append({"layer": layer, "points": len(pairs), "exact": sum(d == m for d, m in pairs) / len(pairs),
                     "median_ratio": float(np.median(ratios)), "worst_ratio": max(ratios),
                     "beyond_48KB": sum(d > device.shared_memory_per_block for d, _ in pairs) / len(pairs),
                     "seconds": time.perf_counter() - start})
        print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"device": device.name, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
