"""``hetero_dse explore`` and ``hetero_dse csim`` end to end, and every bad input of the FPGA issue."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from hetero_dse.analysis import analyze
from hetero_dse.hardware.board import load_board
from hetero_dse.ops import get_builtin

from conftest import REPO

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++")


@needs_gxx
def test_explore_writes_project_and_reports_that_agree(cli, tmp_path):
    out = tmp_path / "out"
    r = cli("explore", "--op", "gemm", "--shape", "small:s2", "--board", "vu9p", "--out", out, "--csim",
            "--top-k", "3", "--dtype", "float32,int8")
    assert r.code == 0, r.err
    assert "gemm small:s2" in r.out and "pass" in r.out
    report = json.loads((out / "report.json").read_text())
    assert report["complete"] is True
    (e,) = report["explorations"]
    assert e["csim"]["passed"] and e["csim"]["mismatches"] == 0
    assert e["project"] == "gemm_small_s2/vu9p/hls" and (out / e["project"] / "src" / "kernel.cpp").is_file()
    assert len(e["top"]) == 3 and e["top"][0]["score_s"] <= e["top"][1]["score_s"] <= e["top"][2]["score_s"]
    assert {t["knobs"]["dtype"] for t in e["top"]} <= {"float32", "int8"}
    # the report's figures are the model's for the best knobs
    best = e["best"]
    assert best["gops"] == pytest.approx(best["ops"] / best["latency_s"] / 1e9)
    csv = pd.read_csv(out / "designs.csv")
    assert len(csv) == 3 and csv.loc[0, "latency_s"] == pytest.approx(best["latency_s"])
    md = (out / "report.md").read_text()
    assert "| gemm small:s2 | vu9p |" in md and "pass" in md
    # csim of the whole output directory
    r = cli("csim", out)
    assert r.code == 0 and "PASS" in r.out


def test_explore_several_boards_and_shapes(cli, tmp_path):
    out = tmp_path / "o"
    r = cli("explore", "--op", "conv1d", "--shape", "small", "--board", "vu9p", "--board", "pynq-z2", "--out", out)
    assert r.code == 0, r.err
    report = json.loads((out / "report.json").read_text())
    assert [(x["shape"], x["board"]) for x in report["explorations"]] == [
        ("small:s1", "vu9p"), ("small:s1", "pynq-z2"), ("small:s2", "vu9p"), ("small:s2", "pynq-z2")]
    for x in report["explorations"]:
        caps = load_board(x["board"]).caps
        assert all(x["best"]["resources"][k] <= caps[k] for k in caps)


def test_non_empty_output_needs_force(cli, tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    db = tmp_path / "history.sqlite"
    r = cli("explore", "--op", "gemv", "--shape", "small:s1", "--board", "vu9p", "--out", out, "--db", db)
    assert r.code == 1 and r.err.startswith("hetero_dse: error: output directory") and "--force" in r.err
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
    assert not db.exists()  # a refused run makes no history database
    r = cli("explore", "--op", "gemv", "--shape", "small:s1", "--board", "vu9p", "--out", out, "--force")
    assert r.code == 0 and (out / "report.md").is_file() and (out / "mine.txt").read_text() == "keep"


def test_unwritable_output(cli, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    r = cli("explore", "--op", "gemv", "--shape", "small:s1", "--board", "vu9p", "--out", blocker / "o")
    assert r.code == 1 and r.err.startswith("hetero_dse: error: cannot write to output directory")
    assert "Traceback" not in r.err and r.err.count("\n") == 1


def test_clock_the_board_cannot_reach(cli, tmp_path):
    r = cli("explore", "--op", "gemv", "--board", "vu9p", "--clock", "400", "--out", tmp_path / "o")
    assert r.code == 1
    assert r.err.strip() == "hetero_dse: error: board vu9p cannot run at 400 MHz: its maximum is 300 MHz " \
                            "(clock.max_mhz in vu9p.yaml)"
    assert not (tmp_path / "o").exists()
    r = cli("explore", "--op", "gemv", "--board", "vu9p", "--clock", "fast", "--out", tmp_path / "o")
    assert r.code == 1 and "--clock expects a frequency in MHz" in r.err


def test_data_type_the_operator_cannot_use(cli, write, tmp_path):
    path = write("op.py", """
        import hetero_dse
        from tvm import te

        @hetero_dse.operator(N=8)
        def scale(N):
            A = te.placeholder((N, N), name="A")
            k = te.reduce_axis((0, N), name="k")
            return [A, te.compute((N,), lambda i: te.sum(A[i, k] * A[k, i], axis=k), name="O")]
        """)
    r = cli("explore", path, "--board", "vu9p", "--dtype", "int8", "--out", tmp_path / "o")
    assert r.code == 1
    assert r.err.strip() == ("hetero_dse: error: operator scale cannot use data type int8: it has no 'dtype' "
                             "parameter (its inputs are float32)")
    r = cli("explore", "--op", "gemm", "--board", "vu9p", "--dtype", "float64", "--out", tmp_path / "o")
    assert r.code == 1 and "data type float64 is not one the FPGA model knows" in r.err


def test_nothing_fits_says_which_resource_and_by_how_much(cli, write, tmp_path):
    board = write("tiny.yaml", """
        name: tiny
        description: a board with almost no DSP
        part: xc7z010clg400-1
        clock: {default_mhz: 100, max_mhz: 150}
        resources: {dsp: 4, bram18k: 120, uram: 0, lut: 17600, ff: 35200}
        usable: {dsp: 0.7, bram18k: 0.7, uram: 0.7, lut: 0.7, ff: 0.7}
        memory:
          - {kind: ddr3, channels: 1, bandwidth_gbps_per_channel: 4.2}
        sources: {resources: test, memory: test, clock: test, usable: test}
        """)
    r = cli("explore", "--op", "gemm", "--shape", "small:s1", "--board", board, "--out", tmp_path / "o")
    assert r.code == 1
    # one fp32 multiply-add lane needs 4 DSPs (fmul and fadd, fulldsp); the cap is int(4 * 0.7) = 2
    assert r.err.strip() == ("hetero_dse: error: nothing fits on tiny: the smallest design of gemm (small:s1) found "
                             "needs 4 DSP, 2.00x the usable 2 (70% of 4); try a larger board or smaller shapes")
    assert not (tmp_path / "o").exists()  # nothing written: not even the directory the run made
    # a part whose shell takes a share: the budget is of what it leaves kernels, and the sentence says so
    shell = write("shell.yaml", (tmp_path / "tiny.yaml").read_text().replace("name: tiny", "name: shell").replace(
        "dsp: 4,", "dsp: 40,") + "slrs: 2\nslr_resources:\n  - {dsp: 2, bram18k: 60, uram: 0, lut: 8800, ff: 17600}\n"
        "  - {dsp: 2, bram18k: 60, uram: 0, lut: 8800, ff: 17600}\n")
    r = cli("explore", "--op", "gemm", "--shape", "small:s1", "--board", shell, "--out", tmp_path / "o")
    assert r.code == 1 and r.err.strip().endswith(
        "needs 4 DSP, 2.00x the usable 2 (70% of 4 left by the shell); try a larger board or smaller shapes")


def test_board_without_bandwidth(cli, write, tmp_path):
    board = write("nobw.yaml", """
        name: nobw
        description: no bandwidth
        part: xcvu9p-flgb2104-2-i
        clock: {default_mhz: 250, max_mhz: 300}
        resources: {dsp: 6840, bram18k: 4320, uram: 960, lut: 1182240, ff: 2364480}
        usable: {dsp: 0.7, bram18k: 0.7, uram: 0.7, lut: 0.7, ff: 0.7}
        memory:
          - {kind: ddr4, channels: 4}
        sources: {resources: test, memory: test, clock: test, usable: test}
        """)
    r = cli("explore", "--op", "gemm", "--board", board, "--out", tmp_path / "o")
    assert r.code == 1 and "bandwidth_gbps_per_channel" in r.err and r.err.count("\n") == 1


def test_zero_time_budget_is_refused(cli, tmp_path):
    r = cli("explore", "--op", "gemm", "--board", "vu9p", "--time-budget", "0", "--out", tmp_path / "o")
    assert r.code == 1 and "--time-budget must be positive" in r.err


def test_interrupted_search_keeps_what_it_found(cli, tmp_path, monkeypatch):
    from cost_models import fpga

    calls = {"n": 0}
    original = fpga.FpgaModel.evaluate

    def flaky(self, rows, detail=False):
        calls["n"] += 1
        if calls["n"] == 4 and not detail:
            raise KeyboardInterrupt
        return original(self, rows, detail)

    monkeypatch.setattr(fpga.FpgaModel, "evaluate", flaky)
    out = tmp_path / "o"
    r = cli("explore", "--op", "conv2d", "--shape", "yolo:C8", "--board", "vu9p", "--explorer", "sa", "--out", out)
    assert r.code == 130 and "interrupted" in r.err
    report = json.loads((out / "report.json").read_text())
    assert report["complete"] is False and report["explorations"][0]["search"]["interrupted"] is True
    assert "Interrupted" in (out / "report.md").read_text()
    # what was found before the stop is written whole; nothing half-written is left
    assert (out / "conv2d_yolo_C8" / "vu9p" / "hls" / "design.json").is_file()
    assert not list(out.glob("**/*.partial"))


def _interrupt_at(monkeypatch, call: int) -> None:
    """Ctrl-C during the ``call``-th batch the FPGA model scores."""
    from cost_models import fpga

    calls = {"n": 0}
    original = fpga.FpgaModel.evaluate

    def flaky(self, rows, detail=False):
        calls["n"] += 1
        if calls["n"] == call and not detail:
            raise KeyboardInterrupt
        return original(self, rows, detail)

    monkeypatch.setattr(fpga.FpgaModel, "evaluate", flaky)


def test_an_interrupted_rerun_never_leaves_an_output_that_looks_complete(cli, tmp_path, monkeypatch):
    """Review findings D3 and D11: an interrupted --force rerun kept the old 'complete' report beside new
    projects and old ones the new run never reached; csim passed them all; the same command could not go on
    without --force; a project from an interrupted search did not say so."""
    out = tmp_path / "o"
    args = ("explore", "--op", "gemm", "--shape", "small", "--board", "vu9p", "--budget", "300", "--out", out)
    assert cli(*args).code == 0
    assert len(list(out.glob("*/vu9p/hls"))) == 2
    _interrupt_at(monkeypatch, 2)  # the rerun stops in its first search, before any project of its own
    r = cli(*args, "--dtype", "int8", "--force")
    assert r.code == 130, r.err
    report = json.loads((out / "report.json").read_text())
    assert report["complete"] is False
    designs = [json.loads(p.read_text()) for p in out.glob("*/vu9p/hls/design.json")]
    assert all(d["knobs"]["dtype"] == "int8" for d in designs) and len(designs) <= 1  # nothing of the old run
    if designs:
        assert designs[0]["search_interrupted"] is True
        readme = next(out.glob("*/vu9p/hls/README.md")).read_text()
        assert "**The search was interrupted**" in readme
    r = cli("csim", out)
    assert "output of an interrupted run" in r.out
    # the same command goes on without --force; another one needs it
    monkeypatch.undo()
    r = cli(*args, "--budget", "200")
    assert r.code == 1 and "holds an interrupted run with other options" in r.err
    r = cli(*args, "--dtype", "int8")
    assert r.code == 0, r.err
    assert "Going on from the interrupted run" in r.out
    assert json.loads((out / "report.json").read_text())["complete"] is True
    assert json.loads((out / ".hetero_dse-run.json").read_text())["complete"] is True


def test_a_second_ctrl_c_while_projects_are_written_still_leaves_the_report(cli, tmp_path, monkeypatch):
    """Review finding D11: two Ctrl-Cs 0.05-0.3 s apart left no report at all, though layers had been
    searched. The first stops the search; the second, while projects are written, stops the writing."""
    _interrupt_at(monkeypatch, 40)  # in the second layer's search: the first layer is complete

    def interrupted_write(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("hetero_dse.hls.project.write_project", interrupted_write)
    out = tmp_path / "o"
    r = cli("explore", "--op", "gemm", "--shape", "small", "--board", "vu9p", "--budget", "20000", "--out", out)
    assert r.code == 130 and "Traceback" not in r.err
    report = json.loads((out / "report.json").read_text())
    assert report["complete"] is False and len(report["explorations"]) == 2
    assert all(e["project"] is None for e in report["explorations"]) and not list(out.glob("**/hls"))
    assert json.loads((out / ".hetero_dse-run.json").read_text())["complete"] is False


def test_csim_refuses_an_output_whose_run_never_wrote_its_report(cli, tmp_path):
    out = tmp_path / "o"
    assert cli("explore", "--op", "gemm", "--shape", "small:s1", "--board", "vu9p", "--budget", "200",
               "--out", out).code == 0
    (out / "report.json").unlink()  # as after a kill -9 while projects were being written
    r = cli("csim", out)
    assert r.code == 1 and "has no report.json: the run writing it was stopped" in r.err


def test_one_failed_search_keeps_the_others_results(cli, write, tmp_path):
    tiny = write("tiny.yaml", (REPO / "boards" / "vu9p.yaml").read_text().replace("name: vu9p", "name: tiny")
                 .replace("dsp: 6840", "dsp: 4").replace("{dsp: 2265", "{dsp: 1").replace("{dsp: 1317", "{dsp: 1"))
    out = tmp_path / "o"
    r = cli("explore", "--op", "gemm", "--shape", "small:s1", "--board", "vu9p", "--board", tiny, "--out", out)
    assert r.code == 1 and "on tiny: nothing fits" in r.err and "the other results are in report.md" in r.err
    report = json.loads((out / "report.json").read_text())
    assert [e["board"] for e in report["explorations"]] == ["vu9p"] and report["errors"]
    assert (out / "gemm_small_s1" / "vu9p" / "hls" / "design.json").is_file()


def test_csim_of_a_directory_without_projects(cli, tmp_path):
    r = cli("csim", tmp_path)
    assert r.code == 1 and "no HLS project under" in r.err


def test_explored_best_matches_exhaustive_optimum():
    """The CLI's default search finds the same best latency as enumerating the whole space."""
    import numpy as np

    from cost_models.fpga import FpgaModel
    from hetero_dse.targets.flow import explore
    from hetero_dse.targets.fpga import FpgaTarget
    from hetero_dse.space.fpga import FpgaSpace

    op = get_builtin("conv1d").instantiate(shape="small:s2")
    e = explore(op, FpgaTarget(load_board("vu9p")))
    space = FpgaSpace(analyze(op), load_board("vu9p"), ["float32"], [250.0])
    model = FpgaModel(space.tables)
    objective = np.concatenate([model.evaluate(r)["objective"] for r in space.enumerate()])
    best = model.evaluate(space.encode(e.best)[None, :])["objective"][0]
    assert best == pytest.approx(objective.min())


