"""The throughput design of the network kernel at batch > 1 (issue 38, item 5): as many compute units, each the
network kernel explored for an even share of the device and of its memory channels, each on its own image, as
raise the images a second."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from cost_models.fpga_network_algorithm import LANES
from cost_models.fpga_network_design import explore_network
from cost_models.fpga_network_ports import WEIGHT_PORTS
from cost_models.fpga_network_placed import NetworkDesign
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import Board
from hetero_dse.model.layer_shape import LayerShape

__all__ = ["MAX_COMPUTE_UNITS", "UNITS_PATIENCE", "explore_throughput"]

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
    the lanes dips, and the next may rise past it) or the units no longer fit."""
    best: NetworkDesign | None = None
    slower: list[tuple[int, float]] = []  # (units, images a second) tried past the best
    stop = ""
    for n in range(1, MAX_COMPUTE_UNITS + 1):
        share = {k: v / n for k, v in board.usable.items()}
        try:
            design = explore_network(layers, replace(board, usable=share), dtype, clock_mhz, lanes,
                                     algorithm=algorithm, weight_ports=weight_ports, units=n)
        except HeteroDSEError as exc:
            stop = f"{n} compute units do not fit: {exc}"
            break
        design.board, design.compute_units = board, n
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
    best.units_stop = "; ".join(w for w in (no_more, stop) if w)
    return best
