"""FPGA model throughput and the YOLO-v1 sweep on a board (issue 3's benchmark; not part of the tests).

    python bench/fpga_model.py                  # both parts, vu9p
    python bench/fpga_model.py --only throughput

Throughput: designs scored per second by the compiled kernel the search uses (chunks of 8,192 random valid
points of each YOLO-v1 layer), against the numpy model on the same chunks and the kernel called one design
at a time, in the same run (the baselines).
Sweep: `explore` with its defaults on C1..C15, timed end to end (analysis, space, search, describe), and
per layer the best design's GFLOPS, % of the DSP roofline, bounding stage and DDR traffic over the I/O
lower bound.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from cost_models.fpga import FpgaModel
from hetero_dse.analysis import analyze
from hetero_dse.hardware.board import load_board
from hetero_dse.ops import get_builtin
from hetero_dse.space.fpga import FpgaSpace
from hetero_dse.targets.flow import explore
from hetero_dse.targets.fpga import FpgaTarget

LAYERS = [f"C{i}" for i in range(1, 16)]


def throughput(board, points: int = 1 << 16, chunk: int = 1 << 13, scalar: int = 300) -> dict:
    """Designs/s of the compiled kernel on chunks (the search's path) and called with one design at a time
    (the baseline, in the same run, on the same designs). The numpy twin of the kernel is gone: the kernel
    is the one implementation (issue 17)."""
    totals = {"kernel": 0.0, "one_at_a_time": 0.0}
    counts = {"kernel": 0, "one_at_a_time": 0}
    for layer in LAYERS:
        op = get_builtin("conv2d").instantiate(shape=f"yolo:{layer}")
        space = FpgaSpace(analyze(op), board, ["float32"], [board.default_clock_mhz])
        model = FpgaModel(space.tables)
        rows = space.sample(points, np.random.default_rng(0))
        model.evaluate(rows[:chunk])  # compile or load the kernel, warm caches
        for name, fn in (("kernel", model.evaluate),):
            t0 = time.perf_counter()
            for start in range(0, len(rows), chunk):
                fn(rows[start:start + chunk])
            totals[name] += time.perf_counter() - t0
            counts[name] += len(rows)
        t0 = time.perf_counter()
        for row in rows[:scalar]:
            model.evaluate(row[None, :])
        totals["one_at_a_time"] += time.perf_counter() - t0
        counts["one_at_a_time"] += scalar
    rate = {k: counts[k] / totals[k] for k in totals}
    return {"kernel_points_per_s": rate["kernel"], "one_at_a_time_points_per_s": rate["one_at_a_time"],
            "kernel_over_one_at_a_time": rate["kernel"] / rate["one_at_a_time"], "points": counts["kernel"]}


def sweep(board) -> dict:
    rows = []
    t_all = time.perf_counter()
    for layer in LAYERS:
        op = get_builtin("conv2d").instantiate(shape=f"yolo:{layer}")
        t0 = time.perf_counter()
        e = explore(op, FpgaTarget(board))
        wall = time.perf_counter() - t0
        _, d = e.best_design
        rows.append({"layer": layer, "explorer": e.result.explorer, "evaluations": e.result.evaluations,
                     "wall_s": wall, "gflops": d["gops"], "roofline": d["roofline"], "bound": d["bound"],
                     "pe": d["pe"], "ii": d["ii"], "dsp_util": d["utilisation"]["dsp"],
                     "bram_util": d["utilisation"]["bram18k"], "traffic_over_bound": d["traffic_over_bound"],
                     "io_bound_kind": d["io_bound_kind"],
                     "clock_mhz": (d.get("clock") or {}).get("achieved_mhz", float(board.default_clock_mhz))})
    return {"layers": rows, "total_wall_s": time.perf_counter() - t_all}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="vu9p")
    parser.add_argument("--only", choices=["throughput", "sweep"])
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    board = load_board(args.board)
    result: dict = {"machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}"}
    if args.only in (None, "throughput"):
        t = result["throughput"] = throughput(board)
        print(f"model: {t['kernel_points_per_s']:,.0f} designs/s (compiled kernel, chunks of 8,192), "
              f"{t['one_at_a_time_points_per_s']:,.0f} (kernel, one design per call; chunks "
              f"{t['kernel_over_one_at_a_time']:.0f}x faster); {t['points']:,} designs")
    if args.only in (None, "sweep"):
        s = result["sweep"] = sweep(board)
        print(f"\nYOLO-v1 C1-C15 on {board.name}: {s['total_wall_s']:.1f} s in all\n")
        print("| layer | search | designs | wall s | GFLOPS | % DSP roofline | bound | PE | II | DSP | BRAM18K "
              "| traffic / I/O bound | clock MHz |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in s["layers"]:
            print(f"| {r['layer']} | {r['explorer']} | {r['evaluations']:,} | {r['wall_s']:.2f} | {r['gflops']:.1f} | "
                  f"{100 * r['roofline']:.1f} | {r['bound']} | {r['pe']} | {r['ii']} | {100 * r['dsp_util']:.0f} % | "
                  f"{100 * r['bram_util']:.0f} % | {r['traffic_over_bound']:.2f} | {r['clock_mhz']:.0f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
