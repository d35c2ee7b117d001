"""How long simulated annealing keeps finding better FPGA designs (issue 37): the default patience's evidence.

    python bench/sa_patience.py --nets yolo,resnet18,mobilenet_v2 --seeds 0,1,2 --json bench/data/sa_patience.json

For each layer and seed, annealing at explore's defaults (512 chains, 30,000 designs) on the FPGA model of the
board, stopped only by the budget or by ``--patience`` rounds without a better objective (three times explore's
default by default, so the gaps the default must cover are seen whole): the rounds that scored anything,
the round of each better design, and the longest run of rounds between two of them. A default patience that
exceeds every gap seen ends each search with the same best design.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models.fpga import FpgaModel  # noqa: E402
from hetero_dse.evaluate.model import ModelEvaluator  # noqa: E402
from hetero_dse.explore.loop import run_search  # noqa: E402
from hetero_dse.explore.settings import MODEL_STARTS, ExplorerSettings  # noqa: E402
from hetero_dse.hardware.board import load_board  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402
from hetero_dse.targets.fpga import DEFAULT_BUDGET, SA_PATIENCE, FpgaTarget  # noqa: E402


class Rounds:
    """Each round that scored something, and the rounds where the best objective improved."""

    def __init__(self) -> None:
        self.best, self.rounds, self.used, self.improved = np.inf, 0, 0, []

    def update(self, rows, evaluation) -> None:
        self.rounds += 1
        self.used += len(rows)
        best = float(np.min(evaluation.objective)) if len(rows) else np.inf
        if best < self.best:
            self.improved.append((self.rounds, self.used, best))
            self.best = best


def operators(nets: list[str]) -> list:
    from hetero_dse.model.capture import capture
    from hetero_dse.model.zoo import build

    out = []
    for net in nets:
        if net == "yolo":
            out += [get_builtin("conv2d").instantiate(shape=f"yolo:C{i}") for i in range(1, 16)]
        else:
            model, example = build(net)
            out += capture(model, example, net, profile=False).operators()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default="yolo,resnet18,mobilenet_v2")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--board", default="vu9p")
    parser.add_argument("--patience", type=int, default=3 * SA_PATIENCE)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    target = FpgaTarget(load_board(args.board))
    runs = []
    for op in operators(args.nets.split(",")):
        for seed in (int(s) for s in args.seeds.split(",")):
            space = target.space(op)
            explorer = ExplorerSettings("sa").make(space, seed, default_starts=MODEL_STARTS, exhaustive_limit=None)
            rounds = Rounds()
            start = time.perf_counter()
            loop = run_search(space, explorer, ModelEvaluator(FpgaModel(space.tables)), budget=DEFAULT_BUDGET,
                              observers=[rounds], patience=args.patience)
            gaps = [b[0] - a[0] for a, b in zip(rounds.improved, rounds.improved[1:], strict=False)]
            runs.append({"layer": op.shape_name, "seed": seed, "rounds": rounds.rounds, "ended": loop.ended,
                         "evaluations": loop.evaluations, "wall_s": round(time.perf_counter() - start, 2),
                         "last_better_round": rounds.improved[-1][0], "longest_gap": max(gaps, default=0),
                         "best": rounds.best})
            r = runs[-1]
            print(f"{r['layer']} seed {seed}: {r['rounds']} rounds ({r['ended']}), last better design in round "
                  f"{r['last_better_round']}, longest gap {r['longest_gap']}", flush=True)
    worst = max(runs, key=lambda r: r["longest_gap"])
    print(f"{len(runs)} searches: longest gap {worst['longest_gap']} rounds ({worst['layer']} seed {worst['seed']}), "
          f"last better design by round {max(r['last_better_round'] for r in runs)}; default patience {SA_PATIENCE}")
    if args.json:
        record = {"board": args.board, "patience": args.patience, "runs": runs}
        args.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
