"""The set H of evaluated points and FlexTensor's start-point rule (§5.1, heuristic method).

A point ``p`` of H is chosen as a start point with probability proportional to ``exp(−γ (E* − E_p) / E*)``,
where ``E = 1 / objective`` is its performance and ``E*`` the best in H: the closer to the best, the likelier.
Failed points (infinite objective) are never start points.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np


class History:
    """The ``size`` best distinct evaluated rows of a space, with their objective (lower is better)."""

    def __init__(self, space, size: int = 4096) -> None:
        self.space = space
        self.size = size
        self.rows = np.empty((0, space.num_knobs), dtype=np.int64)
        self.objective = np.empty(0)

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, rows: np.ndarray, objective: np.ndarray) -> None:
        rows_all = np.concatenate([self.rows, np.atleast_2d(rows)])
        obj_all = np.concatenate([self.objective, np.asarray(objective, dtype=np.float64)])
        _, first = np.unique(self.space.keys(rows_all), return_index=True)
        rows_all, obj_all = rows_all[first], obj_all[first]
        keep = np.argsort(obj_all, kind="stable")[: self.size]
        self.rows, self.objective = rows_all[keep], obj_all[keep]

    @property
    def best(self) -> float:
        return float(self.objective.min()) if len(self.objective) else float("inf")

    def start_points(self, count: int, gamma: float, rng: np.random.Generator, *, replace: bool = True,
                     exclude: Collection[int] = ()) -> np.ndarray:
        """Indices into ``rows`` of ``count`` start points (fewer without replacement when H is small);
        rows whose key is in ``exclude`` are never chosen."""
        ok = np.isfinite(self.objective)
        if exclude and ok.any():
            ok &= ~np.isin(self.space.keys(self.rows), np.fromiter(exclude, dtype=np.int64, count=len(exclude)))
        if not ok.any():
            return np.empty(0, dtype=np.int64)
        perf = np.where(ok, 1.0 / np.where(ok, self.objective, 1.0), 0.0)
        best = perf.max()
        weight = np.where(ok, np.exp(-gamma * (best - perf) / best), 0.0)
        size = count if replace else min(count, int(ok.sum()))
        return rng.choice(len(perf), size=size, replace=replace, p=weight / weight.sum())
