"""History-based tuners (issue 6, seed 002): with a history of YOLO-v1 layers, tune pruned layers it has never
seen (channel counts of a pruned network, primes included). Measurements each method needs to come within
95 % of the best any of them found:

    python bench/history_tuners.py fpga --seeds 2 --budget 500 --json bench_history_fpga.json
    python bench/history_tuners.py cpu --trials 32 --json bench_history_cpu.json

Methods: ``gga`` and ``tl`` start from the history; ``q`` (the Q-method) and ``tl-scratch`` (transfer
learning with an empty history) tune from scratch; on the FPGA model ``sa`` too. A run that never gets
within 95 % counts as its whole budget (reported as missed, so ratios against it are lower bounds).

* fpga: the analytical model on vu9p is the evaluator ("measurement" = one distinct design scored). The
  history holds the 64 best designs of a 5,000-design simulated annealing of each YOLO-v1 layer C2–C15.
* cpu: real measurements on this CPU. The history holds a Q-method run of ``--trials`` on each of
  ``--history`` layers; each method then tunes each pruned layer from its own copy of that database, so no
  method sees another's measurements.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models.fpga import FpgaModel  # noqa: E402
from hetero_dse.analysis import analyze  # noqa: E402
from hetero_dse.hardware.board import load_board  # noqa: E402
from hetero_dse.explore import make_explorer  # noqa: E402
from hetero_dse.targets.base import Search  # noqa: E402
from hetero_dse.targets.cpu import CpuTarget  # noqa: E402
from hetero_dse.targets.flow import explore  # noqa: E402
from hetero_dse.targets.fpga import fpga_workload  # noqa: E402
from hetero_dse.targets.fpga_search import search  # noqa: E402
from hetero_dse.history import Record  # noqa: E402
from hetero_dse.history.match import MATCH_THRESHOLD, Prior  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402
from hetero_dse.space.fpga import FpgaSpace  # noqa: E402

HISTORY_LAYERS = [f"C{i}" for i in range(2, 16)]
#: pruned YOLO-v1 layers: (YOLO layer whose H, W, kernel and stride it keeps, C, K); primes marked *
PRUNED = {
    "P2": ("C2", 53, 131),     # * *
    "P4": ("C4", 97, 181),     # * *  (the CPU run's layers: P4, P8, P13)
    "P6": ("C6", 200, 383),    # K*
    "P7": ("C7", 389, 173),    # * *
    "P8": ("C8", 179, 359),    # * *
    "P10": ("C10", 384, 768),
    "P13": ("C13", 700, 613),  # K*
    "P15": ("C15", 768, 640),
}
FROM_HISTORY = ("gga", "tl")
SCRATCH = ("q", "tl-scratch")


def yolo(layer: str):
    return get_builtin("conv2d").instantiate(shape=f"yolo:{layer}")


def pruned(name: str):
    base, c, k = PRUNED[name]
    return get_builtin("conv2d").instantiate({**dict(yolo(base).params), "C": c, "K": k})


def reach(curve: list[tuple[int, float]], target: float, budget: int) -> tuple[int, bool]:
    """(measurements until the best so far is at most ``target`` seconds, whether it ever was)."""
    hit = next((n for n, best in curve if best <= target), None)
    return (hit, True) if hit is not None else (budget, False)


class MeasuredModel:
    """The FPGA model standing in for a board: each design it scores is one measurement, taken one after
    another in the order the search asks, so a batch whose first design is good enough counts 1, not the
    batch (the CPU run measures one candidate at a time and counts the same way)."""

    def __init__(self, model: FpgaModel) -> None:
        self.model = model
        self.curve: list[tuple[int, float]] = []  # (measurements, fastest latency so far)

    def evaluate(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        scores = self.model.evaluate(rows)
        best = self.curve[-1][1] if self.curve else math.inf
        for latency in scores["latency_s"]:
            best = min(best, float(latency))
            self.curve.append((len(self.curve) + 1, best))
        return scores


def geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


# --------------------------------------------------------------------------------------------- FPGA
def fpga_space(op, board):
    space = FpgaSpace(analyze(op), board, ["float32"], [board.default_clock_mhz])
    return space, FpgaModel(space.tables, traffic_weight=0.01)


def fpga_history(board, layers: list[str]) -> tuple:
    related = []
    for layer in layers:
        op = yolo(layer)
        space, model = fpga_space(op, board)
        found = search(space, model, make_explorer("sa", space, 0, starts=512), budget=5000, top_k=64)
        latency = model.evaluate(found.top_rows)["latency_s"]
        workload = fpga_workload(op, space.analysis, board)
        records = tuple(Record(space.decode(r), float(s)) for r, s in zip(found.top_rows, latency, strict=True))
        related.append((workload, records))
    return tuple(related)


def run_fpga(args) -> dict:
    board = load_board("vu9p")
    t0 = time.perf_counter()
    related = fpga_history(board, HISTORY_LAYERS)
    print(f"history: {sum(len(r) for _, r in related)} designs of {len(related)} layers in "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    methods = FROM_HISTORY + SCRATCH + ("sa",)
    rows = []
    for name in args.layers.split(","):
        op = pruned(name)
        space, model = fpga_space(op, board)
        prior = Prior(space.loop_extents, related)
        curves = {}
        for method in methods:
            for seed in range(args.seeds):
                explorer_name = method.removesuffix("-scratch")
                explorer = make_explorer(explorer_name, space, seed, prior=prior if method in FROM_HISTORY else None,
                                         starts=8 if method in ("q", "sa") else None)
                measured = MeasuredModel(model)
                t = time.perf_counter()
                search(space, measured, explorer, budget=args.budget, top_k=1)
                curves[(method, seed)] = (measured.curve, time.perf_counter() - t)
        best = min(c[-1][1] for c, _ in curves.values())
        row = {"layer": name, "C": op.params["C"], "K": op.params["K"], "match": prior.match(),
               "best_latency_s": best, "methods": {}}
        for method in methods:
            hits = [reach(curves[(method, s)][0], best / 0.95, args.budget) for s in range(args.seeds)]
            row["methods"][method] = {
                "measurements": [n for n, _ in hits], "missed": sum(not ok for _, ok in hits),
                "median": float(np.median([n for n, _ in hits])),
                "final_vs_best": float(np.median([best / curves[(method, s)][0][-1][1] for s in range(args.seeds)])),
                "wall_s": float(np.median([curves[(method, s)][1] for s in range(args.seeds)]))}
        rows.append(row)
        print(f"{name} (C={row['C']}, K={row['K']}, match {row['match']:.2f}): " + ", ".join(
            f"{m} {v['median']:.0f}" + (f" ({v['missed']} missed)" if v["missed"] else "")
            for m, v in row["methods"].items()), flush=True)
    return summarise(rows, methods, args.budget)


def summarise(rows: list[dict], methods, budget: int) -> dict:
    for r in rows:  # what --explorer auto runs: the guided GA from the match threshold, transfer learning below
        r["methods"]["auto"] = r["methods"]["gga" if r["match"] >= MATCH_THRESHOLD else "tl"]
    methods = (*methods, "auto")
    summary = {m: geomean([max(r["methods"][m]["median"], 1) for r in rows]) for m in methods}
    ratios = {f"{s}/{h}": summary[s] / summary[h] for h in ("gga", "auto") for s in methods if s not in ("gga", "auto")}
    print(json.dumps({"geomean_measurements": summary, "ratios": ratios}, indent=1))
    return {"budget": budget, "rows": rows, "geomean_measurements": summary, "ratios": ratios}


# ---------------------------------------------------------------------------------------------- CPU
def run_cpu(args) -> dict:
    from gpu_cpu.schedule import host_target
    from hetero_dse.targets.tuned import tvm_workload
    from hetero_dse.history import HistoryDB

    work = Path(tempfile.mkdtemp(prefix="hetero_dse_bench_"))
    base = work / "history.sqlite"
    db = HistoryDB(str(base))
    t0 = time.perf_counter()
    for layer in args.history.split(","):
        run = explore(yolo(layer), CpuTarget(trials=args.trials, algorithm="direct"), "q", Search(seed=args.seed),
                      history=db)
        best = run.tune.best
        print(f"history {layer}: {len(run.tune.trials)} trials, best {run.gflops(best.result.seconds):.1f} GFLOPS",
              flush=True)
    db.close()
    print(f"history built in {time.perf_counter() - t0:.0f} s", flush=True)
    methods = FROM_HISTORY + SCRATCH
    rows = []
    for name in args.layers.split(","):
        op = pruned(name)
        analysis = analyze(op)
        flops = analysis.flops
        curves, finals = {}, {}
        for method in methods:
            copy = work / f"{name}-{method}.sqlite"
            shutil.copy(base, copy)
            db = HistoryDB(str(copy))
            explorer = method.removesuffix("-scratch")
            curve: list[tuple[int, float]] = []
            run = explore(op, CpuTarget(trials=args.trials, algorithm="direct"), explorer, Search(seed=args.seed),
                          history=db if method in FROM_HISTORY else None,
                          progress=lambda n, best, curve=curve: curve.append((n, best or math.inf)))
            db.close()
            assert run.tune.answered == 0, "a pruned layer must not be in the history"
            curves[method] = curve
            finals[method] = {"gflops": run.gflops(run.tune.best.result.seconds) if run.tune.best else None,
                              "wall_s": run.tune.wall_s, "explorer": run.tune.explorer}
        best = min(c[-1][1] for c in curves.values())
        history = HistoryDB(str(base))
        match = Prior.load(history, tvm_workload(op, host_target(), analysis)).match()
        history.close()
        row = {"layer": name, "C": op.params["C"], "K": op.params["K"], "match": match, "flops": flops,
               "best_gflops": flops / best / 1e9, "methods": {}}
        for method in methods:
            n, ok = reach(curves[method], best / 0.95, args.trials)
            row["methods"][method] = {"median": n, "missed": int(not ok), **finals[method],
                                      "curve_gflops": [flops / s / 1e9 for _, s in curves[method]]}
        rows.append(row)
        print(f"{name} (C={row['C']}, K={row['K']}, match {match:.2f}): best {row['best_gflops']:.1f} GFLOPS; "
              + ", ".join(
            f"{m} {v['median']}{' (missed)' if v['missed'] else ''} → {v['gflops']:.1f}"
            for m, v in row["methods"].items()), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return {"target": host_target(), **summarise(rows, methods, args.trials)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="where", required=True)
    fpga = sub.add_parser("fpga")
    fpga.add_argument("--layers", default=",".join(PRUNED))
    fpga.add_argument("--seeds", type=int, default=2)
    fpga.add_argument("--budget", type=int, default=500)
    cpu = sub.add_parser("cpu")
    cpu.add_argument("--history", default="C4,C8,C13")
    cpu.add_argument("--layers", default="P4,P8,P13")
    cpu.add_argument("--trials", type=int, default=32)
    cpu.add_argument("--seed", type=int, default=0)
    for p in (fpga, cpu):
        p.add_argument("--json", type=Path)
    args = parser.parse_args()
    out = run_fpga(args) if args.where == "fpga" else run_cpu(args)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
