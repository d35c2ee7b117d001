"""Measured search: explorer proposals, each distinct point measured once (on the CPU, or the GPU when
one is present, in an isolated worker; by the roofline estimate otherwise).

Failures (build errors, crashes, timeouts, wrong results, points beyond the device's limits) are recorded
with their message and score as infinitely slow, so the search goes on. Ctrl-C stops the search and returns
what was measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpu_cpu.measure import MeasureJob, MeasureResult, Measurer, measure_cpu_job
from gpu_cpu.pipeline import Pipeline
from hetero_dse.space.cpu_gpu import CpuSpace
from hetero_dse.explore.loop import Evaluation, run_search
from hetero_dse.history import WorkloadHistory, point_key
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point

#: start points per round on CPU and GPU: a round's candidates are built and measured one by one, so a
#: round is short and the explorer learns from each before the next (8 start points would spend a quarter
#: of a 32-trial budget on the random first round)
TVM_STARTS = dict.fromkeys(("q", "p", "sa", "random"), 4)
#: candidates whose first run is this many times slower than the best so far are not timed further
CUTOFF = 4.0


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
        ok = [t for t in self.trials if t.result.ok]
        return min(ok, key=lambda t: t.result.seconds) if ok else None


def tune_cpu(op: Operator, space: CpuSpace, explorer: Any, *, source: str = "builtin", trials: int = 32,
             time_budget_s: float | None = None, patience: int | None = None, timeout_s: float = 60.0,
             progress: Callable[[int, float | None], None] | None = None, measurer: Measurer | None = None,
             history: WorkloadHistory | None = None) -> TuneResult:
    """Measure up to ``trials`` distinct points proposed by ``explorer`` (same ask/tell interface as on FPGA):
    each built by a builder process, then timed by the measuring worker (``measurer`` given: built and timed
    by it)."""
    if measurer is not None:
        return tune(space, explorer, lambda points, best: (
            measurer.run(measure_cpu_job, candidate_job(op, source, p, best)) for p in points),
                    trials=trials, time_budget_s=time_budget_s, patience=patience, progress=progress,
                    history=history)
    with Pipeline(timeout_s=timeout_s, overlap=False) as pipeline:  # the kernel is timed on every core
        return tune(space, explorer, lambda points, best: pipeline.evaluate(
            [candidate_job(op, source, p, best) for p in points]),
                    trials=trials, time_budget_s=time_budget_s, patience=patience, progress=progress,
                    history=history)


def candidate_job(op: Operator, source: str, point: Point, best: float | None, target: str = "llvm") -> MeasureJob:
    """The measurement of ``point``, cut short when its first run is ``CUTOFF`` times slower than ``best``."""
    return MeasureJob(source, op.definition.name, dict(op.params), point.to_json(), target=target,
                      cutoff_s=None if best is None else CUTOFF * best)


class MeasuredEvaluator:
    """Measured trials as an evaluator of the one search loop: each point answered from the history database
    where it holds it, measured otherwise (``evaluate(points, best seconds)`` yields the results in order,
    building ahead as it likes) and stored there the moment it is measured; the trials kept in order."""

    def __init__(self, space: Any, evaluate: Callable[[list[Point], float | None], Iterable[MeasureResult]],
                 history: WorkloadHistory | None = None,
                 progress: Callable[[int, float | None], None] | None = None) -> None:
        self.space, self.measure, self.history, self.progress = space, evaluate, history, progress
        self.result = TuneResult()

    def evaluate(self, rows: np.ndarray, best: float | None, deadline: float | None) -> Evaluation:
        points = [self.space.decode(row) for row in rows]
        stored = self.history.known(points) if self.history is not None else {}
        keys = [point_key(p) for p in points] if stored else []
        answers = {i: stored[k] for i, k in enumerate(keys) if k in stored}
        results = iter(self.measure([p for i, p in enumerate(points) if i not in answers], best))
        objective = []
        for i, point in enumerate(points):
            old = answers.get(i)
            if old is not None:
                measured = MeasureResult(old.seconds, old.error)
                self.result.answered += 1
            else:
                measured = next(results)
                if self.history is not None:
                    self.history.add(point, measured.seconds, measured.error)
            self.result.trials.append(Trial(point, measured))
            objective.append(measured.seconds if measured.ok else float("inf"))
            if self.progress is not None:
                fastest = self.result.best
                self.progress(len(self.result.trials), fastest.result.seconds if fastest else None)
            if deadline is not None and time.perf_counter() >= deadline:
                break
        return Evaluation(np.array(objective, dtype=np.float64))


def tune(space: Any, explorer: Any, evaluate: Callable[[list[Point], float | None], Iterable[MeasureResult]], *,
         trials: int = 32, time_budget_s: float | None = None, patience: int | None = None,
         progress: Callable[[int, float | None], None] | None = None,
         history: WorkloadHistory | None = None) -> TuneResult:
    """Evaluate up to ``trials`` distinct points proposed by ``explorer`` through the one search loop
    (``hetero_dse.explore.loop``), stopping early when ``patience`` rounds bring no faster point.
    ``evaluate`` takes the new points of one proposal and the best seconds so far, and yields their results
    in order (so it may build ahead); it never raises for a bad candidate (it yields a failed result). With
    a ``history``, points it holds are answered from it (they count as trials but are not measured again)
    and every new result is stored there as soon as it is measured, so a run killed at any point resumes
    where it stopped."""
    evaluator = MeasuredEvaluator(space, evaluate, history, progress)
    run = run_search(space, explorer, evaluator, budget=trials, time_budget_s=time_budget_s, patience=patience)
    result = evaluator.result
    result.explorer = getattr(explorer, "name", type(explorer).__name__)
    result.wall_s, result.interrupted = run.wall_s, run.interrupted
    return result
