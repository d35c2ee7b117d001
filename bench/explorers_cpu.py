"""Every explorer measured on this CPU at an equal budget (issue 41): best GFLOPS and measurements to 95 % of the
best any explorer found, per layer and seed, with wall time.

    .venv/bin/python bench/explorers_cpu.py --seeds 1,2,3 --trials 64 --json bench/data/explorers_cpu.json

The layers are convolutions of YOLO-v1 and ResNet-18 (``--layers NAME=C-K-HW-kernel-stride``), measured by TVM
on both cores as ``explore --target cpu`` measures them. The explorers that start from scratch (sa, q, p,
random, ga, ppo) run with no history. The history tuners (gga, tl) get what a user would have: the Q-method's
runs of the *other* layers in the same seed (leave one out, so no layer is answered from its own records).
Seeds are the outer loop and the JSON is written after every run; ``--resume`` keeps the seeds a stopped run
finished (a seed cut short is run again whole: its history tuners need its Q-method runs) and runs the rest. A
run that never comes within 95 % counts as the whole budget (reported as missed).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hetero_dse.history import HistoryDB  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402
from hetero_dse.targets.base import Search  # noqa: E402
from hetero_dse.targets.cpu import CpuTarget  # noqa: E402
from hetero_dse.targets.flow import explore  # noqa: E402

SCRATCH = ("sa", "q", "p", "random", "ga", "ppo")
FROM_HISTORY = ("gga", "tl")
LAYERS = "C8=256-512-28-3-1,C7=512-256-28-1-1,L7=128-128-28-3-1,L9=256-256-14-3-1"


def layer_op(spec: str):
    name, shape = spec.split("=")
    c, k, hw, kernel, stride = (int(v) for v in shape.split("-"))
    params = dict(batch=1, C=c, K=k, H=hw, W=hw, kernel=kernel, stride=stride, padding=kernel // 2)
    return name, get_builtin("conv2d").instantiate(params)


def search_once(op, explorer: str, seed: int, trials: int, history: HistoryDB | None) -> dict:
    curve: list[tuple[int, float]] = []  # (measurements, fastest seconds so far)
    t0 = time.perf_counter()
    run = explore(op, CpuTarget(trials=trials, algorithm="direct"), explorer, Search(seed=seed), history=history,
                  progress=lambda n, best: curve.append((n, best if best is not None else math.inf)))
    if history is not None:
        assert run.tune.answered == 0, "a layer must not be answered from its own records"
    return {"curve_s": curve, "wall_s": time.perf_counter() - t0, "explorer": run.tune.explorer}


def history_without(dbs: dict[str, Path], layer: str, into: Path) -> HistoryDB:
    """A history holding the Q-method's records of every layer but ``layer``."""
    db = HistoryDB(str(into))
    for other, path in dbs.items():
        if other != layer:
            source = HistoryDB(str(path))
            db.import_lines(source.export(), source=f"q:{other}")
            source.close()
    return db


