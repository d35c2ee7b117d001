"""Measured CPU search: the FPGA explorers drive it unchanged, every trial is a distinct point, the best
schedule is checked against the reference inside the worker before it counts."""

from __future__ import annotations

import numpy as np

from gpu_cpu.measure import MeasureResult
from hetero_dse.space.cpu import CpuSpace
from hetero_dse.targets.cpu import tune_cpu
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


def test_explore_cpu_end_to_end_and_replay(cli, tmp_path):
    import json

    out = tmp_path / "o"
    r = cli("explore", "--op", "gemm", "--param", "M=64", "--param", "N=64", "--param", "K=64", "--target", "cpu",
            "--trials", "4", "--out", out)
    assert r.code == 0, r.err
    (record,) = json.loads((out / "report.json").read_text())["cpu"]
    assert record["trials"] == 4 and record["best"]["gflops"] > 0 and record["torch"]["gflops"] > 0
    assert record["explorer"] == "tl"  # what auto means where trials are measured
    # the speedup compares times taken one right after the other: the best re-timed, then torch
    retimed = record["best"]["retimed"]
    assert record["speedup_over_torch"] == record["torch"]["seconds"] / retimed["median_s"]
    assert len(retimed["repeats"]) == 3 and retimed["min_s"] <= retimed["median_s"] <= retimed["max_s"]
    assert record["best"]["timing"]["foreign_load"] is not None and record["torch"]["timing"]["repeats"]
    saved = out / record["directory"]
    assert {p.name for p in saved.iterdir()} == {"module.so", "lowered_tir.py", "llvm.ll", "schedule.json"}
    assert json.loads((saved / "schedule.json").read_text())["knobs"] == record["best"]["knobs"]
    assert "| gemm |" in (out / "report.md").read_text() and "| tl, 4 in " in (out / "report.md").read_text()
    r = cli("replay", saved)
    assert r.code == 0 and "result checked" in r.out
    # review finding D13: a hand-edited schedule rebuilt and reported as checked; now it is refused
    schedule = json.loads((saved / "schedule.json").read_text())
    for knob, value in (("unroll", -7), ("vector", "zz"), ("order", 99)):
        (saved / "schedule.json").write_text(json.dumps({**schedule, "knobs": {**schedule["knobs"], knob: value}}))
        r = cli("replay", saved)
        assert r.code == 1 and "holds a schedule outside the operator's space" in r.err, (knob, r.err)
    (saved / "schedule.json").write_text(json.dumps({**schedule, "signature": "gemm[other]"}))
    r = cli("replay", saved)
    assert r.code == 1 and "was written for gemm[other]" in r.err


def test_target_fpga_without_a_board(cli, tmp_path):
    r = cli("explore", "--op", "gemm", "--out", tmp_path / "o")
    assert r.code == 1 and "needs a board: add --board NAME" in r.err
    r = cli("replay", tmp_path)
    assert r.code == 1 and "has no schedule.json" in r.err


def test_a_space_smaller_than_the_trials_ends_when_measured_out():
    op = get_builtin("gemv").instantiate(shape="small:s2")
    space = CpuSpace(analyze(op))
    assert space.size == 96  # gemv 13×7: 4 splits of 13 × 3 of 7 × 4 unroll depths × 2 orders
    result = tune_cpu(op, space, SimulatedAnnealing(space, seed=2, chains=4, steps=3), trials=1000,
                      measurer=FailingMeasurer())
    assert 0 < len(result.trials) <= 96


