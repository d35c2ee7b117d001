"""Contracts every space and every explorer must keep (Optuna's pattern: one suite, run over every
implementation, so a new one cannot skip it). Each check raises ``AssertionError`` naming what broke.

* **Space**: what ``sample`` draws is ``valid``; ``decode`` then ``encode`` gives the row back; ``valid``
  answers the same for the same rows, before and after sampling (a space is a value); ``neighbours`` stay
  valid; equal rows have equal ``keys`` and distinct rows distinct keys; ``adapt`` of a point to its own space
  is that point's row.
* **Explorer** over a space and an objective: every proposal is valid; the same seed proposes the same
  sequence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["explorer_contract", "space_contract"]


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def space_contract(space: Any, seed: int = 0, count: int = 48) -> None:
    rng = np.random.default_rng(seed)
    rows = space.sample(count, rng)
    _require(len(rows) > 0, "sample drew nothing")
    valid = space.valid(rows)
    _require(bool(valid.all()), f"sample drew {int((~valid).sum())} rows valid() refuses")
    # validity is a function of the row: the same answer for the same rows, in any company
    mixed = np.concatenate([rows, rng.integers(0, np.asarray(space.cardinalities), size=rows.shape)])
    first, again = space.valid(mixed), space.valid(mixed[::-1])[::-1]
    _require(bool(np.array_equal(first, again)), "valid() answers differently for the same rows")
    # a space is a value: drawing from it changes nothing it answers
    space.sample(count, np.random.default_rng(seed + 1))
    _require(bool(np.array_equal(space.valid(mixed), first)), "sampling changed which rows are valid")
    for row in rows[:16]:
        back = space.encode(space.decode(row))
        _require(bool(np.array_equal(back, row)), f"encode(decode(row)) is {back.tolist()}, not {row.tolist()}")
    keys = space.keys(rows)
    unique_rows = {tuple(r) for r in rows.tolist()}
    _require(len(set(keys.tolist())) == len(unique_rows), "keys() does not tell distinct rows apart")
    moved = space.neighbours(rows, rng)
    ok = space.valid(moved)
    _require(bool(ok.all()), f"neighbours() left the space for {int((~ok).sum())} rows")
    if hasattr(space, "adapt"):
        for row in rows[:8]:
            adapted = space.adapt(space.decode(row))
            _require(adapted is not None and bool(np.array_equal(adapted, row)),
                     f"adapt() moved a point of its own space: {row.tolist()} -> "
                     f"{None if adapted is None else adapted.tolist()}")


def explorer_contract(space: Any, make: Callable[[Any, int], Any], objective: Callable[[np.ndarray], np.ndarray],
                      rounds: int = 6, seed: int = 0) -> None:
    """``make(space, seed)`` an explorer; ``objective(rows)`` what it minimises. Runs ``rounds`` rounds of
    propose/observe twice with one seed."""

    def run() -> list[np.ndarray]:
        explorer = make(space, seed)
        seen = []
        for _ in range(rounds):
            proposal = explorer.propose()
            if proposal is None:
                break
            proposal = np.atleast_2d(np.asarray(proposal, dtype=np.int64))
            ok = space.valid(proposal)
            _require(bool(ok.all()), f"{getattr(explorer, 'name', explorer)} proposed {int((~ok).sum())} rows "
                                     "outside the space")
            seen.append(proposal)
            explorer.observe(proposal, objective(proposal))
        return seen

    first, second = run(), run()
    _require(len(first) > 0, "the explorer proposed nothing")
    _require(len(first) == len(second) and all(np.array_equal(a, b) for a, b in zip(first, second, strict=True)),
             "the same seed proposed another sequence")
