"""Contracts every space and every explorer must keep (Optuna's pattern: one suite, run over every
implementation, so a new one cannot skip it). Each check raises ``AssertionError`` naming what broke.

* **Space**: what ``sample`` draws is ``valid``; ``decode`` then ``encode`` gives the row back; ``valid``
  answers the same for the same rows, before and after sampling (a space is a value); ``neighbours`` stay
  valid; equal rows have equal ``keys`` and distinct rows distinct keys; ``adapt`` of a point to its own space
  is that point's row.
* **Explorer** over a space and an objective: every proposal is valid; the same seed proposes the same
  sequence; through the one search loop, the budget is never exceeded and no row is evaluated twice; on a
  small real space (:func:`toy_space`), the one optimum is found within an eighth of the space.
* **History backend**: see :func:`history_contract`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["explorer_contract", "history_contract", "optimum_contract", "search_contract", "space_contract",
           "toy_space"]


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
    for row in rows[:8]:
        adapted = space.adapt(space.decode(row))
        _require(adapted is not None and bool(np.array_equal(adapted, row)),
                 f"adapt() moved a point of its own space: {row.tolist()} -> "
                 f"{None if adapted is None else adapted.tolist()}")
    default = space.default_point()
    _require(default is None or bool(space.valid(space.encode(default)[None, :])[0]),
             f"default_point() {default} is not a valid point of the space")
    if hasattr(space, "default_points"):  # the default, then the points tried next: valid, each once
        points = space.default_points()
        _require(points[:1] == ([] if default is None else [default]),
                 "default_points() does not start with default_point()")
        if points:
            encoded = np.array([space.encode(p) for p in points])
            _require(bool(space.valid(encoded).all()), "default_points() has a point outside the space")
            _require(len(set(space.keys(encoded).tolist())) == len(points), "default_points() has a point twice")


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


class _Scored:
    """An objective as an evaluator of the search loop, remembering every row it evaluated."""

    def __init__(self, objective: Callable[[np.ndarray], np.ndarray]) -> None:
        self.objective = objective
        self.rows: list[np.ndarray] = []

    def evaluate(self, rows: np.ndarray, best: float | None, deadline: float | None, on_row: Any = None) -> Any:
        from hetero_dse.explore.loop import Evaluation

        self.rows.append(rows)
        values = np.asarray(self.objective(rows), dtype=np.float64)
        if on_row is not None:
            for i, v in enumerate(values.tolist()):
                on_row(i, v, None, None)
        return Evaluation(values)


def search_contract(space: Any, make: Callable[[Any, int], Any], objective: Callable[[np.ndarray], np.ndarray],
                    budget: int = 24, seed: int = 0) -> float:
    """Through the one search loop (``hetero_dse.explore.loop``): at most ``budget`` rows evaluated, each a
    valid row evaluated once. Returns the best objective found."""
    from hetero_dse.explore.loop import run_search

    scored = _Scored(objective)
    run = run_search(space, make(space, seed), scored, budget=budget)
    rows = np.concatenate(scored.rows) if scored.rows else np.empty((0, space.num_knobs), dtype=np.int64)
    _require(run.evaluations == len(rows) <= budget, f"{len(rows)} rows evaluated, {run.evaluations} counted, for a "
                                                     f"budget of {budget}")
    _require(len(set(space.keys(rows).tolist())) == len(rows), "a row was evaluated twice")
    _require(bool(space.valid(rows).all()) if len(rows) else True, "a row outside the space was evaluated")
    return run.best


def toy_space() -> Any:
    """A small real space for finding an optimum: gemm 16×16×16's three-level splits, 15 to a loop (3,375
    points), no other knob and no rule."""
    from hetero_dse.analysis import analyze
    from hetero_dse.ops import get_builtin
    from hetero_dse.space.splits import SplitSpace

    return SplitSpace(analyze(get_builtin("gemm").instantiate({"M": 16, "N": 16, "K": 16})), 3, 3, {})


def optimum_contract(make: Callable[[Any, int], Any], budget: int = 400, seed: int = 0) -> None:
    """The explorer finds the one optimum of :func:`toy_space` under a smooth objective (distance in log2 of
    every split factor to one point's) within ``budget`` evaluations, an eighth of the space."""
    space = toy_space()
    tables = [np.log2(np.array(s, dtype=float)) for s in space.splits]  # per loop: split index -> log2 factors
    target = np.array([len(s) // 2 for s in space.splits], dtype=np.int64)

    def objective(rows: np.ndarray) -> np.ndarray:
        return 1.0 + sum(np.abs(tables[i][rows[:, i]] - tables[i][target[i]]).sum(axis=1)
                         for i in range(len(tables)))

    best = search_contract(space, make, objective, budget=budget, seed=seed)
    _require(best == 1.0, f"the optimum (objective 1.0) was not found in {budget} evaluations: best {best:.3f}")


def history_contract(db: Any) -> None:
    """What every history backend keeps (``hetero_dse.history.HistoryDB`` on any SQLAlchemy URL), on an empty
    database: a workload has one id; the first result of a point stays; records come fastest first and
    failures last; a lookup answers exactly the points stored; export then import into the same database adds
    nothing, and what it exports is what it holds."""
    from hetero_dse.history import Record, Workload, point_key
    from hetero_dse.space.point import Point

    workload = Workload("contract", "contract[A:2x2:float32]{}", '{"kind": "test"}', {"hetero_dse": "contract"})
    wid = db.workload_id(workload)
    _require(db.workload_id(workload) == wid, "the same workload got two ids")
    # knobs out of alphabetical order, as a space lists them: an export sorts them, the key must not care
    fast, slow = Record(Point(split=(2, 3), a=1), 1e-3, source="q"), Record(Point(split=(6, 1), a=2), 2e-3)
    failed = Record(Point(split=(1, 6), a=3), None, "build failed")
    for record in (slow, failed, fast):
        _require(db.add(wid, record) is True, f"adding {record.point} to an empty workload was refused")
    _require(db.add(wid, Record(fast.point, 9.0)) is False, "a second result replaced the first")
    held = db.records(wid)
    _require([r.seconds for r in held] == [1e-3, 2e-3, None], f"records not fastest first: {held}")
    _require(held[2].error == "build failed" and held[0].source == "q", "a record lost its error or source")
    found = db.lookup(wid, [Point(a=1, split=(2, 3)), failed.point, Point(a=9, split=(6, 1))])
    _require(set(found) == {point_key(fast.point), point_key(failed.point)}, f"lookup answered {sorted(found)}")
    _require(point_key(Point(a=1, split=(2, 3))) == point_key(fast.point), "a point's key depends on its knobs' order")
    lines = list(db.export())
    _require(len(lines) == 3, f"export wrote {len(lines)} lines for 3 records")
    _require(db.import_lines(lines) == (0, 3), "importing what was exported added records to the same database")
    _require(sorted(lines) == sorted(db.export()), "export after import differs")
