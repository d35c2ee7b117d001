"""The one engine's plug: the history in front of any evaluator, every built-in target through the one flow
into one kind of report row, and a target written here, outside the package, that needs nothing else."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest

from hetero_dse.analysis import analyze
from hetero_dse.evaluate.cached import HistoryEvaluator
from hetero_dse.explore.loop import Evaluation
from hetero_dse.hardware.board import load_board
from hetero_dse.history import HistoryDB, Record, Workload, point_key
from hetero_dse.history.store import WorkloadHistory
from hetero_dse.ops import get_builtin
from hetero_dse.report import write_reports
from hetero_dse.space.splits import SplitSpace
from hetero_dse.targets.base import Defaults, Outcome, Row, Search, Written
from hetero_dse.targets.flow import explore
from hetero_dse.targets.fpga import FpgaTarget

GEMM = get_builtin("gemm").instantiate(shape="small:s2")
GEMM16 = get_builtin("gemm").instantiate({"M": 16, "N": 16, "K": 16})  # 15 three-level splits per loop


class Counting:
    """An evaluator whose time for a row is 1 + its first column; it tells each row and can stop at a count."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.asked: list[list[int]] = []
        self.stop_after = stop_after
        self.answered = 0

    def evaluate(self, rows, best, deadline, on_row=None):
        self.asked.append(rows[:, 0].tolist())
        done = rows if self.stop_after is None else rows[: self.stop_after]
        for i, row in enumerate(done):
            on_row(i, 1.0 + row[0], None, None)
        return Evaluation(1.0 + done[:, 0].astype(float))


@pytest.fixture
def history(tmp_path):
    db = HistoryDB(str(tmp_path / "h.sqlite"))
    space = SplitSpace(analyze(GEMM16), 3, 3, {})
    memo = WorkloadHistory(db, Workload("gemm", GEMM16.signature(), "toy", {"hetero_dse": "test"}))
    yield space, memo
    db.close()


def test_the_history_answers_what_it_holds_and_stores_each_new_result_as_it_comes(history):
    space, memo = history
    rows = np.unique(space.sample(64, np.random.default_rng(0)), axis=0)[:6]
    memo.add(space.decode(rows[1]), 0.5, None)
    memo.add(space.decode(rows[3]), None, "build failed")
    inner = Counting()
    told = []
    wrapped = HistoryEvaluator(inner, space, memo)
    evaluation = wrapped.evaluate(rows, None, None, on_row=lambda i, s, e, _t: told.append((i, s, e)))
    # rows 1 and 3 answered from the history, in order among the measured ones; only the others measured
    assert [i for i, _, _ in told] == list(range(6))
    assert inner.asked == [rows[[0, 2, 4, 5], 0].tolist()]
    assert told[1] == (1, 0.5, None) and told[3] == (3, None, "build failed")
    assert evaluation.objective[1] == 0.5 and evaluation.objective[3] == np.inf
    assert wrapped.answered == 2
    stored = memo.known([space.decode(r) for r in rows])
    assert len(stored) == 6 and stored[point_key(space.decode(rows[5]))].seconds == 1.0 + rows[5, 0]


def test_rows_after_a_deadline_cut_are_neither_told_nor_spent(history):
    space, memo = history
    rows = np.unique(space.sample(64, np.random.default_rng(1)), axis=0)[:5]
    memo.add(space.decode(rows[3]), 0.25, None)  # answered, but after the cut: not spent
    evaluation = HistoryEvaluator(Counting(stop_after=2), space, memo).evaluate(rows, None, None, on_row=None)
    assert len(evaluation.objective) == 2  # rows 0 and 1; row 2 was not reached, so neither is row 3
    assert memo.known([space.decode(r) for r in rows[2:3]]) == {}


def test_an_evaluator_that_does_not_tell_its_rows_is_refused(history):
    space, memo = history

    class Silent(Counting):
        def evaluate(self, rows, best, deadline, on_row=None):
            return Evaluation(np.ones(len(rows)))

    with pytest.raises(TypeError, match="on_row"):
        HistoryEvaluator(Silent(), space, memo).evaluate(space.sample(2, np.random.default_rng(0)), None, None)


