"""The explorer interface: ``propose() -> rows | None`` then ``observe(rows, objective)``.

Rows are encoded points of a space (see ``hetero_dse.space.fpga``); the objective is what to minimise
(latency, penalised when a design is over a cap). An explorer never evaluates anything itself: the
search loop sends its proposals through the evaluator and tells it the results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np


class Explorer(Protocol):
    name: str

    def propose(self) -> np.ndarray | None:
        """The next batch of rows to evaluate, or None when the explorer has nothing more to try."""

    def observe(self, rows: np.ndarray, objective: np.ndarray) -> None:
        """Results of the last proposal, in the same order."""


@runtime_checkable
class Learner(Protocol):
    """An explorer whose learned state outlives a search (the Q-network, ``--q-state``)."""

    def load(self, path: Path) -> None: ...

    def save(self, path: Path) -> None: ...


def fresh_points(space, count: int, rng: np.random.Generator, seen: set[int], first: bool) -> np.ndarray | None:
    """Up to ``count`` points whose keys are not in ``seen`` (they are added to it), in the order drawn: the first
    round's (:func:`first_round`) where ``first``, else random ones; None where eight draws find none new."""
    for _ in range(8):
        rows = first_round(space, count, rng) if first else space.sample(count, rng)
        new = []
        for i, key in enumerate(space.keys(rows).tolist()):
            if key not in seen:
                seen.add(key)
                new.append(i)
        if new:
            return rows[new]
    return None


def first_round(space, count: int, rng: np.random.Generator) -> np.ndarray:
    """An explorer's first ``count`` points: the space's default point where it has one (the schedule an
    engineer writes first, ``CpuSpace.default_point``), then random points of the space. Every explorer
    starting from random points starts from these, so that comparisons between them stay fair."""
    point = space.default_point()
    if point is None:
        return space.sample(count, rng)
    anchor = space.encode(point)[None, :]
    return anchor if count == 1 else np.concatenate([anchor, space.sample(count - 1, rng)])
