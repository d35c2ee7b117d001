"""Exhaustive search: every valid point of a space small enough to enumerate, in chunks."""

from __future__ import annotations

import numpy as np

from hetero_dse.space.fpga import FpgaSpace


class Exhaustive:
    name = "exhaustive"

    def __init__(self, space: FpgaSpace, chunk: int = 1 << 13) -> None:  # chunks that stay in cache
        self._chunks = space.enumerate(chunk)

    def propose(self) -> np.ndarray | None:
        for rows in self._chunks:
            if len(rows):
                return rows
        return None

    def observe(self, rows: np.ndarray, objective: np.ndarray) -> None:
        pass  # nothing to learn: every point is visited anyway
