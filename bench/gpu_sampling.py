"""Rejection sampling of the GPU space (seed 001's domain and the device's limits), per YOLO-v1 layer: draws
judged a block at a time as arrays against the same rules judged point by point (the baseline, in the same run).

    python bench/gpu_sampling.py --layers C2,C4,C8,C13,C15 --pool 512 --json bench/data/gpu_sampling.json

A pool of 512 is what the transfer-learning explorer samples before every batch of 8 it proposes: point by
point, that was most of a measured search's time on an H100 (YOLO-v1 C13 did not finish 128 trials in 490 s).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hetero_dse.analysis import analyze  # noqa: E402
from hetero_dse.hardware.gpus import get_device  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402
from hetero_dse.space.gpu import GpuSpace  # noqa: E402


def timed(space: GpuSpace, pool: int, vectorised: bool, seed: int) -> float:
    space.vectorised = vectorised  # the instance's switch: the same space, the same rules
    start = time.perf_counter()
    rows = space.sample(pool, np.random.default_rng(seed))
    seconds = time.perf_counter() - start
    assert len(rows) == pool and space.valid(rows).all()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="C2,C4,C8,C13,C15")
    parser.add_argument("--pool", type=int, default=512)
    parser.add_argument("--gpu", default="h100")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for layer in args.layers.split(","):
        op = get_builtin("conv2d").instantiate(shape=f"yolo:{layer}")
        space = GpuSpace(analyze(op), get_device(args.gpu))
        per_point = timed(space, args.pool, False, 0)
        arrays = min(timed(space, args.pool, True, seed) for seed in range(3))
        rows.append({"layer": layer, "pool": args.pool, "per_point_s": per_point, "arrays_s": arrays,
                     "speedup": per_point / arrays})
        print(f"{layer}: pool of {args.pool}: point by point {per_point:.3f} s, as arrays {arrays:.4f} s "
              f"({per_point / arrays:.0f}x)", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"gpu": args.gpu, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
