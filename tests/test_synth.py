"""Synthesis in the loop, run with the TEST DOUBLE of vitis_hls in tests/fake_vitis (no synthesis runs here:
the double schedules the project's code itself, never reading design.json's predictions, and writes reports
in Vitis 2022+'s layout), on a Dask LocalCluster. A defect put into the code, which the model cannot see,
shows in the validation as the mismatch a real synthesis would give."""

from __future__ import annotations

from cost_models.fpga_describe import describe
import json
import os
import sys
import time
from pathlib import Path

import pytest

from hetero_dse.hls.synth import SynthError, SynthJob, find_projects, find_tool, synthesize
from hetero_dse.history import HistoryDB

FAKE = Path(__file__).parent / "fake_vitis"


@pytest.fixture
def fake_tool(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKE}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_VITIS_PYTHON", sys.executable)  # the double reads the code with libclang
    monkeypatch.delenv("FAKE_VITIS_MODE", raising=False)
    monkeypatch.delenv("FAKE_VITIS_SCALE", raising=False)
    return find_tool()


@pytest.fixture(scope="module")
def explored(tmp_path_factory):
    """Two small explorations' projects (gemm and conv2d), written once for the module (the convolution's direct
    design: the Winograd engine's would be a network kernel, which synthesis does not read back)."""
    from hetero_dse.cli.main import main

    out = tmp_path_factory.mktemp("explored")
    for op, shape in (("gemm", "small:s1"), ("conv2d", "small:s1")):
        try:
            main(["explore", "--op", op, "--shape", shape, "--board", "vu9p", "--budget", "200",
                  "--out", str(out / op), "--winograd", "off"])
        except SystemExit as exc:
            assert exc.code == 0
    return out


@pytest.fixture
def projects(explored, tmp_path):
    import shutil

    shutil.copytree(explored, tmp_path / "out")
    return tmp_path / "out"


def test_the_tool_is_found_on_path_or_through_xilinx_hls(fake_tool, monkeypatch, tmp_path):
    assert fake_tool.kind == "vitis_hls" and fake_tool.version == "2023.2"
    assert fake_tool.command() == [fake_tool.path, "-f", "run_hls.tcl"]
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("XILINX_HLS", str(FAKE.parent / "nowhere"))
    with pytest.raises(SynthError, match="XILINX_HLS or XILINX_VITIS"):
        find_tool()
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "vitis_hls").symlink_to(FAKE / "vitis_hls")
    monkeypatch.setenv("XILINX_HLS", str(tmp_path))
    assert find_tool().path == str(tmp_path / "bin" / "vitis_hls")


def test_synth_end_to_end_records_validates_and_skips_what_is_done(cli, projects, fake_tool, tmp_path):
    from hetero_dse.hls.validate import worst_error

    db = tmp_path / "h.sqlite"
    r = cli("synth", str(projects), "--steps", "csynth,cosim", "--jobs", "2", "--db", db, "--strict")
    assert r.code == 0, r.err + r.out
    found = find_projects([projects])
    assert len(found) == 2
    for project in found:
        synth = json.loads((project / "synth.json").read_text())
        assert synth["status"] == "ok" and synth["tool_version"] == "2023.2" and synth["steps"] == ["csynth", "cosim"]
        check = json.loads((project / "validation.json").read_text())
        rows = {row["figure"]: row for row in check["figures"]}
        # what the code fixes, the double read from the code the way a scheduler would, and it is what the
        # model predicted: every II and trip count (found in the _Pipeline_ modules), banks, port widths,
        # operator cores, DSPs and BRAMs
        exact = [row for row in check["figures"] if row.get("exact")]
        assert exact and all(row["error"] == 0 for row in exact), [r for r in exact if r["error"] != 0]
        assert any(name.endswith(" II") for name in rows) and rows["DSP"]["error"] == 0
        assert rows["BRAM18K"]["error"] == 0
        # the latency the double's schedule and its DATAFLOW simulation give (AXI round trips, loop overheads
        # and all) is within 10 % of the model's
        cosim = rows["latency (cycles), co-simulated"]
        assert abs(cosim["error"]) < 0.10, cosim
        assert not worst_error(check, 0.25)
    store = HistoryDB(str(db))
    job = SynthJob.of(found[0], ("csynth", "cosim"), 60, fake_tool)
    assert store.synthesis(job.design_key, job.part, job.clock_mhz, "2023.2", "csynth cosim")["status"] == "ok"
    store.close()
    # a rerun synthesizes nothing: every design is in the database
    before = (found[0] / "synth.log").stat().st_mtime
    r = cli("synth", str(projects), "--steps", "csynth,cosim", "--db", db)
    assert r.code == 0 and "2 projects: 0 synthesized, 2 done before, 0 failed" in r.out
    assert (found[0] / "synth.log").stat().st_mtime == before


