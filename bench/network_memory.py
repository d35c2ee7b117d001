"""The network kernel's buffers against each board's memory (``cost_models/fpga_network_memory.py``): each built-in
network's tensors (one compute unit, 1 to 4 weight ports) on every board, where they need HBM spans or do not fit;
then a few explored designs' buffers, the tensors' sizes against their layout's (``design_footprint``).

    .venv/bin/python bench/network_memory.py --json bench/data/network_memory.json

Model figures, the same on any machine; nothing runs on an FPGA.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models.fpga_network_design import explore_network  # noqa: E402
from cost_models.fpga_network_memory import overflow, design_footprint, design_span, footprint, weight_span  # noqa: E402
from cost_models.fpga_network_ports import WEIGHT_PORTS  # noqa: E402
from hetero_dse.hardware.board import load_board  # noqa: E402
from hetero_dse.model.capture import capture  # noqa: E402
from hetero_dse.model.layer_shape import shape_of  # noqa: E402
from hetero_dse.model.zoo import build  # noqa: E402
from hetero_dse.units import fmt_bytes  # noqa: E402

BOARDS = ("vu9p", "u200", "u250", "u280", "zcu102", "zcu104", "kv260", "pynq-z2")
DESIGNS = (("yolo_v1", "u280", "float32"), ("resnet18", "vu9p", "int8"), ("vgg16", "vu9p", "float32"))


def shapes(net: str) -> list:
    model, example = build(net)
    graph = capture(model, example, net, profile=False)
    return [(shape_of(op, from_host=i == 0 and op.name == "conv2d"), layer.count)
            for i, (op, layer) in enumerate(zip(graph.operators(), graph.layers, strict=True))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default="resnet18,mobilenet_v2,yolo_v1,vgg16")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    layers = {net: shapes(net) for net in args.nets.split(",")}
    rows, designs = [], []
    for net, net_layers in layers.items():
        for dtype in ("float32", "int8"):
            f = footprint(net_layers, dtype)
            notes = []
            for name in BOARDS:
                board = load_board(name)
                fits = [q for q in WEIGHT_PORTS if overflow(f, board, dtype, q, 1) is None]
                spans = {q: weight_span(f, board.memory, q) for q in fits}
                if not fits:
                    notes.append(f"{name}: does not fit")
                elif fits != list(WEIGHT_PORTS):
                    notes.append(f"{name}: {min(fits)}+ ports")
                if any(s > 1 for s in spans.values()):
                    notes.append(f"{name}: spans " + ", ".join(f"{q} port{'s' if q > 1 else ''} x{s}"
                                                              for q, s in spans.items() if s > 1))
            rows.append({"network": net, "dtype": dtype, "weights": f.weights, "arena": f.arena, "notes": notes})
            print(f"| {net} | {dtype} | {fmt_bytes(f.weights)} | {fmt_bytes(f.arena)} | "
                  f"{'; '.join(notes) or 'fits every board'} |", flush=True)
    for net, board, dtype in DESIGNS:
        if net not in layers:
            continue
        d = explore_network(layers[net], load_board(board), dtype)
        f, raw = design_footprint(d), footprint(layers[net], dtype)
        designs.append({"network": net, "board": board, "dtype": dtype, "latency_s": d.latency_s,
                        "weight_ports": d.w_ports, "span": design_span(d), "port_bytes": f.port_bytes(d.w_ports),
                        "tensor_port_bytes": raw.port_bytes(d.w_ports), "arena": f.arena, "tensor_arena": raw.arena})
        r = designs[-1]
        print(f"| {net} {dtype} {board} ({1e3 * d.latency_s:.2f} ms) | {d.w_ports}, span {r['span']} | "
              f"{fmt_bytes(r['tensor_port_bytes'])} -> {fmt_bytes(r['port_bytes'])} | "
              f"{fmt_bytes(r['tensor_arena'])} -> {fmt_bytes(r['arena'])} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows, "designs": designs},
                                        indent=1) + "\n")


if __name__ == "__main__":
    main()
