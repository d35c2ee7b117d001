"""Explorers on the FPGA model (issue 5): evaluations to come within 1 % and 5 % of the exhaustive optimum.

    python bench/explorers_fpga.py                         # C1..C15 on vu9p, 10 seeds, 30,000 evaluations
    python bench/explorers_fpga.py --layers C8 --seeds 3   # quick look
    python bench/explorers_fpga.py --recompute-optima      # the exhaustive optima again (~30 min here)

The evaluator is the analytical model (float32, the board's default clock, the default traffic weight), so
every explorer sees exactly the objective `explore` ranks designs by. The exhaustive optimum of each layer
is cached in bench/data/fpga_optima_<board>.json with the number of valid designs it scored. Per layer,
explorer and seed, the search runs to the budget and records after how many distinct designs its best came
within 1 % and 5 % of the optimum; a run that never does counts as the budget (and is reported as missed).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from cost_models.fpga import FpgaModel
from hetero_dse import __version__
from hetero_dse.analysis import analyze
from hetero_dse.hardware.board import load_board
from hetero_dse.explore import Exhaustive, make_explorer
from hetero_dse.explore.settings import MODEL_STARTS
from hetero_dse.targets.fpga_search import search
from hetero_dse.ops import get_builtin
from hetero_dse.space.fpga import FpgaSpace

LAYERS = [f"C{i}" for i in range(1, 16)]
EXPLORERS = ("q", "p", "sa", "random")
DATA = Path(__file__).parent / "data"


def layer_space(layer: str, board) -> tuple[FpgaSpace, FpgaModel]:
    op = get_builtin("conv2d").instantiate(shape=f"yolo:{layer}")
    space = FpgaSpace(analyze(op), board, ["float32"], [board.default_clock_mhz])
    return space, FpgaModel(space.tables, traffic_weight=0.01)


def optima(board, layers: list[str], recompute: bool) -> dict:
    path = DATA / f"fpga_optima_{board.name}.json"
    cached = json.loads(path.read_text()) if path.is_file() and not recompute else {}
    for layer in layers:
        if layer in cached:
            continue
        space, model = layer_space(layer, board)
        t0 = time.perf_counter()
        r = search(space, model, Exhaustive(space), top_k=1)
        cached[layer] = {"objective": float(r.top_objective[0]), "row": r.top_rows[0].tolist(),
                         "valid_designs": r.evaluations, "wall_s": round(time.perf_counter() - t0, 1),
                         "version": __version__}
        print(f"{layer}: exhaustive optimum {cached[layer]['objective'] * 1e3:.4f} ms-equivalent over "
              f"{r.evaluations:,} designs ({cached[layer]['wall_s']} s)", flush=True)
        DATA.mkdir(exist_ok=True)
        path.write_text(json.dumps(cached, indent=1) + "\n")
    return cached


class Tracing:
    """The model, noting the best objective after every distinct design scored."""

    def __init__(self, model: FpgaModel) -> None:
        self.model, self.curve = model, []

    def evaluate(self, rows, detail=False):
        scores = self.model.evaluate(rows, detail)
        best = self.curve[-1] if self.curve else np.inf
        self.curve.extend(np.minimum.accumulate(np.minimum(scores["objective"], best)).tolist())
        return scores

    def __getattr__(self, name):
        return getattr(self.model, name)


def evaluations_to(curve: list[float], target: float) -> int | None:
    hit = np.flatnonzero(np.asarray(curve) <= target)
    return int(hit[0]) + 1 if len(hit) else None


def run(board, layers: list[str], seeds: int, budget: int, explorers: tuple[str, ...], best: dict,
        starts: int) -> list[dict]:
    rows = []
    for layer in layers:
        space, model = layer_space(layer, board)
        optimum = best[layer]["objective"]
        for name in explorers:
            for seed in range(seeds):
                traced = Tracing(model)
                t0 = time.perf_counter()
                search(space, traced, make_explorer(name, space, seed, starts=starts or MODEL_STARTS.get(name)),
                       budget=budget)
                curve = np.asarray(traced.curve)
                better = np.flatnonzero(np.diff(curve, prepend=np.inf) < 0)  # where the best improved
                rows.append({"layer": layer, "explorer": name, "seed": seed, "wall_s": time.perf_counter() - t0,
                             "evaluations": len(traced.curve), "final_gap": traced.curve[-1] / optimum - 1,
                             "improvements": [[int(i) + 1, float(curve[i])] for i in better],
                             "to_5pct": evaluations_to(traced.curve, optimum * 1.05),
                             "to_1pct": evaluations_to(traced.curve, optimum * 1.01)})
            mine = [r for r in rows if r["layer"] == layer and r["explorer"] == name]
            print(f"{layer} {name:6s} to 5 %: {_median(mine, 'to_5pct', budget):>8,.0f}  to 1 %: "
                  f"{_median(mine, 'to_1pct', budget):>8,.0f}  (missed {sum(r['to_1pct'] is None for r in mine)}"
                  f"/{len(mine)}; {np.mean([r['wall_s'] for r in mine]):.1f} s per run)", flush=True)
    return rows


def against_best_known(rows: list[dict], layers: list[str]) -> None:
    """Each run's evaluations to 5 % and 1 % of the best objective any run found for its layer."""
    for layer in layers:
        mine = [r for r in rows if r["layer"] == layer]
        best = min(r["improvements"][-1][1] for r in mine)
        for r in mine:
            r["best_known"] = best
            r["final_gap"] = r["improvements"][-1][1] / best - 1
            for key, slack in (("to_5pct", 1.05), ("to_1pct", 1.01)):
                r[key] = next((n for n, obj in r["improvements"] if obj <= best * slack), None)


