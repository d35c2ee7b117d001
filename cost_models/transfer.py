"""How a read or write process moves a tile between DDR and its on-chip buffer: in whole port words.

Every DDR port carries words of ``word = port_bits / element bits`` elements, read and written whole and
aligned (``hls::vector`` over the m_axi port). A box is a set of *runs*, contiguous in DDR: the
dimensions inside ``q`` span whole rows of the DDR tensor and fit a word evenly (``packed`` elements),
so they are unrolled; dimension ``q`` is walked ``lanes = word / packed`` elements a word; the dimensions
outside ``q`` are the runs, one after the other. Each word is one pipeline iteration at ``ii`` cycles
(the most elements of one word that go to the same bank); where dimension ``q`` is partitioned by a
multiple ``sets`` of the lanes, each word's lanes land in one of ``sets`` sets of banks, picked by the
word's index alike for every lane (the code keeps a copy of the lanes per set, banks named at compile
time), so a run is still one word an iteration, one access a cycle that Vitis bursts. A run that does not
start on a word boundary at compile time — a padded input's halo, a tile origin that is not a whole number of words — is
realigned through a funnel of the previous and the current word, one iteration more per run. The
output is laid out padded to whole tiles and its rows to whole words, so a write never touches a word
another tile owns.
An input read as it is may be laid out by the host with one dimension moved innermost; the model plans
every such layout and keeps the fastest (``cost_models.fpga.layouts``), so the plan here is always in the
port's DDR order.

This is a view of ``cost_models.fpga_blocks.plan_transfer``, the one implementation the model (and so
the search) and the code generator (the loops of ``read_*``/``write_out`` in ``kernel.cpp``) share: the
cycles the model charges are the iterations the generated pipeline runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TransferPlan:
    """See the module docstring; ``q`` = −1: the whole box is one run of ``packed`` elements."""

    q: int
    lanes: int
    packed: int
    ii: int
    iterations: int
    runs: int
    funnel: bool
    ok: bool
    static: bool
    sets: int = 1  # the sets of banks a run's words rotate through, picked at run time

    @property
    def cycles(self) -> int:
        return self.runs * self.iterations * self.ii

    @property
    def beats(self) -> int:
        return self.runs * self.iterations


def transfer_plan(widths: Sequence[int], ddr_shape: Sequence[int], factors: Sequence[int], word: int,
                  strides: Sequence[int], static: bool, offset: int) -> TransferPlan:
    """The plan for a box of ``widths``, cyclically partitioned by ``factors``, in a DDR tensor of
    ``ddr_shape`` (−1 where a dimension never spans a whole row) and ``strides``, through words of
    ``word`` elements; ``static``: the tile origins move the box by whole words; ``offset``: where the
    first run starts in its word."""
    from cost_models.fpga_blocks import plan_transfer

    q, lanes, packed, ii, iterations, runs, funnel, ok, static, sets = plan_transfer(
        np.asarray(widths, dtype=np.float64), np.asarray(ddr_shape, dtype=np.float64),
        np.asarray(factors, dtype=np.float64), len(widths), float(word), np.asarray(strides, dtype=np.float64),
        bool(static), float(offset), all(f >= w for f, w in zip(factors, widths, strict=True)))
    return TransferPlan(int(q), int(lanes), int(packed), int(ii), int(iterations), int(runs), bool(funnel), bool(ok),
                        bool(static), int(sets))
