"""Re-time the best schedules of a ``cpu_yolo.py`` run against torch, interleaved, to take the machine's
noise out of the ratios.

    .venv/bin/python bench/cpu_retime.py bench_cpu.json --rounds 5

On these shared 2-core machines a kernel's time can double for seconds at a time (torch's conv2d on YOLO C4
measured 56-130 GFLOPS in consecutive calls of one idle process). A search's run takes minutes, so its
best and torch's figure are timed far apart. Here, per layer and round, the best schedule of the run
(rebuilt from its knobs, checked against the reference) and torch's call are each timed in a fresh worker
process, one right after the other; the ratio per round and the best figure of each over the rounds are
reported, so both sides see the same quiet moments.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_cpu.measure import MeasureJob, Measurer, measure_cpu_job, time_torch_isolated  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the --json file of bench/cpu_yolo.py")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    rows = []
    for row in json.loads(args.run.read_text())["rows"]:
        op = get_builtin("conv2d").instantiate(shape=f"yolo:{row['layer']}")
        job = MeasureJob("builtin", op.name, dict(op.params), row["best_knobs"])
        ours, torch = [], []
        for _ in range(args.rounds):
            with Measurer(timeout_s=300) as measurer:  # a fresh worker each round, as torch gets
                result = measurer.run(measure_cpu_job, job)
            if not result.ok:
                raise RuntimeError(f"{row['layer']}: the run's best schedule failed: {result.error}")
            ours.append(row["flops"] / result.seconds / 1e9)
            torch.append(row["flops"] / time_torch_isolated(op, "builtin").seconds / 1e9)
        ratios = [o / t for o, t in zip(ours, torch, strict=True)]
        out = {"layer": row["layer"], "ours_gflops": ours, "torch_gflops": torch,
               "median_ratio": statistics.median(ratios), "best_ratio": max(ours) / max(torch),
               "search_ratio": row["vs_torch"]}
        rows.append(out)
        print(f"{row['layer']}: ours {min(ours):.1f}-{max(ours):.1f} GFLOPS, torch {min(torch):.1f}-{max(torch):.1f};"
              f" median of round ratios {out['median_ratio']:.2f}x, best against best {out['best_ratio']:.2f}x "
              f"(in the search's run {row['vs_torch']:.2f}x)", flush=True)

    def geomean(key: str) -> float:
        return math.exp(sum(math.log(r[key]) for r in rows) / len(rows))

    summary = {key: geomean(key) for key in ("median_ratio", "best_ratio", "search_ratio")}
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps({"source": str(args.run), "rounds": args.rounds, "rows": rows, **summary},
                                        indent=2))


if __name__ == "__main__":
    main()