def walls(rows: list[dict], explorers: tuple[str, ...]) -> str:
    """Markdown: each explorer's median wall time a run and median final gap to the best known."""
    lines = ["| explorer | wall time a run (median) | final gap to the best known (median) |", "|---|---|---|"]
    for e in explorers:
        mine = [r for r in rows if r["explorer"] == e]
        lines.append(f"| {e} | {np.median([r['wall_s'] for r in mine]):.1f} s | "
                     f"{100 * np.median([r['final_gap'] for r in mine]):.2f} % |")
    return "\n".join(lines)


def versus(rows: list[dict], layers: list[str], first: str, second: str) -> str:
    """Markdown: per layer, evaluations ``first`` needed to reach ``second``'s final objective (same seed), as
    a fraction of the evaluations ``second`` ran and of those it needed to reach its own final."""
    lines = [f"| layer | {second} final gap | {first} evals to it | / {second}'s budget "
             f"| / {second}'s evals to its own final |", "|---|---|---|---|---|"]
    shares_budget, shares_own = [], []
    for layer in layers:
        pairs = [(a, b) for a in rows for b in rows if a["layer"] == b["layer"] == layer and a["seed"] == b["seed"]
                 and a["explorer"] == first and b["explorer"] == second]
        need, own, gaps = [], [], []
        for a, b in pairs:
            target = b["improvements"][-1][1]
            hit = next((n for n, obj in a["improvements"] if obj <= target), None)
            need.append(hit if hit is not None else np.inf)
            own.append(b["improvements"][-1][0])
            gaps.append(b["final_gap"])
        n, o = float(np.median(need)), float(np.median(own))
        budget = pairs[0][1]["evaluations"]
        shares_budget.append(n / budget)
        shares_own.append(n / o)
        lines.append(f"| {layer} | {100 * np.median(gaps):.2f} % | {n:,.0f} | {n / budget:.1%} | {n / o:.2f}× |")
    finite = [x for x in shares_own if np.isfinite(x)]
    lines.append(f"| median | | | {np.median(shares_budget):.1%} | {np.median(finite) if finite else np.inf:.2f}× |")
    return "\n".join(lines)


def _median(rows: list[dict], key: str, budget: int) -> float:
    return float(np.median([budget if r[key] is None else r[key] for r in rows]))


def summary(rows: list[dict], layers: list[str], explorers: tuple[str, ...], budget: int) -> str:
    """Markdown: per layer the median evaluations to 5 % / 1 % of the optimum, and the geometric means."""
    head = "| layer | " + " | ".join(f"{e} to 5 % | {e} to 1 %" for e in explorers) + " |"
    lines = [head, "|---|" + "---|" * (2 * len(explorers))]
    geo = {(e, k): [] for e in explorers for k in ("to_5pct", "to_1pct")}
    for layer in layers:
        cells = []
        for e in explorers:
            mine = [r for r in rows if r["layer"] == layer and r["explorer"] == e]
            for k in ("to_5pct", "to_1pct"):
                m = _median(mine, k, budget)
                missed = sum(r[k] is None for r in mine)
                geo[(e, k)].append(m)
                cells.append(f"{m:,.0f}" + (f" ({missed} missed)" if missed else ""))
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    means = [f"**{np.exp(np.mean(np.log(geo[(e, k)]))):,.0f}**" for e in explorers for k in ("to_5pct", "to_1pct")]
    lines.append("| geomean | " + " | ".join(means) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="vu9p")
    parser.add_argument("--layers", default=",".join(LAYERS))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=int, default=30_000)
    parser.add_argument("--explorers", default=",".join(EXPLORERS))
    parser.add_argument("--starts", type=int, default=8, help="start points (q, p), chains (sa), batch (random), "
                        "population (ga, gga); 0: each explorer's own default on the FPGA model (MODEL_STARTS)")
    parser.add_argument("--recompute-optima", action="store_true")
    parser.add_argument("--best-known", action="store_true",
                        help="measure against the best design any run of this command found for the layer (not the "
                             "cached exhaustive optimum: the model has changed since it was computed)")
    parser.add_argument("--json", help="also write every run's figures to this file")
    parser.add_argument("--merge", metavar="A.json,B.json",
                        help="no search: the runs of earlier --json files together, each against the best design any "
                             "of them found for its layer, summarised")
    args = parser.parse_args()
    if args.merge:
        merged = [json.loads(Path(p).read_text()) for p in args.merge.split(",")]
        rows = [r for m in merged for r in m["runs"]]
        layers = list(dict.fromkeys(r["layer"] for r in rows))
        explorers = tuple(dict.fromkeys(r["explorer"] for r in rows))
        against_best_known(rows, layers)
        budget = merged[0]["budget"]
        print(summary(rows, layers, explorers, budget))
        print()
        print(walls(rows, explorers))
        return
    board = load_board(args.board)
    layers = args.layers.split(",")
    explorers = tuple(args.explorers.split(","))
    best = ({layer: {"objective": np.inf} for layer in layers} if args.best_known
            else optima(board, layers, args.recompute_optima))
    rows = run(board, layers, args.seeds, args.budget, explorers, best, args.starts)
    if args.best_known:
        against_best_known(rows, layers)
    print()
    print(f"Median evaluations over {args.seeds} seeds to come within 5 % / 1 % of the exhaustive optimum "
          f"(budget {args.budget:,}, {args.starts} start points; a miss counts as the budget):\n")
    print(summary(rows, layers, explorers, args.budget))
    if "q" in explorers and "p" in explorers:
        print(f"\nQ-method to reach the P-method's final quality (median over {args.seeds} seeds):\n")
        print(versus(rows, layers, "q", "p"))
    if args.json:
        Path(args.json).write_text(json.dumps({"board": board.name, "budget": args.budget, "runs": rows}, indent=1))


if __name__ == "__main__":
    main()
