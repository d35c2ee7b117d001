"""Which FPGA architecture serves a network's throughput (issue 38, item 5): the shared network kernel's compute
units (``explore_throughput``, code generated and checked) against a layer-pipelined design, one stage a layer
with its weights on chip (``cost_models/fpga_pipeline.py``, the model of ``hls_templates/pipeline/``).

    python bench/fpga_pipeline.py --nets resnet18,mobilenet_v2,yolo_v1 --boards vu9p,zcu102,u280,zcu104 \\
        --dtypes int8,float32 --json bench/data/fpga_pipeline.json

Per network, board and data type: the shared kernel's images a second at batch 1 and with its compute units at
batch > 1; the pipeline's images a second, its clock, its slowest stage, its DSP and BRAM use, or the sentence
saying why it does not fit. Every figure is the model's; nothing here ran on an FPGA.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cost_models.fpga_network_design import explore_network  # noqa: E402
from cost_models.fpga_network_units import explore_throughput  # noqa: E402
from cost_models.fpga_pipeline import explore_pipeline  # noqa: E402
from hetero_dse.errors import HeteroDSEError  # noqa: E402
from hetero_dse.hardware.board import load_board  # noqa: E402
from network_shapes import network_shapes  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default="resnet18,mobilenet_v2,yolo_v1")
    parser.add_argument("--boards", default="vu9p,zcu102,u280,zcu104")
    parser.add_argument("--dtypes", default="int8,float32")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    print("| network | board | type | shared kernel, batch 1 | compute units, batch > 1 | layer-pipelined "
          "(modelled) | its clock | slowest stage | DSP / BRAM | wins at batch > 1 | s |\n" + "|---" * 11 + "|")
    for net in args.nets.split(","):
        _, shapes = network_shapes(net)
        for board_name in args.boards.split(","):
            board = load_board(board_name)
            for dtype in args.dtypes.split(","):
                start = time.perf_counter()
                try:
                    shared = explore_network(shapes, board, dtype)
                    units = explore_throughput(shapes, board, dtype)
                except HeteroDSEError as exc:
                    rows.append({"net": net, "board": board_name, "dtype": dtype, "why": str(exc)})
                    print(f"| {net} | {board_name} | {dtype} | none: {exc} |", flush=True)
                    continue
                row = {"net": net, "board": board_name, "dtype": dtype, "shared_fps": 1 / shared.latency_s,
                       "units": units.compute_units, "units_fps": units.compute_units / units.latency_s}
                try:
                    p = explore_pipeline(shapes, board, dtype).to_json()
                    row["pipeline"] = {k: p[k] for k in ("fps", "latency_s", "gops", "achieved_mhz", "bottleneck",
                                                         "stages", "utilisation", "interval_cycles", "kernels")}
                    cut = f" ({len(p['kernels'])} kernels)" if p["kernels"] else ""
                    cells = (f"{p['fps']:.0f} fps{cut} | {p['achieved_mhz']:.0f} MHz | {p['bottleneck']} | "
                             f"{100 * p['utilisation']['dsp']:.0f} % / {100 * p['utilisation']['bram18k']:.0f} %")
                    wins = "pipeline" if p["fps"] > row["units_fps"] else "compute units"
                except HeteroDSEError as exc:
                    row["pipeline"] = {"why": str(exc)}
                    cells, wins = f"does not fit: {str(exc).split(': ', 1)[1].split(' (')[0]} | | |", "compute units"
                row["wall_s"] = round(time.perf_counter() - start, 1)
                rows.append(row)
                print(f"| {net} | {board_name} | {dtype} | {row['shared_fps']:.0f} fps | {units.compute_units} × → "
                      f"{row['units_fps']:.0f} fps | {cells} | {wins} | {row['wall_s']} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
