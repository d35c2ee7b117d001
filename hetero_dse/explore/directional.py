"""Explorers that walk FlexTensor's rearranged space from start points (§5.1), and the P-method.

Every round picks ``starts`` start points of H by the start-point rule (``history.py``) and moves one step
from each along directions of the space's :class:`~hetero_dse.space.rearrange.Neighbourhood`. Which
directions is the subclass's decision: the P-method tries every one, the Q-method (``qlearning.py``) the one
its network values most. A point once proposed is never proposed again, and there is no back-tracking: a
start point none of whose directions leads to a new valid point is set aside for good. When every point of
H is set aside (a small space walked out), fresh random points restart the walk.
"""

from __future__ import annotations

import numpy as np

from hetero_dse.explore.base import first_round, fresh_points
from hetero_dse.explore.history import History


class DirectionalExplorer:
    """The walk shared by the P- and Q-methods; subclasses implement :meth:`choose`."""

    name = "directional"

    def __init__(self, space, seed: int = 0, starts: int = 8, gamma: float = 2.0, pool: int = 4096) -> None:
        if starts < 1:
            raise ValueError("an explorer needs at least one start point")
        self.space = space
        self.hood = space.neighbourhood
        self.rng = np.random.default_rng(seed)
        self.starts, self.gamma = starts, gamma
        self.history = History(space, pool)
        self.visited: set[int] = set()
        self.set_aside: set[int] = set()
        #: per row of the last proposal: (start row, start objective, direction) or None for a fresh point
        self._moves: list[tuple[np.ndarray, float, int] | None] = []
        self.rounds = 0

    # ------------------------------------------------------------------------------------------ ask
    def propose(self) -> np.ndarray | None:
        rows: list[np.ndarray] = []
        self._moves = []
        while not rows:
            picks = self.history.start_points(self.starts, self.gamma, self.rng, replace=False,
                                              exclude=self.set_aside)
            if not len(picks):
                return self._fresh()
            start_rows = self.history.rows[picks]
            moved, keys, usable = self._candidates(start_rows)
            self.prepare(start_rows)
            for b, pick in enumerate(picks):
                # directions already taken this round by another start point lead to visited points now
                dirs = np.array([d for d in np.flatnonzero(usable[b]) if keys[b, d] not in self.visited],
                                dtype=np.int64)
                if not len(dirs):
                    self.set_aside.add(self._key(start_rows[b]))
                    continue
                for d in self.choose(b, dirs):
                    self.visited.add(int(keys[b, d]))
                    rows.append(moved[b, d])
                    self._moves.append((start_rows[b], float(self.history.objective[pick]), int(d)))
        return np.array(rows)

    def prepare(self, starts: np.ndarray) -> None:
        """Called with the round's start points before :meth:`choose` is asked about each."""

    def choose(self, start: int, directions: np.ndarray) -> list[int]:
        """The directions to try from the round's start point number ``start`` among ``directions`` (each
        leads to a new valid point)."""
        raise NotImplementedError

    def _candidates(self, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every start moved along every direction, the moved rows' keys, and which moves reach a valid
        point not visited yet."""
        moved, usable = self.hood.moves(starts)
        keys = self.space.keys(moved.reshape(-1, moved.shape[-1])).reshape(usable.shape)
        usable &= np.array([int(k) not in self.visited for k in keys.ravel()]).reshape(usable.shape)
        if usable.any():
            usable[usable] = self.space.valid(moved[usable])
        return moved, keys, usable

    def _fresh(self) -> np.ndarray | None:
        """Random points not visited yet (the first round, or a restart); None when none can be found."""
        rows = fresh_points(self.space, self.starts, self.rng, self.visited, first=not self.rounds)
        if rows is not None:
            self._moves = [None] * len(rows)
        return rows

    def _key(self, row: np.ndarray) -> int:
        return int(self.space.keys(row[None, :])[0])

    # ----------------------------------------------------------------------------------------- tell
    def observe(self, rows: np.ndarray, objective: np.ndarray) -> None:
        self.rounds += 1
        self.history.add(rows, objective)
        self.learn(rows, np.asarray(objective, dtype=np.float64))

    def learn(self, rows: np.ndarray, objective: np.ndarray) -> None:
        """What a subclass makes of the moves of the last round (``self._moves``, row for row)."""


class PMethod(DirectionalExplorer):
    """FlexTensor's P-method: every direction from every start point, each round (the Q-method's control)."""

    name = "p"

    def choose(self, start: int, directions: np.ndarray) -> list[int]:
        return list(directions)


class RandomSearch:
    """Random sampling of the space, never the same point twice: the control every explorer must beat."""

    name = "random"

    def __init__(self, space, seed: int = 0, batch: int = 8) -> None:
        self.space = space
        self.rng = np.random.default_rng(seed)
        self.batch = batch
        self.visited: set[int] = set()

    def propose(self) -> np.ndarray | None:
        for _ in range(16):
            rows = self.space.sample(self.batch, self.rng) if self.visited else \
                first_round(self.space, self.batch, self.rng)
            keys = self.space.keys(rows)
            _, first = np.unique(keys, return_index=True)
            new = [i for i in np.sort(first) if int(keys[i]) not in self.visited]
            if new:
                self.visited.update(int(keys[i]) for i in new)
                return rows[new]
        return None

    def observe(self, rows: np.ndarray, objective: np.ndarray) -> None:
        pass  # nothing to learn: that is the point of a control
