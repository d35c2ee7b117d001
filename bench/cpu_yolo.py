"""YOLO-v1 conv layers on this CPU: our measured search vs torch (oneDNN) vs TVM MetaSchedule at the same
trial budget, all in one run so the ratios share the machine's state.

    .venv/bin/python bench/cpu_yolo.py --layers C2,C4,C8,C13,C15 --trials 32 --explorers q,p --json bench_cpu.json

Each layer: the CPU target's one flow with each explorer named (the first is "ours" in the ratios; every trial built,
checked and timed in a worker, the best GFLOPS so far noted after each trial with its wall time), torch's
conv2d timed on the same inputs, and MetaSchedule's ``tune_tir`` with ``max_trials_global`` = the same
trials, its best module compiled and timed with the same ``time_evaluator`` settings. Then, per layer: the
trials the first explorer needed to reach 95 % and 100 % of each other explorer's final best, and the wall
time it needed to reach MetaSchedule's final best against MetaSchedule's own tuning time. MetaSchedule needs
``psutil``, ``cloudpickle`` and ``tornado`` (``pip install -e .[bench]``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hetero_dse.targets.base import Search  # noqa: E402
from hetero_dse.targets.cpu import CpuTarget  # noqa: E402
from hetero_dse.targets.flow import explore  # noqa: E402
from gpu_cpu.measure import time_torch_isolated  # noqa: E402
from gpu_cpu.schedule import host_target  # noqa: E402
from hetero_dse.analysis import analyze  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402

from yolo_common import curve_recorder, geomean, layer_row, metaschedule, parse_args  # noqa: E402


def main() -> None:
    args = parse_args(__doc__, explorers="q")

    explorers = args.explorers.split(",")
    rows = []
    for layer in args.layers.split(","):
        op = get_builtin("conv2d").instantiate(shape=f"yolo:{layer}")
        flops = analyze(op).flops
        curves, runs = {}, {}
        for name in explorers:
            curve, note = curve_recorder(flops)
            runs[name] = explore(op, CpuTarget(trials=args.trials, algorithm="direct"), name, Search(seed=args.seed),
                                 progress=note)
            curves[name] = curve
        torch_timed = time_torch_isolated(op, "builtin")
        torch_s = torch_timed.seconds if torch_timed is not None else None
        ms_s, ms_wall = (None, None) if args.no_metaschedule else metaschedule(op, args.trials, host_target())
        row = layer_row(layer, flops, explorers, runs, curves, torch_s, ms_s, ms_wall)
        rows.append(row)
        peer = f", MetaSchedule {row['ms_gflops']:.1f} in {ms_wall:.0f} s" if ms_s else ""
        others = "".join(f", {n} {row['final'][n]:.1f}" for n in explorers[1:])
        print(f"{layer}: {explorers[0]} {row['ours_gflops']:.1f} GFLOPS in {row['ours_wall_s']:.0f} s{others}, torch "
              f"{row['torch_gflops']:.1f}{peer}; {row['vs_torch']:.2f}x torch"
              + (f", {row['vs_ms']:.2f}x MetaSchedule" if ms_s else "")
              + "".join(f"; to {n}'s final: {row[f'trials_to_{n}']} trials (it took "
                        f"{row[f'{n}_trials_to_own_final']})" for n in explorers[1:])
              + (f"; to MetaSchedule's final: {row['time_to_ms_final_s']} s" if ms_s else ""), flush=True)
        if args.json:
            args.json.write_text(json.dumps({"target": host_target(), "trials": args.trials, "rows": rows}, indent=2))

    summary = {"geomean_vs_torch": geomean(r["vs_torch"] for r in rows),
               "geomean_vs_ms": geomean(r["vs_ms"] for r in rows)}
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps({"target": host_target(), "trials": args.trials, "rows": rows, **summary},
                                        indent=2))


if __name__ == "__main__":
    main()
