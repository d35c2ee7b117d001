"""Measured trials as evaluators of the one search loop: each distinct point built and timed (on the CPU, or
the GPU when one is present, in an isolated worker) or scored by a per-point model, and every trial kept.

Failures (build errors, crashes, timeouts, wrong results, points beyond the device's limits) are results with
their message, scored as infinitely slow, so the search goes on. Ctrl-C stops the search and keeps what was
measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpu_cpu.measure import MeasureJob, MeasureResult
from hetero_dse.evaluate.cached import HistoryEvaluator
from hetero_dse.explore.loop import Evaluation, Evaluator, OnRow, run_search
from hetero_dse.history.store import WorkloadHistory
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point

__all__ = ["CUTOFF", "MeasuredEvaluator", "Trial", "TrialLog", "TuneResult", "candidate_job", "fastest",
           "measured_evaluator", "tune"]

#: candidates whose first run is this many times slower than the best so far are not timed further
CUTOFF = 4.0

#: the points of one proposal and the best seconds so far in, their results out in order (so it may build ahead)
Measure = Callable[[list[Point], "float | None"], Iterable[MeasureResult]]


@dataclass
class Trial:
    point: Point
    result: MeasureResult


@dataclass
class TuneResult:
    trials: list[Trial] = field(default_factory=list)
    explorer: str = ""
    answered: int = 0  # trials answered from the history database instead of measured
    wall_s: float = 0.0
    interrupted: bool = False

    @property
    def best(self) -> Trial | None:
        return fastest(self.trials)


def fastest(trials: Iterable[Trial]) -> Trial | None:
    """The trial that ran fastest (None: none ran)."""
    return min((t for t in trials if t.result.ok), key=lambda t: t.result.seconds, default=None)


def candidate_job(op: Operator, source: str, point: Point, best: float | None, target: str = "llvm",
                  **more: object) -> MeasureJob:
    """The measurement of ``point``, cut short when its first run is ``CUTOFF`` times slower than ``best``."""
    return MeasureJob.of(op, source, point.to_json(), target=target, cutoff_s=None if best is None else CUTOFF * best,
                         **more)


class MeasuredEvaluator:
    """``measure`` as an evaluator: the results of the rows in order, each told through ``on_row`` the moment
    it exists; it stops between rows at the deadline. Its figures are the measurements (spread, load), its
    errors each failed trial's reason (a build error, a crash, a timeout, a wrong result)."""

    def __init__(self, space: Any, measure: Measure) -> None:
        self.space, self.measure = space, measure

    def evaluate(self, rows: np.ndarray, best: float | None, deadline: float | None,
                 on_row: OnRow | None = None) -> Evaluation:
        results = iter(self.measure([self.space.decode(row) for row in rows], best))
        objective, errors, figures = [], [], []
        for i in range(len(rows)):
            measured = next(results)
            objective.append(measured.seconds if measured.ok else float("inf"))
            errors.append(None if measured.ok else measured.error or "failed")
            figures.append(measured)
            if on_row is not None:
                on_row(i, measured.seconds, measured.error, measured.timing() if measured.ok else None)
            if deadline is not None and time.perf_counter() >= deadline:
                break
        return Evaluation(np.array(objective, dtype=np.float64), figures,
                          errors if any(e is not None for e in errors) else None)


class TrialLog:
    """The outermost evaluator of a measured search: every trial kept in order (answers from the history
    included), the fastest so far, and ``progress(trials, fastest seconds)`` after each."""

    def __init__(self, inner: Evaluator, space: Any,
                 progress: Callable[[int, float | None], None] | None = None) -> None:
        self.inner, self.space, self.progress = inner, space, progress
        self.trials: list[Trial] = []
        self.best_seconds: float | None = None

    @property
    def answered(self) -> int:
        return self.inner.answered if isinstance(self.inner, HistoryEvaluator) else 0

    def evaluate(self, rows: np.ndarray, best: float | None, deadline: float | None,
                 on_row: OnRow | None = None) -> Evaluation:
        def log(i: int, seconds: float | None, error: str | None, timing: dict | None) -> None:
            result = MeasureResult(seconds, error, repeats=tuple((timing or {}).get("repeats") or ()),
                                   foreign_load=(timing or {}).get("foreign_load"))
            self.trials.append(Trial(self.space.decode(rows[i]), result))
            if result.ok and (self.best_seconds is None or seconds < self.best_seconds):
                self.best_seconds = seconds
            if on_row is not None:
                on_row(i, seconds, error, timing)
            if self.progress is not None:
                self.progress(len(self.trials), self.best_seconds)

        return self.inner.evaluate(rows, best, deadline, on_row=log)

    def result(self, explorer: str, wall_s: float, interrupted: bool) -> TuneResult:
        return TuneResult(self.trials, explorer, self.answered, wall_s, interrupted)


def measured_evaluator(space: Any, measure: Measure, history: WorkloadHistory | None = None,
                       progress: Callable[[int, float | None], None] | None = None) -> TrialLog:
    """Measured trials, answered from and written to ``history`` where given, logged."""
    inner: Evaluator = MeasuredEvaluator(space, measure)
    if history is not None:
        inner = HistoryEvaluator(inner, space, history)
    return TrialLog(inner, space, progress)


def tune(space: Any, explorer: Any, measure: Measure, *, trials: int = 32, time_budget_s: float | None = None,
         patience: int | None = None, progress: Callable[[int, float | None], None] | None = None,
         history: WorkloadHistory | None = None) -> TuneResult:
    """Evaluate up to ``trials`` distinct points proposed by ``explorer`` through the one search loop
    (``hetero_dse.explore.loop``), stopping early when ``patience`` rounds bring no faster point. ``measure``
    never raises for a bad candidate (it yields a failed result). With a ``history``, points it holds are
    answered from it (they count as trials but are not measured again) and every new result is stored there
    as soon as it is measured, so a run killed at any point resumes where it stopped."""
    log = measured_evaluator(space, measure, history, progress)
    run = run_search(space, explorer, log, budget=trials, time_budget_s=time_budget_s, patience=patience)
    return log.result(explorer.name, run.wall_s, run.interrupted)