def test_q_method_from_the_cli_saves_and_reuses_its_network(cli, tmp_path):
    state = tmp_path / "q.pt"
    args = ("explore", "--op", "conv2d", "--shape", "yolo:C8", "--board", "vu9p", "--explorer", "q", "--budget",
            "600", "--starts", "16", "--q-state", state)
    r = cli(*args, "--out", tmp_path / "a")
    assert r.code == 0, r.err
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["explorations"][0]["search"]["explorer"] == "q"
    assert report["explorations"][0]["search"]["evaluations"] == 600
    saved = state.stat().st_mtime_ns
    r = cli(*args, "--out", tmp_path / "b")  # starts warm from the saved network, saves it again
    assert r.code == 0, r.err
    assert state.stat().st_mtime_ns >= saved
    # a network of another operator's space: one sentence, nothing written
    r = cli("explore", "--op", "gemm", "--shape", "small:s1", "--board", "vu9p", "--explorer", "q", "--q-state",
            state, "--out", tmp_path / "c")
    assert r.code == 1 and "was trained on a space with" in r.err and "Traceback" not in r.err


def test_exhaustive_is_refused_on_cpu(cli, tmp_path):
    r = cli("explore", "--op", "gemm", "--shape", "small:s1", "--target", "cpu", "--explorer", "exhaustive",
            "--out", tmp_path / "o")
    assert r.code == 1 and "exhaustive explorer" in r.err and not (tmp_path / "o").exists()


