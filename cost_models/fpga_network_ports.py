"""The network kernel's ports (``hls_templates/network/``): the widths of them all, and of its weight ports how many
a design may read at once, the memory channels they sit on (``connectivity.cfg``), how many of them each engine
reads, and what of a channel's bandwidth each port gets where compute units share the board's channels."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from cost_models.fpga_costs import ARENA_OUTSTANDING, NETWORK_OUTSTANDING

__all__ = ["ARENA_PORTS", "WEIGHT_PORTS", "arena_ports", "kernel_buffers", "kernel_ports", "read_streams", "unit_bank",
           "unit_channels", "unit_share", "weight_bandwidth", "weight_banks", "weight_channels", "weight_layout",
           "weight_reads"]

#: the weights' ports a design may read at once (each past the first another m_axi port): four fill ZCU102's
#: 128-bit HP ports that reach the DDR controller on ports of their own
WEIGHT_PORTS = (1, 2, 3, 4)
#: the ports each of the arena's three streams may spread its word over: a word twice the board's port in two
#: halves, each half on a port of its own at the same address of its own buffer (ZCU102's 128-bit HP ports carry
#: 16 int8 activations a beat, half a 32-lane engine's word)
ARENA_PORTS = (1, 2)


def arena_ports(word_bits: int, port_bits: int) -> int:
    """The ports each arena stream spreads a word of ``word_bits`` over: one where the board's port carries it."""
    return max(1, word_bits // port_bits)


def read_streams(a_ports: int, w_ports: int) -> int:
    """The read channels the kernel streams on at once, each a word a cycle as the model charges it: the box's and
    the residual's ports (``a_ports`` each) and the weight ports. The table's and the parameters' few words share
    one of them; the output's ports write, on the write channels beside."""
    return 2 * a_ports + w_ports


def kernel_ports(act_bits: int, w_bits: int, p_bits: int, w_ports: int, a_ports: int = 1) -> list[int]:
    """The widths of the kernel's m_axi ports' burst buffers, in the order its top function declares the ports:
    the descriptor table's ints (never widened), the activations in, the residual and out (a word each, or over
    ``a_ports`` ports a part each, a stream's ports side by side; out, a write, buffers a strobe bit a byte beside
    its data), each weight port's word, the parameters' word."""
    part = act_bits // a_ports
    return [32, *[part] * (2 * a_ports), *[part + part // 8] * a_ports, *[w_bits] * w_ports, p_bits]


def kernel_buffers(act_bits: int, w_bits: int, p_bits: int, w_ports: int, beats: int, a_ports: int = 1
                   ) -> list[tuple[int, int, int]]:
    """Each port's burst buffer (``kernel_ports``' bits, ``beats`` a burst, the bursts in flight): the arena's
    ports (``hls::burst_maxi``) keep ``ARENA_OUTSTANDING``, the others ``NETWORK_OUTSTANDING``."""
    bits = kernel_ports(act_bits, w_bits, p_bits, w_ports, a_ports)
    return [(b, beats, ARENA_OUTSTANDING if 1 <= q <= 3 * a_ports else NETWORK_OUTSTANDING)
            for q, b in enumerate(bits)]


def weight_reads(lanes: int, wword: int, ports: int, grids: Sequence[int], end_to_end: Sequence[int] = ()) -> int:
    """The weight ports of ``ports`` an engine reads at once, a word from each an iteration: the fewest that bring
    every row it takes (``grids`` lane grids of ``lanes`` weights; the most of them fill its row register) in as
    few iterations as the most would, and no more words an iteration than the register holds. A row is padded at
    its front to whole iterations, but for the grids in ``end_to_end`` (the Winograd engine's 3×3 rows,
    ``EngineShape.row_picks``): where such a row is an iteration or more, the rows lie end to end."""
    words = [g * lanes // wword for g in grids]
    fits = [q for q in range(1, ports + 1) if q <= max(words)]
    iterations = {q: [Fraction(w, q) if g in end_to_end and w >= q else -(-w // q)
                      for g, w in zip(grids, words, strict=True)] for q in fits}
    return min(q for q in fits if iterations[q] == iterations[fits[-1]])


def unit_share(channels: int, units: int, w_ports: int) -> float:
    """Of a memory channel's bandwidth each port of one of ``units`` compute units gets: each unit takes
    ``unit_channels`` channels (its arena's and one for each weight port, as many as ``weight_channels``), the units'
    sets one after the other around the board's channels (``unit_bank``); where they do not all fit, the most
    crowded channel sets the share (9 sets on 4 channels: 3 on one of them, a third each, not 4/9). On a board of
    one channel each unit gets ``1/units`` of it, which bounds the unit's own streams together
    (``layer_cycles``)."""
    if channels == 1:
        return 1.0 / units
    return 1.0 / math.ceil(units * unit_channels(channels, w_ports) / channels)


def unit_channels(channels: int, w_ports: int) -> int:
    """The memory channels one compute unit's ports take on a board of ``channels`` (more than one): its arena's
    and its weights', as ``weight_banks`` places them."""
    return 1 + min(w_ports, weight_channels(channels))


def unit_bank(bank: int, unit: int, channels: int, w_ports: int) -> int:
    """The memory bank of a port of compute unit ``unit`` (from 0) that a lone kernel has on ``bank``
    (``weight_banks``; the arena's 0): unit ``u``'s set of ``unit_channels`` begins where unit ``u - 1``'s ends,
    around the board's ``channels`` (``connectivity.cfg``); each time the sets pass the last channel the ports'
    places within a set turn by one, so that units whose sets are alike do not all put their arenas on one
    channel (each channel's units are as many: ``unit_share`` holds)."""
    if channels == 1:
        return 0
    k = unit_channels(channels, w_ports)
    return (unit * k + (bank + unit * k // channels) % k) % channels


def span_set(w_ports: int, span: int) -> int:
    """Banks one compute unit's set takes where each weight port spans ``span`` banks: the arena's (and the
    parameters') first, each port's span aligned to its length after it (``port_banks``)."""
    return span * (w_ports + 1)


def port_banks(unit: int, channels: int, w_ports: int, span: int = 1) -> dict[str, int | list[int]]:
    """The memory bank of each kind of port of compute unit ``unit`` (from 0): the descriptor table's and the
    arena's (all its streams'), each weight port's in turn (``weight_banks``), the parameters' (the next bank
    after the arena's, the one there is on a board of one); each as ``unit_bank`` moves a lone kernel's. Where each
    weight port spans ``span`` banks in a row (an HBM's pseudo-channels; ``fpga_network_memory.weight_span``), the
    unit's set is ``span_set`` banks after the last unit's: its arena and parameters on the first, each weight
    port's span at a multiple of its length after it (so that a span of 2 or 4 stays within one of the HBM
    switch's groups of four); the memory check keeps the sets within the channels."""
    if span > 1:
        base = unit * span_set(w_ports, span)
        return {"arena": base, "params": base, "weights": [base + span * (q + 1) for q in range(w_ports)]}
    lone = {"arena": 0, "params": 1 % channels}
    banks: dict[str, int | list[int]] = {k: unit_bank(b, unit, channels, w_ports) for k, b in lone.items()}
    banks["weights"] = [unit_bank(b, unit, channels, w_ports) for b in weight_banks(w_ports, channels)]
    return banks


def weight_channels(channels: int) -> int:
    """The memory channels the weights' ports spread over: the arena has the first, the weights the next ones
    (up to one a port) where the board has them (``connectivity.cfg``), else they share what there is."""
    return max(1, min(WEIGHT_PORTS[-1], channels - 1))


def weight_banks(ports: int, channels: int) -> list[int]:
    """The memory bank of each of ``ports`` weight ports (``connectivity.cfg``): in turn over the
    ``weight_channels`` past the arena's first, then the arena's own (where a layer's maps are small its streams
    leave it mostly idle; the model bounds its bytes with that port's words among them), then around again; the
    one there is on a board of one."""
    if channels == 1:
        return [0] * ports
    order = [*range(1, weight_channels(channels) + 1), 0]
    return [order[q % len(order)] for q in range(ports)]


def weight_layout(ports: int, channels: int) -> tuple[int, float]:
    """Of ``ports`` weight ports on a board of ``channels`` (``weight_banks``): the most on one channel (the weight
    process reads them in lockstep, so that channel's share sets every port's rate), and the part of the weights
    that crosses the arena's channel."""
    banks = weight_banks(ports, channels)
    return max(banks.count(b) for b in banks), banks.count(0) / ports


def weight_bandwidth(ports: int, channels: int, channel_words: float) -> float:
    """Weight words a cycle ``ports`` weight ports bring over memory channels that each carry ``channel_words``
    words a cycle, placed as ``weight_banks`` places them: the most crowded channel sets every port's rate (a word
    a cycle at most)."""
    return ports * min(1.0, channel_words / weight_layout(ports, channels)[0])
