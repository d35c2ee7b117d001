"""Adapting history schedules to a new shape (issue 6): ``nearest_valid`` testing a level of neighbours a
slice at a time against testing it whole, on the same points in one run.

    .venv/bin/python bench/adapt.py --points 50

YOLO C8's CPU schedules adapted to the pruned shape C=179, K=359 (most adapted rows break a pruning rule
and need the neighbour search); both variants must give the same rows.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import hetero_dse.space.splits as cpu_space  # noqa: E402
from hetero_dse.space.cpu import CpuSpace  # noqa: E402
from hetero_dse.analysis import analyze  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=50)
    args = parser.parse_args()
    conv = get_builtin("conv2d")
    old = CpuSpace(analyze(conv.instantiate(shape="yolo:C8")), vector_bits=512)
    new = CpuSpace(analyze(conv.instantiate({"C": 179, "K": 359}, shape="yolo:C8")), vector_bits=512)
    points = [old.decode(r) for r in old.sample(args.points, np.random.default_rng(0))]
    new.neighbourhood  # noqa: B018 - built once, outside the timing
    results, times = {}, {}
    sliced = cpu_space.nearest_valid
    whole_level = functools.partial(sliced, chunk=sys.maxsize)  # the baseline: a level tested in one call
    for name, fn in (("whole level", whole_level), ("a slice at a time", sliced)):
        cpu_space.nearest_valid = fn  # the name CpuSpace.adapt calls
        t = time.perf_counter()
        results[name] = [new.adapt(p) for p in points]
        times[name] = (time.perf_counter() - t) / len(points)
    same = all((a is None and b is None) or np.array_equal(a, b) for a, b in zip(*results.values(), strict=True))
    base = times["whole level"]
    for name, seconds in times.items():
        print(f"{name}: {seconds * 1e3:.1f} ms per point ({base / seconds:.2f}x the whole-level baseline)")
    print(f"same adapted rows: {same}")


if __name__ == "__main__":
    main()