# ------------------------------------------------------------------ a target written outside the package
class ToyDevice:
    """A made-up device: a schedule's time is the number of outer tiles (fewer is faster). Everything the
    engine needs from a kind of device, and nothing more."""

    kind, device, report_key, artefact = "toy", "toy device", "toy", "toy program"
    defaults = Defaults({"sa": 8}, "sa", 200, "schedules", auto_from_history=False)

    def check(self, op):
        pass

    def preparation(self, operators):
        return None

    def directory(self, op):
        return f"{op.slug}/toy"

    def space(self, op):
        return SplitSpace(analyze(op), 3, 3, {})

    def workload(self, op, space):
        return None

    def evaluator(self, op, space, history, progress=None):
        class Outer:
            best_seconds = best_point = None

            def evaluate(self, rows, best, deadline, on_row=None):
                seconds = np.array([float(sum(space.decode(r)[f"split.{n}"][0] for n in space.loop_names))
                                    for r in rows])
                if self.best_seconds is None or seconds.min() < self.best_seconds:
                    self.best_seconds, self.best_point = float(seconds.min()), space.decode(rows[seconds.argmin()])
                return Evaluation(seconds)

        return nullcontext(Outer())

    def observers(self, space, search):
        return ()

    # no ``alternatives``: a target written before there were any still runs (``Target.alternatives``)
    def finish(self, op, space, explorer, loop, evaluator, observers, history, search):
        return Outcome(op, self, space, explorer, loop, best=evaluator.best_point, best_seconds=evaluator.best_seconds)

    def write(self, outcome, out: Path, seed):
        path = out / self.directory(outcome.op) / "toy.txt"
        path.parent.mkdir(parents=True)
        path.write_text(f"{outcome.best_seconds}\n")
        return Written(str(path.relative_to(out)), passed=True)

    def row(self, o, written):
        return Row("toy", o.op.name, o.op.shape_name, self.device, "model", o.best_seconds, None, None, None, None,
                   o.explorer, o.loop.evaluations, 0, 0, o.loop.wall_s, o.interrupted,
                   written.directory if written else None, None, "pass", "made up")

    def record(self, o, written):
        return {"operator": o.op.name, "seconds": o.best_seconds}

    def markdown(self, o, written):
        return ["## The toy device", "", "Nothing to see.", ""]

    def csv_rows(self, o):
        return []

    def footnote(self):
        return "toy: made up."


def test_a_new_kind_of_device_is_one_class(tmp_path):
    target = ToyDevice()
    outcome = explore(GEMM16, target, "sa", Search(budget=200))
    # every split's outer factor 1 is the best this device can do: one per loop
    assert outcome.best_seconds == len(outcome.space.loop_names)
    assert 0 < outcome.loop.evaluations <= 200
    written = target.write(outcome, tmp_path, 0)
    write_reports(tmp_path, [(outcome, written)], interrupted=False)
    report = json.loads((tmp_path / "report.json").read_text())
    # the target's own record, and the search's convergence the report adds to every record
    (record,) = report["toy"]
    assert {k: record[k] for k in ("operator", "seconds")} == {"operator": "gemm", "seconds": 3.0}
    assert record["convergence"][-1][1] == 3.0 and record["convergence"][-1][0] <= outcome.loop.evaluations
    assert (tmp_path / "report.html").is_file()
    (row,) = report["rows"]
    assert (row["kind"], row["device"], row["seconds"], row["check"]) == ("toy", "toy device", 3.0, "pass")
    md = (tmp_path / "report.md").read_text()
    assert "| gemm | toy device | 3 s | model |" in md and "## The toy device" in md
    assert "toy: made up." in md


