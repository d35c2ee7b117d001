"""The explorer interface: ``propose() -> rows | None`` then ``observe(rows, objective)``.

Rows are encoded points of a space (see ``hetero_dse.space.fpga``); the objective is what to minimise
(latency, penalised when a design is over a cap). An explorer never evaluates anything itself: the
search loop sends its proposals through the evaluator and tells it the results.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Explorer(Protocol):
    name: str

    def propose(self) -> np.ndarray | None:
        """The next batch of rows to evaluate, or None when the explorer has nothing more to try."""

    def observe(self, rows: np.ndarray, objective: np.ndarray) -> None:
        """Results of the last proposal, in the same order."""