@pytest.mark.parametrize("mode,reason", [
    ("crash", "exited with code 1"),
    ("garbage", "not a complete XML report"),
    ("hang", "limit"),
    ("killworker", "worker running it was lost"),
])
def test_a_failed_job_is_recorded_with_its_log_and_the_rest_go_on(mode, reason, projects, fake_tool, monkeypatch,
                                                                    tmp_path):
    conv, gemm = find_projects([projects])  # in path order
    assert "conv2d" in str(conv) and "gemm" in str(gemm)
    jobs = [SynthJob.of(p, ("csynth",), 4 if mode == "hang" else 120, fake_tool) for p in (gemm, conv)]
    store = HistoryDB(str(tmp_path / "h.sqlite"))
    # the double misbehaves for the conv2d project only (its design.json names the mode)
    monkeypatch.setenv("FAKE_VITIS_MODE_FOR", "conv2d")
    monkeypatch.setenv("FAKE_VITIS_MODE", mode)
    t0 = time.time()
    outcomes = {Path(o.project).parts[-3]: o for o in synthesize(jobs, store=store, workers=2)}
    assert time.time() - t0 < 90
    assert outcomes["gemm_small_s1"].status == "ok"
    bad = outcomes["conv2d_small_s1"]
    assert bad.status in ("failed", "timeout") and reason in bad.result["reason"]
    if mode in ("crash",):
        assert "crashed as asked" in bad.result["log_tail"]
    job = jobs[1]
    stored = store.synthesis(job.design_key, job.part, job.clock_mhz, job.tool.version, "csynth")
    assert stored["status"] == bad.status and json.loads((conv / "synth.json").read_text())["status"] == bad.status
    store.close()


def _gemm(out, params, knobs):
    from hetero_dse.hardware.board import load_board
    from hetero_dse.hls.project import write_project
    from hetero_dse.ops import get_builtin
    from hetero_dse.targets.base import Search
    from hetero_dse.targets.flow import explore
    from hetero_dse.targets.fpga import FpgaTarget

    board = load_board("vu9p")
    e = explore(get_builtin("gemm").instantiate(params), FpgaTarget(board), search=Search(budget=300, top_k=1))
    op, analysis = e.best_operator()
    row = e.space.encode(e.best_design[0].replace(**knobs))
    return write_project(out, op, analysis, e.space.decode(row), describe(e.model, row), board)


@pytest.fixture(scope="module")
def gemm_project(tmp_path_factory):
    """A GEMM whose PE array reads 4 x 8 elements of B an iteration from 32 banks, and carries its sum through
    the pipeline (DEPENDENCE): the project a defect is put into."""
    return _gemm(tmp_path_factory.mktemp("gemm") / "hls", {"M": 32, "N": 32, "K": 32},
                 {"tile.i": 16, "tile.j": 32, "tile.k": 32, "unroll.i": 1, "unroll.j": 8, "unroll.k": 4})


