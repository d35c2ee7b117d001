"""Seed 001's GPU searching domain on the roofline estimate: YOLO-v1 conv layers searched in the FP32 (SIMT)
space of a named GPU with the domain and without it, and the first round's best against the search's final.

    .venv/bin/python bench/gpu_domain.py --layers C2,C4,C8,C13,C15 --budget 512 --seeds 3 --json gpu_domain.json

No GPU is used: every figure is the roofline model's (``cost_models/gpu_roofline.py``), so this measures what
the pruning does to the search, not a kernel's speed. "first round" is the best of the explorer's first batch of
candidates (its starts), the round a measured search pays for before it learns anything.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models.gpu_roofline import estimate  # noqa: E402
from hetero_dse.analysis import analyze  # noqa: E402
from hetero_dse.explore.loop import run_search  # noqa: E402
from hetero_dse.explore.settings import make_explorer  # noqa: E402
from hetero_dse.hardware.gpus import get_device  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402
from hetero_dse.space.gpu import GpuSpace  # noqa: E402


class Roofline:
    """The roofline as the search loop's evaluator, remembering each round's best."""

    def __init__(self, space: GpuSpace) -> None:
        self.space, self.rounds = space, []

    def evaluate(self, rows, best, deadline, on_row=None):
        from hetero_dse.explore.loop import Evaluation

        seconds = []
        for row in rows:
            point = self.space.decode(row)
            problem = self.space.beyond_limits(point)
            seconds.append(np.inf if problem else estimate(self.space, point).seconds)
        seconds = np.array(seconds)
        self.rounds.append(float(seconds.min()) if len(seconds) else np.inf)
        return Evaluation(seconds)


def run(op, device: str, domain: bool, explorer: str, budget: int, seed: int) -> dict:
    space = GpuSpace(analyze(op), get_device(device), domain=domain)
    evaluator = Roofline(space)
    run_search(space, make_explorer(explorer, space, seed, starts=8), evaluator, budget=budget)
    best = float(np.minimum.accumulate(evaluator.rounds)[-1])
    return {"first_round_s": evaluator.rounds[0], "final_s": best, "first_over_final": best / evaluator.rounds[0],
            "domain_active": space.domain}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="C2,C4,C8,C13,C15")
    parser.add_argument("--device", default="h100")
    parser.add_argument("--explorer", default="sa")
    parser.add_argument("--budget", type=int, default=512)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for layer in args.layers.split(","):
        op = get_builtin("conv2d").instantiate(shape=f"yolo:{layer}")
        flops = analyze(op).flops
        row = {"layer": layer}
        for domain in (False, True):
            runs = [run(op, args.device, domain, args.explorer, args.budget, seed) for seed in range(args.seeds)]
            key = "domain" if domain else "whole"
            row[key] = {"first_round_gflops": float(np.median([flops / r["first_round_s"] / 1e9 for r in runs])),
                        "final_gflops": float(np.median([flops / r["final_s"] / 1e9 for r in runs])),
                        "first_over_final": float(np.median([r["first_over_final"] for r in runs])),
                        "domain_active": runs[0]["domain_active"]}
        rows.append(row)
        w, d = row["whole"], row["domain"]
        print(f"{layer}: whole space first round {w['first_round_gflops']:.0f} GFLOPS ({w['first_over_final']:.0%} of "
              f"its final {w['final_gflops']:.0f}); domain first round {d['first_round_gflops']:.0f} "
              f"({d['first_over_final']:.0%} of its final {d['final_gflops']:.0f})"
              + ("" if d["domain_active"] else " [domain off: too sparse]"), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"device": args.device, "explorer": args.explorer, "budget": args.budget,
                                         "seeds": args.seeds, "basis": "roofline estimate", "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
