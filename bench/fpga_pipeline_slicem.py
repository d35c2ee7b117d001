"""How much of a layer pipeline's LUTs must be SLICEM LUTs (issue 38): shift-register FIFOs (SRL) and LUT RAM can
only use the LUTs of SLICEM slices, about half of an UltraScale+ part's, and the model counts LUTs as one pool. This
sums, for a traced network's pipeline as the explorer designs it, the LUTs of every memory the model keeps in LUTs:
each stage's weights and line buffer where they are LUT RAM, each of its FIFOs in shift registers or LUT RAM, and
each regroup's input FIFO (two words in shift registers), by the model's own functions (``fpga_pipeline_storage``).

    python bench/fpga_pipeline_slicem.py --cases mobilenet_v2:zcu102:int8,mobilenet_v2:vu9p:float32

Prints a row a case: the design's images a second, its LUTs, the memory LUTs by kind, and their share of the
part's LUTs (to set beside its SLICEM share) and of the usable LUTs. The model's figures; nothing was synthesised.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models.fpga_pipeline import explore_traced  # noqa: E402
from cost_models.fpga_pipeline_storage import (  # noqa: E402
    FIFO_CONTROL_LUT,
    fifo_storage,
    in_lanes_of,
    line_rows,
    memories,
    weight_rows,
)
from hetero_dse.hardware.board import RESOURCE_KINDS, load_board  # noqa: E402
from hetero_dse.model.chain import trace_chain  # noqa: E402
from hetero_dse.model.zoo import build, calibrated  # noqa: E402


def memory_luts(design, caps: dict[str, float]) -> dict[str, float]:
    """The LUTs of every memory the model keeps in LUTs, as the model charges them (``memories``' LUT RAM, and
    ``fifo_storage`` less its control for a FIFO in shift registers or LUT RAM)."""
    bits = 8 * np.dtype(design.dtype).itemsize
    lut = RESOURCE_KINDS.index("lut")

    def lutram(words: float, width: float) -> float:
        return float(dict(memories(words, width, caps))["lutram"][lut])

    def fifo(depth: int, width: float, memory: str) -> float:
        if memory not in ("srl", "lutram"):
            return 0.0
        res = np.zeros(len(RESOURCE_KINDS))
        fifo_storage(depth, width, caps, res)
        return float(res[lut]) - FIFO_CONTROL_LUT

    parts = {"weights": 0.0, "line": 0.0, "fifos": 0.0, "regroups": 0.0}
    for s in design.stages:
        n, p, q = s.layer, s.in_lanes, s.out_lanes
        if s.weights == "lutram":
            parts["weights"] += lutram(weight_rows(n, p, q), p * q * bits)
        if s.line == "lutram":
            lanes = in_lanes_of(n, p, q)
            parts["line"] += lutram(line_rows(n) * n.W * math.ceil(n.C / lanes), lanes * bits)
        parts["fifos"] += sum(fifo(depth, width, memory) for _, depth, width, memory in s.fifos)
    parts["regroups"] = sum(fifo(2, g.in_lanes * bits, "srl") for g in design.regroups)
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="mobilenet_v2:zcu102:int8,mobilenet_v2:vu9p:float32,"
                                           "mobilenet_v2:u280:float32")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    print("| network | board | type | images a second | LUTs | memory LUTs (weights / line / FIFOs / regroups) | "
          "of the part's LUTs | of the usable |")
    print("|---|---|---|---|---|---|---|---|")
    for case in args.cases.split(","):
        net, board_name, dtype = case.split(":")
        model, example = build(net)
        layers, _ = trace_chain(calibrated(model, example), example)
        board = load_board(board_name)
        design = explore_traced(layers, board, dtype)
        parts = memory_luts(design, {k: float(board.cap(k)) for k in RESOURCE_KINDS})
        total = sum(parts.values())
        row = {"net": net, "board": board_name, "dtype": dtype, "fps": design.fps, "lut": design.resources["lut"],
               "memory_luts": parts, "of_part": total / board.resources["lut"], "of_usable": total / board.cap("lut")}
        rows.append(row)
        print(f"| {net} | {board_name} | {dtype} | {design.fps:,.0f} | {design.resources['lut']:,.0f} | "
              f"{total:,.0f} ({' / '.join(f'{v:,.0f}' for v in parts.values())}) | {100 * row['of_part']:.1f} % | "
              f"{100 * row['of_usable']:.1f} % |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
