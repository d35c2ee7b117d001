"""An FPGA space as the value tables a cost model reads (``cost_models/fpga.py``): what each column of an encoded
row selects, and the geometry of every buffer. The model scores rows from these alone; the space's rules,
sampling and neighbourhoods stay the space's."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetero_dse.analysis import Analysis
from hetero_dse.hardware.board import Board
from hetero_dse.space.fpga_knobs import AccessGeometry

__all__ = ["FpgaTables", "padded_table"]


def padded_table(values: list[np.ndarray]) -> np.ndarray:
    """One row per loop, its choices from the left, padded with 1 (a row never selects the padding)."""
    table = np.ones((len(values), max(len(v) for v in values)), dtype=np.int64)
    for i, v in enumerate(values):
        table[i, : len(v)] = v
    return table


@dataclass(frozen=True)
class FpgaTables:
    """The columns of an encoded row, as values: column ``i < loops`` indexes ``tile_table[i]``, column
    ``loops + i`` ``unroll_table[i]``, then one column each for the order (an index into ``order_positions``:
    each loop's tile-loop level), the data type and the clock. ``reads`` and ``write``: each buffer's
    geometry (its DDR access and the loops that index each of its dimensions)."""

    analysis: Analysis
    board: Board
    dtypes: tuple[str, ...]
    clocks_mhz: tuple[float, ...]
    loop_names: tuple[str, ...]
    num_spatial: int
    extents: np.ndarray
    tile_table: np.ndarray
    unroll_table: np.ndarray
    order_positions: np.ndarray
    reads: tuple[AccessGeometry, ...]
    write: AccessGeometry

    @property
    def loops(self) -> int:
        return len(self.loop_names)

    @property
    def col_order(self) -> int:
        return 2 * self.loops

    @property
    def col_dtype(self) -> int:
        return 2 * self.loops + 1

    @property
    def col_clock(self) -> int:
        return 2 * self.loops + 2

    @property
    def ports(self) -> tuple[AccessGeometry, ...]:
        """The buffers in port order: the reads, then the write."""
        return (*self.reads, self.write)

    def tiles(self, rows: np.ndarray) -> np.ndarray:
        """Each row's tile extent per loop."""
        n = self.loops
        return self.tile_table[np.arange(n), rows[:, :n]]
