"""The algorithm as a choice the CPU search makes (issue 40): a 3×3 stride-1 convolution's Winograd products
searched beside its direct schedules, each algorithm's best timed as the convolution's function one right after
the other, the fastest kept, written and replayed. The fast tests time with a test double (``Clock``), so the
choice is known; one end-to-end run measures for real."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpu_cpu.measure import MeasureResult
from hetero_dse.history import HistoryDB
from hetero_dse.ops import get_builtin
from hetero_dse.ops.winograd import TILE_KNOB
from hetero_dse.targets.base import Search
from hetero_dse.targets.cpu import CpuTarget
from hetero_dse.targets.flow import explore


class Clock:
    """A test double of the measuring workers: a time per kind of job, nothing built. ``conv``: the convolution's
    function by algorithm (``direct``, or the Winograd tile); ``product``: Winograd's product alone, by tile.
    ``interrupt``: Ctrl-C on the first job of that kind. A time of None: that job crashes."""

    def __init__(self, conv: dict, product: dict | None = None, interrupt: str | None = None):
        self.conv, self.product, self.interrupt = conv, product or {2: 5e-4, 4: 3e-4}, interrupt
        self.jobs: list[tuple[str, dict]] = []

    def run(self, job, payload):
        kind = "product" if payload.name == "winograd_product" else "conv"
        self.jobs.append((kind, dict(payload.point)))
        if kind == self.interrupt:
            raise KeyboardInterrupt
        if kind == "product":  # the tile from the product's α² points
            seconds = self.product[int(round(payload.params["E"] ** 0.5)) - 2]
        else:
            seconds = self.conv[payload.point.get(TILE_KNOB, "direct")]
        if seconds is None:
            return MeasureResult(None, "crashed")
        return MeasureResult(seconds * (1 + 1e-3 * len(self.jobs)))

    def close(self):
        pass


@pytest.fixture(autouse=True)
def library(request, monkeypatch):
    """torch's time as a test double too (2 ms, its repeats agreeing), except where measured for real."""
    if "end_to_end" not in request.node.name:
        monkeypatch.setattr("hetero_dse.targets.cpu.time_torch_isolated",
                            lambda op, source: MeasureResult(2e-3, repeats=(2e-3, 2e-3, 2e-3)))


def conv():
    return get_builtin("conv2d").instantiate(shape="small:s1")  # C4 → K8, 8×8, 3×3 stride 1


def test_the_fastest_algorithm_is_chosen_by_timing_each_algorithms_best_as_the_convolution():
    clock = Clock({"direct": 2e-3, 2: 3e-3, 4: 1e-3})
    seen = []
    t = explore(conv(), CpuTarget(trials=3, measurer=clock), "random", Search(seed=1),
                progress=lambda done, best: seen.append(done))
    # three searches of 3 trials each: direct's, then each tile's product, on one progress count
    assert [kind for kind, _ in clock.jobs[:9]] == ["conv"] * 3 + ["product"] * 6
    assert seen[-1] == 9 and seen == sorted(seen) and t.evaluations == 9
    assert all(TILE_KNOB not in t.point for t in t.trials) and len(t.trials) == 3
    assert len(t.other_trials) == 6 and all(TILE_KNOB not in t.point for t in t.other_trials)
    # then the direct search's finalists timed again (its three points: tests/test_cpu_finalists.py), and each
    # algorithm's best as the convolution, one after the other: direct, F(2x2), F(4x4)
    assert [(kind, p.get(TILE_KNOB)) for kind, p in clock.jobs[9:12]] == [("conv", None)] * 3
    assert len(t.finalists) == 3
    compared = clock.jobs[12:15]
    assert [kind for kind, _ in compared] == ["conv"] * 3
    assert [p.get(TILE_KNOB) for _, p in compared] == [None, 2, 4]
    assert t.best[TILE_KNOB] == 4 and t.algorithm == "Winograd F(4×4, 3×3)"
    assert [(a["algorithm"], a["chosen"]) for a in t.algorithms] == [
        ("direct", False), ("Winograd F(2×2, 3×3)", False), ("Winograd F(4×4, 3×3)", True)]
    # the function's time from that comparison, not the product's from its search
    assert t.algorithms[2]["seconds"] == pytest.approx(1e-3, rel=0.02) == t.best_seconds
    assert t.algorithms[2]["searched_seconds"] == pytest.approx(3e-4, rel=0.02)
    # the chosen point re-timed before the library, as any best is
    assert clock.jobs[15][1][TILE_KNOB] == 4 and t.retimed.seconds == pytest.approx(1e-3, rel=0.02)
    record = t.record(None)
    assert record["algorithm"] == "Winograd F(4×4, 3×3)" and record["trials"] == 9
    assert record["searches"] == {label: {"trials": 3, "explorer": "random", "ended": "budget", "why_not": None}
                                  for label in ("Winograd F(2×2, 3×3)", "Winograd F(4×4, 3×3)")} | {
        "direct": {"trials": 3, "explorer": "random", "ended": "budget"}}
    assert record["best"]["knobs"][TILE_KNOB] == 4
    assert [a["searched"] for a in record["algorithms"]] == ["convolution", "product alone", "product alone"]
    # its GFLOPS count direct convolution's FLOPs: said, and no share of the CPU's peak
    assert record["best"]["gflops_counted"] == "direct convolution's FLOPs"
    row = t.target.row(t, None)
    assert row.evaluations == 9 and row.detail.startswith("Winograd F(4×4, 3×3); ours one run")
    assert row.detail.endswith("GFLOPS count direct convolution's FLOPs; W transformed (G W Gᵀ) ahead, not timed")
    assert row.peak_fraction is None
    assert row.algorithm == "Winograd F(4×4, 3×3)"