def test_fpga_designs_enter_the_history_and_seed_the_guided_ga(cli, tmp_path):
    from hetero_dse.history import HistoryDB

    db = tmp_path / "h.sqlite"
    first = cli("explore", "--op", "conv2d", "--shape", "small:s1", "--board", "vu9p", "--out", tmp_path / "a",
                "--db", db, "--explorer", "sa", "--budget", "2000")
    assert first.code == 0, first.err
    store = HistoryDB(str(db))
    (w,) = store.workloads()
    stored = store.records(w["id"])
    assert len(stored) == 64 and w["target"] == "fpga vu9p" and store.workload(w["id"]).extents["k"] == 8
    best = json.loads((tmp_path / "a" / "report.json").read_text())["explorations"][0]["best"]
    assert stored[0].seconds == pytest.approx(best["latency_s"])  # the model's latency of the best design
    second = cli("explore", "--op", "conv2d", "--shape", "small:s1", "--param", "K=12", "--board", "vu9p",
                 "--out", tmp_path / "b", "--db", db, "--explorer", "gga", "--budget", "64")
    assert second.code == 0, second.err
    e = json.loads((tmp_path / "b" / "report.json").read_text())["explorations"][0]
    assert e["search"]["explorer"] == "gga" and e["search"]["evaluations"] == 64
    assert len(store.workloads()) == 2
    none = cli("explore", "--op", "conv2d", "--shape", "small:s1", "--param", "K=16", "--board", "vu9p",
               "--out", tmp_path / "c", "--db", db, "--no-history", "--budget", "100")
    assert none.code == 0 and len(store.workloads()) == 2