class Sweep:
    """A made-up explorer: the space's points in random batches of four, never one twice."""

    name = "sweep"

    def __init__(self, space, seed):
        self.space, self.rng, self.seen = space, np.random.default_rng(seed), set()

    def propose(self):
        rows = self.space.sample(16, self.rng)
        keys = self.space.keys(rows)
        new = [i for i, k in enumerate(keys) if int(k) not in self.seen][:4]
        self.seen.update(int(keys[i]) for i in new)
        return rows[new] if new else None

    def observe(self, rows, objective):
        pass


def test_a_target_an_explorer_and_a_plot_are_each_one_class_and_one_registration(cli, tmp_path):
    """From outside the package: a kind of device, a search strategy and a figure of the report, each declared
    once, and the whole run (CLI -> engine -> target -> report) takes them."""
    from hetero_dse.explore.registry import _REGISTRY as explorers
    from hetero_dse.explore.registry import register_explorer
    from hetero_dse.report_html import PLOTS, new_figure, register_plot
    from hetero_dse.targets.registry import _REGISTRY as targets
    from hetero_dse.targets.registry import register_target

    def evaluations(report):
        rows = [r for r in report["rows"] if r["kind"] == "toy"]
        if not rows:
            return None
        fig, ax = new_figure()
        ax.bar([r["operator"] for r in rows], [r["evaluations"] for r in rows])
        return fig

    register_target("toy", lambda request: [ToyDevice()], "a made-up device")
    register_explorer("sweep", lambda space, seed, starts, gamma, prior: Sweep(space, seed), "four at a time")
    register_plot("toy_evaluations", evaluations, "Points each toy search evaluated.")
    register_plot("broken", lambda report: 1 / 0, "A plugin's figure that fails.")
    try:
        r = cli("explore", "--op", "gemm", "--param", "M=16", "--param", "N=16", "--param", "K=16", "--target",
                "toy", "--explorer", "sweep", "--budget", "40", "--out", tmp_path / "out", "--no-history")
        assert r.code == 0, r.err
        report = json.loads((tmp_path / "out" / "report.json").read_text())
        (row,) = report["rows"]
        assert (row["kind"], row["explorer"], row["evaluations"]) == ("toy", "sweep", 40), r.out
        assert row["seconds"] >= 3.0 and row["directory"] and (tmp_path / "out" / row["directory"]).is_file(), \
            (row, r.out)
        page = (tmp_path / "out" / "report.html").read_text()
        assert "Points each toy search evaluated." in page
        assert "Figure broken not drawn</b>: ZeroDivisionError" in page  # costs that figure, not the report
        # the device's own section of report.json is listed, so every reader finds its records
        assert "toy" in report["sections"] and report["toy"][0]["convergence"] and "Search convergence" in page
        merged = cli("report", tmp_path / "out", tmp_path / "out", "--out", tmp_path / "both")
        assert merged.code == 0, merged.err
        assert len(json.loads((tmp_path / "both" / "report.json").read_text())["toy"]) == 2
        assert "--explorer" in cli("explore", "--op", "gemm", "--target", "toy", "--explorer", "nope").err
    finally:
        targets.pop("toy"), explorers.pop("sweep"), PLOTS.pop("toy_evaluations"), PLOTS.pop("broken")
    assert "'toy' is not one of" in cli("explore", "--op", "gemm", "--target", "toy").err


def test_a_script_runs_the_engine_from_any_thread(tmp_path):
    """``execute`` from a script's worker thread (where signals cannot be held while the report is written);
    the same script run again into the same folder goes on from it only if it is the same run."""
    import threading

    from hetero_dse.errors import HeteroDSEError
    from hetero_dse.run.engine import RunSettings, execute

    found = {}
    settings = RunSettings(tmp_path / "out", Search(budget=30))
    worker = threading.Thread(target=lambda: found.setdefault("r", execute([GEMM16], [ToyDevice()], settings)))
    worker.start()
    worker.join(120)
    result = found["r"]
    assert not result.interrupted and result.rows[0].seconds >= 3.0
    assert json.loads((tmp_path / "out" / "report.json").read_text())["complete"]
    with pytest.raises(HeteroDSEError, match="not empty"):  # another run's folder is not taken over silently
        execute([GEMM], [ToyDevice()], settings)
    with pytest.raises(HeteroDSEError, match="at least one operator"):
        execute([], [ToyDevice()], RunSettings(tmp_path / "none"))