def test_direct_is_kept_where_it_is_faster_and_winograd_on_keeps_the_fastest_winograd():
    t = explore(conv(), CpuTarget(trials=2, measurer=Clock({"direct": 1e-3, 2: 3e-3, 4: 2e-3})), "random",
                Search(seed=1))
    assert TILE_KNOB not in t.best and t.algorithm == "direct"
    assert t.best_seconds == pytest.approx(1e-3, rel=0.02)
    clock = Clock({"direct": 1e-3, 2: 3e-3, 4: 2e-3})
    t = explore(conv(), CpuTarget(trials=2, measurer=clock, algorithm="winograd"), "random", Search(seed=1))
    assert t.best[TILE_KNOB] == 4 and [a["algorithm"] for a in t.algorithms] == [
        "Winograd F(2×2, 3×3)", "Winograd F(4×4, 3×3)"]


def test_each_other_algorithms_best_is_written_beside_and_one_that_fails_costs_the_chosen_nothing(
        monkeypatch, tmp_path):
    """The chosen module (F(4×4)) and, beside it in ``alternatives/``, direct's and F(2×2)'s bests, each built
    and checked, for a network to time inside it (``hetero_dse/targets/cpu_network.py``). Where one of those
    cannot be built, the chosen module is still written and the run says which was not."""
    from gpu_cpu.blocks import ScheduleError
    from hetero_dse.targets import cpu

    target = CpuTarget(trials=2, measurer=Clock({"direct": 2e-3, 2: 3e-3, 4: 1e-3}))
    t = explore(conv(), target, "random", Search(seed=1))
    assert t.best[TILE_KNOB] == 4
    written = target.write(t, tmp_path / "a", seed=0)
    saved = tmp_path / "a" / written.directory
    beside = {d.name: json.loads((d / "schedule.json").read_text()) for d in (saved / "alternatives").iterdir()}
    assert sorted(beside) == ["direct", "winograd_f2"] and written.passed and not written.warnings
    assert beside["direct"]["algorithm"] == "direct" and TILE_KNOB not in beside["direct"]["knobs"]
    assert beside["winograd_f2"]["knobs"][TILE_KNOB] == 2
    # each with the time it was compared by, as the operator's function
    seconds = {a["algorithm"]: a["seconds"] for a in t.algorithms}
    assert beside["direct"]["measured_seconds"] == seconds["direct"]
    assert all((saved / "alternatives" / name / "module.so").is_file() for name in beside)

    real = cpu.apply_cpu

    def refuses_f2(op, point):  # TVM refusing F(2×2)'s point, as it may a point it cannot build
        if point.get(TILE_KNOB) == 2:
            raise ScheduleError("TVM rejects the point")
        return real(op, point)

    monkeypatch.setattr(cpu, "apply_cpu", refuses_f2)
    written = target.write(t, tmp_path / "b", seed=0)
    saved = tmp_path / "b" / written.directory
    assert (saved / "module.so").is_file()
    assert json.loads((saved / "schedule.json").read_text())["knobs"][TILE_KNOB] == 4
    assert [d.name for d in (saved / "alternatives").iterdir()] == ["direct"]
    (warning,) = written.warnings
    assert "Winograd F(2×2, 3×3)'s best is not written beside the chosen module (TVM rejects the point)" in warning


def test_an_algorithm_that_cannot_be_searched_costs_the_direct_result_nothing_and_says_why(monkeypatch):
    from hetero_dse.errors import HeteroDSEError

    real = CpuTarget.check

    def check(self, op):
        if op.name == "winograd_product" and op.params["E"] == 16:
            raise HeteroDSEError("F(2×2)'s product does not fit")
        real(self, op)

    monkeypatch.setattr(CpuTarget, "check", check)
    t = explore(conv(), CpuTarget(trials=2, measurer=Clock({"direct": 2e-3, 2: 1e-4, 4: 3e-3})), "random",
                Search(seed=1))
    assert not t.interrupted and TILE_KNOB not in t.best and t.algorithm == "direct"
    assert [a["algorithm"] for a in t.algorithms] == ["direct", "Winograd F(4×4, 3×3)"]
    assert t.record(None)["searches"]["Winograd F(2×2, 3×3)"] == {"trials": 0, "explorer": "", "ended": "",
                                                                 "why_not": "F(2×2)'s product does not fit"}


