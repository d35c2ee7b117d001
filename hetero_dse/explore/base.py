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
    """An explorer's first ``count`` points: the space's default points where it has them (the schedule an
    engineer writes first, ``CpuSpace.default_point``, then the register tiles tried next,
    ``CpuSpace.default_points``; the first ``count`` of them where the round is smaller), then as many neighbours
    of the first (one move along a direction of the rearranged space, drawn at random) as the space's
    ``near_default`` share of the rest asks for, in turn with random points of the space, none twice. Every
    explorer starting from random points starts from these, so that comparisons between them stay fair."""
    points = default_points(space)
    if not points:
        return space.sample(count, rng)
    anchors = np.concatenate([space.encode(p)[None, :] for p in points])[:count]
    anchor = anchors[:1]
    if count <= len(anchors):
        return anchors
    share = int(getattr(space, "near_default", 0.0) * (count - len(anchors)) + 0.5)
    near = default_neighbours(space, anchor, share, rng, besides=anchors)
    rest = count - len(anchors) - len(near)
    drawn = _draws(space, rest, rng, set(space.keys(np.concatenate([anchors, near])).tolist())) if rest else anchor[:0]
    # neighbours and random points in turn, so that a budget that cuts the round keeps the share
    mixed = [row for pair in zip(near, drawn, strict=False) for row in pair]
    mixed += list(near[len(drawn):]) + list(drawn[len(near):])
    return np.concatenate([anchors, np.array(mixed, dtype=anchor.dtype).reshape(-1, anchor.shape[1])])


def _draws(space, count: int, rng: np.random.Generator, taken: set[int]) -> np.ndarray:
    """Up to ``count`` random rows of ``space``, none twice and none whose key is in ``taken``: fresh random
    points (:func:`fresh_points`) drawn until there are ``count`` or the draws find none new."""
    rows: list[np.ndarray] = []
    while len(rows) < count and (new := fresh_points(space, count - len(rows), rng, taken, first=False)) is not None:
        rows.extend(new)
    return np.array(rows) if rows else np.empty((0, space.num_knobs), dtype=np.int64)


def default_points(space) -> list:
    """The space's default points (``CpuSpace.default_points``); its one default point where it names no others;
    none where it has none."""
    if hasattr(space, "default_points"):
        return space.default_points()
    point = space.default_point()
    return [] if point is None else [point]


def default_neighbours(space, anchor: np.ndarray, count: int, rng: np.random.Generator,
                       besides: np.ndarray | None = None) -> np.ndarray:
    """Up to ``count`` distinct valid neighbours of ``anchor`` (one row), drawn at random among its moves, none
    of the rows ``besides``."""
    if count <= 0 or not hasattr(space, "neighbourhood"):
        return anchor[:0]
    moved, exists = space.neighbourhood.moves(anchor)
    near = moved[0][exists[0]]
    near = near[space.valid(near)] if len(near) else near
    if not len(near):
        return anchor[:0]
    _, distinct = np.unique(space.keys(near), return_index=True)
    near = near[np.sort(distinct)]
    if besides is not None and len(near):
        near = near[~np.isin(space.keys(near), space.keys(besides))]
    return near[rng.permutation(len(near))[:count]]