# ------------------------------------------------------------------ the built-in targets, one row type
def test_the_fpga_target_fills_the_one_row_with_the_models_figures(tmp_path):
    target = FpgaTarget(load_board("vu9p"))
    e = explore(GEMM, target, "sa", Search(budget=3000, top_k=2))
    point, design = e.best_design
    assert e.best == point and e.best_seconds == design["latency_s"] and e.estimate
    row = target.row(e, Written("x"))
    assert (row.kind, row.device, row.basis, row.seconds) == ("fpga", "vu9p", "model", design["latency_s"])
    assert row.peak_fraction == design["roofline"] and row.gflops == design["gops"]
    assert row.evaluations == e.result.evaluations <= 3000 and f"PE {design['pe']}" in row.detail


def test_the_gpu_target_without_a_gpu_fills_the_row_with_a_labelled_estimate(monkeypatch):
    import shutil

    if shutil.which("nvcc") is None:
        pytest.skip("the GPU target needs the CUDA toolkit (nvcc)")
    monkeypatch.setattr("hetero_dse.targets.gpu.present_gpu", lambda: None)
    from hetero_dse.targets.gpu import GpuTarget

    target = GpuTarget("a100", trials=8)
    assert target.defaults.budget == 4096 and target.workload(GEMM, target.space(GEMM)) is None
    t = explore(GEMM, target, "random", Search(budget=64))
    row = target.row(t, None)
    assert (row.basis, row.device, row.library_seconds) == ("estimate", "a100 (estimate)", None)
    assert row.evaluations == len(t.trials) == 64 and row.seconds == min(
        x.result.seconds for x in t.trials if x.result.ok)
    assert row.gflops == pytest.approx(analyze(GEMM).flops / row.seconds / 1e9)
    assert row.peak_fraction == pytest.approx(row.gflops * 1e9 / 19.5e12)  # the A100's FP32 peak
    assert row.bound in ("compute", "dram", "l2", "shared", "launch")


def test_fpga_designs_the_history_holds_seed_a_history_based_tuner(tmp_path):
    db = HistoryDB(str(tmp_path / "h.sqlite"))
    target = FpgaTarget(load_board("vu9p"))
    small = get_builtin("gemm").instantiate(shape="small:s1")
    explore(small, target, "sa", Search(budget=2000), history=db)
    (listed,) = db.workloads()
    assert listed["records"] == 64  # the best designs of the search are kept, the rest is cheap to score again
    copy = HistoryDB(str(tmp_path / "copy.sqlite"))  # FPGA designs pass the import's knob checks
    assert copy.import_lines(db.export()) == (64, 0)
    copy.close()
    e = explore(GEMM, target, "gga", Search(budget=500), history=db)
    assert e.explorer == "gga" and e.found
    assert isinstance(db.records(db.workload_id(target.workload(small, target.space(small))))[0], Record)
    db.close()


