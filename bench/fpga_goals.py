"""What issue 38's anchors ask of a design on these boards, against two bounds no design of this project can pass
(a bound, not a design: nothing here is explored or generated).

    python bench/fpga_goals.py

- The DSP roofline: every usable DSP (the board's usable share, ``boards/*.yaml``) in a multiply-add every cycle,
  two int8 multiplies a DSP48E2 where the code packs them, at the board's target clock and at its ceiling. The
  code this project generates runs each DSP at the fabric's clock (HLS does not double-pump a DSP).
- The DDR bound of a layer-by-layer design: each layer reads its input (and its residual) and writes its output
  once, the weights are read once an image, all at the board's sustained bandwidth on every channel it has.
- The DSP bounds with Winograd: each 3×3 stride-1 convolution by F(m×m, 3×3) at the largest tile the int8 engine
  offers (``fpga_network_algorithm.winograd_tiles``), α² multiplies for m² outputs, one a DSP (a transformed
  operand is too wide to pack two); every other layer two multiplies a DSP. For the network kernel's *separate*
  engines (a grid and a Winograd engine, each its own DSPs, one busy at a time) the best split of the DSPs gives
  ``(√a + √b)²/D`` cycles an image (``a``, ``b``: the Winograd and direct engines' DSP-cycles on one DSP); for
  *one* PE array shared by both modes (HybridDNN's spatial/Winograd PE, not built here) ``(a + b)/D``. Transforms,
  fills and memory are free in both: no design of either kind is faster.

For each anchor: the fraction of each bound it needs. Above 100 % of the roofline, no single-pumped design at
that clock reaches it, whatever its dataflow.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cost_models.fpga_network_algorithm import winograd_tiles  # noqa: E402
from hetero_dse.hardware.board import load_board  # noqa: E402
from hetero_dse.model.layer_shape import LayerShape  # noqa: E402
from network_shapes import network_shapes  # noqa: E402

#: (network, board, figure, unit, where it comes from)
ANCHORS = [
    ("resnet18", "zcu102", 478.0, "fps", "Vitis AI DPU, 3 x B4096 at 281 MHz, int8, multiple threads (UG1354)"),
    ("mobilenet_v2", "zcu102", 734.0, "fps", "Vitis AI DPU, 3 x B4096 at 281 MHz, int8, multiple threads (UG1354)"),
    ("resnet18", "vu9p", 3375.7, "GOPS", "HybridDNN on VU9P (DAC 2020; Winograd's saved multiplies counted)"),
]


def network_figures(shapes: list[tuple[LayerShape, int]]) -> tuple[float, float]:
    """Operations an image (two a multiply-add) and the bytes a layer-by-layer int8 design moves an image, for a
    network's distinct layers ``shapes`` (``network_shapes``)."""
    ops = moved = 0
    for s, n in shapes:
        oh, ow = (s.H + 2 * s.pad - s.R) // s.stride + 1, (s.W + 2 * s.pad - s.S) // s.stride + 1
        out = s.K * oh * ow
        moved += n * (s.C * s.H * s.W + out * (2 if s.residual else 1) + s.K * s.R * s.S * (s.C if s.engine == "grid"
                                                                                         else 1))
        ops += n * 2 * s.macs
    return float(ops), float(moved)


def winograd_dsp_cycles(shapes: list[tuple[LayerShape, int]]) -> tuple[float, float]:
    """DSP-cycles an image on one DSP (see the module doc): the 3×3 stride-1 layers' by Winograd's multiplies,
    one a DSP, and the other layers' int8 multiplies, two a DSP."""
    wino = direct = 0.0
    for s, n in shapes:
        tiles = winograd_tiles(s, "int8") if (s.R, s.S, s.stride) == (3, 3, 1) else ()
        if tiles:
            m = max(tiles)
            wino += n * s.macs * (m + 2) ** 2 / (9 * m * m)
        else:
            direct += n * s.macs / 2
    return wino, direct


def main() -> None:
    print("| anchor | board | its figure | GOPS | DSP roofline at target / ceiling clock (GOPS) | share of the "
          "roofline needed | layer-by-layer DDR bound (fps) | share of it needed | source |\n" + "|---" * 9 + "|")
    bounds, captured = [], {}
    for net, board_name, figure, unit, source in ANCHORS:
        board = load_board(board_name)
        if net not in captured:  # a network's capture (a torch trace) once, for every anchor of it
            captured[net] = network_shapes(net)[1]
        shapes = captured[net]
        ops, moved = network_figures(shapes)
        fps = figure if unit == "fps" else figure * 1e9 / ops
        gops = fps * ops / 1e9
        roof = [board.cap("dsp") * 2 * 2 * mhz * 1e6 / 1e9 for mhz in (board.default_clock_mhz, board.max_clock_mhz)]
        m = board.memory
        ddr = m.sustained_gbps_per_channel * m.channels * 1e9 / moved
        print(f"| {net} {figure:,.1f} {unit} | {board_name} | {fps:,.0f} fps | {gops:,.0f} | {roof[0]:,.0f} / "
              f"{roof[1]:,.0f} | {100 * gops / roof[0]:.0f} % / {100 * gops / roof[1]:.0f} % | {ddr:,.0f} | "
              f"{100 * fps / ddr:.0f} % | {source} |")
        a, b = winograd_dsp_cycles(shapes)
        dsp = board.cap("dsp")
        for kind, cycles in (("separate engines", (math.sqrt(a) + math.sqrt(b)) ** 2 / dsp),
                             ("one shared PE", (a + b) / dsp)):
            at = [mhz * 1e6 / cycles for mhz in (board.default_clock_mhz, board.max_clock_mhz)]
            bounds.append(f"| {net} {figure:,.1f} {unit} | {board_name} | {kind} | {at[0]:,.0f} / {at[1]:,.0f} | "
                          f"{100 * fps / at[0]:.0f} % / {100 * fps / at[1]:.0f} % |")
    print("\n| anchor | board | Winograd's DSP bound | images a second at target / ceiling clock | share needed |\n"
          + "|---" * 5 + "|")
    print("\n".join(bounds))


if __name__ == "__main__":
    main()
