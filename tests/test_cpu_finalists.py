"""The direct search's finalists (``hetero_dse.targets.tuned.finalists``): its fastest distinct points and the
engineer's default point timed again one right after the other before one is kept, so that a point timed at a
quiet moment does not win over one timed at a busy moment (issue 39: ResNet-18 L4's search kept 1.12 ms where
its default point runs 0.61). Timed with a test double of the measuring workers, so the choice is known."""

from __future__ import annotations

import json

import pytest

from gpu_cpu.measure import MeasureResult
from hetero_dse.analysis import analyze
from hetero_dse.evaluate.measured import Trial
from hetero_dse.ops import get_builtin
from hetero_dse.space.cpu import CpuSpace
from hetero_dse.space.point import Point
from hetero_dse.targets.base import Search
from hetero_dse.targets.cpu import CpuTarget
from hetero_dse.targets.flow import explore
from hetero_dse.targets.tuned import FINALISTS, finalists


class Moments:
    """A test double of the measuring workers, nothing built: the search's timings in the order it asks for them
    (``searched``, each point timed at its own moment), then, timed again, each point's own time (``own``, by
    the order the search first timed the points in), its repeats agreeing."""

    def __init__(self, searched: list[float], own: list[float]):
        self.searched, self.own = searched, own
        self.jobs: list[str] = []
        self.order: list[str] = []

    def run(self, job, payload):
        key = json.dumps(payload.point, sort_keys=True)
        self.jobs.append(key)
        if key not in self.order:
            self.order.append(key)
        n = len(self.jobs)
        seconds = self.searched[n - 1] if n <= len(self.searched) else self.own[self.order.index(key)]
        return MeasureResult(seconds, repeats=(seconds,) * 3)

    def close(self):
        pass


@pytest.fixture(autouse=True)
def library(monkeypatch):
    """torch's time as a test double too (2 ms, its repeats agreeing)."""
    monkeypatch.setattr("hetero_dse.targets.cpu.time_torch_isolated",
                        lambda op, source: MeasureResult(2e-3, repeats=(2e-3, 2e-3, 2e-3)))


def key(point: Point) -> str:
    return json.dumps(point.to_json(), sort_keys=True)


def test_finalists_are_the_fastest_distinct_points_then_the_default_point_where_it_ran():
    a, b, c, d, e = (Point({"split.i": (n, 1, 1, 1)}) for n in range(1, 6))
    trials = [Trial(e, MeasureResult(9e-3)), Trial(a, MeasureResult(3e-3)), Trial(b, MeasureResult(1e-3)),
              Trial(b, MeasureResult(0.5e-3)), Trial(c, MeasureResult(None, "crashed")),
              Trial(d, MeasureResult(2e-3)), Trial(c, MeasureResult(4e-3))]
    # fastest first, each point once (b's faster timing), the crashed timing not counted; then the default (e)
    assert [(t.point, t.result.seconds) for t in finalists(trials, e)] == [
        (b, 0.5e-3), (d, 2e-3), (a, 3e-3), (e, 9e-3)]
    assert [t.point for t in finalists(trials, a)] == [b, d, a]  # the default among them: not twice
    assert [t.point for t in finalists(trials, None)] == [b, d, a]
    assert [t.point for t in finalists(trials, Point({"split.i": (7, 1, 1, 1)}))] == [b, d, a]  # never ran
    assert [t.point for t in finalists(trials[:2], e, count=FINALISTS)] == [a, e]
    assert finalists([], e) == []


def test_the_finalist_fastest_when_timed_again_is_kept_though_the_search_timed_another_faster():
    op = get_builtin("conv2d").instantiate(shape="small:s1")
    default = CpuSpace(analyze(op)).default_point()
    # the search times the default point first, at a busy moment (4 ms), and a slower point at a quiet one (1 ms)
    clock = Moments(searched=[4e-3, 1e-3, 2e-3, 3e-3, 5e-3, 6e-3], own=[0.5e-3, 1.5e-3, 2.5e-3, 3.5e-3, 5e-3, 6e-3])
    t = explore(op, CpuTarget(trials=6, measurer=clock, algorithm="direct"), "random", Search(seed=1))
    assert len(t.trials) == 6 and clock.order[0] == key(default)  # the first round's first point
    # after the search: the three fastest as searched, then the default point, one right after the other
    assert clock.jobs[6:10] == [clock.order[1], clock.order[2], clock.order[3], clock.order[0]]
    assert t.best == default and t.best_seconds == pytest.approx(0.5e-3)
    assert t.direct_best.point == default and t.final.result.seconds == pytest.approx(0.5e-3)
    assert clock.jobs[10] == key(default) and t.retimed.seconds == pytest.approx(0.5e-3)  # then beside torch
    record = t.record(None)
    assert record["best"]["knobs"] == default.to_json() and record["best"]["seconds"] == pytest.approx(0.5e-3)
    assert [(f["searched_seconds"], f["seconds"], f["chosen"]) for f in record["finalists"]] == [
        (1e-3, 1.5e-3, False), (2e-3, 2.5e-3, False), (3e-3, 3.5e-3, False), (4e-3, 0.5e-3, True)]
    assert record["speedup_over_torch"] == pytest.approx(4.0)


def test_a_search_of_one_point_has_no_finalists_to_time_again():
    op = get_builtin("conv2d").instantiate(shape="small:s1")
    clock = Moments(searched=[1e-3], own=[1e-3])
    t = explore(op, CpuTarget(trials=1, measurer=clock, algorithm="direct"), "random", Search(seed=1))
    assert len(clock.jobs) == 2 and t.final is None and t.record(None)["finalists"] == []  # searched, beside torch
