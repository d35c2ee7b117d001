"""The throughput design of the network kernel at batch > 1 (issue 38, item 5): as many compute units, each the
network kernel explored for an even share of the board's budget (``Board.cap``) and of its memory channels, each
on its own images, as raise the images a second; each unit's descriptor table a run of a batch (``batched``: the
linear layers once over all its images)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from cost_models.fpga_slrs import room_usable, slr_room, slrs_spanned
from cost_models.fpga_network_algorithm import LANES
from cost_models.fpga_network_choices import keeping_choices
from cost_models.fpga_network_design import explore_network
from cost_models.fpga_network_ports import WEIGHT_PORTS
from cost_models.fpga_network_placed import NetworkDesign
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import RESOURCE_KINDS, Board
from hetero_dse.model.layer_shape import LayerShape

__all__ = ["MAX_COMPUTE_UNITS", "UNITS_PATIENCE", "batched", "explore_throughput", "over_batch", "slr_placement"]

#: at most this many compute units are tried (each takes an even share of the device)
MAX_COMPUTE_UNITS = 8
#: unit counts tried past the best before the search stops (ResNet-18 int8 on u280: 2 units 854 fps, 3 units 817,
#: 4 units 1,090; MobileNet-V2 int8 on ZCU102: 2 units 388 fps, 3 383, 4 361, 5 403)
UNITS_PATIENCE = 3


def over_batch(shape: LayerShape) -> bool:
    """A layer that runs once over a batch: a linear layer (one pixel an image, a 1×1 window), whose ``images``
    images' inputs the host lays side by side as as many pixels, so that its weights are read once for all."""
    return (shape.H, shape.W, shape.R, shape.S) == (1, 1, 1, 1) and shape.engine == "grid"


def batched(layers: Sequence[tuple[LayerShape, int]], images: int) -> list[tuple[LayerShape, int]]:
    """A run of ``images`` images as the kernel's table takes it: each convolution once an image (its count times
    ``images``), each linear layer (``over_batch``) once over ``images`` pixels. At batch 1 a linear layer reads
    each weight once an image: VGG-16's first, 98 MiB of int8 weights, a quarter of a unit's time."""
    if images == 1:
        return list(layers)
    return [(replace(s, W=images, images=images), c) if over_batch(s) else (s, c * images) for s, c in layers]


@keeping_choices  # a count's layers recur at its SLRs' room, and at the next count where its channel share is alike
def explore_throughput(layers: Sequence[tuple[LayerShape, int]], board: Board, dtype: str = "float32",
                       clock_mhz: float | None = None, lanes: Sequence[int] = LANES, algorithm: str = "auto",
                       weight_ports: Sequence[int] = WEIGHT_PORTS, images: int = 1) -> NetworkDesign:
    """The design of most images a second at batch > 1, each unit's table a run of ``images`` images
    (``batched``): ``n`` compute units, each a network kernel explored for
    ``1/n`` of the device's resources, each with its own memory channels (its arena's, its weights') where the
    board has them, sharing them where it has not (``unit_share``). ``n`` goes up
    until the throughput has not risen for ``UNITS_PATIENCE`` steps (a unit count whose share of the device halves
    the lanes dips, and the next may rise past it) or the units no longer fit. Where units of an even share span
    SLRs, or each fit one but cannot each have one (``slr_placement``: a shell takes part of an SLR), each is
    explored again for its SLR's room (``slr_share``) and the faster that places kept; a count that cannot keep each
    unit within an SLR even so is passed over."""
    if images < 1:
        raise HeteroDSEError(f"a batch of {images} images: a compute unit runs one or more at a time")
    layers = batched(layers, images)
    best: NetworkDesign | None = None
    best_rate = 0.0
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
        unit = _resources(design)
        slrs = slr_placement(board, unit, n)
        if n > 1 and not slrs and (fitted := slr_share(board, n, unit)):
            # units of an even share that span SLRs, or fit one each but cannot each keep to one: each sized to
            # its SLR's room instead (the shell's part taken), kept where they place and run more images a second
            try:
                within = explore_network(layers, replace(board, usable=fitted), dtype, clock_mhz, lanes,
                                         algorithm=algorithm, weight_ports=weight_ports, units=n)
                placed = slr_placement(board, _resources(within), n)
                if placed is not None and (slrs is None or within.latency_s < design.latency_s):
                    design, slrs = within, placed
            except HeteroDSEError:
                pass
        if slrs is None:
            unplaced.append(n)
            continue
        design.board, design.compute_units, design.unit_slrs, design.images = board, n, slrs, images
        design.resources = {k: v * n for k, v in design.resources.items()}
        rate = n * images / design.latency_s  # images a second (``NetworkDesign.fps``)
        if best is not None and rate <= best_rate:
            slower.append((n, rate))
            if len(slower) == UNITS_PATIENCE:
                break
            continue
        best, best_rate, slower = design, rate, []
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
    Where a unit fits one SLR (``slrs_spanned``) the model clocks it as crossing none, so the link configuration
    keeps each within one (``slr=`` lines): dealt round the SLRs in turn, each while its room (``slr_room``) has
    space for another. None where the SLRs cannot hold them so; () where nothing is placed: one unit, one die, or a
    unit that spans SLRs (v++ places it; the model derated its clock for the crossings)."""
    used = unit > 0
    if units == 1 or board.slrs <= 1 or not used.any() or slrs_spanned(board, unit) > 1:
        return ()
    room = []
    for held in slr_room(board):
        kinds = used & (held > 0)  # a resource an SLR has none of is not counted (as slrs_spanned does not)
        room.append(int(math.floor(min(held[kinds] / unit[kinds]) + 1e-9)) if kinds.any() else units)
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


def slr_share(board: Board, units: int, unit: np.ndarray) -> dict[str, float] | None:
    """What each of ``units`` compute units may take of what the shell leaves kernels (a fraction of each
    resource, as ``Board.usable``) so that each keeps within one SLR's room (``slr_room``): of every way to deal the
    units to the SLRs, the one whose units would be largest against a unit of resources ``unit`` (the even share's,
    whose proportions the explorer keeps) in its scarcest resource, each unit the least room of an SLR over the
    units it takes; None on one die."""
    if board.slrs <= 1:
        return None
    rooms = slr_room(board)
    part = np.array([board.kernel_resources(k) for k in RESOURCE_KINDS], dtype=np.float64)
    kinds = (unit > 0) & (part > 0)
    best, best_score = None, -1.0
    for dealt in itertools.product(range(units + 1), repeat=board.slrs):
        if sum(dealt) != units:
            continue
        d = np.array(dealt, dtype=np.float64)
        each = (rooms[d > 0] / d[d > 0, None]).min(axis=0)
        score = float((each[kinds] / unit[kinds]).min()) if kinds.any() else float(each.sum())
        if score > best_score:
            best, best_score = each, score
    assert best is not None
    return room_usable(board, best)


def _resources(design: NetworkDesign) -> np.ndarray:
    return np.array([design.resources.get(k, 0.0) for k in RESOURCE_KINDS])