def test_a_model_search_ends_on_the_targets_patience_and_says_why(monkeypatch):
    """Annealing on the FPGA model finds its best design early and then walks designs already scored: the
    target's default patience ends it (report.json says so); a user's --patience replaces it; an exhaustive
    search always runs to its end."""
    from hetero_dse.explore.loop import ENDS
    from hetero_dse.explore.settings import ExplorerSettings
    from hetero_dse.targets.fpga import DEFAULT_BUDGET, SA_PATIENCE

    target = FpgaTarget(load_board("vu9p"))
    op = get_builtin("conv2d").instantiate(shape="yolo:C12")
    e = explore(op, target, "sa", Search(seed=0))
    assert e.loop.ended == "patience" and e.loop.evaluations < DEFAULT_BUDGET
    record = target.record(e, None)["search"]
    assert record["ended"] == "patience" and record["ended_reason"] == ENDS["patience"]
    improved = [used for used, _ in e.loop.convergence]
    assert improved and improved[-1] < e.loop.evaluations
    patient = explore(op, target, ExplorerSettings("sa", patience=3 * SA_PATIENCE), Search(seed=0))
    assert patient.loop.evaluations > e.loop.evaluations and patient.best_design[1]["latency_s"] == \
        e.best_design[1]["latency_s"]
    # a budget the user gives is spent, and another explorer's search is not cut by annealing's patience
    assert explore(op, target, "sa", Search(seed=0, budget=20_000)).loop.ended == "budget"
    assert explore(op, target, "random", Search(seed=0)).loop.ended == "budget"
    import hetero_dse.targets.flow as flow

    given = []
    run_search = flow.run_search
    monkeypatch.setattr(flow, "run_search", lambda *a, **k: given.append(k["patience"]) or run_search(*a, **k))
    whole = explore(get_builtin("gemm").instantiate(shape="small:s1"), target, "exhaustive", Search())
    assert given == [None] and whole.loop.ended == "explorer"  # an enumeration is never cut short


def _figure(text: str) -> float:
    """``4.866 ms`` or ``13.70 MB`` as the number it prints (seconds, bytes)."""
    value, unit = text.split()
    scale = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9, "B": 1.0, "kB": 1e3, "MB": 1e6, "GB": 1e9}
    return float(value) * scale[unit]


def test_the_fpga_top_k_is_printed_in_the_order_of_the_score_it_is_ranked_by():
    """Issue 39 item 4: the top-k of yolo:C8 on the VU9P listed a 5.589 ms design above a 5.542 ms one under a
    latency column, ranked in fact by the model's objective (latency charged for DDR traffic). The table names
    and prints the score it is ranked by, and the traffic that puts a slower design first."""
    target = FpgaTarget(load_board("vu9p"))
    op = get_builtin("conv2d").instantiate(shape="yolo:C8")
    e = explore(op, target, "sa", Search(budget=2000, top_k=10))
    lines = target.markdown(e, None)
    header = next(i for i, line in enumerate(lines) if line.startswith("| rank |"))
    assert lines[header].startswith("| rank | score | latency | DDR traffic (× tensors, × I/O bound) |")
    assert "ranked by score" in lines[header - 2]
    table = [line.strip("|").split(" | ") for line in lines[header + 2:header + 2 + len(e.designs)]]
    ranks = [int(cells[0]) for cells in table]
    scores = [_figure(cells[1]) for cells in table]
    latencies = [_figure(cells[2]) for cells in table]
    traffic = [_figure(cells[3].split(" (")[0]) for cells in table]
    assert ranks == list(range(1, len(e.designs) + 1)) == list(range(1, 11))
    assert scores == sorted(scores)  # the printed order follows the printed score
    inversions = [r for r in range(len(table) - 1) if latencies[r + 1] < latencies[r]]
    assert inversions, "no design ranked above a faster one: the case this test reproduces is gone"
    for r in inversions:  # a slower design first moves less data
        assert traffic[r] < traffic[r + 1], (r + 1, latencies[r:r + 2], traffic[r:r + 2])
    top = target.record(e, None)["top"]
    assert [t["score_s"] for t in top] == sorted(t["score_s"] for t in top)
    assert all(t["score_s"] >= t["latency_s"] for t in top)  # the charge only adds
    # the score is what the header says, from the columns printed: latency × (1 + w × traffic in tensors), to
    # the millionth the fullest resource adds and the columns' rounding
    weight = e.model.traffic_weight
    for cells, (_, d) in zip(table, e.designs, strict=True):
        tensors = float(cells[3].split(" (")[1].split("×")[0])
        assert _figure(cells[1]) == pytest.approx(_figure(cells[2]) * (1 + weight * tensors), rel=2e-3)
        assert d["score_s"] == pytest.approx(d["latency_s"] * (1 + weight * d["traffic_over_compulsory"]), rel=2e-6)