def test_a_guided_ga_of_one_is_refused(cli, tmp_path):
    r = cli("explore", "--op", "gemm", "--shape", "small:s2", "--board", "vu9p", "--explorer", "gga", "--starts", "1",
            "--out", tmp_path / "o")
    assert r.code == 1 and "population of at least 2" in r.err and "Traceback" not in r.err
    # the refused run leaves nothing: not the directory it made, nor one the user made (kept, still empty)
    assert not (tmp_path / "o").exists()
    (tmp_path / "mine").mkdir()
    r = cli("explore", "--op", "gemm", "--shape", "small:s2", "--board", "vu9p", "--explorer", "ga", "--starts", "1",
            "--out", tmp_path / "mine")
    assert r.code == 1 and "population of at least 2" in r.err
    assert (tmp_path / "mine").is_dir() and not any((tmp_path / "mine").iterdir())


def test_a_shape_too_large_for_a_test_bench_is_reported_without_a_project(cli, tmp_path):
    # 100000 channels in and out: 360 GB of weights. The search succeeds on the model; the project's test
    # vectors cannot be drawn, so it is refused in one sentence and the report still holds the designs.
    out = tmp_path / "o"
    r = cli("explore", "--op", "conv2d", "--shape", "yolo:C8", "--param", "C=100000", "--param", "K=100000",
            "--board", "vu9p", "--budget", "300", "--out", out)
    assert r.code == 1
    assert "no HLS project for conv2d yolo:C8[C=100000,K=100000] on vu9p" in r.err
    assert "360.94 GB of vectors (limit 1.00 GB)" in r.err and "Traceback" not in r.err
    (e,) = json.loads((out / "report.json").read_text())["explorations"]
    assert e["project"] is None and e["project_unwritten"].startswith("not written: its test bench")
    assert e["best"]["latency_s"] > 0
    assert "HLS project: not written: its test bench would hold" in (out / "report.md").read_text()
    assert not list(out.glob("**/hls*"))


