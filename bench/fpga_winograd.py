"""Winograd on the FPGA (issue 40, item 4): the network kernel's Winograd engine against its direct grid, by the
model of the generated code (``cost_models/fpga_network.py``; the C-simulation checks its trip counts).

    python bench/fpga_winograd.py --nets resnet18,yolo_v1 --boards vu9p,zcu102 --dtypes float32,int8 \\
        --json bench/data/fpga_winograd.json

Per layer: every distinct 3×3 stride-1 convolution of each network (its image's layer excepted: it stays on the
grid), a kernel for that layer alone, direct (``algorithm="direct"``) and Winograd (``"winograd"``): latency, GOPS
(two operations a multiply-add of direct convolution, whatever the algorithm), GOPS per DSP used, and the share of
the DSP roofline (every usable DSP in a multiply-add a cycle at the target clock), which Winograd may pass by the
multiplies it saves. Per network: the design ``explore --model`` makes (``auto``: the faster of a design with a
Winograd engine beside the grid and one without) against the direct one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cost_models.fpga_costs import dsp_roofline_ops  # noqa: E402
from cost_models.fpga_network import Tiles, network_trips  # noqa: E402
from cost_models.fpga_network_algorithm import winograd_tiles  # noqa: E402
from cost_models.fpga_network_design import explore_network  # noqa: E402
from hetero_dse.errors import HeteroDSEError  # noqa: E402
from hetero_dse.hardware.board import load_board  # noqa: E402
from network_shapes import network_shapes  # noqa: E402


def _floors(design) -> dict:
    """Two floors of the one layer on its engine, in the iterations the kernel runs (``network_trips``, the counts
    the C-simulation checks), for the layer as one tile whatever the buffers hold: its PE array's (every patch of
    the map, padded to whole patches) and its weight process's (each weight read once, a word from each port an
    iteration, the rows as the engine lays them: padded to whole iterations, or end to end). No tiling is faster
    than the larger of the two, even with every other cost overlapped."""
    p = design.layers[0]
    engine, layer = design.engines[p.layer.engine], p.layer
    side = engine.patch_side(layer)
    whole = Tiles(layer.K, layer.C, -(-layer.OH // side) * side, -(-layer.OW // side) * side)
    trips = network_trips(engine, layer, whole)
    hz = design.achieved_mhz * 1e6
    return {"pe_s": p.count * trips["compute"] / hz, "weights_s": p.count * trips["read_w"] / hz}


def _figures(design, board, dtype) -> dict:
    peak = dsp_roofline_ops(board.cap("dsp"), dtype, design.clock_mhz)
    gops = 2 * design.macs / design.latency_s / 1e9
    record = design.to_json()
    wino = next((e for e in record["engines"] if e["kind"] == "winograd"), None)
    # the Winograd layers' DDR traffic over seed 001's I/O lower bound (cost_models/fpga_network_io.py)
    io = [layer["io"]["traffic_over_bound"] for layer in record["layers"] if "io" in layer]
    return {"latency_s": design.latency_s, "gops": gops, "dsp": design.resources["dsp"],
            "lut": design.resources["lut"], "gops_per_dsp": gops / design.resources["dsp"],
            "dsp_roofline": gops * 1e9 / peak, "mhz": design.achieved_mhz,
            "engines": " + ".join(f"{e['kind']} " + "×".join(str(v) for v in e["lanes"].values())
                                  + (f" F({e['tile']})" if e.get("tile") else "") for e in record["engines"]),
            "winograd_layers": sum(p.layer.engine == "winograd" for p in design.layers),
            "error": wino["error"] if wino else None, "traffic_over_bound": io,
            **(_floors(design) if len(design.layers) == 1 else {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default="resnet18,yolo_v1")
    parser.add_argument("--boards", default="vu9p,zcu102")
    parser.add_argument("--dtypes", default="float32,int8")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for net in args.nets.split(","):
        _, shapes = network_shapes(net)
        for board_name in args.boards.split(","):
            board = load_board(board_name)
            for dtype in args.dtypes.split(","):
                for scope, layers in [("network", shapes)] + [(s.name, [(s, n)]) for s, n in shapes
                                                             if winograd_tiles(s, dtype)]:
                    row = {"net": net, "board": board_name, "dtype": dtype, "scope": scope}
                    start = time.perf_counter()
                    for algorithm in ("direct", "winograd" if scope != "network" else "auto"):
                        try:
                            row[algorithm] = _figures(explore_network(layers, board, dtype, algorithm=algorithm),
                                                      board, dtype)
                        except HeteroDSEError as exc:
                            row[algorithm] = {"why": str(exc)}
                    row["wall_s"] = round(time.perf_counter() - start, 1)
                    rows.append(row)
                    _print(row)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


def _print(row: dict) -> None:
    other = "winograd" if "winograd" in row else "auto"
    d, w = row["direct"], row[other]
    if "why" in d or "why" in w:
        print(f"| {row['net']} | {row['scope']} | {row['board']} | {row['dtype']} | "
              f"{d.get('why', '')} {w.get('why', '')} |", flush=True)
        return
    print(f"| {row['net']} | {row['scope']} | {row['board']} | {row['dtype']} | {d['engines']} | "
          f"{1e3 * d['latency_s']:.3f} ms | {d['gops']:.0f} | {d['gops_per_dsp']:.3f} | "
          f"{100 * d['dsp_roofline']:.0f} % | {w['engines']} ({w['winograd_layers']} on Winograd) | "
          f"{1e3 * w['latency_s']:.3f} ms | {w['gops']:.0f} | {w['gops_per_dsp']:.3f} | "
          f"{100 * w['dsp_roofline']:.0f} % | **{d['latency_s'] / w['latency_s']:.2f}×** | "
          f"{_span(w['traffic_over_bound'])} |{_ceiling(d, w)}", flush=True)


def _ceiling(direct: dict, winograd: dict) -> str:
    """`` PE 1.82× / weights 2.10× |``: direct's latency over each floor of the Winograd engine (``_floors``): the
    smaller is the most it could gain on the layer; nothing for a whole network."""
    if "pe_s" not in winograd:
        return ""
    return (f" PE {direct['latency_s'] / winograd['pe_s']:.2f}× / weights "
            f"{direct['latency_s'] / winograd['weights_s']:.2f}× |")


def _span(values: list[float]) -> str:
    """``1.52–3.10`` (the Winograd layers' traffic over the I/O bound), ``—`` where there is none."""
    if not values:
        return "—"
    return "–".join(f"{v:.2f}" for v in sorted({min(values), max(values)}))


if __name__ == "__main__":
    main()
