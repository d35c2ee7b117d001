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
from hetero_dse.explore.search import STALE_ROUNDS
from hetero_dse.history import Record, WorkloadHistory, point_key
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


def _answers(history: WorkloadHistory, fresh: dict[int, Point]) -> dict[int, Record]:
    """The stored records of the points in ``fresh``, by the same keys."""
    stored = history.known(fresh.values())
    keys = {key: point_key(p) for key, p in fresh.items()}
    return {key: stored[pk] for key, pk in keys.items() if pk in stored}


def tune(space: Any, explorer: Any, evaluate: Callable[[list[Point], float | None], Iterable[MeasureResult]], *,
         trials: int = 32, time_budget_s: float | None = None, patience: int | None = None,
         progress: Callable[[int, float | None], None] | None = None,
         history: WorkloadHistory | None = None) -> TuneResult:
    """Evaluate up to ``trials`` distinct points proposed by ``explorer``, stopping early when ``patience``
    rounds bring no faster point. ``evaluate`` takes the new points of one proposal and the best seconds so
    far, and yields their results in order (so it may build ahead); it never raises for a bad candidate (it
    yields a failed result). With a ``history``, points it holds are answered from it (they count as trials
    but are not measured again) and every new result is stored there as soon as it is measured, so a run
    killed at any point resumes where it stopped."""
    result = TuneResult(explorer=getattr(explorer, "name", type(explorer).__name__))
    seen: dict[int, float] = {}
    start = time.perf_counter()
    stale = since_better = 0

    def out_of_time() -> bool:
        return time_budget_s is not None and time.perf_counter() - start >= time_budget_s

    try:
        while len(result.trials) < trials and not out_of_time():
            proposal = explorer.propose()
            if proposal is None:
                break
            proposal = np.atleast_2d(np.asarray(proposal, dtype=np.int64))
            keys = [int(k) for k in space.keys(proposal)]
            fresh: dict[int, Point] = {}
            for row, key in zip(proposal, keys, strict=True):
                if key not in seen and key not in fresh and len(result.trials) + len(fresh) < trials:
                    fresh[key] = space.decode(row)
            best = result.best
            before = best.result.seconds if best else float("inf")
            answers = _answers(history, fresh) if history is not None else {}
            to_measure = [p for k, p in fresh.items() if k not in answers]
            results = iter(evaluate(to_measure, None if best is None else before))
            for key, point in fresh.items():
                old = answers.get(key)
                if old is not None:
                    measured = MeasureResult(old.seconds, old.error)
                    result.answered += 1
                else:
                    measured = next(results)
                    if history is not None:
                        history.add(point, measured.seconds, measured.error)
                result.trials.append(Trial(point, measured))
                seen[key] = measured.seconds if measured.ok else float("inf")
                if progress is not None:
                    best = result.best
                    progress(len(result.trials), best.result.seconds if best else None)
                if out_of_time():
                    break
            if any(k not in seen for k in keys):
                # rows past the trial or time budget were never measured; the search ends here, and an
                # explorer told they failed would learn from it (the Q-method's reward −1, kept in its
                # saved state): tell it nothing, as the model's search loop does
                break
            explorer.observe(proposal, np.array([seen[k] for k in keys]))
            best = result.best
            if fresh:
                since_better = 0 if best is not None and best.result.seconds < before else since_better + 1
            if patience is not None and since_better >= patience:
                break
            # a small space can be measured out before ``trials``: stop when proposals bring nothing new
            stale = 0 if fresh else stale + 1
            if stale >= STALE_ROUNDS:
                break
    except KeyboardInterrupt:
        result.interrupted = True
    result.wall_s = time.perf_counter() - start
    return result
