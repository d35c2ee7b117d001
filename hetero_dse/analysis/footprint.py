"""Exact footprints of affine accesses over a rectangular tile of loops.

The footprint of ``T[f_1(x), …, f_n(x)]`` over a tile (each loop x_v in ``[0, t_v)``) is the number of
distinct index tuples the tile touches. It is not the bounding box: a stride-2 window with a 1-wide
kernel tile touches every other row. Dimensions that share no loop are independent, so the count is a
product over groups of dimensions linked by shared loops (a shift convolution links its channel and
spatial dimensions); inside a group the distinct tuples are counted exactly by growing the set of
reachable linearised indices one loop at a time, never larger than the footprint itself.

The count is for a tile away from the tensor's edges (translation does not change it); a tile that
hangs over an edge touches fewer elements, which only a bound check at the edge can tell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from hetero_dse.analysis.expr import AffineExpr


def footprint(indices: Sequence[AffineExpr], tile: Mapping[str, int]) -> int:
    """Distinct elements touched by ``indices`` when each loop ``v`` runs over ``range(tile[v])``.

    Loops missing from ``tile`` are taken as extent 1 (held fixed).
    """
    total = 1
    for group in _linked_dimensions(indices):
        total *= _distinct_tuples([indices[d] for d in group], tile)
    return total


def bounding_box(indices: Sequence[AffineExpr], tile: Mapping[str, int]) -> tuple[int, ...]:
    """Width of the touched range along each dimension (what a rectangular buffer must hold)."""
    return tuple(_width(ix, tile) for ix in indices)


def _width(ix: AffineExpr, tile: Mapping[str, int]) -> int:
    return 1 + sum(abs(c) * (max(tile.get(name, 1), 1) - 1) for name, c in ix.terms)


def _linked_dimensions(indices: Sequence[AffineExpr]) -> list[list[int]]:
    """Group dimensions that share a loop (union-find over loops)."""
    parent = list(range(len(indices)))

    def root(d: int) -> int:
        while parent[d] != d:
            parent[d] = parent[parent[d]]
            d = parent[d]
        return d

    owner: dict[str, int] = {}
    for d, ix in enumerate(indices):
        for name in ix.loops:
            if name in owner:
                parent[root(d)] = root(owner[name])
            else:
                owner[name] = d
    groups: dict[int, list[int]] = {}
    for d in range(len(indices)):
        groups.setdefault(root(d), []).append(d)
    return list(groups.values())


def _distinct_tuples(dims: Sequence[AffineExpr], tile: Mapping[str, int]) -> int:
    loops: dict[str, list[int]] = {}
    for d, ix in enumerate(dims):
        for name, c in ix.terms:
            if tile.get(name, 1) > 1:
                loops.setdefault(name, [0] * len(dims))[d] = c
    if not loops:
        return 1
    if len(dims) == 1 and len(loops) == 1:
        return tile[next(iter(loops))]  # one loop, non-zero coefficient: all values distinct
    # Linearise a tuple inside the bounding box in mixed radix; distinct codes <=> distinct tuples.
    widths = [_width(ix, tile) for ix in dims]
    radix = np.cumprod([1] + widths[:-1], dtype=np.int64)
    codes = np.zeros(1, dtype=np.int64)
    for name, coeffs in loops.items():
        step = int(np.dot(coeffs, radix))
        codes = np.unique((codes[:, None] + step * np.arange(tile[name], dtype=np.int64)[None, :]).ravel())
    return int(codes.size)
