"""Whether a network's buffers fit the board's memory (issue 38). Each compute unit keeps, on the banks its ports
are connected to (``fpga_network_ports.port_banks``):

- its arena: the network's input and every layer's output, each a region of its own (as
  ``hetero_dse/hls/network_layout.lay_out`` places them), beside the descriptor table's few words;
- the network's weights, split over its weight ports, a part a port (as the host loads them);
- its parameters: each output channel's bias, and in int8 its requantising multiplier, 32 bits each.

A bank holds the memory's capacity over its channels (``Memory.capacity_gib`` is the whole memory's). Before a
design is explored the tensors' own sizes are counted (``fitting_weight_ports``); a design's, as its kernel runs
the layers (``check_memory``): channels padded to its block, the image's layer as the host's im2col. The layout
also pads each region to whole words and keeps a halo of padding beside it, a few kilobytes a layer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cost_models.fpga_network_placed import NetworkDesign
from cost_models.fpga_network_ports import port_banks
from cost_models.fpga_network_shapes import NetLayer
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import Board, Memory
from hetero_dse.model.layer_shape import LayerShape
from hetero_dse.units import fmt_bytes

__all__ = ["Footprint", "bank_bytes", "bank_loads", "check_memory", "design_footprint", "design_span",
           "fitting_weight_ports", "footprint", "weight_span"]


@dataclass(frozen=True)
class Footprint:
    """Bytes one compute unit keeps in memory for a network."""

    weights: int
    arena: int
    params: int


def footprint(layers: Sequence[tuple[LayerShape | NetLayer, int]], dtype: str) -> Footprint:
    """The network's weights, arena and parameters in ``dtype`` (each layer ``count`` times), its layers as torch
    has them (``LayerShape``) or as a kernel runs them (``NetLayer``)."""
    element = 1 if dtype == "int8" else 4
    weights = arena = params = 0
    for s, count in layers:
        oh = (s.H + 2 * s.pad - s.R) // s.stride + 1
        ow = (s.W + 2 * s.pad - s.S) // s.stride + 1
        weights += count * s.K * s.R * s.S * (1 if s.engine == "depthwise" else s.C) * element
        arena += count * s.K * oh * ow * element
        params += count * s.K * (2 if dtype == "int8" else 1) * 4
    first = layers[0][0]
    arena += first.C * first.H * first.W * element  # the network's input
    return Footprint(weights, arena, params)


def bank_bytes(memory: Memory) -> int:
    """What one bank (a channel) of ``memory`` holds."""
    return int(memory.capacity_gib * 2**30 / memory.channels)


def weight_span(f: Footprint, memory: Memory, w_ports: int) -> int:
    """Banks in a row each weight port's buffer spans: one, or where its part of the weights (and the parameters
    beside the first) is more than a bank holds on a memory of several banks (an HBM's 256 MiB pseudo-channels),
    as many as hold it: ``connectivity.cfg`` connects the port to that range (``HBM[1:2]``), and the port still
    moves a channel's words a cycle."""
    if memory.channels == 1 or not memory.capacity_gib:
        return 1
    return max(1, -(-(-(-f.weights // w_ports) + f.params) // bank_bytes(memory)))


def bank_loads(f: Footprint, channels: int, w_ports: int, units: int, span: int = 1) -> dict[int, int]:
    """Bytes on each memory bank: every unit's arena, weight parts (each over its ``span`` banks) and parameters
    where ``port_banks`` puts them."""
    loads: dict[int, int] = {}
    part = -(-f.weights // w_ports)
    for u in range(units):
        banks = port_banks(u, channels, w_ports, span)
        placed = [(banks["arena"], f.arena), (banks["params"], f.params),
                  *(((b + i) % channels, -(-part // span)) for b in banks["weights"] for i in range(span))]
        for bank, size in placed:
            loads[bank] = loads.get(bank, 0) + size
    return loads


def _overflow(layers: Sequence[tuple[LayerShape | NetLayer, int]], board: Board, dtype: str, w_ports: int, units: int
              ) -> str | None:
    """Why the buffers of a design with ``w_ports`` weight ports and ``units`` compute units do not fit ``board``'s
    memory (None: they fit, or the board file gives no capacity)."""
    memory = board.memory
    if not memory.capacity_gib:
        return None
    f = footprint(layers, dtype)
    of = f"{w_ports} weight port{'s' if w_ports > 1 else ''}" + (f", {units} compute units" if units > 1 else "")
    span = weight_span(f, memory, w_ports)
    if span > 1 and units * (1 + w_ports * span) > memory.channels:
        return (f"the network's buffers do not fit {board.name}'s memory in {dtype} ({of}): each weight port's part "
                f"({fmt_bytes(-(-f.weights // w_ports))}) spans {span} of its {memory.channels} banks, and the "
                f"arenas and spans need {units * (1 + w_ports * span)}")
    bank, load = max(bank_loads(f, memory.channels, w_ports, units, span).items(), key=lambda bl: bl[1])
    if load <= bank_bytes(memory):
        return None
    where = f"{memory.connectivity}[{bank}]" if memory.connectivity else "its memory"
    return (f"the network's buffers do not fit {board.name}'s memory in {dtype} ({of}): {where} would hold "
            f"{fmt_bytes(load)} of its {fmt_bytes(bank_bytes(memory))} (weights {fmt_bytes(f.weights)}, activations "
            f"{fmt_bytes(f.arena)} a unit)")


def fitting_weight_ports(layers: Sequence[tuple[LayerShape, int]], board: Board, dtype: str,
                         weight_ports: Sequence[int], units: int) -> tuple[int, ...]:
    """The weight ports of ``weight_ports`` whose parts of the weights, with the arena and the parameters, fit
    the banks they are on (more ports, smaller parts); one sentence where none does."""
    fits = tuple(q for q in weight_ports if _overflow(layers, board, dtype, q, units) is None)
    if not fits:
        why = _overflow(layers, board, dtype, max(weight_ports), units)
        if dtype != "int8" and _overflow(layers, board, "int8", max(weight_ports), units) is None:
            why += "; in int8 they fit (--dtype int8)"
        raise HeteroDSEError(why)
    return fits


def design_footprint(design: NetworkDesign) -> Footprint:
    """A design's buffers as its kernel runs the layers: channels padded to its block, the image's layer as the
    host's im2col."""
    return footprint([(p.layer, p.count) for p in design.layers], design.dtype)


def design_span(design: NetworkDesign) -> int:
    """Banks in a row each of the design's weight ports spans (``weight_span``), as ``connectivity.cfg`` says."""
    return weight_span(design_footprint(design), design.board.memory, design.w_ports)


def check_memory(design: NetworkDesign) -> None:
    """One sentence where a bank would hold more than its share of the board's memory."""
    padded = [(p.layer, p.count) for p in design.layers]  # as design_footprint counts them
    why = _overflow(padded, design.board, design.dtype, design.w_ports, design.compute_units)
    if why:
        raise HeteroDSEError(why)
