"""The FPGA target's second algorithm for one operator: a 3×3 stride-1 convolution by Winograd F(m×m, 3×3) on
the network kernel's Winograd engine (``cost_models/fpga_network_design``, explored for this one layer with the
whole board), set beside the best direct design of the single-operator search. ``--winograd auto`` keeps the
faster by the model, ``on`` the Winograd engine wherever it takes the operator, ``off`` never asks. Both are the
model of the code each generator writes: the single-operator kernel's (``cost_models/fpga.py``) and the network
kernel's (``cost_models/fpga_network.py``, whose trip counts its C-simulation checks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cost_models.fpga_network_design import explore_network, winograd_tiles
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import Board
from hetero_dse.operator import Operator

__all__ = ["WinogradChoice", "winograd_choice", "winograd_markdown", "winograd_row"]


@dataclass
class WinogradChoice:
    """The Winograd engine's design for the operator (None where it is not offered: ``why``), whether it is the
    one kept, and the direct design's latency it was set against."""

    design: Any | None
    chosen: bool
    direct_s: float
    why: str = ""

    @property
    def seconds(self) -> float:
        return self.design.latency_s

    @property
    def speedup(self) -> float:
        """The direct design's latency over the Winograd engine's (above 1: Winograd is faster)."""
        return self.direct_s / self.design.latency_s

    def engine(self) -> str:
        """``Winograd F(2×2, 3×3) engine of 16 × 16 lanes``."""
        e = self.design.engines["winograd"]
        return f"Winograd F({e.tile}×{e.tile}, 3×3) engine of {e.out_lanes} × {e.in_lanes} lanes"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"chosen": self.chosen, "direct_latency_s": self.direct_s}
        if self.design is None:
            return {**out, "why": self.why}
        record = self.design.to_json()
        return {**out, "engine": self.engine(), "speedup_over_direct": self.speedup,
                **{k: record[k] for k in ("latency_s", "gops", "peak_gops", "achieved_mhz", "engines", "resources",
                                          "utilisation", "basis")}}


def winograd_choice(op: Operator, board: Board, dtype: str, clock_mhz: float, algorithm: str, direct_s: float
                    ) -> WinogradChoice | None:
    """The Winograd engine set against the direct design of ``direct_s`` for ``op`` at the direct design's data
    type and clock target; None where ``algorithm`` is ``direct`` or ``op`` is no convolution."""
    from hetero_dse.model.layer_shape import shape_of

    if algorithm == "direct" or op.name != "conv2d":
        return None
    try:  # the layer reads its input from the kernel's arena, as any layer of a network (no im2col)
        shape = shape_of(op, from_host=False)
    except HeteroDSEError as exc:
        return WinogradChoice(None, False, direct_s, str(exc))
    if (shape.R, shape.S) != (3, 3) or not winograd_tiles(shape, dtype):
        return WinogradChoice(None, False, direct_s, "Winograd runs 3×3 stride-1 convolutions of one group on the "
                                                     "FPGA's network kernel; this one stays direct")
    try:
        design = explore_network([(shape, 1)], board, dtype, clock_mhz, algorithm="winograd")
    except HeteroDSEError as exc:
        return WinogradChoice(None, False, direct_s, str(exc))
    return WinogradChoice(design, algorithm == "winograd" or design.latency_s < direct_s, direct_s)


def winograd_row(e: Any, written: Any) -> Any:
    """The report's row where the Winograd engine is kept: its latency, GOPS (direct convolution's operations)
    and share of the engine's peak (which counts the multiplies Winograd saves), beside the direct design's."""
    from gpu_cpu.winograd import algorithm_name
    from hetero_dse.targets.base import Row
    from hetero_dse.units import fmt_seconds

    w = e.winograd
    record = w.design.to_json()
    res, util = record["resources"], record["utilisation"]
    detail = (f"{w.design.dtype} · {w.engine()} (the network kernel) · DSP {res['dsp']:,.0f} ({100 * util['dsp']:.0f}%)"
              f" · {record['achieved_mhz']:.0f} MHz · {w.speedup:.2f}× the direct design ({fmt_seconds(w.direct_s)})")
    check = "—" if written is None or written.passed is None else ("pass" if written.passed else "FAIL")
    return Row("fpga", e.op.name, e.op.shape_name, e.board.name, "model", w.seconds, record["gops"],
               record["gops"] / record["peak_gops"], "compute", None, e.explorer, e.loop.evaluations, 0, 0,
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
    verdict = ("kept: its project is the one written" if w.chosen else
               "not kept: the direct design is faster (`--winograd on` keeps it)")
    return [f"Winograd: a {w.engine()} of the network kernel, explored for this layer with the whole board, "
            f"runs it in {fmt_seconds(w.seconds)} at {w.design.achieved_mhz:.0f} MHz, {w.speedup:.2f}× the best "
            f"direct design's {fmt_seconds(w.direct_s)} by the model; {verdict}.", ""]