@pytest.fixture(scope="module")
def close_project(tmp_path_factory):
    """A GEMM whose output element is updated every 2 iterations over a 7-cycle read-add-write: II 4."""
    return _gemm(tmp_path_factory.mktemp("close") / "hls", {"M": 4, "N": 2, "K": 64},
                 {"tile.i": 1, "tile.j": 2, "tile.k": 64, "unroll.i": 1, "unroll.j": 1, "unroll.k": 1})


def _mutant(project, kind, description, into):
    from hetero_dse.testing.mutants import apply, mutants

    (mutant,) = [m for m in mutants(project, [kind]) if description in m.description]
    return apply(project, mutant, into)


def test_a_defect_the_model_cannot_see_is_a_validation_mismatch(cli, gemm_project, close_project, fake_tool,
                                                              tmp_path):
    """design.json stays as the model wrote it; the code is broken one defect at a time; the double's
    reports, read from the broken code, disagree with the prediction where a real synthesis would, each
    mismatch named by its cause, and --strict fails."""
    def synth(project, *extra):
        r = cli("synth", str(project), "--db", tmp_path / f"{project.name}.sqlite", "--strict", *extra)
        rows = {row["figure"]: row for row in json.loads((project / "validation.json").read_text())["figures"]}
        return r, rows

    clean, rows = synth(gemm_project)
    assert clean.code == 0, clean.out
    assert rows["compute II"]["reported"] == rows["compute II"]["predicted"] == 1
    # B's channel left with its 4 banks along k only: the 8 j lanes of a k read one bank -> II 8
    broken = _mutant(gemm_project, "partition_removed", "variable=buf1_B_s type=cyclic factor=8 dim=2",
                     tmp_path / "banks")
    r, rows = synth(broken)
    assert r.code == 1
    assert rows["compute II"]["reported"] == 8 and "limited memory ports on buf1_B_s" in rows["compute II"]["cause"]
    banks = rows["buf1_B_s banks"]
    assert (banks["predicted"], banks["reported"]) == (32, 4) and "did not apply" in banks["cause"]
    # a DEPENDENCE distance longer than the code's where the sum recurs every 2 iterations over 7 cycles: Vitis
    # trusts it, free to schedule the write anywhere in the 23-stage iteration; the hardware reads a sum before
    # its last update is written, and the co-simulation catches it
    record = json.loads((close_project / "design.json").read_text())["predicted"]
    assert (record["accumulation_distance"], record["recurrence"], record["ii"]) == (2, 7, 4)
    broken = _mutant(close_project, "dependence_distance", "distance 2 -> 8", tmp_path / "dist")
    r, rows = synth(broken, "--steps", "csynth,cosim")
    assert r.code == 1 and rows["co-simulation"]["reported"] == "Fail" and rows["co-simulation"]["failed"]
    assert (rows["compute II"]["predicted"], rows["compute II"]["reported"]) == (4, 4)  # the II pragma holds
    # ports of 256-bit words where the board's are 512
    broken = _mutant(gemm_project, "port_width", "A_word_t 16 -> 8 lanes", tmp_path / "narrow")
    r, rows = synth(broken)
    assert r.code == 1 and "is 256 bits, the model assumed 512" in rows["m_axi A (bits)"]["cause"]
    # the old sum passed into the PE before its product: the carried path is the PE's whole pipeline (its
    # multiply, its add, the call), not the add the model charges, and every 2 iterations that needs more
    # than II 4
    broken = _mutant(close_project, "accumulate_in_pe", "", tmp_path / "pe")
    r, rows = synth(broken)
    assert r.code == 1 and rows["compute II"]["reported"] > rows["compute II"]["predicted"] == 4
    assert "a carried dependence on obuf" in rows["compute II"]["cause"]