def test_ctrl_c_keeps_what_was_measured_and_writes_the_report(cli, tmp_path, monkeypatch):
    import json

    from gpu_cpu.pipeline import Pipeline

    real = Pipeline.evaluate

    def interrupted_after_three(self, jobs):
        for n, result in enumerate(real(self, jobs)):
            yield result
            if n == 2:
                raise KeyboardInterrupt

    monkeypatch.setattr(Pipeline, "evaluate", interrupted_after_three)
    out = tmp_path / "o"
    r = cli("explore", "--op", "gemm", "--shape", "small:s1", "--target", "cpu", "--trials", "20", "--out", out)
    assert r.code == 130 and "interrupted" in r.err
    report = json.loads((out / "report.json").read_text())
    assert report["complete"] is False
    (record,) = report["cpu"]
    assert record["interrupted"] is True and record["trials"] == 3 and record["torch"] is None
    saved = out / record["directory"]
    assert json.loads((saved / "schedule.json").read_text())["knobs"] == record["best"]["knobs"]
    assert not list(out.glob("**/*.partial"))


def test_a_written_module_computes_the_reference_with_the_weights_packed_as_its_schedule_json_says(cli, tmp_path):
    import json

    import tvm

    from hetero_dse.targets.cpu import packed_weights

    out = tmp_path / "o"
    r = cli("explore", "--op", "conv2d", "--shape", "small:s1", "--target", "cpu", "--trials", "4", "--winograd", "off",
            "--out", out)
    assert r.code == 0, r.err
    (record,) = json.loads((out / "report.json").read_text())["cpu"]
    saved = out / record["directory"]
    schedule = json.loads((saved / "schedule.json").read_text())
    op = get_builtin("conv2d").instantiate(shape="small:s1")
    inputs = op.random_inputs(3)
    names = [t.op.name for t in op.inputs]

    def as_it_says(name, a):  # schedule.json's own numpy recipe for the weight (a transpose, and a block)
        how = schedule["packed_weights"][name]["how"]
        scope = {"numpy": np, name: a}
        exec(("result = " + how) if "; " not in how else how.replace("; ", "\nresult = ", 1), scope)  # noqa: S102
        assert list(scope["result"].shape) == schedule["packed_weights"][name]["shape"]
        return scope["result"]

    args = [as_it_says(n, a) if n in schedule["packed_weights"] else a for n, a in zip(names, inputs, strict=True)]
    module = tvm.runtime.load_module(str(saved / "module.so"))
    dev = tvm.cpu(0)
    got = tvm.runtime.tensor(np.zeros([int(d) for d in op.output.shape], dtype="float32"), dev)
    module[module.entry_name](*[tvm.runtime.tensor(a, dev) for a in args], got)
    np.testing.assert_allclose(got.numpy(), op.reference(inputs), rtol=1e-4, atol=1e-4)
    # vectorised over the output channels, W[k, c, r, s] is taken as [c, r, s, k]
    space = CpuSpace(analyze(op))
    point = space.decode(np.zeros(space.num_knobs, dtype=int)).replace(**{"split.k": (2, 1, 1, 4), "vector": "k"})
    assert packed_weights(op, point) == {"W": {"transpose": [1, 2, 3, 0], "shape": [4, 3, 3, 8],
                                               "how": "numpy.ascontiguousarray(W.transpose((1, 2, 3, 0)))"}}
    # a schedule.json written before the weights were packed ahead: its time was another kernel's, and replay
    # says so beside it
    r = cli("replay", saved)
    assert r.code == 0 and "another code generation" not in r.out, r.err
    old = {k: v for k, v in schedule.items() if k not in ("cpu_codegen", "packed_weights")}
    (saved / "schedule.json").write_text(json.dumps({**old, "knobs": point.to_json()}))
    r = cli("replay", saved)
    assert r.code == 0 and ("another code generation: revision 1, this is 3, whose kernels take their weights "
                            "packed ahead") in " ".join(r.out.split()), (r.out, r.err)
    # revision 3 changed only the kernels with an epilogue staged: this one (none) is revision 2's code
    (saved / "schedule.json").write_text(json.dumps({**old, "cpu_codegen": "2", "knobs": point.to_json()}))
    r = cli("replay", saved)
    assert r.code == 0 and "another code generation" not in r.out, (r.out, r.err)
