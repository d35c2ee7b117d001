"""The pieces the FPGA space is built from: its pruning options, the tile extents a loop may take, and a
buffer's shape as a function of the tiles."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetero_dse.analysis import Access
from hetero_dse.space.base import divisors

__all__ = ["AccessGeometry", "SpaceOptions", "fixed_lane_tiles", "tile_candidates"]


@dataclass(frozen=True)
class SpaceOptions:
    """Pruning of the FPGA space (FlexTensor §4.2 and the I/O optimality condition of seed 001)."""

    max_unrolled_loops: int = 3
    window_limit: int = 11
    padding_waste: float = 0.25
    io_optimal: bool = False  # keep conv tiles with x·y within a factor io_slack of R·z
    io_slack: float = 4.0
    #: a PE array fixed beforehand (one shared by a network's layers): each named loop unrolled by its factor,
    #: no other loop unrolled, and the named loops' tiles whole multiples of their factor (the loop padded up
    #: to one where none of its tile extents is)
    pe: tuple[tuple[str, int], ...] = ()


def fixed_lane_tiles(extent: int, lanes: int, padding_waste: float) -> list[int]:
    """The tiles of a loop a fixed PE array unrolls by ``lanes``: the candidates that are whole multiples of
    it, the lanes' powers-of-two multiples whose padded last tile wastes little, and the whole loop padded up to
    a multiple (a 3-channel image on 64 channel lanes: one tile of 64, 61 zero)."""
    padded = -(-extent // lanes) * lanes
    tiles = {t for t in tile_candidates(extent, padding_waste) if t % lanes == 0} | {padded}
    # the lanes and their powers-of-two multiples too, their last tile padded as the padding rule allows
    multiple = lanes
    while multiple < padded:
        if -(-extent // multiple) * multiple - extent <= max(padding_waste * extent, lanes - 1):
            tiles.add(multiple)
        multiple *= 2
    return sorted(tiles)


def tile_candidates(extent: int, padding_waste: float) -> list[int]:
    """Divisors of ``extent`` and powers of two whose padded last tile wastes at most ``padding_waste``."""
    tiles = set(divisors(extent))
    t = 2
    while t < extent:
        padded = -(-extent // t) * t
        if padded - extent <= padding_waste * extent:
            tiles.add(t)
        t *= 2
    return sorted(tiles)


@dataclass(frozen=True)
class AccessGeometry:
    """A buffer's shape as a function of the tiles: ``width[d] = Σ_l |coef[d, l]|·(tile[l] − 1) + 1``."""

    access: Access
    coef: np.ndarray  # (dims, loops) signed coefficients of the affine index
    shape: tuple[int, ...]
    loops_used: np.ndarray  # (loops,) bool: the loops this access depends on

    @property
    def name(self) -> str:
        return self.access.tensor