def test_winograd_on_says_why_a_layer_kept_direct_convolution():
    gemm = get_builtin("gemm").instantiate(shape="small:s1")
    target = CpuTarget(trials=2, measurer=Clock({"direct": 1e-3}), algorithm="winograd")
    t = explore(gemm, target, "random", Search(seed=1))
    assert target.row(t, None).detail.startswith(
        "direct: Winograd takes a convolution (conv2d, group_conv2d, depthwise_conv2d), not gemm; ours ")
    clock = Clock({"direct": 1e-3}, product={2: None, 4: None})
    t = explore(conv(), CpuTarget(trials=2, measurer=clock, algorithm="winograd"), "random", Search(seed=1))
    assert TILE_KNOB not in t.best and t.target.row(t, None).detail.startswith("direct: no Winograd point ran; ")


def test_the_progress_total_counts_every_algorithms_search_and_ends_on_the_chosen_best(tmp_path):
    from hetero_dse.run.engine import RunSettings, execute
    from hetero_dse.run.events import Quiet

    seen = {}

    class Events(Quiet):
        def search(self, title, total, unit):
            seen["total"] = total
            outer = self

            class Bar:
                def update(self, done, best):
                    seen["last"] = (done, best)

                def finished(self, evaluations):
                    seen["finished"] = evaluations

                def failed(self):
                    outer.fail = True

            return Bar()

    run = execute([conv()], [CpuTarget(trials=2, measurer=Clock({"direct": 2e-3, 2: 3e-3, 4: 1e-3}))],
                  RunSettings(out=tmp_path / "o"), events=Events())
    (outcome, written) = run.results[0]
    assert seen["total"] == 6 and seen["finished"] == 6
    assert seen["last"] == (6, outcome.best_seconds) and outcome.best[TILE_KNOB] == 4
    # the double's choice written for real: the module is built and checked against the reference
    assert written.passed is True
    schedule = json.loads((tmp_path / "o" / written.directory / "schedule.json").read_text())
    assert schedule["knobs"][TILE_KNOB] == 4 and schedule["packed_weights"]["W"]["winograd"] == 4
    report = (tmp_path / "o" / "report.md").read_text()
    assert "Winograd F(4×4, 3×3); ours" in report


def test_only_a_3x3_stride_1_float32_convolution_has_winograd_beside_it_and_direct_asks_for_none():
    target = CpuTarget()
    assert [a.label for a in target.alternatives(conv())] == ["Winograd F(2×2, 3×3)", "Winograd F(4×4, 3×3)"]
    assert [a.op.params["E"] for a in target.alternatives(conv())] == [16, 36]
    # the product is a built-in the workers rebuild from there, whatever op.py the convolution came from
    assert {a.target.source for a in CpuTarget(source="my_op.py").alternatives(conv())} == {"builtin"}
    assert target.alternatives(get_builtin("conv2d").instantiate(shape="small:s2")) == ()  # stride 2
    assert target.alternatives(get_builtin("gemm").instantiate(shape="small:s1")) == ()
    assert CpuTarget(algorithm="direct").alternatives(conv()) == ()
    with pytest.raises(Exception, match="one of auto, direct, winograd, not fast"):
        CpuTarget(algorithm="fast")
    clock = Clock({"direct": 1e-3})
    t = explore(conv(), CpuTarget(trials=2, measurer=clock, algorithm="direct"), "random", Search(seed=1))
    # two trials, the two timed again as finalists, the kept one beside torch: no comparison of algorithms
    assert t.algorithm is None and t.record(None)["algorithm"] == "direct" and len(clock.jobs) == 5


def test_the_products_trials_go_to_their_own_workload_in_the_history(tmp_path):
    db = HistoryDB(str(tmp_path / "h.sqlite"))
    explore(conv(), CpuTarget(trials=2, measurer=Clock({"direct": 2e-3, 2: 3e-3, 4: 1e-3})), "random",
            Search(seed=1), history=db)
    products = [a.op.signature() for a in CpuTarget().alternatives(conv())]
    counts = {w["signature"]: w["records"] for w in db.workloads()}
    assert counts == {conv().signature(): 2, products[0]: 2, products[1]: 2}
    # a second run answers every search from the history: nothing is measured but the direct search's two
    # finalists, the comparison of the three algorithms and the re-timing beside torch
    clock = Clock({"direct": 2e-3, 2: 3e-3, 4: 1e-3})
    t = explore(conv(), CpuTarget(trials=2, measurer=clock), "random", Search(seed=1), history=db)
    assert t.answered_all == 6 and [kind for kind, _ in clock.jobs] == ["conv"] * len(clock.jobs)
    assert len(clock.jobs) == 2 + 3 + 1
    db.close()


