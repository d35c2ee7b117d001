"""The one search loop of every target: explorer proposals → one gate (deduplication, budget, time) → an
evaluator → what the observers keep, and one rule for what the explorer is told.

* **Evaluator** (:class:`Evaluator`): rows in, an :class:`Evaluation` out — the objective of each row it
  evaluated (``inf``: a failed or infeasible point), in order, why each failed row failed (``errors``), and
  what else it knows (``figures``). It may stop before the end at the deadline (a measured trial takes
  seconds): the rows it did not reach are not spent. The evaluators are ``hetero_dse.evaluate``'s: the FPGA
  model, measured TVM trials, the GPU roofline estimate, and the history database in front of any of them.
* **Budget** is distinct points evaluated (answers from a history count: they are points of this search);
  **time** is checked between rounds and, by an evaluator that takes long, between points.
* **Patience**: rounds that evaluate something without improving the best objective. **Stale rounds**: rounds
  that bring nothing new.
* **The explorer** hears about every row it proposed, rows seen before answered from the gate's memory. Where
  a round was cut (budget, time), the search ends there and the explorer is told nothing: a row never
  evaluated is not a failure to learn from.
* **Ctrl-C** ends the search; what was evaluated is kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = ["ENDS", "STALE_ROUNDS", "Evaluation", "Evaluator", "LoopResult", "Observer", "OnRow", "run_search"]

#: Proposals in a row that bring nothing new before a search is declared converged.
STALE_ROUNDS = 64


@dataclass
class Evaluation:
    """The objective of the first ``len(objective)`` rows asked for; for each, the reason it has no time (None:
    it has one; ``errors`` None: no row failed), and the evaluator's other figures."""

    objective: np.ndarray
    figures: Any = None
    errors: Sequence[str | None] | None = None

    def error(self, i: int) -> str | None:
        """Why row ``i`` has no time (None: it has one)."""
        return None if self.errors is None else self.errors[i]


#: told as each row is evaluated: its index in the rows asked for, its time in seconds (None: failed), the
#: error that kept it from having one, and how the time was taken (a measurement's spread and conditions:
#: ``{"repeats", "foreign_load", "loaded", ...}``; None for a model)
OnRow = Callable[[int, "float | None", "str | None", "dict | None"], None]


class Evaluator(Protocol):
    def evaluate(self, rows: np.ndarray, best: float | None, deadline: float | None,
                 on_row: OnRow | None = None) -> Evaluation:
        """Evaluate ``rows`` in order (``best``: the best objective so far, for cutting slow candidates
        short; ``deadline``: a ``time.perf_counter()`` to stop at, between rows; ``on_row``: told about each
        row the moment its result exists, so that a run killed mid-batch keeps what it measured)."""


class Observer(Protocol):
    def update(self, rows: np.ndarray, evaluation: Evaluation) -> None:
        """Rows just evaluated and their evaluation (same length)."""


@dataclass
class LoopResult:
    evaluations: int = 0
    wall_s: float = 0.0
    interrupted: bool = False
    best: float = float("inf")
    #: (points evaluated, best objective so far) each time the best improved: the search's convergence
    convergence: list[tuple[int, float]] = field(default_factory=list)
    #: why the search ended, as a person reads it (``ENDS``)
    ended: str = ""


#: why a search ends
ENDS = {"budget": "the budget of points was spent", "time": "the time budget was spent",
        "patience": "rounds in a row brought no better point (patience)",
        "converged": "the explorer proposed nothing new for many rounds", "explorer": "the explorer ended",
        "interrupted": "interrupted"}


