"""Calibration of the FPGA model against synthesized designs: synthetic results generated from known
constants (plus noise) must give those constants back, and explore must use (or refuse) a calibration."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cost_models.calibration import Calibration, CalibrationError
from cost_models.fpga import FpgaModel
from cost_models.fpga_describe import describe
from hetero_dse.analysis import analyze
from hetero_dse.hardware.board import load_board
from hetero_dse.hls.calibrate import fit, observations
from hetero_dse.ops import get_builtin
from hetero_dse.space.fpga import FpgaSpace

VU9P = load_board("vu9p")
TRUE = {"lut_mul": 140.0, "lut_add": 260.0, "ff_mul": 120.0, "ff_add": 400.0, "overhead": 6, "derate": 0.9}


def synthetic_results(root, count=14, seed=0, noise=0.01):
    """``count`` designs of a GEMM as projects with a synth.json whose figures follow TRUE (± noise)."""
    root.mkdir(parents=True, exist_ok=True)
    op = get_builtin("gemm").instantiate({"M": 64, "N": 64, "K": 64})
    space = FpgaSpace(analyze(op), VU9P, ["float32"], [250.0])
    model = FpgaModel(space.tables)
    rng = np.random.default_rng(seed)
    rows = space.sample(4000, rng)
    feasible = rows[model.evaluate(rows)["feasible"]]
    terms_seen = set()
    made = 0
    for row in feasible:
        d = describe(model, row)
        t = d["calibration_terms"]
        key = (t["mul_units"], t["add_units"])
        if key in terms_seen:
            continue
        terms_seen.add(key)
        c = t["constants"]
        wobble = lambda: 1 + rng.normal(0, noise)  # noqa: E731
        lut = (t["lut_fixed"] + TRUE["lut_mul"] * t["mul_units"] + TRUE["lut_add"] * t["add_units"]
               + c["lut_base"] + c["lut_per_port"] * t["ports"]) * wobble()
        ff = (t["ff_fixed"] + TRUE["ff_mul"] * t["mul_units"] + TRUE["ff_add"] * t["add_units"]
              + c["ff_base"] + c["ff_per_port"] * t["ports"]) * wobble()
        dsp = 2 * t["mul_units"] + 2 * t["add_units"]  # the cores the code binds: fmul and fadd fulldsp
        project = root / f"p{made}"
        project.mkdir()
        (project / "run_hls.tcl").write_text("")
        labels = ["pe_x"]
        (project / "design.json").write_text(json.dumps({
            "part": VU9P.part, "board": "vu9p", "knobs": space.decode(row).to_json(), "predicted": d,
            "expectations": {"loops": [{"process": "compute_tile", "labels": labels, "trip_count": 1, "ii": 1}]}}))
        (project / "synth.json").write_text(json.dumps({
            "status": "ok", "tool_version": "2023.2",
            "report": {"resources": {"dsp": dsp, "lut": lut, "ff": ff}, "estimated_clock_ns": 4.0 / TRUE["derate"],
                       "modules": {"compute_tile": {"loops": [{"name": "pe_x", "depth": t["depth_fixed"]
                                                               + TRUE["overhead"], "children": []}]}}}}))
        made += 1
        if made == count:
            break
    assert made == count
    return root


def test_calibration_recovers_the_constants_its_reports_were_made_with(tmp_path):
    cal = fit(observations([synthetic_results(tmp_path)]))
    assert (cal.part, cal.tool_version, cal.designs) == (VU9P.part, "2023.2", 14)
    a = cal.arithmetic["float32"]
    # a GEMM's PE has (nearly) as many adds as multiplies, so the designs tell the LUT/FF of a multiply-add
    # (400 LUT and 520 FF here, 320 and 470 before), not how it splits: the fit finds the sum, and the
    # sourced constants keep the split
    assert a["lut_mul"] + a["lut_add"] == pytest.approx(TRUE["lut_mul"] + TRUE["lut_add"], rel=0.05)
    assert a["ff_mul"] + a["ff_add"] == pytest.approx(TRUE["ff_mul"] + TRUE["ff_add"], rel=0.05)
    assert (a["dsp_mul"], a["dsp_add"]) == (pytest.approx(2, rel=0.01), pytest.approx(2, rel=0.01))
    assert cal.fixed["compute_overhead_cycles"] == TRUE["overhead"]
    assert cal.fmax_derate == pytest.approx(TRUE["derate"])
    for figure in ("lut", "ff"):
        q = cal.quality[figure]
        assert q["mape_after"] < q["mape_before"] and q["mape_after"] < 3.0
        assert q["mape_leave_one_out"] < 4.0  # it generalises to a design it did not see
    assert "float32.lut_mul" in cal.calibrated and "fmax_derate" in cal.calibrated


def test_a_calibrated_model_predicts_the_synthesized_figures(tmp_path):
    cal = fit(observations([synthetic_results(tmp_path)]))
    path = tmp_path / "cal.yaml"
    cal.dump(path)
    loaded = Calibration.load(path)
    assert loaded.to_json() == cal.to_json()
    op = get_builtin("gemm").instantiate({"M": 64, "N": 64, "K": 64})
    space = FpgaSpace(analyze(op), VU9P, ["float32"], [250.0])
    plain, calibrated = FpgaModel(space.tables), FpgaModel(space.tables, calibration=loaded)
    row = space.sample(50, np.random.default_rng(3))[0]
    before, after = describe(plain, row), describe(calibrated, row)
    t = before["calibration_terms"]
    want = (t["lut_fixed"] + TRUE["lut_mul"] * t["mul_units"] + TRUE["lut_add"] * t["add_units"] + 3000
            + 1600 * t["ports"])
    assert after["resources"]["lut"] == pytest.approx(want, rel=0.05)
    # the derated clock: the same cycles take 1/0.9 as long
    assert after["pipeline_depth"] == before["pipeline_depth"] + TRUE["overhead"] - 4
    assert after["calibration"]["designs"] == 14


def test_explore_uses_a_calibration_and_refuses_one_for_another_part(cli, tmp_path):
    cal = fit(observations([synthetic_results(tmp_path / "r")]))
    path = tmp_path / "cal.yaml"
    cal.dump(path)
    r = cli("explore", "--op", "gemm", "--shape", "small:s1", "--board", "vu9p", "--budget", "200",
            "--calibration", path, "--out", tmp_path / "o", "--no-history")
    assert r.code == 0, r.err
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "o").rglob("design.json")]
    assert record["predicted"]["calibration"]["calibrated"] == cal.calibrated
    report = (tmp_path / "o" / "report.md").read_text()
    assert f"from {cal.designs} synthesized designs" in report and "float32.lut_mul" in report
    assert json.loads((tmp_path / "o" / "report.json").read_text())["explorations"][0]["calibration"]["designs"] == 14
    r = cli("explore", "--op", "gemm", "--shape", "small:s1", "--board", "u280", "--budget", "200",
            "--calibration", path, "--out", tmp_path / "o2", "--no-history")
    assert r.code == 1 and VU9P.part in r.err and load_board("u280").part in r.err
    bad = tmp_path / "bad.yaml"
    bad.write_text("part: x\n")
    with pytest.raises(CalibrationError, match="not a calibration"):
        Calibration.load(bad)
    bad.write_text("part: [\n")
    r = cli("explore", "--op", "gemm", "--shape", "small:s1", "--board", "vu9p", "--calibration", bad,
            "--out", tmp_path / "o3", "--no-history")
    assert r.code == 1 and "is not YAML (line 2, column 1)" in r.err and len(r.err.strip().splitlines()) == 1
    bad.write_bytes(b"part: caf\xe9\n")  # read like a board file now: one sentence, not an internal error
    with pytest.raises(CalibrationError, match="is not UTF-8 text"):
        Calibration.load(bad)
    with pytest.raises(CalibrationError, match="does not exist"):
        Calibration.load(tmp_path / "missing.yaml")


def test_calibrate_command_and_its_bad_input(cli, tmp_path):
    synthetic_results(tmp_path / "r", count=6)
    r = cli("calibrate", tmp_path / "r", "-o", tmp_path / "cal.yaml")
    assert r.code == 0, r.err
    assert "MAPE before" in r.out and "leave-one-out" in r.out and (tmp_path / "cal.yaml").is_file()
    (tmp_path / "none").mkdir()
    r = cli("calibrate", tmp_path / "none", "-o", tmp_path / "x.yaml")
    assert r.code == 1 and "holds no HLS project" in r.err
    # another part among the results: refused, both named
    other = tmp_path / "r" / "p0" / "design.json"
    record = json.loads(other.read_text())
    record["part"] = "xcu280-fsvh2892-2L-e"
    other.write_text(json.dumps(record))
    r = cli("calibrate", tmp_path / "r", "-o", tmp_path / "y.yaml")
    assert r.code == 1 and "one part and tool version at a time" in r.err and "xcu280" in r.err
