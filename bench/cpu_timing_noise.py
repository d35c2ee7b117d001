"""How much one CPU schedule's measured time moves between measurements, with the default timing and with a
longer one: the same schedules timed again and again, each time in a fresh worker (as two searches minutes
apart would time them), the two timings interleaved so that they share the machine's state.

    .venv/bin/python bench/cpu_timing_noise.py --layer C8 --points 3 --repeats 8 --min-repeat-ms 0,40

Points: the layer's default point and ``--points`` − 1 seeded random valid points. Per point and timing:
the spread (slowest / fastest), the coefficient of variation, and the wall time one measurement costs
(build included, as in a search).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_cpu.measure import MeasureJob, Measurer, measure_cpu_job  # noqa: E402
from hetero_dse.space.cpu import CpuSpace  # noqa: E402
from hetero_dse.analysis import analyze  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layer", default="C8")
    parser.add_argument("--points", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--min-repeat-ms", default="0,40", help="comma-separated timings to compare")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    op = get_builtin("conv2d").instantiate(shape=f"yolo:{args.layer}")
    space = CpuSpace(analyze(op))
    points = [space.default_point()]
    points += [space.decode(r) for r in space.sample(args.points - 1, np.random.default_rng(0))]
    timings = [int(t) for t in args.min_repeat_ms.split(",")]
    seconds = {(p, t): [] for p in range(len(points)) for t in timings}
    wall = {t: [] for t in timings}
    for repeat in range(args.repeats):
        for p, point in enumerate(points):
            for t in timings:
                job = MeasureJob("builtin", "conv2d", dict(op.params), point.to_json(), min_repeat_ms=t)
                start = time.perf_counter()
                with Measurer() as measurer:  # a fresh worker, as another search would have
                    result = measurer.run(measure_cpu_job, job)
                wall[t].append(time.perf_counter() - start)
                if result.ok:
                    seconds[(p, t)].append(result.seconds)
        print(f"round {repeat + 1}/{args.repeats} done", flush=True)

    flops = analyze(op).flops
    rows = []
    for p in range(len(points)):
        for t in timings:
            s = np.array(seconds[(p, t)])
            rows.append({"point": p, "min_repeat_ms": t, "n": len(s), "gflops_median": flops / np.median(s) / 1e9,
                         "spread": float(s.max() / s.min()), "cv": float(s.std() / s.mean())})
            print(f"point {p} min_repeat_ms {t:>3}: {rows[-1]['gflops_median']:.1f} GFLOPS median, "
                  f"spread {rows[-1]['spread']:.2f}x, cv {100 * rows[-1]['cv']:.1f} %")
    for t in timings:
        print(f"min_repeat_ms {t:>3}: {np.median(wall[t]):.2f} s per measurement (median)")
    if args.json:
        args.json.write_text(json.dumps({"layer": args.layer, "rows": rows,
                                         "wall_s": {t: float(np.median(w)) for t, w in wall.items()}}, indent=2))


if __name__ == "__main__":
    main()