def test_an_ii_violation_in_a_pipeline_module_fails_strict(gemm_project, tmp_path):
    """Vitis 2022+ moves a pipelined loop into <function>_Pipeline_<labels>: the validation finds it there,
    and a loop it cannot find at all is a failure under --strict, never a silent pass."""
    from hetero_dse.hls.validate import validate, worst_error

    record = json.loads((gemm_project / "design.json").read_text())
    read = next(lp for lp in record["expectations"]["loops"] if lp["process"] == "read_buf0_A")
    name = "_".join(read["labels"])
    loop = {"name": name, "trip_count": read["trip_count"], "ii": read["ii"] + 1, "depth": 70, "children": []}
    result = {"status": "ok", "report": {"modules": {f"read_buf0_A_Pipeline_{name}": {"loops": [loop]}}}}
    rows = {row["figure"]: row for row in validate(record, result)["figures"]}
    found = rows[f"read_buf0_A:{'/'.join(read['labels'])} II"]
    assert found["reported"] == read["ii"] + 1 and found in worst_error(validate(record, result), 0.25)
    # the compute's loop is nowhere in this report: missing, which --strict counts as a failure
    compute = rows["compute II"]
    assert compute["reported"] is None and compute["missing"] and compute in worst_error(validate(record, result), 0.25)


def test_bad_input_is_one_sentence(cli, projects, fake_tool, tmp_path):
    (tmp_path / "empty").mkdir()
    r = cli("synth", str(tmp_path / "empty"))
    assert r.code == 1 and "holds no HLS project" in r.err
    r = cli("synth", str(projects), "--steps", "place")
    assert r.code == 1 and "unknown step 'place'" in r.err
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "run_hls.tcl").write_text("")
    (tmp_path / "p" / "design.json").write_text("{}")
    r = cli("synth", str(tmp_path / "p"))  # that project's error, reported with the others' results
    assert r.code == 1 and "not a design record" in r.out
    assert "1 project: 0 synthesized, 0 done before, 1 failed" in r.out
    r = cli("synth", str(projects / "gemm"), "--scheduler", "tcp://127.0.0.1:9", "--db", tmp_path / "h.sqlite")
    assert r.code == 1 and "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in r.err


def test_ctrl_c_cancels_the_rest_keeps_what_finished_and_leaves_no_tool_running(projects, fake_tool, monkeypatch,
                                                                              tmp_path):
    conv, gemm = find_projects([projects])
    jobs = [SynthJob.of(p, ("csynth",), 600, fake_tool) for p in (gemm, conv)]
    store = HistoryDB(str(tmp_path / "h.sqlite"))
    monkeypatch.setenv("FAKE_VITIS_MODE_FOR", "conv2d")
    monkeypatch.setenv("FAKE_VITIS_MODE", "hang")

    def interrupt(kind, job, result):
        if kind == "done":  # the user presses Ctrl-C once the first result is in
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        synthesize(jobs, store=store, workers=2, on_event=interrupt)
    assert json.loads((gemm / "synth.json").read_text())["status"] == "ok"
    assert store.synthesis(jobs[0].design_key, jobs[0].part, jobs[0].clock_mhz, "2023.2", "csynth")["status"] == "ok"
    assert store.synthesis(jobs[1].design_key, jobs[1].part, jobs[1].clock_mhz, "2023.2", "csynth") is None
    assert not (conv / "synth.json").exists()
    store.close()
    # the hung tool went down with its worker
    pid = int((conv / "fake.pid").read_text())
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the tool (pid {pid}) still runs after Ctrl-C")


def test_explore_synthesizes_its_top_designs_and_reports_them(cli, fake_tool, tmp_path):
    out = tmp_path / "o"
    r = cli("explore", "--op", "conv2d", "--shape", "small:s1", "--board", "vu9p", "--budget", "300",
            "--synth", "2", "--synth-steps", "csynth,impl", "--out", out, "--db", tmp_path / "h.sqlite",
            "--winograd", "off")
    assert r.code == 0, r.err
    (e,) = json.loads((out / "report.json").read_text())["explorations"]
    ranks = {s["rank"]: s for s in e["synthesis"]}
    assert set(ranks) == {1, 2} and all(s["status"] == "ok" for s in ranks.values())
    assert ranks[1]["project"] == e["project"] and ranks[2]["project"].endswith("hls_rank2")
    for s in ranks.values():
        figures = {f["figure"]: f for f in s["figures"]}
        # impl ran: post-route resources and the achieved clock (the double closes at 1/1.05 of the target)
        assert "LUT (post-route)" in figures
        assert figures["Fmax (MHz, post-route)"]["error"] == pytest.approx(1 / 1.05 - 1, rel=1e-3)
        assert (out / s["project"] / "validation.json").is_file()
    assert "## Predicted against synthesized" in (out / "report.md").read_text()
    r = cli("explore", "--op", "conv2d", "--shape", "small:s1", "--target", "cpu", "--synth", "1",
            "--out", tmp_path / "o2")
    assert r.code == 1 and "--synth synthesizes FPGA designs" in r.err


