"""One FPGA accelerator for a whole network (issue 38), by the model: the design `explore --model` reports, for
the built-in networks on the boards and data types the issue names, against published anchors.

    python bench/shared_fpga.py --nets resnet18,mobilenet_v2,yolo_v1 --boards vu9p,zcu102 --dtypes float32,int8 \\
        --json bench/data/shared_fpga.json

Per network, board and data type: the engines chosen (``hetero_dse/targets/fpga_shared.py``), the network's
latency at batch 1, frames a second, GOPS over the network's mapped layers (two operations a multiply-add),
GOPS per DSP, and the share of the DSP roofline (every usable DSP a multiply-add a cycle at the target clock);
and the sum of the layers' own designs, each alone on the device, beside it. The model's figures: the shared
HLS kernel is not generated yet, and int8 is one DSP a multiply (no DSP48E2 packing yet).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models.fpga import FpgaModel  # noqa: E402
from hetero_dse.analysis import analyze  # noqa: E402
from hetero_dse.errors import HeteroDSEError  # noqa: E402
from hetero_dse.hardware.board import load_board  # noqa: E402
from hetero_dse.model.capture import capture  # noqa: E402
from hetero_dse.model.zoo import build  # noqa: E402
from hetero_dse.space.fpga import FpgaSpace  # noqa: E402
from hetero_dse.targets.fpga_shared import explore_shared  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default="resnet18,mobilenet_v2,yolo_v1")
    parser.add_argument("--boards", default="vu9p,zcu102")
    parser.add_argument("--dtypes", default="float32,int8")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for net in args.nets.split(","):
        model, example = build(net)
        graph = capture(model, example, net, profile=False)
        layers = list(zip(graph.operators(), (layer.count for layer in graph.layers), strict=True))
        flops = sum(analyze(op).flops * count for op, count in layers)
        for board_name in args.boards.split(","):
            board = load_board(board_name)
            for dtype in args.dtypes.split(","):
                start = time.perf_counter()
                try:
                    design = explore_shared(layers, board, dtype)
                except HeteroDSEError as exc:  # a network the data type or the board cannot take: said, not a row
                    print(f"| {net} | {board_name} | {dtype} | none: {exc} |", flush=True)
                    rows.append({"net": net, "board": board_name, "dtype": dtype, "why": str(exc)})
                    continue
                wall = time.perf_counter() - start
                first = layers[0][0].with_dtype(dtype)
                space = FpgaSpace(analyze(first), board, [dtype], [design.clock_mhz])
                peak = FpgaModel(space.tables).peak_ops(0, design.clock_mhz)
                gops = flops / design.latency_s / 1e9
                row = {"net": net, "board": board_name, "dtype": dtype, "latency_s": design.latency_s,
                       "fps": 1.0 / design.latency_s, "gops": gops, "dsp": design.resources["dsp"],
                       "gops_per_dsp": gops / design.resources["dsp"], "dsp_roofline": flops / design.latency_s / peak,
                       "engines": [e.to_json()["lanes"] | {"kind": e.kind.name} for e in design.engines],
                       "utilisation": design.utilisation, "wall_s": round(wall, 1)}
                rows.append(row)
                engines = " + ".join(f"{e['kind']} " + "×".join(str(v) for k, v in e.items() if k != "kind")
                                     for e in row["engines"])
                print(f"| {net} | {board_name} | {dtype} | {engines} | {1e3 * row['latency_s']:.2f} ms | "
                      f"{row['fps']:.0f} | {gops:.1f} | {row['gops_per_dsp']:.3f} | "
                      f"{100 * row['dsp_roofline']:.0f} % | "
                      f"{100 * design.utilisation['dsp']:.0f} % / {100 * design.utilisation['bram18k']:.0f} % | "
                      f"{wall:.0f} s |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
