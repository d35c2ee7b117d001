"""The measured search loop (hetero_dse.evaluate.measured.tune) and what it tells the explorer, without TVM: a toy
space and an evaluator that makes up seconds."""

from __future__ import annotations

import numpy as np

from gpu_cpu.measure import MeasureResult
from hetero_dse.evaluate.measured import tune
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


# ------------------------------------------------------------------------ the one loop of every target
from hetero_dse.explore.loop import Evaluation, run_search  # noqa: E402


class Slow:
    """An evaluator that takes ``seconds`` a row and stops at the deadline, as measured trials do."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds, self.rows = seconds, []

    def evaluate(self, rows, best, deadline):
        import time

        out = []
        for row in rows:
            time.sleep(self.seconds)
            self.rows.append(int(row[0]))
            out.append(1.0 + row[0] / 100)
            if deadline is not None and time.perf_counter() >= deadline:
                break
        return Evaluation(np.array(out))


class Repeating(Recorder):
    """Proposes rows 0-4 again every other round."""

    def propose(self):
        rows = super().propose()
        return rows if len(self.told) % 2 == 0 else np.arange(5)[:, None]


def test_the_loop_never_exceeds_its_budget_and_never_evaluates_a_point_twice():
    evaluator = Slow()
    explorer = Repeating()
    run = run_search(ToySpace(), explorer, evaluator, budget=12)
    assert run.evaluations == 12 and len(evaluator.rows) == 12 and len(set(evaluator.rows)) == 12
    # a repeated proposal is answered from memory, with the objectives it had
    repeated = [told for rows, told in explorer.told if rows == [0, 1, 2, 3, 4]]
    assert len(repeated) >= 2 and repeated[0] == repeated[1]


def test_rows_the_evaluator_did_not_reach_before_the_deadline_are_not_spent_nor_told():
    evaluator = Slow(seconds=0.05)
    explorer = Recorder()
    run = run_search(ToySpace(), explorer, evaluator, budget=100, time_budget_s=0.12)
    assert 1 <= run.evaluations == len(evaluator.rows) < 5  # the first proposal, cut by the deadline
    assert explorer.told == []


def test_patience_ends_a_search_that_stops_improving():
    # the recorder's later points are slower (1 + x/100): after the first round nothing improves
    run = run_search(ToySpace(), Recorder(), Slow(), budget=100, patience=2)
    assert run.evaluations == 15  # round 1 improves, rounds 2 and 3 do not