def test_where_the_winograd_engine_is_kept_the_direct_designs_are_synthesized_and_the_kernel_skipped(
        cli, fake_tool, tmp_path):
    """The project a Winograd engine's operator writes is a network kernel, which synthesis does not read back:
    explore --synth synthesizes the direct designs from the first (hls_rank1), and synth over the output tree
    says it skips the kernel."""
    out = tmp_path / "o"
    r = cli("explore", "--op", "conv2d", "--param", "C=32", "--param", "K=32", "--param", "H=56", "--param", "W=56",
            "--board", "zcu102", "--dtype", "int8", "--budget", "300", "--synth", "2", "--out", out,
            "--db", tmp_path / "h.sqlite", "--winograd", "on")
    assert r.code == 0, r.err
    (e,) = json.loads((out / "report.json").read_text())["explorations"]
    assert e["winograd"]["chosen"] is True
    ranks = {s["rank"]: s for s in e["synthesis"]}
    assert set(ranks) == {1, 2} and all(s["status"] == "ok" for s in ranks.values())
    assert [ranks[k]["project"].rsplit("/", 1)[1] for k in (1, 2)] == ["hls_rank1", "hls_rank2"]
    networks = []
    assert e["project"] not in {s["project"] for s in ranks.values()}
    assert len(find_projects([out], networks)) == 2
    assert [p.resolve() for p in networks] == [(out / e["project"]).resolve()]
    r = cli("synth", str(out), "--db", tmp_path / "h.sqlite")
    assert r.code == 0, r.err + r.out
    assert "skipped 1 network kernel project(s)" in r.out


def test_jobs_run_on_an_existing_scheduler_and_calibrate_reads_their_results(cli, projects, fake_tool, tmp_path,
                                                                            monkeypatch):
    """A team's set-up: a scheduler with its workers already running (here a LocalCluster on loopback),
    'synth --scheduler' sending the jobs there; then 'calibrate' fits the model to what came back."""
    from distributed import LocalCluster

    monkeypatch.setenv("FAKE_VITIS_SCALE", "1.3")  # a tool that spends 30 % more LUT and FF than the double

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      host="127.0.0.1") as cluster:
        r = cli("synth", str(projects), "--scheduler", cluster.scheduler_address, "--db", tmp_path / "h.sqlite")
    assert r.code == 0, r.err
    assert all(json.loads((p / "synth.json").read_text())["status"] == "ok" for p in find_projects([projects]))
    r = cli("calibrate", str(projects), "-o", tmp_path / "cal.yaml")
    assert r.code == 0, r.err
    from cost_models.calibration import Calibration

    cal = Calibration.load(tmp_path / "cal.yaml")
    assert cal.designs == 2 and cal.tool_version == "2023.2"
    # the fit brings the model to what was reported (and the double closes timing at 90 % of the target period)
    assert cal.quality["lut"]["mape_after"] < cal.quality["lut"]["mape_before"] > 10
    assert cal.fmax_derate == 1.0  # an estimated period shorter than the target is not a derating
    # the bind op table's fadd takes 5 cycles and fmul 4 at 250 MHz: 4 and 3 at or below 200 MHz, one stage
    # deeper above
    assert (cal.arithmetic["float32"]["add_latency"], cal.arithmetic["float32"]["mul_latency"]) == (4, 3)