class _Gate:
    """Deduplicates proposals (a point is never evaluated twice) and enforces the budget."""

    def __init__(self, space: Any, budget: int | None, dedupe: bool) -> None:
        self.space = space
        self.budget = budget
        self.used = 0
        self.dedupe = dedupe
        self.seen = np.empty(0, dtype=np.int64)
        self.seen_objective = np.empty(0)

    def admit(self, rows: np.ndarray) -> np.ndarray:
        """The rows of ``rows`` not seen before, cut to what is left of the budget."""
        if self.dedupe and len(rows):
            keys, first = np.unique(self.space.keys(rows), return_index=True)
            if len(self.seen):
                pos = np.minimum(np.searchsorted(self.seen, keys), len(self.seen) - 1)
                new = self.seen[pos] != keys
            else:
                new = np.ones(len(keys), dtype=bool)
            rows = rows[np.sort(first[new])]
        if self.budget is not None:
            rows = rows[: max(self.budget - self.used, 0)]
        self.used += len(rows)
        return rows

    def give_back(self, count: int) -> None:
        """Rows admitted but never evaluated (the evaluator stopped at the deadline)."""
        self.used -= count

    def record(self, rows: np.ndarray, objective: np.ndarray) -> None:
        """Remember the objective of newly evaluated rows, so that repeated proposals are answered from here."""
        if not self.dedupe or not len(rows):
            return
        keys = self.space.keys(rows)
        merged = np.concatenate([self.seen, keys])
        values = np.concatenate([self.seen_objective, np.asarray(objective, dtype=np.float64)])
        order = np.argsort(merged, kind="stable")
        self.seen, self.seen_objective = merged[order], values[order]

    def recall(self, rows: np.ndarray) -> np.ndarray | None:
        """Objectives of ``rows``, or None where one of them was never evaluated."""
        if not len(self.seen):
            return None
        keys = self.space.keys(rows)
        pos = np.minimum(np.searchsorted(self.seen, keys), len(self.seen) - 1)
        if (self.seen[pos] != keys).any():
            return None
        return self.seen_objective[pos]

    @property
    def exhausted(self) -> bool:
        return self.budget is not None and self.used >= self.budget


def run_search(space: Any, explorer: Any, evaluator: Evaluator, *, budget: int | None = None,
               time_budget_s: float | None = None, patience: int | None = None, dedupe: bool = True,
               observers: Sequence[Observer] = (), on_round: Callable[[int], None] | None = None) -> LoopResult:
    """Run ``explorer`` over ``space`` until it stops, the budget of points or seconds is spent, ``patience``
    rounds bring no better objective, nothing new comes for ``STALE_ROUNDS`` rounds, or Ctrl-C.
    ``dedupe=False`` (the exhaustive explorer, which never repeats itself) skips the gate's memory.
    ``on_round(evaluations)`` is called after every round."""
    result = LoopResult()
    gate = _Gate(space, budget, dedupe)
    start = time.perf_counter()
    deadline = start + time_budget_s if time_budget_s is not None else None
    stale = since_better = 0
    ended = "budget"
    try:
        while not gate.exhausted:
            if deadline is not None and time.perf_counter() >= deadline:
                ended = "time"
                break
            proposal = explorer.propose()
            if proposal is None:
                ended = "explorer"
                break
            proposal = np.atleast_2d(np.asarray(proposal, dtype=np.int64))
            rows = gate.admit(proposal)
            stale = stale + 1 if len(rows) == 0 else 0
            if stale >= STALE_ROUNDS:
                ended = "converged"
                break
            evaluation = None
            if len(rows):
                evaluation = evaluator.evaluate(rows, None if result.best == float("inf") else result.best, deadline)
                done = len(evaluation.objective)
                gate.give_back(len(rows) - done)
                rows = rows[:done]
                gate.record(rows, evaluation.objective)
                for observer in observers:
                    observer.update(rows, evaluation)
                round_best = float(np.min(evaluation.objective)) if done else float("inf")
                since_better = 0 if round_best < result.best else since_better + 1
                if round_best < result.best:
                    result.convergence.append((gate.used, round_best))
                result.best = min(result.best, round_best)
            result.evaluations = gate.used
            if on_round is not None:
                on_round(gate.used)
            if gate.exhausted:
                break
            if patience is not None and since_better >= patience:
                ended = "time" if deadline is not None and time.perf_counter() >= deadline else "patience"
                break
            # one rule: the explorer hears about every row it proposed, or, where the round was cut, nothing
            if dedupe:
                told = gate.recall(proposal)
            elif evaluation is not None and len(evaluation.objective) == len(proposal):
                told = evaluation.objective
            else:
                told = None
            if told is None:
                ended = "time" if deadline is not None and time.perf_counter() >= deadline else "budget"
                break
            explorer.observe(proposal, told)
    except KeyboardInterrupt:
        result.interrupted = True
        ended = "interrupted"
    result.ended = ended
    result.evaluations = gate.used
    result.wall_s = time.perf_counter() - start
    return result
