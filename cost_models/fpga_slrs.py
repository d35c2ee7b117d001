"""The SLRs of a multi-die part as kernels get them: what the platform's shell and the system's infrastructure leave
each SLR (``Board.slr_resources``, UG1393's ``platforminfo``), the runs of adjacent SLRs a design spans (the clock
model derates for them: ``fpga_clock``), the room compute units are dealt into (``fpga_network_units``), and the SLR
a lone kernel keeps to."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cost_models.fpga_clock import achieved_clock
from hetero_dse.hardware.board import RESOURCE_KINDS, Board

__all__ = ["SLR_INFRASTRUCTURE", "lone_slr", "room_usable", "slr_capacity", "slr_room", "slr_windows",
           "slrs_spanned"]

#: what the system's infrastructure may take of an SLR's resources (SLR crossings to memory, routing): UG1393
#: ("Determining Where to Place the Kernels") counts 10 %
SLR_INFRASTRUCTURE = 0.10


def slr_windows(board: Board) -> np.ndarray:
    """Each run of adjacent SLRs (a design spanning SLRs takes a run of them: they are stacked, and an SLR's wires
    reach only its neighbours), shortest first: a row of its length and what it holds of kernels of each resource
    (``slr_capacity``), ``RESOURCE_KINDS`` order. No rows on a single die: nothing to span. On vu9p, whose shell
    sits in the middle SLR, two SLRs hold 3,223.8 DSPs, not twice the largest's 2,038.5."""
    if board.slrs <= 1:
        return np.zeros((0, 1 + len(RESOURCE_KINDS)))
    rooms = slr_capacity(board)
    return np.array([[length, *rooms[start:start + length].sum(axis=0)] for length in range(1, board.slrs + 1)
                     for start in range(board.slrs - length + 1)], dtype=np.float64)


def slrs_spanned(board: Board, used: Sequence[float]) -> int:
    """How many SLRs a design of resources ``used`` (``RESOURCE_KINDS`` order) spans at the least, as the clock
    model counts them (``fpga_clock.achieved_clock``): the shortest run of adjacent SLRs that holds it
    (``slr_windows``; one more than the part has where none does); 1 on a single die."""
    _, slrs = achieved_clock(1.0, np.asarray(used, dtype=np.float64), slr_windows(board), 1.0, 1.0, 0.0, 1.0, 1.0,
                             1.0)
    return int(slrs)


def lone_slr(board: Board, used: Sequence[float]) -> int | None:
    """The SLR a lone kernel of resources ``used`` keeps to where one's room holds it (the first: ``slr_room``, as
    the compute units' placement and the lint count it). None on one die, or where no SLR's room holds it (v++
    places it; the model clocks it by the SLRs it spans, ``slrs_spanned``)."""
    if board.slrs <= 1:
        return None
    return next((i for i, held in enumerate(slr_room(board))
                 if all(u <= h for u, h in zip(used, held, strict=True) if h > 0)), None)


def slr_capacity(board: Board, fraction: float = 1.0 - SLR_INFRASTRUCTURE) -> np.ndarray:
    """What each SLR holds of kernels (one row an SLR, ``RESOURCE_KINDS`` order): ``fraction`` (all but
    ``SLR_INFRASTRUCTURE``) of the resources the platform's shell leaves it (``Board.slr_resources``; an even
    share of the part's where the board file does not give them)."""
    if board.slr_resources:
        rows = [[r[k] for k in RESOURCE_KINDS] for r in board.slr_resources]
    else:
        rows = [[board.resources[k] / board.slrs for k in RESOURCE_KINDS]] * board.slrs
    return np.array(rows, dtype=np.float64) * fraction


def slr_room(board: Board) -> np.ndarray:
    """What compute units may take of each SLR (one row an SLR, ``RESOURCE_KINDS`` order): the board's usable
    fraction of what the shell leaves it, ``SLR_INFRASTRUCTURE``'s share at least left over. The units are dealt to
    the SLRs (``fpga_network_units.slr_placement``) and sized (``slr_share``) by it, and the lint checks it."""
    usable = np.array([min(board.usable[k], 1.0 - SLR_INFRASTRUCTURE) for k in RESOURCE_KINDS])
    return slr_capacity(board, 1.0) * usable


def room_usable(board: Board, room: np.ndarray) -> dict[str, float]:
    """``room`` (resources, ``RESOURCE_KINDS`` order: an SLR's, or a share of one) as ``Board.usable`` gives a budget:
    a fraction of what the shell leaves kernels of each resource (a resource the part has none of keeps the board's)."""
    part = [board.kernel_resources(k) for k in RESOURCE_KINDS]
    return {k: float(room[i] / part[i]) if part[i] else board.usable[k] for i, k in enumerate(RESOURCE_KINDS)}
