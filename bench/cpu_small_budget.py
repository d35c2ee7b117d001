"""Does a user's budget of 16 trials find what 64 find? Each layer searched from scratch (``--no-history``) with
16 trials under several seeds and with 64 trials once, through ``hetero_dse explore`` as a user runs it; the
best of each run re-timed against torch as the report does.

    .venv/bin/python bench/cpu_small_budget.py --layers C8=256-512-28-3-1,L7=128-128-28-3-1 --seeds 1,2,3
    .venv/bin/python bench/cpu_small_budget.py --layers L10=dw:144-56-3-2 --seeds 1,2,3

A layer is NAME=C-K-HW-kernel-stride (a convolution) or NAME=dw:C-HW-kernel-stride (a depthwise one).

Prints, per layer, each 16-trial run's GFLOPS as a fraction of the 64-trial run's (the goal of issue 39:
at least 0.9 in every run), and torch's figure from the same runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def explore(op: str, params: dict[str, int], trials: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="hetero_dse_budget_") as tmp:
        args = [sys.executable, "-m", "hetero_dse", "explore", "--op", op, "--target", "cpu", "--trials",
                str(trials), "--seed", str(seed), "--no-history", "--winograd", "off", "--out", f"{tmp}/o"]
        for key, value in params.items():
            args += ["--param", f"{key}={value}"]
        run = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"explore failed: {run.stderr.strip()[-1500:]}")
        (record,) = json.loads(Path(f"{tmp}/o/report.json").read_text())["cpu"]
    return {"gflops": record["best"]["gflops"], "torch_gflops": record["torch"]["gflops"],
            "vector": record["best"]["knobs"].get("vector"), "wall_s": record["wall_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="C8=256-512-28-3-1,L7=128-128-28-3-1,L9=256-256-14-3-1",
                        help="NAME=C-K-HW-kernel-stride or NAME=dw:C-HW-kernel-stride, comma-separated")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for spec in args.layers.split(","):
        name, shape = spec.split("=")
        if shape.startswith("dw:"):
            op = "depthwise_conv2d"
            c, hw, kernel, stride = (int(v) for v in shape[3:].split("-"))
            params = dict(C=c, H=hw, W=hw, kernel=kernel, stride=stride, padding=kernel // 2)
        else:
            op = "conv2d"
            c, k, hw, kernel, stride = (int(v) for v in shape.split("-"))
            params = dict(C=c, K=k, H=hw, W=hw, kernel=kernel, stride=stride, padding=kernel // 2)
        full = explore(op, params, 64, 1)
        small = [explore(op, params, 16, int(s)) for s in args.seeds.split(",")]
        fractions = [s["gflops"] / full["gflops"] for s in small]
        rows.append({"layer": name, "op": op, "params": params, "trials_64": full, "trials_16": small,
                     "fractions": fractions})
        print(f"{name}: 64 trials {full['gflops']:.0f} GFLOPS (torch {full['torch_gflops']:.0f}); 16 trials "
              + ", ".join(f"{s['gflops']:.0f} ({f:.2f}, {s['vector']})" for s, f in zip(small, fractions, strict=True))
              + f"; torch in those runs {min(s['torch_gflops'] for s in small):.0f}-"
              f"{max(s['torch_gflops'] for s in small):.0f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
