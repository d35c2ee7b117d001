"""Measured search: explorer proposals, each distinct point measured once (on the CPU, or the GPU when
one is present, in an isolated worker; by the roofline estimate otherwise).

Failures (build errors, crashes, timeouts, wrong results, points beyond the device's limits) are recorded
with their message and score as infinitely slow, so the search goes on. Ctrl-C stops the search and returns
what was measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpu_cpu.measure import MeasureJob, MeasureResult, Measurer, measure_cpu_job
from gpu_cpu.space import CpuSpace
from hetero_dse.explore.search import STALE_ROUNDS
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point


@dataclass
class Trial:
    point: Point
    result: MeasureResult


@dataclass
class TuneResult:
    trials: list[Trial] = field(default_factory=list)
    wall_s: float = 0.0
    interrupted: bool = False

    @property
    def best(self) -> Trial | None:
        ok = [t for t in self.trials if t.result.ok]
        return min(ok, key=lambda t: t.result.seconds) if ok else None


def tune_cpu(op: Operator, space: CpuSpace, explorer: Any, *, source: str = "builtin", trials: int = 32,
             time_budget_s: float | None = None, timeout_s: float = 60.0,
             progress: Callable[[int, float | None], None] | None = None, measurer: Measurer | None = None,
             ) -> TuneResult:
    """Measure up to ``trials`` distinct points proposed by ``explorer`` (same ask/tell interface as on FPGA)."""
    own = measurer is None
    measurer = measurer or Measurer(timeout_s=timeout_s)

    def evaluate(point: Point) -> MeasureResult:
        return measurer.run(measure_cpu_job, MeasureJob(source, op.definition.name, dict(op.params), point.to_json()))

    try:
        return tune(space, explorer, evaluate, trials=trials, time_budget_s=time_budget_s, progress=progress)
    finally:
        if own:
            measurer.close()


def tune(space: Any, explorer: Any, evaluate: Callable[[Point], MeasureResult], *, trials: int = 32,
         time_budget_s: float | None = None, progress: Callable[[int, float | None], None] | None = None,
         ) -> TuneResult:
    """Evaluate up to ``trials`` distinct points proposed by ``explorer``; ``evaluate`` never raises for a bad
    candidate (it returns a failed result)."""
    result = TuneResult()
    seen: dict[int, float] = {}
    start = time.perf_counter()
    stale = 0
    try:
        while len(result.trials) < trials:
            if time_budget_s is not None and time.perf_counter() - start >= time_budget_s:
                break
            proposal = explorer.propose()
            if proposal is None:
                break
            proposal = np.atleast_2d(np.asarray(proposal, dtype=np.int64))
            objective = np.empty(len(proposal))
            measured_before = len(result.trials)
            for i, (row, key) in enumerate(zip(proposal, space.keys(proposal), strict=True)):
                key = int(key)
                if key not in seen and len(result.trials) < trials:
                    point = space.decode(row)
                    measured = evaluate(point)
                    result.trials.append(Trial(point, measured))
                    seen[key] = measured.seconds if measured.ok else float("inf")
                    if progress is not None:
                        best = result.best
                        progress(len(result.trials), best.result.seconds if best else None)
                objective[i] = seen.get(key, float("inf"))
            explorer.observe(proposal, objective)
            # a small space can be measured out before ``trials``: stop when proposals bring nothing new
            stale = stale + 1 if len(result.trials) == measured_before else 0
            if stale >= STALE_ROUNDS:
                break
    except KeyboardInterrupt:
        result.interrupted = True
    result.wall_s = time.perf_counter() - start
    return result
