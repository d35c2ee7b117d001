"""YOLO-v1 conv layers on this CPU: our measured search vs torch (oneDNN) vs TVM MetaSchedule at the same
trial budget, all in one run so the ratios share the machine's state.

    .venv/bin/python bench/cpu_yolo.py --layers C2,C4,C8,C13,C15 --trials 32 --json bench_cpu.json

Each layer: ``explore_cpu`` (simulated annealing over the generated space, every trial built, checked and
timed in a worker), torch's conv2d timed on the same inputs, and MetaSchedule's ``tune_tir`` with
``max_trials_global`` = the same trials, its best module compiled and timed with the same ``time_evaluator``
settings. MetaSchedule needs ``psutil``, ``cloudpickle`` and ``tornado`` (``pip install -e .[bench]``).
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

from gpu_cpu.baselines import time_torch_cpu  # noqa: E402
from gpu_cpu.cpu_flow import explore_cpu  # noqa: E402
from gpu_cpu.schedule import host_target  # noqa: E402
from hetero_dse.analysis import analyze  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402


def metaschedule(op, trials: int) -> tuple[float, float]:
    """(seconds per run of MetaSchedule's best, tuning wall seconds) for ``op`` on this CPU."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    mod = tvm.IRModule({"main": op.prim_func()})
    target = tvm.target.Target(host_target())
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as work_dir:
        # the builder's worker pool takes ~70 s to answer its first build on this machine's TVM wheel: the
        # default 30 s timeout fails every candidate
        db = ms.tune_tir(mod, target, work_dir, max_trials_global=trials, num_trials_per_iter=min(trials, 32),
                         builder=ms.builder.LocalBuilder(timeout_sec=300))
        sch = ms.tir_integration.compile_tir(db, mod, target)
    wall = time.perf_counter() - start
    executable = tvm.compile(sch.mod, target=target)
    dev = tvm.cpu(0)
    inputs = op.random_inputs(0)
    args = [tvm.runtime.tensor(a, dev) for a in inputs]
    out = tvm.runtime.tensor(np.zeros([int(d) for d in op.output.shape], dtype="float32"), dev)
    executable(*args, out)
    np.testing.assert_allclose(out.numpy(), op.reference(inputs), rtol=1e-3, atol=1e-3)
    timer = executable.mod.time_evaluator(executable.mod.entry_name, dev, number=3, repeat=3)
    return float(np.median(timer(*args, out).results)), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="C2,C4,C8,C13,C15")
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-metaschedule", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    rows = []
    for layer in args.layers.split(","):
        op = get_builtin("conv2d").instantiate(shape=f"yolo:{layer}")
        flops = analyze(op).flops
        ours = explore_cpu(op, trials=args.trials, seed=args.seed)
        best = ours.tune.best
        torch_s = time_torch_cpu(op)
        ms_s, ms_wall = (None, None) if args.no_metaschedule else metaschedule(op, args.trials)
        row = {"layer": layer, "flops": flops, "trials": len(ours.tune.trials),
               "ours_gflops": flops / best.result.seconds / 1e9, "ours_wall_s": ours.tune.wall_s,
               "torch_gflops": flops / torch_s / 1e9,
               "ms_gflops": flops / ms_s / 1e9 if ms_s else None, "ms_wall_s": ms_wall,
               "best_knobs": best.point.to_json()}
        row["vs_torch"] = row["ours_gflops"] / row["torch_gflops"]
        row["vs_ms"] = row["ours_gflops"] / row["ms_gflops"] if ms_s else None
        rows.append(row)
        peer = f", MetaSchedule {row['ms_gflops']:.1f} in {ms_wall:.0f} s" if ms_s else ""
        print(f"{layer}: ours {row['ours_gflops']:.1f} GFLOPS in {row['ours_wall_s']:.0f} s, torch "
              f"{row['torch_gflops']:.1f}{peer}; {row['vs_torch']:.2f}x torch"
              + (f", {row['vs_ms']:.2f}x MetaSchedule" if ms_s else ""), flush=True)
        if args.json:
            args.json.write_text(json.dumps({"target": host_target(), "trials": args.trials, "rows": rows}, indent=2))

    def geomean(key: str) -> float | None:
        values = [r[key] for r in rows if r[key]]
        return math.exp(sum(map(math.log, values)) / len(values)) if values else None

    summary = {"geomean_vs_torch": geomean("vs_torch"), "geomean_vs_ms": geomean("vs_ms")}
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps({"target": host_target(), "trials": args.trials, "rows": rows, **summary},
                                        indent=2))


if __name__ == "__main__":
    main()
