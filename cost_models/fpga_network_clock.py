"""The clock a design of the network kernel, or of the layer pipeline, closes at for its target: derated by its
widest broadcast and by the SLRs it spans (``fpga_clock.achieved_clock``)."""

from __future__ import annotations

import numpy as np

from cost_models.fpga_clock import achieved_clock
from cost_models.fpga_costs import FANOUT_FREE, FANOUT_NS_PER_DOUBLING, SLR_DERATE
from cost_models.fpga_network_shapes import EngineShape
from cost_models.fpga_slrs import slr_windows
from hetero_dse.hardware.board import Board

__all__ = ["achieved_mhz", "design_clock_mhz"]


def design_clock_mhz(board: Board, clock_mhz: float, res: np.ndarray, fanout: float, span: int | None = None
                     ) -> float:
    """The clock (MHz) a whole-network design of resources ``res`` closes at for a target ``clock_mhz``:
    derated by its widest broadcast (``fanout`` lanes an element reaches) and the SLRs it spans: the fewest that
    hold ``res``, or ``span`` where the design is placed over that many (a kernel of a cut pipeline)."""
    windows = slr_windows(board) if span is None else np.zeros((0, 1 + len(res)))
    eff, _ = achieved_clock(clock_mhz * 1e6, res, windows, float(fanout), 1.0, FANOUT_NS_PER_DOUBLING,
                            FANOUT_FREE, SLR_DERATE[2], SLR_DERATE[3])
    if span is not None and span > 1:
        eff *= SLR_DERATE[min(span, 3)]
    return float(eff) / 1e6


def achieved_mhz(board: Board, clock: float, engines: dict[str, EngineShape], res: np.ndarray) -> float:
    """The clock (MHz) a design of these engines and resources closes at for a target ``clock``."""
    # the widest broadcast: an input element to every output lane; a pointwise Winograd weight to its α² grids
    fanout = max(max(e.out_lanes, e.alpha ** 2 if e.pointwise else 1) for e in engines.values())
    return design_clock_mhz(board, clock, res, fanout)
