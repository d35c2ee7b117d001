"""How a read or write process moves a tile between DDR and its on-chip buffer.

The process walks the buffer's box with the innermost dimensions *fully unrolled* while they are
completely partitioned, fit in one port word (``lanes`` elements of a beat of the board's ``port_bits``)
and lie contiguously in DDR (every dimension inside them spans the whole tensor); the next dimension is
*partially unrolled* by its partition factor where that fits what is left of the word (else one element a
cycle), so that every element written in a cycle goes to its own bank, chosen at compile time; the outer
dimensions are a plain loop nest pipelined at II=1.

This is a view of ``cost_models.fpga_kernel.plan_transfer``, the one implementation the model (and so
the search) and the code generator (the loops of ``read_*``/``write_out`` in ``kernel.cpp``) share: the
cycles the model charges are the iterations the generated pipeline runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TransferPlan:
    """``split``: the partially unrolled dimension (−1: the whole box is one cycle), unrolled by ``lanes``."""

    split: int
    lanes: int
    cycles: int
    elements_per_cycle: int


def transfer_plan(widths: Sequence[int], shape: Sequence[int], factors: Sequence[int], lanes: int) -> TransferPlan:
    """The plan for a box of ``widths``, cyclically partitioned by ``factors``, inside a tensor of
    ``shape``, through a port of ``lanes`` elements."""
    from cost_models.fpga_kernel import plan_transfer

    split, q, cycles, per_cycle = plan_transfer(np.asarray(widths, dtype=np.float64),
                                                np.asarray(shape, dtype=np.float64),
                                                np.asarray(factors, dtype=np.float64), len(widths), float(lanes))
    return TransferPlan(int(split), int(q), int(cycles), int(per_cycle))
