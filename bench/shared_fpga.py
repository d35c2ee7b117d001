"""One FPGA accelerator for a whole network (issue 38): the shared network kernel `explore --model` designs and
writes, for the built-in networks on the boards and data types the issue names, against published anchors.

    python bench/shared_fpga.py --nets resnet18,mobilenet_v2,yolo_v1 --boards vu9p,zcu102 --dtypes float32,int8 \\
        --json bench/data/shared_fpga.json

Per network, board and data type: the engines chosen (``cost_models/fpga_network_design.py``), the network's
latency at batch 1 by the model of the generated kernel (``cost_models/fpga_network.py``, whose trip counts the
C-simulation checks), frames a second, GOPS over the network's mapped layers (two operations a multiply-add, the
unpadded layers'), GOPS per DSP used, and the share of the DSP roofline (every usable DSP in a multiply-add a
cycle at the target clock, as many DSPs a multiply-add as the data type's cores take). ``--csim`` also writes
each design's project (every distinct layer on random data) and C-simulates it: the verdict and the trip-count
check go into the row. Beside it, the throughput design at batch > 1: as many compute units as raise the images
a second (``explore_throughput``), each an image (with ``--csim`` its kernel C-simulated too), and their ceiling:
as many units, each its share of the device but the board's memory to itself. The GOPS of the convolutions alone
(the layers of more than one output pixel) are beside the network's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models.fpga_costs import dsp_roofline_ops  # noqa: E402
from cost_models.fpga_network_design import explore_network  # noqa: E402
from cost_models.fpga_network_ports import WEIGHT_PORTS  # noqa: E402
from cost_models.fpga_network_units import explore_throughput  # noqa: E402
from hetero_dse.errors import HeteroDSEError  # noqa: E402
from hetero_dse.hardware.board import load_board  # noqa: E402
from hetero_dse.model.capture import capture  # noqa: E402
from hetero_dse.model.layer_shape import shape_of  # noqa: E402
from hetero_dse.model.zoo import build  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default="resnet18,mobilenet_v2,yolo_v1")
    parser.add_argument("--boards", default="vu9p,zcu102")
    parser.add_argument("--dtypes", default="float32,int8")
    parser.add_argument("--csim", action="store_true", help="write each project and C-simulate it")
    parser.add_argument("--csim-gib", type=float, help="the blocks a C-simulation may hold at once, GiB (the "
                        "tool's limit where not given; this machine's memory past it)")
    parser.add_argument("--weight-ports", default=",".join(map(str, WEIGHT_PORTS)),
                        help="the weights' ports a design may read at once")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    ports = tuple(int(v) for v in args.weight_ports.split(","))
    if args.csim_gib:
        import hetero_dse.hls.network_project as network_project

        network_project.MAX_CSIM_BYTES = int(args.csim_gib * 2**30)
    for net in args.nets.split(","):
        model, example = build(net)
        graph = capture(model, example, net, profile=False)
        ops = graph.operators()
        for board_name in args.boards.split(","):
            board = load_board(board_name)
            for dtype in args.dtypes.split(","):
                start = time.perf_counter()
                try:
                    shapes = [(shape_of(op, from_host=i == 0 and op.name == "conv2d"), layer.count)
                              for i, (op, layer) in enumerate(zip(ops, graph.layers, strict=True))]
                    design = explore_network(shapes, board, dtype, weight_ports=ports)
                except HeteroDSEError as exc:  # a network the data type or the board cannot take: said, not a row
                    print(f"| {net} | {board_name} | {dtype} | none: {exc} |", flush=True)
                    rows.append({"net": net, "board": board_name, "dtype": dtype, "why": str(exc)})
                    continue
                wall = time.perf_counter() - start
                peak = dsp_roofline_ops(board.cap("dsp"), dtype, design.clock_mhz)
                gops = 2 * design.macs / design.latency_s / 1e9
                row = {"net": net, "board": board_name, "dtype": dtype, "weight_ports": design.w_ports,
                       "word": design.word, "arena_ports": design.arena_ports, "latency_s": design.latency_s,
                       "fps": 1.0 / design.latency_s, "gops": gops, "dsp": design.resources["dsp"],
                       "gops_per_dsp": gops / design.resources["dsp"], "dsp_roofline": gops * 1e9 / peak,
                       "achieved_mhz": design.achieved_mhz, "engines": design.to_json()["engines"],
                       "utilisation": design.utilisation, "wall_s": round(wall, 1)}
                # the convolutions alone (layers of more than one output pixel: not the linear ones, weight-bound at
                # batch 1), as accelerator papers often count
                conv = [p for p in design.layers if p.layer.OH * p.layer.OW > 1]
                conv_s = sum(p.count * p.cycles for p in conv) / (design.achieved_mhz * 1e6)
                row["conv_gops"] = 2 * sum(p.count * p.shape.macs for p in conv) / conv_s / 1e9
                units = explore_throughput(shapes, board, dtype, weight_ports=ports)
                n = units.compute_units
                row["throughput"] = {"compute_units": n, "fps": n / units.latency_s, "dsp": units.resources["dsp"]}
                if n > 1:  # the units' ceiling: each its share of the device, but every memory channel to itself
                    alone = explore_network(shapes, replace(board, usable={k: v / n for k, v in board.usable.items()}),
                                            dtype, weight_ports=ports)
                    row["throughput"]["ceiling_fps"] = n / alone.latency_s
                if args.csim:
                    row["csim"] = _csim(design, ops)
                    if n > 1:  # the units' kernel is another (smaller) kernel: checked too
                        row["throughput"]["csim"] = _csim(units, ops)
                rows.append(row)
                engines = " + ".join(f"{e['kind']} " + "×".join(str(v) for v in e["lanes"].values())
                                     + (f" ({e['taps']}×{e.get('tap_rows', 1)} taps)" if e.get("tap_rows", 1) > 1
                                        else f" ({e['taps']} taps)" if e.get("taps", 1) > 1 else "")
                                     for e in row["engines"])
                if design.w_ports > 1:
                    engines += f", weights on {design.w_ports} ports"
                if design.arena_ports > 1:
                    engines += f", a word of {design.word} over {design.arena_ports} arena ports"
                print(f"| {net} | {board_name} | {dtype} | {engines} | {1e3 * row['latency_s']:.2f} ms | "
                      f"{row['fps']:.0f} | {gops:.1f} | {row['gops_per_dsp']:.3f} | "
                      f"{100 * row['dsp_roofline']:.0f} % | "
                      f"{100 * design.utilisation['dsp']:.0f} % / {100 * design.utilisation['bram18k']:.0f} % | "
                      f"{design.achieved_mhz:.0f} | {row['conv_gops']:.1f} | {n} × → {row['throughput']['fps']:.0f} fps"
                      + (f" (ceiling {row['throughput']['ceiling_fps']:.0f})" if n > 1 else "") + " | "
                      f"{wall:.1f} s |" + (f" {row['csim']} |" if args.csim else "")
                      + (f" units: {row['throughput']['csim']} |" if "csim" in row["throughput"] else ""),
                      flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


def _csim(design, ops) -> str:
    from hetero_dse.hls.csim import csim
    from hetero_dse.hls.network_lint import lint_network
    from hetero_dse.hls.network_project import check_trips, write_network_project
    from hetero_dse.hls.network_run import random_run

    from hetero_dse.errors import HeteroDSEError

    with tempfile.TemporaryDirectory() as tmp:
        try:
            project = write_network_project(Path(tmp) / "hls", design, random_run(design, ops))
            result = csim(project)
        except HeteroDSEError as exc:
            return f"csim not run: {exc}"
        trips = check_trips(project, result.output)
        lint = lint_network(project)
        return (f"csim {'pass' if result.passed else 'FAIL'} ({result.mismatches} of {result.elements} off), "
                f"trips {'= model' if not trips else 'DIFFER'}, lint {'clean' if lint.ok else 'FINDINGS'}")


if __name__ == "__main__":
    main()
