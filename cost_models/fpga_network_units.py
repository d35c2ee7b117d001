"""The throughput design of the network kernel at batch > 1 (issue 38, item 5): as many compute units, each the
network kernel explored for an even share of the device and of its memory channels, each on its own image, as
raise the images a second."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from cost_models.fpga import SLR_INFRASTRUCTURE, slr_capacity, slr_resources
from cost_models.fpga_network_algorithm import LANES
from cost_models.fpga_network_design import explore_network
from cost_models.fpga_network_ports import WEIGHT_PORTS
from cost_models.fpga_network_placed import NetworkDesign
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import RESOURCE_KINDS, Board
from hetero_dse.model.layer_shape import LayerShape

__all__ = ["MAX_COMPUTE_UNITS", "UNITS_PATIENCE", "explore_throughput", "slr_placement"]

#: at most this many compute units are tried (each takes an even share of the device)
MAX_COMPUTE_UNITS = 8
#: unit counts tried past the best before the search stops (ResNet-18 int8 on u280: 2 units 854 fps, 3 units 817,
#: 4 units 1,090; MobileNet-V2 int8 on ZCU102: 2 units 388 fps, 3 383, 4 361, 5 403)
UNITS_PATIENCE = 3


def explore_throughput(layers: Sequence[tuple[LayerShape, int]], board: Board, dtype: str = "float32",
                       clock_mhz: float | None = None, lanes: Sequence[int] = LANES, algorithm: str = "auto",
                       weight_ports: Sequence[int] = WEIGHT_PORTS) -> NetworkDesign:
    """The design of most images a second at batch > 1: ``n`` compute units, each a network kernel explored for
    ``1/n`` of the device's resources, each with its own memory channels (its arena's, its weights') where the
    board has them, sharing them where it has not (``unit_share``). ``n`` goes up
    until the throughput has not risen for ``UNITS_PATIENCE`` steps (a unit count whose share of the device halves
    the lanes dips, and the next may rise past it) or the units no longer fit. Where units of an even share each fit
    one SLR but cannot each have one (``slr_placement``: a shell takes part of an SLR), each is explored again for
    its SLR's room (``slr_share``); a count that cannot keep each unit within an SLR even so is passed over."""
    best: NetworkDesign | None = None
    slower: list[tuple[int, float]] = []  # (units, images a second) tried past the best
    stop, unplaced = "", []
    for n in range(1, MAX_COMPUTE_UNITS + 1):
        share = {k: v / n for k, v in board.usable.items()}
        try:
            design = explore_network(layers, replace(board, usable=share), dtype, clock_mhz, lanes,
                                     algorithm=algorithm, weight_ports=weight_ports, units=n)
        except HeteroDSEError as exc:
            stop = f"{n} compute units do not fit: {exc}"
            break
        slrs = slr_placement(board, _resources(design), n)
        if slrs is None and (fitted := slr_share(board, n)):
            # the model clocked each unit as within one SLR, and they cannot each keep to one: each unit sized to
            # its SLR's room instead (the shell's part taken), not to an even share of the part
            try:
                design = explore_network(layers, replace(board, usable=fitted), dtype, clock_mhz, lanes,
                                         algorithm=algorithm, weight_ports=weight_ports, units=n)
                slrs = slr_placement(board, _resources(design), n)
            except HeteroDSEError:
                pass
        if slrs is None:
            unplaced.append(n)
            continue
        design.board, design.compute_units, design.unit_slrs = board, n, slrs
        design.resources = {k: v * n for k, v in design.resources.items()}
        if best is not None and n / design.latency_s <= best.compute_units / best.latency_s:
            slower.append((n, n / design.latency_s))
            if len(slower) == UNITS_PATIENCE:
                break
            continue
        best, slower = design, []
    else:
        stop = f"at most {MAX_COMPUTE_UNITS} compute units are tried"
    if best is None:
        raise HeteroDSEError(f"no network kernel fits {board.name}")
    counts = [u for u, _ in slower]
    no_more = (f"{counts[0]}{f' to {counts[-1]}' if len(counts) > 1 else ''} compute units run no more images a "
               f"second ({', '.join(f'{fps:,.0f}' for _, fps in slower)} fps)" if slower else "")
    split = ""
    if unplaced:
        counts = str(unplaced[-1]) if len(unplaced) == 1 else f"{', '.join(map(str, unplaced[:-1]))} and {unplaced[-1]}"
        split = f"{counts} compute units cannot each keep within one of {board.name}'s {board.slrs} SLRs, as the " \
                "model clocks them"
    best.units_stop = "; ".join(w for w in (no_more, split, stop) if w)
    return best


def slr_placement(board: Board, unit: np.ndarray, units: int) -> tuple[int, ...] | None:
    """The SLR of each of ``units`` compute units of resources ``unit`` (``RESOURCE_KINDS`` order) on ``board``.
    Where a unit fits an even share of the part (one SLR by ``achieved_clock``) the model clocks it as crossing
    none, so the link configuration keeps each within one (``slr=`` lines): dealt round the SLRs in turn, each
    while what it holds of kernels (``slr_capacity``: the shell's part and the infrastructure's taken) has room.
    None where the SLRs cannot hold them so; () where nothing is placed: one unit, one die, or a unit past an
    SLR's share (v++ places it; the model derated its clock for the crossings)."""
    if units == 1 or board.slrs <= 1:
        return ()
    used = unit > 0
    if not used.any() or (unit[used] > slr_resources(board)[used]).any():
        return ()
    room = [int(math.floor(min(cap[used] / unit[used]))) for cap in slr_capacity(board)]
    if sum(room) < units:
        return None
    placed: list[int] = []
    slr = 0
    while len(placed) < units:
        if room[slr] > 0:
            placed.append(slr)
            room[slr] -= 1
        slr = (slr + 1) % board.slrs
    return tuple(placed)


def slr_share(board: Board, units: int) -> dict[str, float] | None:
    """What each of ``units`` compute units may take of the part (a fraction of each resource, as
    ``Board.usable``) so that each keeps within one SLR: the units dealt to the SLRs one at a time, each to the SLR
    whose room a unit would then have most of (an SLR's room: the board's usable fraction, ``SLR_INFRASTRUCTURE``'s
    at most, of what its shell leaves it, in its scarcest resource against the part's), and each unit the least
    room of an SLR it shares; None on one die."""
    if board.slrs <= 1:
        return None
    usable = np.array([min(board.usable[k], 1.0 - SLR_INFRASTRUCTURE) for k in RESOURCE_KINDS])
    rooms = slr_capacity(board, 1.0) * usable
    part = np.array([board.resources[k] for k in RESOURCE_KINDS], dtype=np.float64)
    kinds = part > 0
    size = (rooms[:, kinds] / part[kinds]).min(axis=1)
    dealt = np.zeros(board.slrs)
    for _ in range(units):
        dealt[int(np.argmax(size / (dealt + 1)))] += 1
    each = (rooms[dealt > 0] / dealt[dealt > 0, None]).min(axis=0)
    return {k: float(each[i] / part[i]) if part[i] else board.usable[k] for i, k in enumerate(RESOURCE_KINDS)}


def _resources(design: NetworkDesign) -> np.ndarray:
    return np.array([design.resources.get(k, 0.0) for k in RESOURCE_KINDS])
