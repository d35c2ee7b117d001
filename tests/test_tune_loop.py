"""The measured search loop (gpu_cpu.tune.tune) and what it tells the explorer, without TVM: a toy space and
an evaluator that makes up seconds."""

from __future__ import annotations

import numpy as np

from gpu_cpu.measure import MeasureResult
from gpu_cpu.tune import tune
from hetero_dse.space.point import Point


class ToySpace:
    """Points 0..99 of one knob."""

    def keys(self, rows: np.ndarray) -> np.ndarray:
        return np.asarray(rows)[:, 0]

    def decode(self, row) -> Point:
        return Point({"x": int(row[0])})


class Recorder:
    """Proposes five new points a round and writes down what it is told."""

    name = "recorder"

    def __init__(self) -> None:
        self.next = 0
        self.told: list[tuple[list[int], list[float]]] = []

    def propose(self) -> np.ndarray:
        rows = np.arange(self.next, self.next + 5)[:, None]
        self.next += 5
        return rows

    def observe(self, rows: np.ndarray, objective: np.ndarray) -> None:
        self.told.append((rows[:, 0].tolist(), list(objective)))


def evaluate(points, _best):
    for p in points:
        yield MeasureResult(1.0 + p["x"] / 100)


def test_rows_cut_by_the_trial_budget_are_never_told_as_failures():
    """Review finding (issue 19): with 7 trials and proposals of 5, the second proposal's last 3 rows were
    never measured, yet the explorer was told inf for them — the Q-method's reward −1, saved in --q-state."""
    explorer = Recorder()
    result = tune(ToySpace(), explorer, evaluate, trials=7)
    assert len(result.trials) == 7
    for rows, objective in explorer.told:
        assert all(np.isfinite(objective)), (rows, objective)
    assert [rows for rows, _ in explorer.told] == [[0, 1, 2, 3, 4]]