def test_a_shape_too_large_to_measure_is_refused_before_any_search(cli, tmp_path):
    r = cli("explore", "--op", "conv2d", "--shape", "yolo:C8", "--param", "C=100000", "--param", "K=100000",
            "--target", "cpu", "--board", "vu9p", "--out", tmp_path / "o")
    assert r.code == 1 and "tensors take 360.63 GB: too large to measure on the CPU" in r.err
    assert not (tmp_path / "o").exists()


def test_a_run_into_a_log_file_prints_progress_lines(cli, tmp_path, monkeypatch):
    """Issue 39 item 4: a 15-minute ``explore --model resnet18`` whose output went to a log printed nothing until
    its end. Not on a terminal, each search says when it starts, how far it is every EVERY_S seconds, and how
    it ended; each step between says when it starts."""
    import re

    from hetero_dse.cli import progress_log

    monkeypatch.setattr(progress_log, "EVERY_S", 0.0)  # a line at every update of the search
    monkeypatch.setattr(progress_log, "START_S", 0.0)  # and its start said at its first
    out = tmp_path / "o"
    r = cli("explore", "--op", "gemm", "--shape", "small", "--board", "vu9p", "--budget", "300", "--out", out)
    assert r.code == 0, r.err
    lines = [line for line in r.err.splitlines() if re.match(r"\[\d\d:\d\d:\d\d\] ", line)]
    for shape in ("s1", "s2"):
        mine = [line[11:] for line in lines if f"gemm small:{shape} on vu9p" in line]
        assert mine[0] == f"gemm small:{shape} on vu9p: searching, at most 300 designs"
        assert re.fullmatch(rf"gemm small:{shape} on vu9p: done, 300 designs, best [\d.]+ µs, \d+ s", mine[-1])
        assert any(re.fullmatch(rf"gemm small:{shape} on vu9p: [\d,]+/300 designs, best .+, \d+ s", m) for m in mine)
    assert any(line.endswith("writing gemm small:s1 for vu9p") for line in lines)
