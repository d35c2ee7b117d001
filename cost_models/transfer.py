"""How a read or write process moves a tile between DDR and its on-chip buffer, one port word per cycle.

The process walks the buffer's box with the innermost dimensions *fully unrolled* while they fit in one
port word (``lanes`` elements of a 512-bit beat) and lie contiguously in DDR (every dimension inside them
spans the whole tensor), the next dimension *partially unrolled* by what is left of the word, and the outer
dimensions as a plain loop nest pipelined at II=1. So a [k][c][3][3] weight tile moves 9 elements per
cycle, a 16-wide row of floats 16, a 7-wide row 7.

The same plan is used by the model (``cost_models.fpga``, vectorised) and by the code generator (the loops
of ``read_*``/``write_out`` in ``kernel.cpp``), so the cycles the model charges are the iterations the
generated pipeline runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil, prod


@dataclass(frozen=True)
class TransferPlan:
    """``split``: the partially unrolled dimension (−1: the whole box is one cycle), unrolled by ``lanes``."""

    split: int
    lanes: int
    cycles: int
    elements_per_cycle: int


def transfer_plan(widths: list[int], shape: list[int], lanes: int) -> TransferPlan:
    """The plan for a box of ``widths`` inside a tensor of ``shape`` through a port of ``lanes`` elements."""
    dims = len(widths)
    packed = 1
    for d in range(dims - 1, -1, -1):
        contiguous = d == dims - 1 or widths[d + 1] == shape[d + 1]
        if contiguous and packed * widths[d] <= lanes:
            packed *= widths[d]
            continue
        q = min(widths[d], lanes // packed) if contiguous else 1
        cycles = prod(widths[:d]) * ceil(widths[d] / q)
        return TransferPlan(d, q, cycles, packed * q)
    return TransferPlan(-1, 1, 1, packed)
