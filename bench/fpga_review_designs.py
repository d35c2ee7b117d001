"""The second HLS review's layers explored with explore's defaults: each best design's figures (issue 35).

    python bench/fpga_review_designs.py [--json out.json]
    PYTHONPATH=<another tree> python bench/fpga_review_designs.py    # the same on an earlier tree

YOLO-v1 C8 and C1 on vu9p, an int8 GEMM 1024^3 on u280, a depthwise layer of 144 channels 56x56 on zcu104,
and ResNet-18's L12 and L13 with their bias, residual and ReLU on vu9p: per layer the best design's latency,
GFLOPS (GOPS for int8), % of the DSP roofline, bounding process, PE, II, DSPs and, where the tree reports
them, the clock the model expects and the DDR bursts of its ports. Only figures every tree's design record
has are required, so an earlier commit runs it too.
"""

from __future__ import annotations

import argparse
import json
import time

from hetero_dse.epilogue import fuse
from hetero_dse.hardware.board import load_board
from hetero_dse.ops import get_builtin
from hetero_dse.targets.flow import explore
from hetero_dse.targets.fpga import FpgaTarget

LAYERS = {
    "YOLO-v1 C8 (vu9p)": ("conv2d", {"C": 256, "H": 28, "W": 28, "K": 512, "kernel": 3, "padding": 1}, None, "vu9p"),
    "YOLO-v1 C1 (vu9p)": ("conv2d", {"C": 3, "H": 448, "W": 448, "K": 64, "kernel": 7, "stride": 2, "padding": 3},
                          None, "vu9p"),
    "int8 GEMM 1024^3 (u280)": ("gemm", {"M": 1024, "N": 1024, "K": 1024, "dtype": "int8"}, None, "u280"),
    "depthwise 144x56x56 (zcu104)": ("depthwise_conv2d", {"C": 144, "H": 56, "W": 56, "kernel": 3, "padding": 1},
                                     None, "zcu104"),
    "ResNet-18 L12 (vu9p)": ("conv2d", {"C": 256, "H": 14, "W": 14, "K": 512, "kernel": 3, "stride": 2,
                                        "padding": 1}, ["bias", "relu"], "vu9p"),
    "ResNet-18 L13 (vu9p)": ("conv2d", {"C": 512, "H": 7, "W": 7, "K": 512, "kernel": 3, "padding": 1},
                             ["bias", "add", "relu"], "vu9p"),
}


def review_operator(op_name: str, params: dict, steps: list[str] | None):
    """A layer of :data:`LAYERS` as its operator, its epilogue fused (the bias indexed by the convolution's
    output channels, dimension 1)."""
    op = get_builtin(op_name).instantiate(params)
    return fuse(op, steps, tuple(range(1, len(op.output.shape) - 2))) if steps else op


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    rows = []
    print("| layer | latency | GOPS | % DSP roofline | bound | PE | II | DSP | clock MHz | shortest DDR run (words) "
          "| wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, (op_name, params, steps, board_name) in LAYERS.items():
        op = review_operator(op_name, params, steps)
        t0 = time.perf_counter()
        e = explore(op, FpgaTarget(load_board(board_name)))
        wall = time.perf_counter() - t0
        _, d = e.best_design
        clock = (d.get("clock") or {}).get("achieved_mhz")
        runs = [b["run_words"] for b in d["buffers"] if "run_words" in b]
        row = {"layer": name, "latency_s": d["latency_s"], "gops": d["gops"], "roofline": d["roofline"],
               "bound": d["bound"], "pe": d["pe"], "ii": d["ii"], "dsp": d["resources"]["dsp"], "clock_mhz": clock,
               "shortest_run_words": min(runs) if runs else None, "wall_s": wall}
        rows.append(row)
        print(f"| {name} | {d['latency_s'] * 1e3:.3f} ms | {d['gops']:.1f} | {100 * d['roofline']:.1f} | "
              f"{d['bound']} | {d['pe']} | {d['ii']} | {d['resources']['dsp']:,.0f} | "
              f"{'—' if clock is None else f'{clock:.0f}'} | {'—' if not runs else min(runs)} | {wall:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