def test_ctrl_c_in_a_winograd_search_keeps_the_direct_best_and_says_interrupted():
    clock = Clock({"direct": 2e-3, 2: 3e-3, 4: 1e-3}, interrupt="product")
    t = explore(conv(), CpuTarget(trials=3, measurer=clock), "random", Search(seed=1))
    assert t.interrupted and t.best is not None and TILE_KNOB not in t.best and t.retimed is None
    assert t.library is None and t.algorithms == [] and len(t.searched) == 1


def test_a_time_budget_is_split_evenly_over_the_algorithms(monkeypatch):
    from hetero_dse.targets import flow

    budgets = []
    real = flow.run_search

    def spy(space, explorer, evaluator, **kw):
        budgets.append(kw["time_budget_s"])
        return real(space, explorer, evaluator, **kw)

    monkeypatch.setattr(flow, "run_search", spy)
    explore(conv(), CpuTarget(trials=2, measurer=Clock({"direct": 2e-3, 2: 3e-3, 4: 1e-3})), "random",
            Search(seed=1, time_budget_s=90.0))
    assert budgets == [30.0, 30.0, 30.0]


def test_winograd_chosen_end_to_end_writes_a_module_that_computes_the_reference_and_replays(cli, tmp_path):
    """Measured for real: --winograd on keeps a Winograd point; the written module takes the weights transformed
    as schedule.json says and computes the convolution."""
    import tvm

    from gpu_cpu.winograd import winograd_weights

    out = tmp_path / "o"
    r = cli("explore", "--op", "conv2d", "--shape", "small:s1", "--target", "cpu", "--trials", "2", "--winograd",
            "on", "--out", out)
    assert r.code == 0, r.err
    (record,) = json.loads((out / "report.json").read_text())["cpu"]
    saved = out / record["directory"]
    schedule = json.loads((saved / "schedule.json").read_text())
    m = schedule["knobs"][TILE_KNOB]
    assert record["algorithm"] == f"Winograd F({m}×{m}, 3×3)" and record["trials"] == 6
    assert sum(a["chosen"] for a in record["algorithms"]) == 1 and record["best"]["retimed"] is not None
    assert schedule["packed_weights"]["W"]["winograd"] == m
    op = conv()
    x, w = op.random_inputs(3)
    module = tvm.runtime.load_module(str(saved / "module.so"))
    dev = tvm.cpu(0)
    got = tvm.runtime.tensor(np.zeros([int(d) for d in op.output.shape], dtype="float32"), dev)
    u = np.ascontiguousarray(winograd_weights(op, schedule["knobs"], w))
    module[module.entry_name](tvm.runtime.tensor(x, dev), tvm.runtime.tensor(u, dev), got)
    np.testing.assert_allclose(got.numpy(), op.reference([x, w]), rtol=1e-4, atol=1e-4)
    assert "Winograd F(" in (out / "report.md").read_text()
    r = cli("replay", saved)
    assert r.code == 0, r.err
    # the other tile's best beside it (a network may run it faster: tests/test_network.py), checked and replayable
    (other,) = [a for a in record["algorithms"] if not a["chosen"]]
    kept = saved / "alternatives" / f"winograd_f{6 - m}"
    beside = json.loads((kept / "schedule.json").read_text())
    assert beside["algorithm"] == other["algorithm"] == f"Winograd F({6 - m}×{6 - m}, 3×3)"
    assert beside["knobs"][TILE_KNOB] == 6 - m and beside["measured_seconds"] == other["seconds"]
    assert beside["signature"] == schedule["signature"] and schedule["algorithm"] == record["algorithm"]
    module = tvm.runtime.load_module(str(kept / "module.so"))
    u = np.ascontiguousarray(winograd_weights(op, beside["knobs"], w))
    module[module.entry_name](tvm.runtime.tensor(x, dev), tvm.runtime.tensor(u, dev), got)
    np.testing.assert_allclose(got.numpy(), op.reference([x, w]), rtol=1e-4, atol=1e-4)
    r = cli("replay", kept)
    assert r.code == 0, r.err


def test_winograd_on_over_rpc_is_refused_in_one_sentence(cli, tmp_path):
    r = cli("explore", "--op", "conv2d", "--shape", "small:s1", "--target", "cpu", "--winograd", "on", "--rpc",
            "127.0.0.1:9190", "--out", tmp_path / "o")
    assert r.code == 1 and "--winograd on is for this machine's CPU" in r.err and "Traceback" not in r.err
