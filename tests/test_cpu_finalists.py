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
    the order the search first timed the points in; None: it crashes), its repeats agreeing."""

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
        if seconds is None:
            return MeasureResult(None, "crashed: a test double's crash")
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


def test_the_algorithms_compare_the_direct_finalist_kept_and_an_other_algorithm_winning_writes_it_beside():
    from hetero_dse.ops.winograd import TILE_KNOB
    from hetero_dse.targets.cpu_network import alternatives_of

    op = get_builtin("conv2d").instantiate(shape="small:s1")  # 3×3 stride 1: Winograd F(2×2) and F(4×4) beside
    default = CpuSpace(analyze(op)).default_point()
    # direct's 4 trials (the default timed busy), each tile's product 4 trials; timed again: the default 0.5 ms,
    # each Winograd tile as the convolution 0.2 and 0.3 ms (the 13th and 14th points the double sees)
    own = [0.5e-3, 1.5e-3, 2.5e-3, 3.5e-3] + [9e-3] * 8 + [0.2e-3, 0.3e-3]
    clock = Moments(searched=[4e-3, 1e-3, 2e-3, 3e-3] + [5e-4] * 8, own=own)
    t = explore(op, CpuTarget(trials=4, measurer=clock), "random", Search(seed=1))
    assert clock.order[0] == key(default) and t.final.point == default
    compared = clock.jobs[16:19]  # after the search's 12 and the 4 finalists: direct's kept, F(2×2), F(4×4)
    assert compared[0] == key(default) and [json.loads(k).get(TILE_KNOB) for k in compared] == [None, 2, 4]
    assert t.algorithm == "Winograd F(2×2, 3×3)" and t.best[TILE_KNOB] == 2
    # the direct row: the search's time of the point kept (4 ms, timed busy) beside its time in the comparison
    direct = t.algorithms[0]
    assert direct["algorithm"] == "direct" and direct["searched_seconds"] == pytest.approx(4e-3)
    assert direct["seconds"] == pytest.approx(0.5e-3)
    # the direct module written beside the chosen one is the finalist kept, not the search's fastest trial
    beside = dict(alternatives_of(t, alternatives_only=False))
    assert beside["direct"].best == default and beside["direct"].best_seconds == pytest.approx(0.5e-3)


def test_ctrl_c_while_the_finalists_are_timed_keeps_the_search_and_says_interrupted():
    class Interrupted(Moments):
        def run(self, job, payload):
            if len(self.jobs) == len(self.searched):
                raise KeyboardInterrupt
            return super().run(job, payload)

    op = get_builtin("conv2d").instantiate(shape="small:s1")
    clock = Interrupted(searched=[4e-3, 1e-3, 2e-3, 3e-3], own=[1e-3] * 4)
    t = explore(op, CpuTarget(trials=4, measurer=clock, algorithm="direct"), "random", Search(seed=1))
    assert t.interrupted and t.loop.ended == "interrupted" and t.record(None)["ended"] == "interrupted"
    assert len(t.trials) == 4 and t.best_seconds == pytest.approx(1e-3)  # the search's fastest, as it timed it
    assert t.final is None and t.retimed is None and t.library is None


def test_where_every_finalist_crashes_when_timed_again_the_report_says_the_searchs_fastest_was_kept():
    op = get_builtin("conv2d").instantiate(shape="small:s1")
    clock = Moments(searched=[4e-3, 1e-3, 2e-3, 3e-3], own=[None] * 4)
    t = explore(op, CpuTarget(trials=4, measurer=clock, algorithm="direct"), "random", Search(seed=1))
    assert t.final is None and t.best_seconds == pytest.approx(1e-3) and t.retimed is None
    assert [f["error"] for f in t.record(None)["finalists"]] == ["crashed: a test double's crash"] * 4
    assert t.target.row(t, None).detail.startswith("no finalist ran when timed again: the search's fastest kept; ")


def test_where_every_direct_finalist_crashes_and_winograd_wins_the_comparison_stays_whole():
    from hetero_dse.ops.winograd import TILE_KNOB
    from hetero_dse.targets.cpu_network import alternatives_of

    op = get_builtin("conv2d").instantiate(shape="small:s1")
    # direct's points crash whenever timed again; each Winograd tile's best runs as the convolution
    clock = Moments(searched=[4e-3, 1e-3, 2e-3, 3e-3] + [5e-4] * 8, own=[None] * 12 + [0.2e-3, 0.3e-3])
    t = explore(op, CpuTarget(trials=4, measurer=clock), "random", Search(seed=1))
    assert t.final is None and t.algorithm == "Winograd F(2×2, 3×3)" and t.best[TILE_KNOB] == 2
    # direct keeps its row (the search's fastest trial, timed again), its error said; of the others only the one
    # that ran is written beside the chosen (a candidate a row, or alternatives_of's zip fails)
    assert [(a["algorithm"], a["error"] is not None) for a in t.algorithms] == [
        ("direct", True), ("Winograd F(2×2, 3×3)", False), ("Winograd F(4×4, 3×3)", False)]
    assert [name for name, _ in alternatives_of(t, alternatives_only=False)] == ["winograd_f4"]
    assert not t.target.row(t, None).detail.startswith("no finalist ran")  # a Winograd point was kept
