"""The pieces the FPGA space is built from: its pruning options, the tile extents a loop may take, and a
buffer's shape as a function of the tiles."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetero_dse.analysis import Access
from hetero_dse.space.base import divisors

__all__ = ["AccessGeometry", "SpaceOptions", "tile_candidates"]


@dataclass(frozen=True)
class SpaceOptions:
    """Pruning of the FPGA space (FlexTensor §4.2 and the I/O optimality condition of seed 001)."""

    max_unrolled_loops: int = 3
    window_limit: int = 11
    padding_waste: float = 0.25
    io_optimal: bool = False  # keep conv tiles with x·y within a factor io_slack of R·z
    io_slack: float = 4.0


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
