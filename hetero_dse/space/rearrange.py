"""FlexTensor's rearranged space (§4.2): the directions an explorer moves along, for every target's space.

A space's knobs are of two kinds here:

* a **split**: the ways to write a loop as a product of N factors ``[f1 … fN]``. FlexTensor turns this list
  into an N(N−1)/2-dimensional neighbourhood: along direction (i, j) the neighbour grows ``f_i`` and
  shrinks ``f_j``, every other factor unchanged, so that neighbours share most of their structure (and,
  likely, their performance). Each dimension is walked both ways, so a split has N(N−1) directions; the
  step goes to the nearest such factorisation (smallest ``g_i > f_i``).
* an ordered **choice** (reorder choice, unroll depth, data type, clock…): ±1 along its values.

A knob may span several columns of the encoded row: on FPGA a loop's (tile, unroll) pair is one split
``[trips, tile/unroll, unroll]`` (with padded tiles, ``trips`` is the rounded-up count), so that growing the
PE array along a loop and growing its buffer are single moves. Only the pairs the space allows are values.

Everything is a table lookup on encoded rows: ``step[d][v]`` is the value the knob takes from value ``v``
along direction ``d`` (−1 where the direction leads outside the knob). Whether the moved row obeys the
space's other rules (register limits, unroll counts…) is the space's ``valid``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Knob:
    """One knob of a space as the explorers see it.

    Args:
        name: the knob's name, as in points (``split.k``, ``order``…).
        columns: the encoded row's columns it occupies.
        values: ``(n, len(columns))`` the index combinations it can take, one row per value.
        factors: ``(n, N)`` a split's factor lists, row for row with ``values``; None for an ordered choice.
    """

    name: str
    columns: tuple[int, ...]
    values: np.ndarray
    factors: np.ndarray | None = None

    @classmethod
    def choice(cls, name: str, column: int, count: int) -> Knob:
        return cls(name, (column,), np.arange(count, dtype=np.int64)[:, None])

    @classmethod
    def split(cls, name: str, column: int, factors: np.ndarray) -> Knob:
        return cls(name, (column,), np.arange(len(factors), dtype=np.int64)[:, None], np.asarray(factors))


@dataclass(frozen=True)
class Direction:
    knob: int      # index into Neighbourhood.knobs
    grow: int      # split: the factor grown; choice: +1 or -1
    shrink: int    # split: the factor shrunk; choice: -1
    label: str


def split_steps(factors: np.ndarray, grow: int, shrink: int) -> np.ndarray:
    """For each factor list, the index of its neighbour along (grow, shrink), or −1: the list that keeps every
    other factor, has a larger ``grow`` factor and a smaller ``shrink`` factor, and grows it least."""
    f = np.asarray(factors, dtype=np.float64)
    others = [k for k in range(f.shape[1]) if k not in (grow, shrink)]
    same = np.ones((len(f), len(f)), dtype=bool)
    for k in others:
        same &= f[:, None, k] == f[None, :, k]
    ok = same & (f[None, :, grow] > f[:, None, grow]) & (f[None, :, shrink] < f[:, None, shrink])
    # nearest: the smallest grown factor, then the largest shrunk one
    cost = np.where(ok, f[None, :, grow] * 1e6 - f[None, :, shrink], np.inf)
    best = np.argmin(cost, axis=1)
    return np.where(ok.any(axis=1), best, -1).astype(np.int64)


class Neighbourhood:
    """The directions of a space and the moves along them, on encoded rows."""

    def __init__(self, knobs: list[Knob], cardinalities: np.ndarray) -> None:
        # A knob with one value keeps its directions (they never lead anywhere), so that every shape of an
        # operator has the same directions and features: a Q-network trained on one layer loads into another.
        self.knobs = list(knobs)
        self.cardinalities = np.asarray(cardinalities, dtype=np.int64)
        self.directions: list[Direction] = []
        self._steps: list[np.ndarray] = []
        self._lookup: list[tuple[np.ndarray, np.ndarray]] = []  # (radix, dense table: row digits -> value id)
        for ki, knob in enumerate(self.knobs):
            cards = self.cardinalities[list(knob.columns)]
            radix = np.cumprod(np.concatenate([[1], cards[:-1]])).astype(np.int64)
            table = np.full(int(np.prod(cards)), -1, dtype=np.int64)
            table[knob.values @ radix] = np.arange(len(knob.values))
            self._lookup.append((radix, table))
            if knob.factors is None:
                n = len(knob.values)
                for step in (1, -1):
                    target = np.arange(n) + step
                    self._steps.append(np.where((target >= 0) & (target < n), target, -1))
                    self.directions.append(Direction(ki, step, -1, f"{knob.name}{'+' if step > 0 else '-'}1"))
            else:
                parts = knob.factors.shape[1]
                for i in range(parts):
                    for j in range(parts):
                        if i != j:
                            self._steps.append(split_steps(knob.factors, i, j))
                            self.directions.append(Direction(ki, i, j, f"{knob.name}[{i}↑{j}↓]"))
        self._dir_knob = np.array([d.knob for d in self.directions], dtype=np.int64)
        # the steps of each knob's directions as one table (local direction x value id -> target id), so that
        # a batch of moves takes one lookup per knob rather than one per direction
        self._local = np.zeros(len(self.directions), dtype=np.int64)
        self._knob_steps: list[np.ndarray] = []
        for ki in range(len(self.knobs)):
            mine = np.flatnonzero(self._dir_knob == ki)
            self._local[mine] = np.arange(len(mine))
            self._knob_steps.append(np.stack([self._steps[d] for d in mine]) if len(mine)
                                    else np.zeros((0, 0), dtype=np.int64))
        #: the directions of knobs with more than one value: the only ones a random move need try
        self.movable = np.array([i for i, d in enumerate(self.directions) if len(self.knobs[d.knob].values) > 1],
                                dtype=np.int64)

    @property
    def num_directions(self) -> int:
        return len(self.directions)

    def value_ids(self, rows: np.ndarray) -> np.ndarray:
        """``(rows, knobs)``: each knob's value id in each row (−1 for a combination the knob does not have)."""
        rows = np.atleast_2d(rows)
        out = np.empty((len(rows), len(self.knobs)), dtype=np.int64)
        for ki, knob in enumerate(self.knobs):
            radix, table = self._lookup[ki]
            out[:, ki] = table[rows[:, list(knob.columns)] @ radix]
        return out

    def moves(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every row moved along every direction: ``(rows, directions, columns)`` and whether each move exists."""
        rows = np.atleast_2d(rows)
        d = self.num_directions
        moved, exists = self.step(np.repeat(rows, d, axis=0), np.tile(np.arange(d), len(rows)))
        return moved.reshape(len(rows), d, -1), exists.reshape(len(rows), d)

    def step(self, rows: np.ndarray, directions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each row moved along its own direction; and whether that move exists."""
        rows = np.atleast_2d(rows)
        out = rows.copy()
        exists = np.zeros(len(rows), dtype=bool)
        ids = self.value_ids(rows)
        directions = np.asarray(directions, dtype=np.int64)
        knob_of = self._dir_knob[directions]
        for knob_i in np.unique(knob_of):
            hit = np.flatnonzero(knob_of == knob_i)
            knob = self.knobs[knob_i]
            current = ids[hit, knob_i]
            target = np.where(current >= 0,
                              self._knob_steps[knob_i][self._local[directions[hit]], np.maximum(current, 0)], -1)
            ok = target >= 0
            exists[hit] = ok
            out[np.ix_(hit[ok], list(knob.columns))] = knob.values[target[ok]]
        return out, exists

    @property
    def num_features(self) -> int:
        return sum(1 if k.factors is None else k.factors.shape[1] for k in self.knobs)

    def features(self, rows: np.ndarray) -> np.ndarray:
        """The point as the Q-network sees it: log2 of each split factor, each choice's position in [0, 1]."""
        ids = np.maximum(self.value_ids(rows), 0)
        parts = []
        for ki, knob in enumerate(self.knobs):
            if knob.factors is None:
                parts.append((ids[:, ki] / max(len(knob.values) - 1, 1))[:, None])
            else:
                parts.append(np.log2(np.asarray(knob.factors, dtype=np.float64)[ids[:, ki]]))
        if not parts:
            return np.zeros((len(ids), 0), dtype=np.float32)
        return np.concatenate(parts, axis=1).astype(np.float32)


def random_neighbours(space, rows: np.ndarray, rng: np.random.Generator, tries: int = 16,
                      batch: int = 4) -> np.ndarray:
    """One neighbour per row along a random direction, inside ``space`` (its ``valid`` rules); the row itself
    where ``tries`` random directions all lead outside. The directions are tried ``batch`` at a time per
    row (the first that stays inside wins, as if tried one by one), so that a space whose rules reject
    most moves costs a few large calls of ``valid`` rather than many small ones."""
    rows = np.atleast_2d(rows)
    hood: Neighbourhood = space.neighbourhood
    out = rows.copy()
    if not len(hood.movable) or not len(rows):
        return out
    pending = np.arange(len(rows))
    for _ in range(-(-tries // batch)):
        picks = hood.movable[rng.integers(0, len(hood.movable), size=len(pending) * batch)]
        moved, exists = hood.step(np.repeat(rows[pending], batch, axis=0), picks)
        ok = exists.copy()
        if ok.any():
            ok[ok] = space.valid(moved[ok])
        ok = ok.reshape(len(pending), batch)
        found = ok.any(axis=1)
        first = np.argmax(ok, axis=1)
        chosen = moved.reshape(len(pending), batch, -1)[np.arange(len(pending)), first]
        out[pending[found]] = chosen[found]
        pending = pending[~found]
        if not len(pending):
            break
    return out


def nearest_valid(space, row: np.ndarray, depth: int = 2, width: int = 32,
                  chunk: int | None = None) -> np.ndarray | None:
    """``row`` if the space allows it, else the first valid row at most ``depth`` steps away along the
    rearranged directions (searching from ``width`` rows per step, testing ``chunk`` rows per call of
    ``space.valid``, ``width`` by default); None when there is none so near."""
    frontier = np.atleast_2d(np.asarray(row, dtype=np.int64))
    if space.valid(frontier)[0]:
        return frontier[0]
    for _ in range(depth):
        moved, exists = space.neighbourhood.moves(frontier)
        candidates = moved[exists]
        if not len(candidates):
            return None
        # tested a slice at a time, in order: the first valid one is the answer, and a CPU space tests
        # validity point by point in Python
        step = chunk or width
        for start in range(0, len(candidates), step):
            ok = space.valid(candidates[start:start + step])
            if ok.any():
                return candidates[start + int(np.flatnonzero(ok)[0])]
        frontier = candidates[:width]
    return None


def nearest_factors(candidates: np.ndarray, wanted: np.ndarray, outer_weight: float = 0.01) -> int:
    """The index of the factor list of ``candidates`` nearest ``wanted`` in log scale, the outermost factor
    (the trip count, which follows from the loop's extent) counting little."""
    logs = np.log2(np.asarray(candidates, dtype=np.float64))
    gap = np.abs(logs - np.log2(np.asarray(wanted, dtype=np.float64)))
    weights = np.ones(logs.shape[1])
    weights[0] = outer_weight
    return int(np.argmin(gap @ weights))
