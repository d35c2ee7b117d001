"""Synthesis with the real Vitis HLS: collected where XILINX_HLS is set (a machine with Vitis), skipped here."""

from __future__ import annotations

import json
import os
import shutil

import pytest

pytestmark = pytest.mark.skipif(not os.environ.get("XILINX_HLS") and shutil.which("vitis_hls") is None
                                and shutil.which("vitis-run") is None,
                                reason="Vitis HLS is not installed here (set XILINX_HLS to run these)")


def test_a_small_gemm_synthesizes_and_meets_its_exact_figures(cli, tmp_path):
    out = tmp_path / "o"
    r = cli("explore", "--op", "gemm", "--shape", "small:s1", "--board", "vu9p", "--budget", "500",
            "--synth", "1", "--out", out, "--db", tmp_path / "h.sqlite")
    assert r.code == 0, r.err
    (e,) = json.loads((out / "report.json").read_text())["explorations"]
    (s,) = e["synthesis"]
    assert s["status"] == "ok", s["reason"]
    figures = {f["figure"]: f for f in s["figures"]}
    # what the code fixes must come out as the model says: the port widths and the operator cores
    for name, f in figures.items():
        if name.startswith(("m_axi", "fmul", "fadd")):
            assert f["error"] == 0, (name, f)
