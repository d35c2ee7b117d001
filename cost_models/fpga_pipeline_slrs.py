"""A layer pipeline over a multi-die part's SLRs: its chain of stages cut into kernels, one an SLR, each kernel's
last stage streaming its output to the next kernel over AXI4-Stream (``stream_connect`` in ``connectivity.cfg``,
FINN's partitions of a dataflow graph by SLR). A single kernel that spans SLRs crosses them on unregistered wires
and the clock model derates it (``fpga_clock``); a kernel kept to one SLR is clocked as one SLR, and its stream
to the next is registered at both ends (HLS's axis register slices, ``register_mode=both``), each end in its own
SLR: the crossing goes register to register (*estimate*: no placement confirms it closes; a linker-inserted
register slice in its SLR-crossing mode, PG085, would make sure, and is not in the project).

Where no cut gives every kernel one SLR, a kernel may take a run of adjacent SLRs (``Kernel.also``): its own wires
cross unregistered, and it is derated as any design over that many SLRs, the others still clocked as one. On u280,
ResNet-18 int8's fastest design keeps its stem in SLR0 and the rest in one kernel over SLR1 and SLR2, at 3/4 of the
clock, faster than any cut into one kernel an SLR (whose stages must be narrower to fit) and than the single kernel
over three SLRs at half the clock. Its ``slr=`` names the SLR next to the kernel its stream comes from (the first
kernel's: the one it streams to): a guide the placer follows where it can (``USER_SLR_ASSIGNMENT``, UG912), not a
bound. Not checked: the width of its own wires between its SLRs against the die's SLR-crossing lines.

A cut may fall after a stage only where nothing later reads an earlier tensor (a residual does not cross), and
only where the stage's output word is at most ``CROSSING_BITS`` wide. The kernel after a cut reads the stream and
forks it to the tensor's consumers (the image reader's process, from a stream): one more process, the tensor's
words a trip. Each kernel is charged its own control, AXI-Lite and m_axi adapters, and its ends of the streams.
Not charged: each extra m_axi master's port on the platform's memory interconnect, and its crossing where its
DDR bank sits in another SLR (inside ``fpga_slrs.SLR_INFRASTRUCTURE``'s 10 %).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from cost_models.fpga_costs import SLR_DERATE
from cost_models.fpga_network_clock import design_clock_mhz
from cost_models.fpga_network_resources import kernel_base
from cost_models.fpga_slrs import slr_room
from hetero_dse.hardware.board import RESOURCE_KINDS, Board

__all__ = ["CROSSING_BITS", "CROSSING_REGISTERS", "Kernel", "crossing", "cut_points", "kernel_resources", "over_slrs",
           "place_kernels"]

#: the widest word a stream between kernels carries: the width of the platform's AXI data paths (an Alveo's
#: memory ports); a tensor of wider words is not cut
CROSSING_BITS = 512
#: registers a bit of the word takes at each end of a stream between kernels: HLS's axis register slice
#: (``register_mode=both``: two a bit) at each, and the forking process's input register at the receiving end
#: (*estimate*, as the FPGA review had it: about 4–5 a bit in all); each slice's multiplexers a LUT a bit
CROSSING_REGISTERS = {"out": 2, "in": 3}
_FF, _LUT = RESOURCE_KINDS.index("ff"), RESOURCE_KINDS.index("lut")


@dataclass(frozen=True)
class Kernel:
    """The stages ``first`` … ``last`` (inclusive) as one kernel in SLR ``slr``; ``crossing_bits`` the width of
    the stream it reads from the kernel before (0 for the first, which reads the image from DDR)."""

    first: int
    last: int
    slr: int
    crossing_bits: int = 0
    #: stages whose weights this kernel keeps in another memory than the single kernel would (its SLR is short of
    #: that one): (stage, the memory's name, as ``weights_moves`` names it)
    moved: tuple[tuple[int, str], ...] = ()
    #: the SLRs it takes after ``slr``, adjacent, in order: a kernel one SLR does not hold (none: one SLR)
    also: tuple[int, ...] = ()

    @property
    def slrs(self) -> tuple[int, ...]:
        """Every SLR it takes, ``slr`` first."""
        return (self.slr, *self.also)

    def to_json(self) -> dict[str, Any]:
        return {"first": self.first, "last": self.last, "slr": self.slr, "slrs": list(self.slrs),
                "crossing_bits": self.crossing_bits, "moved": [list(m) for m in self.moved]}


def cut_points(sources: Sequence[int | None], out_bits: Sequence[float]) -> list[bool]:
    """Whether the chain may be cut after each stage (``True`` at ``i``: stage ``i``'s output, tensor ``i + 1``,
    crosses): no later stage adds a residual from a tensor before it (``sources``: the tensor each stage adds,
    0 the image, ``i + 1`` stage ``i``'s output), and its word (``out_bits``) is at most ``CROSSING_BITS``. Never
    after the last stage."""
    n = len(sources)
    earliest = [n + 1] * (n + 1)  # the earliest tensor any stage from i on adds
    for i in range(n - 1, -1, -1):
        earliest[i] = min(earliest[i + 1], n + 1 if sources[i] is None else sources[i])
    return [i < n - 1 and earliest[i + 1] >= i + 1 and out_bits[i] <= CROSSING_BITS for i in range(n)]


def _orders(slrs: int) -> list[list[int]]:
    """Every run of adjacent SLRs a chain can take in order, from each SLR in each direction."""
    runs = []
    for start in range(slrs):
        for step in (1, -1):
            run = list(range(start, slrs if step > 0 else -1, step))
            if run not in runs:
                runs.append(run)
    return runs


def _parts(run: Sequence[int], span: int) -> list[list[list[int]]]:
    """Every way of taking ``run``'s SLRs in order as groups of at most ``span`` adjacent ones, a kernel a group."""
    if not run:
        return [[]]
    return [[list(run[:k]), *rest] for k in range(1, min(span, len(run)) + 1) for rest in _parts(run[k:], span)]


def crossing(bits: float, end: str = "in") -> np.ndarray:
    """What a stream of ``bits``-wide words between two kernels adds at its ``end`` (``out``: the sending kernel's,
    ``in``: the receiving kernel's): its registers and their multiplexers, and at the receiving end the fork's
    control."""
    res = np.zeros(len(RESOURCE_KINDS))
    res[_FF] += CROSSING_REGISTERS[end] * bits
    res[_LUT] += bits + (64 if end == "in" else 0)  # the fork's loop and handshakes (*estimate*)
    return res


def _ends(first: int, last: int, out_bits: Sequence[float]) -> np.ndarray:
    """What a kernel of stages ``first`` … ``last`` spends on its streams: the receiving end of the one from the
    kernel before, the sending end of the one to the next."""
    res = np.zeros(len(RESOURCE_KINDS))
    if first:
        res += crossing(out_bits[first - 1])
    if last < len(out_bits) - 1:
        res += crossing(out_bits[last], "out")
    return res


def _repair(need: np.ndarray, room: np.ndarray, held: np.ndarray, moves: Sequence[tuple[int, str, np.ndarray]]
            ) -> tuple[tuple[int, str], ...] | None:
    """Moves (stage, memory) that bring ``need`` within ``room`` (the resources ``held``), each the one that
    leaves least over, until it fits; None where none helps. Each stage moves once."""
    short = held & (need > room)
    if not moves or not all(any(d[r] < 0 for _, _, d in moves) for r in np.flatnonzero(short)):
        return None  # a resource over its room that no move frees (the DSPs, the registers): none can help
    scale = np.maximum(room[held], 1.0)
    over = lambda v: float(np.sum(np.maximum(v[held] - room[held], 0.0) / scale))  # noqa: E731
    done: dict[int, str] = {}
    left = over(need)
    while left > 0:
        trials = [(over(need + delta), i, a, delta) for i, a, delta in moves if i not in done]
        if not trials:
            return None
        value, i, a, delta = min(trials, key=lambda t: t[0])
        if value >= left:
            return None
        need, left, done[i] = need + delta, value, a
    return tuple(sorted(done.items()))


def place_kernels(board: Board, costs: Sequence[np.ndarray], base: Callable[[int, int], np.ndarray],
                  can_cut: Sequence[bool], out_bits: Sequence[float],
                  moves: Sequence[Sequence[tuple[str, np.ndarray]]] | None = None, span: int = 1
                  ) -> list[Kernel] | None:
    """The fewest kernels, each within one SLR's room (``slr_room``), that the chain of stages of resources
    ``costs`` (each stage's with its regroups; ``RESOURCE_KINDS`` order) can be cut into at ``can_cut``, a kernel
    of stages ``first`` … ``last`` charged ``base(first, last)`` (its control and ports) and its input's crossing.
    Each run of adjacent SLRs is filled greedily, each kernel as many stages as fit: a shorter rest fits wherever a
    longer one does, so greedy finds the fewest kernels wherever any fit, but for the crossing's registers (a later
    cut may cross a wider word). ``moves[i]``: each other memory for stage ``i``'s weights, (its name, what it
    adds to the stage's resources); a kernel over its SLR's room in one memory moves weights to another where that
    brings it within (``_repair``), and says so (``Kernel.moved``). ``span``: the most adjacent SLRs a kernel may
    take, their rooms together (``Kernel.also``); each way of grouping a run's SLRs is filled the same way. None on
    one die, or where no cut fits."""
    if board.slrs <= 1 or not costs:
        return None
    rooms = slr_room(board)
    held = np.array([board.cap(k) > 0 for k in RESOURCE_KINDS])  # a resource the part has: none left is none
    n = len(costs)
    prefix = np.vstack([np.zeros(len(RESOURCE_KINDS)), np.cumsum(np.asarray(costs, dtype=float), axis=0)])

    # how many of the stages up to each free each resource by a move: a kernel short of one no stage of it frees
    # is refused before its moves are tried
    frees = np.vstack([np.zeros(len(RESOURCE_KINDS)), np.cumsum(
        [np.any([d < 0 for _, d in moves[i]], axis=0) if moves and len(moves[i]) else np.zeros(len(RESOURCE_KINDS))
         for i in range(n)], axis=0)])
    tried: dict[tuple[int, int, tuple[int, ...]], tuple[tuple[int, str], ...] | None] = {}

    def fits(first: int, last: int, group: list[int]) -> tuple[tuple[int, str], ...] | None:
        key = (first, last, tuple(group))
        if key not in tried:  # the same kernel on the same SLRs recurs across the runs' groupings
            room = rooms[group].sum(axis=0)
            need = base(first, last) + prefix[last + 1] - prefix[first] + _ends(first, last, out_bits)
            short = held & (need > room)
            if not short.any():
                tried[key] = ()
            elif np.any(short & (frees[last + 1] - frees[first] <= 0)):
                tried[key] = None
            else:
                tried[key] = _repair(need, room, held, [(i, name, d) for i in range(first, last + 1)
                                                        for name, d in moves[i]])
        return tried[key]

    best: list[Kernel] | None = None
    for parts in (p for run in _orders(board.slrs) for p in _parts(run, span)):
        kernels, first = [], 0
        for group in parts:
            if best is not None and len(kernels) >= len(best):
                break
            for last in [n - 1, *(i for i in range(n - 2, first - 1, -1) if can_cut[i])]:
                moved = fits(first, last, group)
                if moved is not None:
                    break
            if moved is None:
                break
            kernels.append(Kernel(first, last, group[0], int(out_bits[first - 1]) if first else 0, moved,
                                  tuple(group[1:])))
            first = last + 1
            if first == n:
                break
        if first == n and (best is None or len(kernels) < len(best)):
            best = kernels
    if best and len(best) > 1 and best[0].also:  # the first kernel's guide: the SLR next to the one it streams to
        order = best[0].slrs[::-1]
        best[0] = replace(best[0], slr=order[0], also=order[1:])
    return best


def kernel_resources(kernel: Kernel, costs: Sequence[np.ndarray], base: Callable[[int, int], np.ndarray],
                     out_bits: Sequence[float], moves: Sequence[Sequence[tuple[str, np.ndarray]]] | None = None
                     ) -> np.ndarray:
    """A kernel's resources: its stages' (with the weights it moved to other memories: ``moves``), its control
    and ports (``base``), its ends of the streams it reads and writes."""
    res = base(kernel.first, kernel.last) + sum(costs[kernel.first:kernel.last + 1]) + _ends(kernel.first, kernel.last,
                                                                                             out_bits)
    for i, name in kernel.moved:
        res = res + dict(moves[i])[name]
    return res


def over_slrs(board: Board, clock_mhz: float, costs: Sequence[np.ndarray], groups: Sequence[tuple[int, np.ndarray]],
              buffers: Sequence[tuple[int, ...]], sources: Sequence[int | None], out_lanes: Sequence[int],
              elem_bits: int, moves: Sequence[Sequence[tuple[str, np.ndarray]]] | None = None
              ) -> tuple[float, list[Kernel], np.ndarray]:
    """``(clock MHz, kernels, resources they add)``: the pipeline of stages of resources ``costs`` (its control and
    ports apart: ``buffers``, the image's, the result's and the weights' as ``pipeline_buffers`` gives them),
    regroups ``groups`` (each the stage it feeds, ``Regroup.stage``, and its resources: in that stage's kernel),
    residual ``sources`` and output lanes ``out_lanes``, cut into kernels one an SLR where that closes faster than
    the single kernel (the clock model derates one that spans SLRs), each kernel at one SLR's clock (its own widest
    broadcast), the slowest the design's; where no such cut fits, kernels of up to two adjacent SLRs and so on,
    each derated by the SLRs it takes; else the single kernel's clock, no kernels and no resources.
    ``moves[i]``: the other memories stage ``i``'s weights could live in (``weights_moves``), a kernel's ``moved``
    naming those it takes."""
    zero = np.zeros(len(RESOURCE_KINDS))
    stage_costs = [np.array(c, dtype=float) for c in costs]
    for stage, res in groups:
        stage_costs[stage] += res
    out_bits = [q * elem_bits for q in out_lanes]
    image, result, weights = buffers
    last = len(costs) - 1

    def base(first: int, end: int) -> np.ndarray:  # the image's port on the first kernel, the result's on the last
        return kernel_base([*([image] if first == 0 else []), *([result] if end == last else []), weights])

    single_mhz = design_clock_mhz(board, clock_mhz, base(0, last) + sum(stage_costs), max(out_lanes))
    if board.slrs <= 1:
        return single_mhz, [], zero

    cuts = cut_points(sources, out_bits)
    # the fewest SLRs a kernel: a kernel over more is derated as the single kernel over as many would be, and
    # none is tried where that derating alone is no faster than the single kernel
    kernels = None
    for span in range(1, board.slrs):
        if span > 1 and single_mhz >= clock_mhz * SLR_DERATE[min(span, 3)]:
            break
        kernels = place_kernels(board, stage_costs, base, cuts, out_bits, moves, span)
        if kernels:
            break
    if not kernels:
        return single_mhz, [], zero
    used = [kernel_resources(k, stage_costs, base, out_bits, moves) for k in kernels]
    mhz = min(design_clock_mhz(board, clock_mhz, res, max(out_lanes[k.first:k.last + 1]), len(k.slrs))
              for k, res in zip(kernels, used, strict=True))
    if mhz <= single_mhz:
        return single_mhz, [], zero
    extra = sum(used, zero) - (base(0, last) + sum(stage_costs))
    return mhz, kernels, extra
