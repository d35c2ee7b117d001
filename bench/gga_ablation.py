"""What the guided GA's additions to seed 002's Algorithm 1 are worth, on the FPGA model: the pruned YOLO-v1
layers of ``history_tuners.py``, the same history, many seeds. Each variant runs ``--budget`` designs per
seed; the reference is stricter than ``history_tuners.py``'s (the best of two 20,000-design simulated
annealings and a transfer-learning run), so the GA's later generations, not its first, decide the figures:

    python bench/gga_ablation.py --seeds 8

Variants: ``paper`` (the best child kept, no rebalance), ``keep-best`` (the best so far kept too),
``rebalance`` (the paper's selection, half the expertise moves rebalanced) and ``both`` (the default).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from history_tuners import (  # noqa: E402
    HISTORY_LAYERS, PRUNED, MeasuredModel, fpga_history, fpga_space, geomean, pruned, reach,
)

from hetero_dse.hardware.board import load_board  # noqa: E402
from hetero_dse.explore import make_explorer  # noqa: E402
from hetero_dse.targets.fpga_search import search  # noqa: E402
from hetero_dse.explore.gga import GuidedGA  # noqa: E402
from hetero_dse.explore.settings import GGA_POPULATION  # noqa: E402
from hetero_dse.history.match import Prior  # noqa: E402

VARIANTS = {"paper": (0.0, False), "keep-best": (0.0, True), "rebalance": (0.5, False), "both": (0.5, True)}


def reference(space, model, prior) -> float:
    """The fastest latency of two long simulated annealings and one transfer-learning run."""
    runs = [make_explorer("sa", space, seed, starts=16) for seed in range(2)]
    found = [search(space, model, ex, budget=20000, top_k=1) for ex in runs]
    found.append(search(space, model, make_explorer("tl", space, 0, prior=prior), budget=500, top_k=1))
    return min(float(model.evaluate(f.top_rows)["latency_s"][0]) for f in found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default=",".join(PRUNED))
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--budget", type=int, default=500)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    board = load_board("vu9p")
    related = fpga_history(board, HISTORY_LAYERS)
    rows = []
    for name in args.layers.split(","):
        space, model = fpga_space(pruned(name), board)
        prior = Prior(space.loop_extents, related)
        t = time.perf_counter()
        best = reference(space, model, prior)
        row = {"layer": name, "reference_latency_s": best, "reference_s": time.perf_counter() - t, "variants": {}}
        candidates = prior.candidates(space, GGA_POPULATION)
        for variant, (balance, keep_best) in VARIANTS.items():
            counts, missed, finals = [], 0, []
            for seed in range(args.seeds):
                measured = MeasuredModel(model)
                ga = GuidedGA(space, seed=seed, candidates=candidates, balance=balance, keep_best=keep_best)
                search(space, measured, ga, budget=args.budget, top_k=1)
                n, ok = reach(measured.curve, best / 0.95, args.budget)
                counts.append(n)
                missed += not ok
                finals.append(best / measured.curve[-1][1])
            row["variants"][variant] = {"measurements": counts, "median": float(np.median(counts)),
                                        "missed": missed,
                                        "final_vs_reference": float(np.median(finals))}
        rows.append(row)
        print(f"{name}: " + ", ".join(f"{v} {r['median']:.0f} ({r['final_vs_reference']:.3f})"
                                      for v, r in row["variants"].items()), flush=True)
    summary = {v: geomean([max(r["variants"][v]["median"], 1) for r in rows]) for v in VARIANTS}
    print(json.dumps({"geomean_measurements": summary,
                      "paper/variant": {v: summary["paper"] / s for v, s in summary.items()}}, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"budget": args.budget, "seeds": args.seeds, "rows": rows,
                                         "geomean_measurements": summary}, indent=1) + "\n")


if __name__ == "__main__":
    main()
