"""Simulated annealing over many chains at once, restarted with FlexTensor's start-point rule (§5.1).

Each round picks ``chains`` start points among the best points seen so far, point ``p`` with probability
proportional to ``exp(-γ (E* − E_p) / E*)`` where ``E = 1 / objective`` is the performance and ``E*``
the best; every chain then walks ``steps`` random neighbour moves, accepting a worse neighbour with
probability ``exp(-Δ / T)`` (Δ the relative loss, T cooling geometrically within the round).
"""

from __future__ import annotations

import numpy as np

from hetero_dse.space.fpga import FpgaSpace


class SimulatedAnnealing:
    name = "sa"

    def __init__(self, space: FpgaSpace, seed: int = 0, chains: int = 512, steps: int = 24, gamma: float = 2.0,
                 temperature: float = 0.1, cooling: float = 0.85, pool: int = 4096) -> None:
        self.space = space
        self.rng = np.random.default_rng(seed)
        self.chains, self.steps, self.gamma = chains, steps, gamma
        self.t0, self.cooling, self.pool_size = temperature, cooling, pool
        self.pool_rows = np.empty((0, space.num_knobs), dtype=np.int64)
        self.pool_obj = np.empty(0)
        self.current: np.ndarray | None = None
        self.current_obj: np.ndarray | None = None
        self.step = 0
        self._pending: str = "start"

    def propose(self) -> np.ndarray | None:
        if self.current is None:
            self._pending = "start"
            if len(self.pool_rows) == 0:
                return self.space.sample(self.chains, self.rng)
            return self._start_points()
        self._pending = "move"
        return self.space.neighbours(self.current, self.rng)

    def _start_points(self) -> np.ndarray:
        finite = np.isfinite(self.pool_obj)
        if not finite.any():
            return self.space.sample(self.chains, self.rng)
        perf = np.where(finite, 1.0 / self.pool_obj, 0.0)
        best = perf.max()
        weight = np.where(finite, np.exp(-self.gamma * (best - perf) / best), 0.0)
        pick = self.rng.choice(len(perf), size=self.chains, p=weight / weight.sum())
        return self.pool_rows[pick]

    def observe(self, rows: np.ndarray, objective: np.ndarray) -> None:
        self._remember(rows, objective)
        if self._pending == "start":
            self.current, self.current_obj, self.step = rows.copy(), objective.copy(), 0
            return
        assert self.current is not None and self.current_obj is not None
        temperature = self.t0 * self.cooling ** self.step
        with np.errstate(invalid="ignore", divide="ignore"):
            loss = (objective - self.current_obj) / self.current_obj
            loss = np.where(np.isfinite(loss), loss, np.inf)
        accept = (loss <= 0) | (self.rng.random(len(rows)) < np.exp(-np.maximum(loss, 0) / temperature))
        self.current[accept] = rows[accept]
        self.current_obj[accept] = objective[accept]
        self.step += 1
        if self.step >= self.steps:
            self.current = None  # next round: new start points from the pool

    def _remember(self, rows: np.ndarray, objective: np.ndarray) -> None:
        rows_all = np.concatenate([self.pool_rows, rows])
        obj_all = np.concatenate([self.pool_obj, objective])
        _, first = np.unique(self.space.keys(rows_all), return_index=True)
        rows_all, obj_all = rows_all[first], obj_all[first]
        keep = np.argsort(obj_all, kind="stable")[: self.pool_size]
        self.pool_rows, self.pool_obj = rows_all[keep], obj_all[keep]
