"""Synthesis in the loop, run with the TEST DOUBLE of vitis_hls in tests/fake_vitis (no synthesis runs here:
the double writes reports derived from design.json), on a Dask LocalCluster."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from hetero_dse.hls.synth import SynthError, SynthJob, find_projects, find_tool, synthesize
from hetero_dse.history import HistoryDB

FAKE = Path(__file__).parent / "fake_vitis"


@pytest.fixture
def fake_tool(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKE}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("FAKE_VITIS_MODE", raising=False)
    return find_tool()


@pytest.fixture(scope="module")
def explored(tmp_path_factory):
    """Two small explorations' projects (gemm and conv2d), written once for the module."""
    from hetero_dse.cli.main import main

    out = tmp_path_factory.mktemp("explored")
    for op, shape in (("gemm", "small:s1"), ("conv2d", "small:s1")):
        try:
            main(["explore", "--op", op, "--shape", shape, "--board", "vu9p", "--budget", "200",
                  "--out", str(out / op)])
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
    db = tmp_path / "h.sqlite"
    r = cli("synth", str(projects), "--steps", "csynth,cosim", "--jobs", "2", "--db", db)
    assert r.code == 0, r.err + r.out
    found = find_projects([projects])
    assert len(found) == 2
    for project in found:
        synth = json.loads((project / "synth.json").read_text())
        assert synth["status"] == "ok" and synth["tool_version"] == "2023.2" and synth["steps"] == ["csynth", "cosim"]
        record = json.loads((project / "design.json").read_text())
        check = json.loads((project / "validation.json").read_text())
        rows = {row["figure"]: row for row in check["figures"]}
        # the double reports 1.03x the predicted cycles plus 40 in co-simulation, LUT and FF 1.1x, the rest as
        # predicted: the validation reads each back against design.json
        cycles = record["predicted"]["latency_s"] * record["knobs"]["clock_mhz"] * 1e6
        cosim = rows["latency (cycles), co-simulated"]
        assert cosim["predicted"] == pytest.approx(cycles) and cosim["reported"] == round(cycles * 1.03) + 40
        assert rows["LUT"]["error"] == pytest.approx(0.1, abs=1e-3) and rows["DSP"]["error"] == 0
        if "compute II" in rows:  # a compute of one iteration has no loop to match
            assert rows["compute II"]["error"] == 0
        assert any(name.endswith(" II") for name in rows)
        assert all(row["error"] == 0 for name, row in rows.items() if name.startswith(("m_axi", "fmul", "fadd")))
    store = HistoryDB(str(db))
    job = SynthJob.of(found[0], ("csynth", "cosim"), 60, fake_tool)
    assert store.synthesis(job.design_key, job.part, job.clock_mhz, "2023.2", "csynth cosim")["status"] == "ok"
    store.close()
    # a rerun synthesizes nothing: every design is in the database
    before = (found[0] / "synth.log").stat().st_mtime
    r = cli("synth", str(projects), "--steps", "csynth,cosim", "--db", db)
    assert r.code == 0 and "done before" in r.out
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


def test_mismatches_are_named_by_their_cause_and_strict_fails(cli, projects, fake_tool, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_VITIS_MODE", "ii")
    gemm = find_projects([projects / "conv2d"])[0]  # its compute is a pipelined loop
    r = cli("synth", str(gemm), "--db", tmp_path / "h.sqlite", "--strict")
    assert r.code == 1
    rows = {row["figure"]: row for row in json.loads((gemm / "validation.json").read_text())["figures"]}
    assert rows["compute II"]["reported"] == 4 * rows["compute II"]["predicted"]
    assert "limited memory ports on buf0" in rows["compute II"]["cause"]
    # every buffer left in one bank (the partition pragma did not apply): named per buffer, from csynth.rpt
    monkeypatch.setenv("FAKE_VITIS_MODE", "nopartition")
    r = cli("synth", str(gemm), "--db", tmp_path / "h3.sqlite", "--strict")
    assert r.code == 1
    banks = [row for row in json.loads((gemm / "validation.json").read_text())["figures"]
             if row["figure"].endswith(" banks")]
    assert banks and all(row["reported"] == 1 and "did not apply" in row["cause"] for row in banks
                         if row["predicted"] > 1)
    monkeypatch.setenv("FAKE_VITIS_MODE", "narrow")
    r = cli("synth", str(gemm), "--db", tmp_path / "h2.sqlite")
    assert r.code == 0  # not strict: reported, not fatal
    rows = json.loads((gemm / "validation.json").read_text())["figures"]
    (narrow,) = [row for row in rows if row["figure"].startswith("m_axi") and row["reported"] == 32]
    assert "is 32 bits, the model assumed 512" in narrow["cause"]


def test_bad_input_is_one_sentence(cli, projects, fake_tool, tmp_path):
    (tmp_path / "empty").mkdir()
    r = cli("synth", str(tmp_path / "empty"))
    assert r.code == 1 and "holds no HLS project" in r.err
    r = cli("synth", str(projects), "--steps", "place")
    assert r.code == 1 and "unknown step 'place'" in r.err
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "run_hls.tcl").write_text("")
    (tmp_path / "p" / "design.json").write_text("{}")
    r = cli("synth", str(tmp_path / "p"))
    assert r.code == 1 and "not a design record" in r.err
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
            "--synth", "2", "--synth-steps", "csynth,impl", "--out", out, "--db", tmp_path / "h.sqlite")
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


def test_jobs_run_on_an_existing_scheduler_and_calibrate_reads_their_results(cli, projects, fake_tool, tmp_path):
    """A team's set-up: a scheduler with its workers already running (here a LocalCluster on loopback),
    'synth --scheduler' sending the jobs there; then 'calibrate' fits the model to what came back."""
    from distributed import LocalCluster

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
    # the double reports LUT and FF 10 % over the model and closes timing at 90 % of the target period
    # (MAPE is against the reported figure: 0.1 / 1.1)
    assert cal.quality["lut"]["mape_after"] < cal.quality["lut"]["mape_before"] == pytest.approx(100 / 11, rel=0.01)
    assert cal.fmax_derate == 1.0  # an estimated period shorter than the target is not a derating
    # the bind op table's fadd takes 5 cycles and fmul 4 at 250 MHz: 4 and 3 at or below 200 MHz, one stage
    # deeper above
    assert (cal.arithmetic["float32"]["add_latency"], cal.arithmetic["float32"]["mul_latency"]) == (4, 3)