def summarise(runs: list[dict], layers: dict, trials: int) -> dict:
    """Per layer: the best any run found, and per explorer the median measurements to 95 % of it (misses
    counted as the budget) and the median final GFLOPS; then the geometric means over layers."""
    out: dict = {"layers": {}, "geomean": {}}
    for name, op in layers.items():
        flops = 2.0 * op.params["C"] * op.params["K"] * op.params["kernel"] ** 2 * (
            op.params["H"] // op.params["stride"]) * (op.params["W"] // op.params["stride"])
        mine = [r for r in runs if r["layer"] == name]
        if not mine:
            continue
        best = min(r["curve_s"][-1][1] for r in mine)
        per = {}
        for explorer in SCRATCH + FROM_HISTORY:
            rs = [r for r in mine if r["explorer"] == explorer]
            if not rs:
                continue
            hits = [next((n for n, s in r["curve_s"] if s <= best / 0.95), None) for r in rs]
            per[explorer] = {"to_95": float(np.median([trials if h is None else h for h in hits])),
                             "missed": sum(h is None for h in hits), "seeds": len(rs),
                             "gflops": float(np.median([flops / r["curve_s"][-1][1] / 1e9 for r in rs])),
                             "wall_s": float(np.median([r["wall_s"] for r in rs]))}
        out["layers"][name] = {"best_gflops": flops / best / 1e9, "explorers": per}
    for explorer in SCRATCH + FROM_HISTORY:
        cells = [v["explorers"][explorer] for v in out["layers"].values() if explorer in v["explorers"]]
        if cells:
            out["geomean"][explorer] = {k: float(np.exp(np.mean(np.log([max(c[k], 1e-9) for c in cells]))))
                                        for k in ("to_95", "gflops", "wall_s")}
    return out


def table(summary: dict, trials: int) -> str:
    """One row an explorer: per layer the median measurements to 95 % (✗ a seed that missed) and GFLOPS, then
    the geometric means and the wall time."""
    names = list(summary["layers"])
    lines = ["| explorer | " + " | ".join(f"{n}: to 95 %, GFLOPS" for n in names)
             + " | geomean to 95 % | geomean GFLOPS | wall a run (geomean) |",
             "|---|" + "---|" * (len(names) + 3)]
    for explorer, mean in summary["geomean"].items():
        cells = []
        for n in names:
            v = summary["layers"][n]["explorers"].get(explorer)
            cells.append("—" if v is None else f"{v['to_95']:.0f}{' ✗' * v['missed']}, {v['gflops']:.0f}")
        lines.append(f"| {explorer} | " + " | ".join(cells)
                     + f" | {mean['to_95']:.1f} | {mean['gflops']:.0f} | {mean['wall_s']:.0f} s |")
    lines.append("| best found | " + " | ".join(f"{summary['layers'][n]['best_gflops']:.0f} GFLOPS" for n in names)
                 + f" | (budget {trials}) | | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default=LAYERS, help="NAME=C-K-HW-kernel-stride, comma-separated")
    parser.add_argument("--explorers", default=",".join(SCRATCH + FROM_HISTORY))
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--resume", action="store_true", help="keep the whole seeds already in --json")
    parser.add_argument("--table", action="store_true", help="print --json's figures as a markdown table, run nothing")
    args = parser.parse_args()
    from gpu_cpu.schedule import host_target

    layers = dict(layer_op(spec) for spec in args.layers.split(","))
    if args.table:
        data = json.loads(args.json.read_text())
        print(table(summarise(data["runs"], layers, data["trials"]), data["trials"]))
        return
    wanted = args.explorers.split(",")
    runs: list[dict] = []
    order = [e for e in SCRATCH if e in wanted] + [e for e in FROM_HISTORY if e in wanted]
    if any(e in FROM_HISTORY for e in order) and "q" not in order:
        order.insert(0, "q")  # the history tuners' history is the Q-method's runs
    if args.resume and args.json and args.json.is_file():
        kept = json.loads(args.json.read_text())["runs"]
        whole = {s for s in {r["seed"] for r in kept} if sum(r["seed"] == s for r in kept) == len(order) * len(layers)}
        runs = [r for r in kept if r["seed"] in whole]
        print(f"kept seeds {sorted(whole)} from {args.json}", flush=True)

    def save() -> None:
        if args.json:
            args.json.write_text(json.dumps({"target": host_target(), "trials": args.trials, "runs": runs,
                                             "summary": summarise(runs, layers, args.trials)}, indent=1) + "\n")

    with tempfile.TemporaryDirectory(prefix="hetero_dse_explorers_") as tmp:
        for seed in (int(s) for s in args.seeds.split(",")):
            if any(r["seed"] == seed for r in runs):
                continue
            q_dbs = {name: Path(tmp) / f"q-{seed}-{name}.sqlite" for name in layers}
            for explorer in order:
                for name, op in layers.items():
                    if explorer in FROM_HISTORY:
                        history = history_without(q_dbs, name, Path(tmp) / f"{explorer}-{seed}-{name}.sqlite")
                    else:
                        history = HistoryDB(str(q_dbs[name])) if explorer == "q" else None
                    run = search_once(op, explorer, seed, args.trials, history)
                    if history is not None:
                        history.close()
                    runs.append({"layer": name, "explorer": explorer, "seed": seed, **run})
                    print(f"seed {seed} {name} {explorer}: {run['curve_s'][-1][0]} trials, best "
                          f"{run['curve_s'][-1][1] * 1e3:.3f} ms, {run['wall_s']:.0f} s", flush=True)
                    save()
    summary = summarise(runs, layers, args.trials)
    for name, row in summary["layers"].items():
        print(f"{name}: best {row['best_gflops']:.1f} GFLOPS; " + ", ".join(
            f"{e} {v['to_95']:.0f}{'✗' * v['missed']} ({v['gflops']:.1f})" for e, v in row["explorers"].items()))
    print(json.dumps(summary["geomean"], indent=1))


if __name__ == "__main__":
    main()
