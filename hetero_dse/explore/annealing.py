"""Simulated annealing over many chains at once, restarted with FlexTensor's start-point rule (§5.1).

Each round picks ``chains`` start points among the best points seen so far, point ``p`` with probability
proportional to ``exp(-γ (E* − E_p) / E*)`` where ``E = 1 / objective`` is the performance and ``E*``
the best; every chain then walks ``steps`` random neighbour moves, accepting a worse neighbour with
probability ``exp(-Δ / T)`` (Δ the relative loss, T cooling geometrically within the round).
"""

from __future__ import annotations

import numpy as np

from hetero_dse.explore.base import first_round
from hetero_dse.explore.history import History


class SimulatedAnnealing:
    name = "sa"

    def __init__(self, space, seed: int = 0, chains: int = 512, steps: int = 24, gamma: float = 2.0,
                 temperature: float = 0.1, cooling: float = 0.85, pool: int = 4096) -> None:
        self.space = space
        self.rng = np.random.default_rng(seed)
        self.chains, self.steps, self.gamma = chains, steps, gamma
        self.t0, self.cooling = temperature, cooling
        self.history = History(space, pool)
        self.current: np.ndarray | None = None
        self.current_obj: np.ndarray | None = None
        self.step = 0
        self._pending: str = "start"

    def propose(self) -> np.ndarray | None:
        if self.current is None:
            self._pending = "start"
            starts = self.history.start_points(self.chains, self.gamma, self.rng)
            if not len(starts):
                return first_round(self.space, self.chains, self.rng)
            return self.history.rows[starts]
        self._pending = "move"
        return self.space.neighbours(self.current, self.rng)

    def observe(self, rows: np.ndarray, objective: np.ndarray) -> None:
        self.history.add(rows, objective)
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
