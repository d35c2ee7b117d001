"""The FPGA target's second algorithm for one operator: a 3×3 stride-1 convolution (the built-in conv2d) by
Winograd F(m×m, 3×3) on the network kernel's Winograd engine (``cost_models/fpga_network_design``, explored for
this one layer with the whole board), set beside the best direct design of the single-operator search. Both are
the model of the code each generator writes: the single-operator kernel's (``cost_models/fpga.py``) and the network
kernel's (``cost_models/fpga_network.py``, whose trip counts its C-simulation checks).

The two kernels do not take the same tensors: the network kernel's are [H][W][C] in a zero border, channels padded
to its block, a bias added, and in int8 its output requantised to int8 where the single-operator kernel writes the
int32 sums. So ``--winograd auto`` keeps the faster only where that is the same work, float32 with the model
uncalibrated (the calibration fits the single-operator kernel alone); elsewhere it says what the Winograd engine
would take and keeps the direct design. ``on`` keeps the Winograd engine wherever it takes the operator, ``off``
never asks."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from cost_models.fpga_costs import dsp_roofline_ops
from cost_models.fpga_network_algorithm import winograd_tiles
from cost_models.fpga_network_design import explore_network
from cost_models.fpga_winograd import TILES, refusal
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import Board
from hetero_dse.operator import Operator

__all__ = ["INTERFACE", "WinogradChoice", "winograd_choice", "winograd_markdown", "winograd_row"]

#: what the kept project takes and gives, where it differs from the operator's own kernel
INTERFACE = ("its tensors [H][W][C] in a zero border (channels padded to the kernel's block), a bias added "
             "(zero where the operator has none), in int8 the output requantised to int8")


@dataclass
class WinogradChoice:
    """The Winograd engine's design for the operator (None where it is not offered: ``why``), whether it is the
    one kept (and ``why`` not, where it is faster but the comparison is not like with like), and the direct
    design's latency it was set against."""

    design: Any | None
    chosen: bool
    direct_s: float
    why: str = ""
    #: a Ctrl-C stopped the Winograd engine's exploration (the direct search stands; the run stops after it)
    interrupted: bool = False

    @property
    def seconds(self) -> float:
        return self.design.latency_s

    @cached_property
    def record(self) -> dict[str, Any]:
        """The design's record (``NetworkDesign.to_json``), read once."""
        return self.design.to_json()

    @cached_property
    def io(self) -> dict[str, Any] | None:
        """The layer's DDR traffic against seed 001's I/O lower bound (``fpga_network_io``)."""
        return self.record["layers"][0].get("io") if self.design is not None else None

    def io_words(self) -> str:
        """``DDR traffic 5.74 MB, 3.22× the I/O lower bound (compulsory)``, or nothing where none applies."""
        from hetero_dse.units import fmt_bytes

        io = self.io
        if not io:
            return ""
        return (f"DDR traffic {fmt_bytes(io['traffic_bytes'])}, {io['traffic_over_bound']:.2f}× the I/O lower "
                f"bound ({io['io_bound_kind']})")

    @property
    def speedup(self) -> float:
        """The direct design's latency over the Winograd engine's (above 1: Winograd is faster)."""
        return self.direct_s / self.design.latency_s

    def engine(self) -> str:
        """``Winograd F(2×2, 3×3) engine of 16 × 16 lanes`` (``, its transforms on DSPs`` where they are)."""
        e = self.design.engines["winograd"]
        return (f"Winograd F({e.tile}×{e.tile}, 3×3) engine of {e.out_lanes} × {e.in_lanes} lanes"
                + (", its transforms on DSPs" if e.transform_dsp else ""))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"chosen": self.chosen, "direct_latency_s": self.direct_s,
                               **({"why": self.why} if self.why else {})}
        if self.design is None:
            return out
        record = self.record
        return {**out, "engine": self.engine(), "speedup_over_direct": self.speedup, "interface": INTERFACE,
                **({"io": self.io} if self.io else {}),
                **{k: record[k] for k in ("latency_s", "gops", "peak_gops", "achieved_mhz", "engines", "resources",
                                          "utilisation", "basis")}}


