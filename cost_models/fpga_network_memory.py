"""Whether a network's buffers fit the board's memory (issue 38). Each compute unit keeps, on the banks its ports
are connected to (``fpga_network_ports.port_banks``):

- its arena: the network's input and every layer's output, each a region of its own (as
  ``hetero_dse/hls/network_layout.lay_out`` places them), beside the descriptor table's few words;
- the network's weights, dealt over its weight ports: every port's buffer as large as the host allocates it;
- its parameters: each output channel's bias, and in int8 its requantising multiplier, 32 bits each.

A bank holds the memory's capacity over its channels (``Memory.capacity_gib`` is the whole memory's). Before a
design is explored the tensors' own sizes are counted (``fitting_weight_ports``: the weights split evenly over the
ports); a design's as its layout deals them (``design_footprint``): channels padded to its block and to whole
channel tiles, a float32 Winograd engine's 3×3 weights as their α² transformed values, each layer's words over the
ports its engine reads (the others hold zeros for it), the image's layer both as the image and as the host's
im2col; its arena with every region's halo and guards (``reads_past``), taking each layer whose input has a
tensor's shape for one of its readers. Each weight row's front padding is not counted: under 1 % of a port's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cost_models.fpga_network import network_trips
from cost_models.fpga_network_placed import NetworkDesign
from cost_models.fpga_network_ports import port_banks, span_set
from cost_models.fpga_network_shapes import NetLayer, reads_past
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import Board, Memory
from hetero_dse.model.layer_shape import LayerShape
from hetero_dse.units import fmt_bytes

__all__ = ["Footprint", "bank_bytes", "bank_loads", "design_footprint", "design_span",
           "fitting_weight_ports", "footprint", "memory_problem", "overflow", "weight_span"]


@dataclass(frozen=True)
class Footprint:
    """Bytes one compute unit keeps in memory for a network: ``part``, each weight port's buffer (None: the
    weights split evenly over the ports)."""

    weights: int
    arena: int
    params: int
    part: int | None = None

    def port_bytes(self, w_ports: int) -> int:
        return self.part if self.part is not None else -(-self.weights // w_ports)


def _element(dtype: str) -> int:
    return 1 if dtype == "int8" else 4


def footprint(layers: Sequence[tuple[LayerShape | NetLayer, int]], dtype: str) -> Footprint:
    """The network's weights, arena and parameters in ``dtype`` (each layer ``count`` times), its layers as torch
    has them (``LayerShape``) or as a kernel runs them (``NetLayer``)."""
    element = _element(dtype)
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


def design_footprint(design: NetworkDesign) -> Footprint:
    """A design's buffers as its layout deals them (see the module doc)."""
    element = _element(design.dtype)
    padded = footprint([(p.layer, p.count) for p in design.layers], design.dtype)
    words = 0  # of one weight port, in elements
    for p in design.layers:
        e, layer, t = design.engines[p.layer.engine], p.layer, p.tiles
        k = -(-layer.K // t.tk) * t.tk
        c = 1 if layer.engine == "depthwise" else -(-layer.C // t.tc) * t.tc
        transformed = e.kind == "winograd" and layer.R > 1 and not e.w_transform
        taps = (e.tile + 2) ** 2 if transformed else layer.R * layer.S
        # its rows, each padded at its front to whole iterations of the weight process (a word from each port the
        # engine reads), or a step's rows end to end and the step padded at its end (``row_picks``)
        rows = -(-k * c * taps // e.row_elements(layer))
        if e.row_picks > 1 and layer.R > 1:
            step = int(network_trips(e, layer, t)["w_rows"])
            iterations = -(-rows // step) * e.step_reads(layer, step)
        else:
            iterations = rows * e.row_reads(layer)
        words += p.count * iterations * e.w_word
    first = design.layers[0]
    image = 0
    if first.im2col:  # the image placed as it is too, its channels padded to the block
        s = first.shape
        image = -(-s.C // design.block) * design.block * s.H * s.W * element
    return Footprint(padded.weights, _arena(design) * element + image, padded.params, words * element)


def _arena(design: NetworkDesign) -> int:
    """The arena's elements as ``lay_out`` places its regions: each layer's output (each time it runs) and the
    network's input (or the host's im2col of it), each inside the halo and guards of the widest read of it
    (``reads_past``). The design does not say which layer reads which tensor, so every layer whose input has a
    tensor's shape is taken for a reader: never fewer elements than the layout's, more only where a layer of that
    shape reads another tensor with a wider halo."""
    def region(channels: int, rows: int, cols: int) -> int:
        halo = bottom = right = 0
        for q in design.layers:
            if (q.layer.C, q.layer.H, q.layer.W) == (channels, rows, cols):
                h, b, r = reads_past(q.layer, q.tiles)
                halo, bottom, right = max(halo, h), max(bottom, b), max(right, r)
        return (halo + rows + bottom) * (halo + cols + right) * channels

    first = design.layers[0].layer
    return region(first.C, first.H, first.W) + sum(p.count * region(p.layer.K, p.layer.OH, p.layer.OW)
                                                   for p in design.layers)


def bank_bytes(memory: Memory) -> int:
    """What one bank (a channel) of ``memory`` holds."""
    return int(memory.capacity_gib * 2**30 / memory.channels)


def weight_span(f: Footprint, memory: Memory, w_ports: int) -> int:
    """Banks in a row each weight port's buffer spans: one, or on an HBM (its 256 MiB pseudo-channels; Vitis takes
    ranges of them, ``HBM[2:3]``) where a port's buffer is more than a bank holds, as many as hold it. The port
    still moves a channel's words a cycle."""
    if memory.connectivity != "HBM" or not memory.capacity_gib:
        return 1
    return max(1, -(-f.port_bytes(w_ports) // bank_bytes(memory)))


def bank_loads(f: Footprint, channels: int, w_ports: int, units: int, span: int = 1) -> dict[int, int]:
    """Bytes on each memory bank: every unit's arena, weight ports' buffers (each over its ``span`` banks, counted
    as an even share on each: where XRT fills a range from its first bank instead, the range holds the same, and a
    part fits its range either way) and parameters where ``port_banks`` puts them."""
    loads: dict[int, int] = {}
    part = f.port_bytes(w_ports)
    for u in range(units):
        banks = port_banks(u, channels, w_ports, span)
        placed = [(banks["arena"], f.arena), (banks["params"], f.params)]
        for b in banks["weights"]:
            left = part
            for i in range(span):
                placed.append((b + i, -(-left // (span - i))))
                left -= -(-left // (span - i))
        for bank, size in placed:
            loads[bank] = loads.get(bank, 0) + size
    return loads


def overflow(f: Footprint, board: Board, dtype: str, w_ports: int, units: int) -> str | None:
    """Why the buffers ``f`` of a design with ``w_ports`` weight ports and ``units`` compute units do not fit
    ``board``'s memory (None: they fit, or the board file gives no capacity)."""
    memory = board.memory
    if not memory.capacity_gib:
        return None
    of = f"{w_ports} weight port{'s' if w_ports > 1 else ''}" + (f", {units} compute units" if units > 1 else "")
    span = weight_span(f, memory, w_ports)
    if span > 1 and units * span_set(w_ports, span) > memory.channels:
        fit = memory.channels // span_set(w_ports, span)
        return (f"the network's buffers do not fit {board.name}'s memory in {dtype} ({of}): each weight port's "
                f"{fmt_bytes(f.port_bytes(w_ports))} spans {span} of its {memory.channels} banks, and each unit's "
                f"arena and spans take {span_set(w_ports, span)}: at most {fit} compute unit{'s' if fit > 1 else ''}")
    bank, load = max(bank_loads(f, memory.channels, w_ports, units, span).items(), key=lambda bl: bl[1])
    if load <= bank_bytes(memory):
        return None
    where = f"{memory.connectivity}[{bank}]" if memory.connectivity else "its memory"
    return (f"the network's buffers do not fit {board.name}'s memory in {dtype} ({of}): {where} would hold "
            f"{fmt_bytes(load)} of the {fmt_bytes(bank_bytes(memory))} it holds (each unit: weights "
            f"{fmt_bytes(f.weights)}, activations {fmt_bytes(f.arena)})")


def fitting_weight_ports(layers: Sequence[tuple[LayerShape, int]], board: Board, dtype: str,
                         weight_ports: Sequence[int], units: int) -> tuple[int, ...]:
    """The weight ports of ``weight_ports`` whose parts of the weights, with the arena and the parameters, fit
    the banks they are on (more ports, smaller parts); one sentence where none does."""
    f = footprint(layers, dtype)
    fits = tuple(q for q in weight_ports if overflow(f, board, dtype, q, units) is None)
    if not fits:
        why = overflow(f, board, dtype, max(weight_ports), units)
        if dtype != "int8" and overflow(footprint(layers, "int8"), board, "int8", max(weight_ports), units) is None:
            why += "; in int8 they fit (--dtype int8)"
        raise HeteroDSEError(why)
    return fits


def design_span(design: NetworkDesign) -> int:
    """Banks in a row each of the design's weight ports spans (``weight_span``), as ``connectivity.cfg`` says."""
    return weight_span(design_footprint(design), design.board.memory, design.w_ports)


def memory_problem(design: NetworkDesign, units: int | None = None) -> str | None:
    """Why ``design``'s buffers, as its layout deals them, do not fit its board's memory with ``units`` compute
    units (None: its own ``compute_units``); None where they fit."""
    return overflow(design_footprint(design), design.board, design.dtype, design.w_ports,
                     design.compute_units if units is None else units)
