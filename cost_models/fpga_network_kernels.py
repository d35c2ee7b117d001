"""Kernels of different sizes in one xclbin, one an SLR (issue 38): the throughput design of a part whose
platform's shell takes part of one SLR. Compute units of one kernel (``fpga_network_units``) are each sized to
the room they are dealt into, so there the smallest SLR's room bounds them all, or that SLR is left empty (VGG-16 on
vu9p: two units of 1,514 DSPs, SLR1's 922 idle). v++ links several kernels into one xclbin, each kept to its SLR
(``slr=``): here each SLR gets the network kernel explored for its own room (``slr_room``), SLRs of equal room one
kernel instantiated on each. Every kernel runs its own images; the memory channels are dealt among all their units
as among one kernel's (``port_banks``, ``unit_share``), so every kernel has the first's weight ports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from cost_models.fpga_network_design import explore_network
from cost_models.fpga_network_memory import design_span
from cost_models.fpga_network_placed import NetworkDesign
from cost_models.fpga_network_units import batched
from cost_models.fpga_slrs import room_usable, slr_room, slrs_spanned
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import RESOURCE_KINDS, Board
from hetero_dse.model.layer_shape import LayerShape

__all__ = ["KernelSet", "explore_slr_kernels", "kernel_name"]


def kernel_name(index: int) -> str:
    """The top function of a set's ``index``-th kernel: ``network_kernel_a``, ``network_kernel_b``…"""
    return f"network_kernel_{chr(ord('a') + index)}"


@dataclass
class KernelSet:
    """Kernels side by side in one xclbin, each its units on SLRs of their own (``unit_slrs``), on the banks of
    the units before it (``first_unit``), each on its own images."""

    board: Board
    kernels: list[NetworkDesign]

    @property
    def fps(self) -> float:
        return sum(k.fps for k in self.kernels)

    @property
    def compute_units(self) -> int:
        return sum(k.compute_units for k in self.kernels)

    @property
    def resources(self) -> dict[str, float]:
        return {r: sum(k.resources.get(r, 0.0) for k in self.kernels) for r in RESOURCE_KINDS}

    def to_json(self) -> dict[str, Any]:
        return {"fps": self.fps, "compute_units": self.compute_units, "images": self.kernels[0].images,
                "resources": self.resources,
                "kernels": [{"top": kernel_name(i), **{k: v for k, v in d.to_json().items() if k in (
                    "compute_units", "unit_slrs", "fps", "latency_s", "engines", "resources", "achieved_mhz",
                    "weight_ports")}} for i, d in enumerate(self.kernels)]}


def explore_slr_kernels(layers: Sequence[tuple[LayerShape, int]], board: Board, dtype: str = "float32",
                        clock_mhz: float | None = None, algorithm: str = "auto", images: int = 1) -> KernelSet | None:
    """A kernel for each distinct SLR room of ``board`` (``slr_room``), explored for that room with the memory
    channels' share of as many units as the part has SLRs, each unit of a run of ``images`` images (``batched``);
    None on one die, or where every SLR's room is the same or the explorer gives every room one design (the compute
    units of one kernel are that design). SLRs whose rooms give one design share its kernel. Every kernel is
    clocked at the slowest's (v++ links an xclbin's kernels on one clock)."""
    if board.slrs <= 1:
        return None
    groups: dict[tuple[float, ...], list[int]] = {}
    for slr, room in enumerate(slr_room(board)):
        groups.setdefault(tuple(np.round(room, 3)), []).append(slr)
    if len(groups) == 1:
        return None  # every SLR alike: the compute units of one kernel
    run, rooms = batched(layers, images), sorted(groups.items(), key=lambda g: -sum(g[0]))
    found = _kernels(rooms, run, board, dtype, clock_mhz, algorithm)
    slowest = min((d.achieved_mhz for d, _ in found), default=0.0)
    if any(d.achieved_mhz > slowest for d, _ in found):
        # v++ links every kernel of an xclbin on one kernel clock: each explored again for the slowest's
        found = _kernels(rooms, run, board, dtype, slowest, algorithm)
        if any(d.achieved_mhz != found[0][0].achieved_mhz for d, _ in found):
            return None  # (the clocks still apart: the units of one kernel, one clock by construction)
    if len(found) < 2:
        return None  # one kernel: the compute units of one kernel are that design
    kernels, first = [], 0
    for d, slrs in found:
        d.board, d.compute_units, d.unit_slrs, d.images, d.first_unit = board, len(slrs), tuple(sorted(slrs)), images, \
            first
        d.resources = {k: v * len(slrs) for k, v in d.resources.items()}
        kernels.append(d)
        first += len(slrs)
    return KernelSet(board, kernels)


def _kernels(groups: list[tuple[tuple[float, ...], list[int]]], run: list, board: Board, dtype: str,
             clock_mhz: float | None, algorithm: str) -> list[tuple[NetworkDesign, list[int]]]:
    """Each room's kernel (largest room first: its weight ports every kernel's), and the SLRs it is on; SLRs whose
    rooms give one design one kernel."""
    found: list[tuple[NetworkDesign, list[int]]] = []
    ports = None
    for room, slrs in groups:
        try:
            d = explore_network(run, replace(board, usable=room_usable(board, np.array(room))), dtype, clock_mhz,
                                algorithm=algorithm, units=board.slrs, **({"weight_ports": (ports,)} if ports else {}))
        except HeteroDSEError:
            continue  # no kernel fits this room: its SLRs stay empty
        if design_span(d) > 1:  # (an HBM's pseudo-channel spans: no board of those has SLRs of unequal room)
            return []
        ports = ports or d.w_ports
        if slrs_spanned(board, [d.resources.get(k, 0.0) for k in RESOURCE_KINDS]) > 1:
            raise HeteroDSEError(f"a kernel explored for SLR{slrs[0]}'s room spans SLRs (a bug: please report it)")
        same = next((f for f in found if _same(f[0], d)), None)
        if same is not None:  # rooms a little apart that the explorer gives one design: one kernel on both
            same[1].extend(slrs)
        else:
            found.append((d, list(slrs)))
    return found


def _same(a: NetworkDesign, b: NetworkDesign) -> bool:
    """Whether two kernels are one design: the same engines, words, clock and every layer's tiles."""
    return (a.engines, a.word, a.block, a.achieved_mhz, [(p.layer, p.tiles) for p in a.layers]) == (
        b.engines, b.word, b.block, b.achieved_mhz, [(p.layer, p.tiles) for p in b.layers])