def winograd_choice(op: Operator, board: Board, dtype: str, clock_mhz: float, algorithm: str, direct_s: float,
                    calibrated: bool = False) -> WinogradChoice | None:
    """The Winograd engine set against the direct design of ``direct_s`` for ``op`` at the direct design's data
    type and clock target; None where ``algorithm`` is ``direct`` or ``op`` is not the built-in conv2d.
    ``calibrated``: the direct design's figure is the calibrated model's."""
    from hetero_dse.model.layer_shape import shape_of

    from hetero_dse.ops import get_builtin

    if algorithm == "direct" or op.name != "conv2d" or op.definition.builder is not get_builtin("conv2d").builder:
        return None  # an op.py's operator may share the name and compute something else

    def not_offered(why: str) -> WinogradChoice:
        return WinogradChoice(None, False, direct_s, why)

    try:  # the layer reads its input from the kernel's arena, as any layer of a network (no im2col)
        shape = shape_of(op, from_host=False)
    except HeteroDSEError as exc:
        return not_offered(str(exc))
    if (shape.R, shape.S, shape.stride) != (3, 3, 1):
        return not_offered(f"Winograd runs 3×3 stride-1 convolutions, not {shape.R}×{shape.S} stride {shape.stride}")
    if dtype not in TILES:
        return not_offered(f"the network kernel's Winograd engine runs float32 and int8, not {dtype}")
    if not winograd_tiles(shape, dtype):
        return not_offered(refusal(TILES[dtype][0], dtype, shape.C, 3, 3, 1) or "no tile of the engine takes it")
    try:
        design = explore_network([(shape, 1)], board, dtype, clock_mhz, algorithm="winograd")
    except HeteroDSEError as exc:
        return not_offered(str(exc))
    except KeyboardInterrupt:  # the direct search stands; the run stops after it (the caller marks it)
        return WinogradChoice(None, False, direct_s, "interrupted before the Winograd engine was explored", True)
    if algorithm == "winograd":
        return WinogradChoice(design, True, direct_s)
    faster = design.latency_s < direct_s
    if faster and dtype != "float32":
        return WinogradChoice(design, False, direct_s, f"the network kernel's {dtype} layer is not this operator "
                                                       "(its output requantised to int8, where this operator's is "
                                                       "the int32 sums)")
    if faster and calibrated:
        return WinogradChoice(design, False, direct_s, "the direct design's figure is the calibrated model's, the "
                                                       "Winograd engine's the uncalibrated estimate")
    return WinogradChoice(design, faster, direct_s)


def winograd_row(e: Any, written: Any) -> Any:
    """The report's row where the Winograd engine is kept: its latency, GOPS (direct convolution's operations)
    and their share of the board's DSP roofline (which Winograd may pass by the multiplies it saves)."""
    from gpu_cpu.winograd import algorithm_name
    from hetero_dse.targets.base import Row
    from hetero_dse.units import fmt_seconds

    w = e.winograd
    record = w.record
    res, util = record["resources"], record["utilisation"]
    roofline_gops = dsp_roofline_ops(e.board.cap("dsp"), w.design.dtype, w.design.clock_mhz) / 1e9
    detail = (f"{w.design.dtype} · {w.engine()} (the network kernel) · DSP {res['dsp']:,.0f} ({100 * util['dsp']:.0f}%)"
              f" · {record['achieved_mhz']:.0f} MHz · {w.speedup:.2f}× the direct design ({fmt_seconds(w.direct_s)})"
              + (f" · {w.io_words()}" if w.io else ""))
    check = "—" if written is None or written.passed is None else ("pass" if written.passed else "FAIL")
    return Row("fpga", e.op.name, e.op.shape_name, e.board.name, "model", w.seconds, record["gops"],
               record["gops"] / roofline_gops, None, None, e.explorer, e.loop.evaluations, 0, 0,
               e.loop.wall_s, e.interrupted, written.directory if written else None, written.why if written else None,
               check, detail, algorithm=algorithm_name(w.design.engines["winograd"].tile))


def winograd_markdown(e: Any) -> list[str]:
    """What report.md says of the Winograd engine beside the single-operator search: kept or not, and why."""
    from hetero_dse.units import fmt_seconds

    w = e.winograd
    if w is None:
        return []
    if w.design is None:
        return [f"Winograd: not offered ({w.why}).", ""]
    if w.chosen:
        verdict = (f"kept: its project is the one written, the network kernel's for this layer ({INTERFACE}); "
                   "`hetero_dse synth` reads back the direct designs only (`explore --synth` synthesizes those), "
                   "the kernel is synthesized with its own `make csynth`")
    elif w.why:
        verdict = f"not kept, {w.why} (`--winograd on` keeps it)"
    else:
        verdict = "not kept: the direct design is faster (`--winograd on` keeps it)"
    return [f"Winograd: a {w.engine()} of the network kernel, explored for this layer with the whole board, "
            f"runs it in {fmt_seconds(w.seconds)} at {w.design.achieved_mhz:.0f} MHz, {w.speedup:.2f}× the best "
            f"direct design's {fmt_seconds(w.direct_s)} by the model"
            + (f"; {w.io_words()}: seed 001's Theorem 4.12 for F(e×e, 3×3) (its Ω with constant 1) with the "
               f"engine's {w.io['onchip_values']:,.0f} values on chip, raised to the input, weights and output read "
               "or written once" if w.io else "")
            + f"; {verdict}.", ""]
