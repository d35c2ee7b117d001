"""What every design space is: a :class:`Space` (the protocol the search loop, the explorers and the
contract kit rely on), :class:`Enumerable` for the spaces small enough to walk whole, and the pieces the
FPGA and CPU/GPU spaces share."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol, runtime_checkable

import numpy as np

from hetero_dse.errors import HeteroDSEError
from hetero_dse.space.point import Point

__all__ = ["Enumerable", "Space", "SpaceError", "adapt_points", "divisors"]


class SpaceError(HeteroDSEError):
    """A point outside its space, or a space that cannot be built."""


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` in increasing order (trial division up to its square root: 10^9 takes 30,000
    steps, not a billion)."""
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d != n // d:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def adapt_points(space: Space, points: Iterable[Point], count: int | None = None) -> np.ndarray:
    """Points of the same operator at other extents as distinct rows of ``space`` (``Space.adapt``), in order, at
    most ``count``: one with no valid row near, or adapting to a row already taken, is left out."""
    rows, keys = [], set()
    for point in points:
        if count is not None and len(rows) == count:
            break
        row = space.adapt(point)
        if row is None:
            continue
        key = int(space.keys(row[None, :])[0])
        if key not in keys:
            keys.add(key)
            rows.append(row)
    return np.array(rows, dtype=np.int64).reshape(-1, space.num_knobs)


class Space(Protocol):
    """Points encoded as integer rows, one column per knob (the index of its value)."""

    cardinalities: np.ndarray

    @property
    def num_knobs(self) -> int: ...

    def keys(self, rows: np.ndarray) -> np.ndarray:
        """One integer per row, equal for equal rows."""

    def valid(self, rows: np.ndarray) -> np.ndarray:
        """Which rows obey the space's rules."""

    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """``count`` valid rows (fewer, never none, where the rules keep too few for the draws to find)."""

    def decode(self, row: np.ndarray) -> Point: ...

    def encode(self, point: Point) -> np.ndarray: ...

    def neighbours(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One valid neighbour per row along FlexTensor's rearranged directions."""

    def adapt(self, point: Point) -> np.ndarray | None:
        """The row nearest ``point``, a point of the same operator at other extents."""

    def default_point(self) -> Point | None:
        """The point an engineer would write first, measured in every explorer's first round (None: none)."""


@runtime_checkable
class Enumerable(Protocol):
    """A space the exhaustive explorer can walk whole."""

    def enumerate(self, chunk: int = ...) -> Iterator[np.ndarray]: ...

    def pruned_size(self) -> int: ...
