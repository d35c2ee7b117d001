"""Builds in parallel with measurement: wall time of the same CPU candidates evaluated one at a time (build
then time, in one worker) and through the pipeline (builder pool + measuring worker), in one run.

    .venv/bin/python bench/cpu_pipeline.py --layer C15 --candidates 24 --json bench_pipeline.json

The candidates are a fixed seeded sample of the layer's space, so both paths do exactly the same work.
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
from gpu_cpu.pipeline import Pipeline  # noqa: E402
from hetero_dse.space.cpu import CpuSpace  # noqa: E402
from hetero_dse.analysis import analyze  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layer", default="C15")
    parser.add_argument("--candidates", type=int, default=24)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    op = get_builtin("conv2d").instantiate(shape=f"yolo:{args.layer}")
    space = CpuSpace(analyze(op))
    rows = space.sample(args.candidates, np.random.default_rng(0))
    jobs = [MeasureJob("builtin", "conv2d", dict(op.params), space.decode(r).to_json()) for r in rows]

    start = time.perf_counter()
    with Measurer() as measurer:
        serial = [measurer.run(measure_cpu_job, job) for job in jobs]
    serial_s = time.perf_counter() - start

    start = time.perf_counter()
    with Pipeline(overlap=True) as pipeline:
        piped = list(pipeline.evaluate(jobs))
    piped_s = time.perf_counter() - start

    same_failures = [a.ok for a in serial] == [b.ok for b in piped]
    summary = {"layer": args.layer, "candidates": len(jobs), "serial_s": serial_s, "pipeline_s": piped_s,
               "speedup": serial_s / piped_s, "failures": sum(not r.ok for r in serial),
               "same_failures": same_failures}
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
