"""What the DPU's ResNet-18 goal on ZCU102 (issue 38) would gain if the network kernel's Winograd engine also ran the
stride-2 layers, so that one PE array (the engine's) served every layer: a what-if of the model, not a design.

    python bench/fpga_stride2_lever.py [--net resnet18] [--board zcu102] [--dtype int8]

The engine runs 3×3 stride-1 convolutions (by F(m×m, 3×3)) and, in its pointwise mode, 1×1 stride-1 ones, linear
layers and the image's layer as im2col; a ResNet's 3×3 and 1×1 stride-2 layers keep a grid beside it, and only one
of the two is busy at a time. Space-to-depth would move them: a 3×3 stride-2 convolution (pad 1, an even input) is
exactly a 3×3 stride-1 one over the input's 2×2 phases as 4C channels at half the size, its weights rearranged
(each phase's taps, the rest zero); a 1×1 stride-2 one is a 1×1 over every other pixel. Here each such layer is
given to the explorer as that equivalent shape (``s2d``), and the network's design explored as today (``auto``: a
grid beside the engine where it is faster) and with the engine alone. The read of the phases (runs of a pixel's
channels, not of a row) is charged as the stride-1 layer's whole rows, which flatters it; the engine multiplies all
36 taps a 4C-channel window has, 27 of them zeros the host would lay out, as such an engine would.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cost_models.fpga_network_design import explore_network  # noqa: E402
from cost_models.fpga_network_units import explore_throughput  # noqa: E402
from hetero_dse.hardware.board import load_board  # noqa: E402
from hetero_dse.model.layer_shape import LayerShape  # noqa: E402
from network_shapes import network_shapes  # noqa: E402


def s2d(s: LayerShape) -> LayerShape:
    """A stride-2 layer as the stride-1 one space-to-depth makes of it (the module doc); any other as it is."""
    if s.engine != "grid" or s.stride != 2 or s.from_host or s.H % 2 or s.W % 2:
        return s
    if (s.R, s.S, s.pad) == (3, 3, 1):
        return replace(s, C=4 * s.C, H=s.H // 2, W=s.W // 2, stride=1)
    if (s.R, s.S, s.pad) == (1, 1, 0):
        return replace(s, H=s.H // 2, W=s.W // 2, stride=1)
    return s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--net", default="resnet18")
    parser.add_argument("--board", default="zcu102")
    parser.add_argument("--dtype", default="int8")
    args = parser.parse_args()
    board, shapes = load_board(args.board), network_shapes(args.net)[1]
    moved = [(s2d(s), n) for s, n in shapes]
    changed = sum(s != m for (s, _), (m, _) in zip(shapes, moved, strict=True))
    print(f"{args.net} on {args.board} in {args.dtype}: {changed} stride-2 layers given as their space-to-depth "
          "equivalents\n")
    print("| layers | algorithm | engines | DSP | MHz | batch 1 | compute units | search |\n" + "|---" * 8 + "|")
    for label, layers in (("as today", shapes), ("stride 2 by space-to-depth", moved)):
        for algorithm in ("auto", "winograd"):
            start = time.perf_counter()
            try:
                d = explore_network(layers, board, args.dtype, algorithm=algorithm)
            except Exception as exc:  # noqa: BLE001 - a layout the engine alone cannot run: said in its row
                print(f"| {label} | {algorithm} | none: {exc} |||||||")
                continue
            units = explore_throughput(layers, board, args.dtype, algorithm=algorithm)
            engines = " + ".join(f"{e['kind']} " + "×".join(map(str, e["lanes"].values()))
                                 + (f" F({e['tile']})" if e.get("tile") else "") for e in d.to_json()["engines"])
            print(f"| {label} | {algorithm} | {engines} | {d.resources['dsp']:,.0f} | {d.achieved_mhz:.0f} | "
                  f"{1 / d.latency_s:.0f} fps | {units.compute_units} × → {units.compute_units / units.latency_s:.0f} "
                  f"fps | {time.perf_counter() - start:.1f} s |", flush=True)


if __name__ == "__main__":
    main()
