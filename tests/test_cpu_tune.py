"""Measured CPU search: the FPGA explorers drive it unchanged, every trial is a distinct point, the best
schedule is checked against the reference inside the worker before it counts."""

from __future__ import annotations

import numpy as np

from gpu_cpu.measure import MeasureResult
from gpu_cpu.space import CpuSpace
from gpu_cpu.tune import tune_cpu
from hetero_dse.analysis import analyze
from hetero_dse.explore.annealing import SimulatedAnnealing
from hetero_dse.ops import get_builtin


def test_annealing_drives_a_measured_cpu_search():
    op = get_builtin("gemm").instantiate({"M": 64, "N": 64, "K": 64})
    space = CpuSpace(analyze(op))
    seen = []
    result = tune_cpu(op, space, SimulatedAnnealing(space, seed=0, chains=4, steps=2), trials=6,
                      progress=lambda n, best: seen.append(n))
    assert len(result.trials) == 6 and seen == [1, 2, 3, 4, 5, 6]
    keys = space.keys(np.array([space.encode(t.point) for t in result.trials]))
    assert len(set(keys.tolist())) == 6
    assert result.best is not None and result.best.result.ok and result.best.result.seconds > 0


class FailingMeasurer:
    """Every other candidate fails, as a crash would: the search must go on."""

    def __init__(self):
        self.calls = 0

    def run(self, job, payload):
        self.calls += 1
        return MeasureResult(None, "crashed") if self.calls % 2 else MeasureResult(1e-3 * self.calls)

    def close(self):
        pass


def test_failures_are_recorded_and_the_search_goes_on():
    op = get_builtin("gemm").instantiate(shape="small:s1")
    space = CpuSpace(analyze(op))
    result = tune_cpu(op, space, SimulatedAnnealing(space, seed=1, chains=3, steps=2), trials=8,
                      measurer=FailingMeasurer())
    assert len(result.trials) == 8
    assert sum(not t.result.ok for t in result.trials) == 4 and result.best.result.seconds == 2e-3
