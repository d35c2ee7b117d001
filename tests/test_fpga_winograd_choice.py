"""One operator on a board, Winograd beside direct (issue 40): a 3×3 stride-1 convolution's best direct design
set against the network kernel's Winograd engine explored for that one layer, the faster kept by the model
(``--winograd auto``: in float32, where the two kernels do the same work), the Winograd engine kept where asked
(``on``), never asked (``off``); the project written is the kept design's, C-simulated and linted; report.md and
report.json say which, by how much, and why not."""

from __future__ import annotations

import json
import shutil

import pytest

from hetero_dse.hardware.board import load_board
from hetero_dse.ops import get_builtin
from hetero_dse.targets.fpga_winograd import winograd_choice

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++")


def _conv(C, K, HW, kernel=3, stride=1):
    return ["--op", "conv2d", "--param", f"C={C}", "--param", f"K={K}", "--param", f"H={HW}", "--param", f"W={HW}",
            "--param", f"kernel={kernel}", "--param", f"stride={stride}", "--param", "padding=1"]


def _exploration(out):
    report = json.loads((out / "report.json").read_text())
    return report["explorations"][0], report["rows"][0]


@needs_gxx
def test_a_3x3_convolution_on_vu9p_is_kept_on_the_winograd_engine_and_c_simulates(cli, tmp_path):
    out = tmp_path / "o"
    r = cli("explore", *_conv(128, 128, 28), "--board", "vu9p", "--out", out, "--csim", "--no-history")
    assert r.code == 0, r.err
    e, row = _exploration(out)
    w = e["winograd"]
    # the model's own figures: the row is the Winograd engine's latency, the direct design's beside it
    assert w["chosen"] is True and w["latency_s"] < w["direct_latency_s"] == e["best"]["latency_s"]
    assert w["speedup_over_direct"] == pytest.approx(w["direct_latency_s"] / w["latency_s"])
    # its DDR traffic against seed 001's bound for F(e×e, 3×3) (issue 40, item 2), said in the report too
    assert w["io"]["traffic_over_bound"] == pytest.approx(w["io"]["traffic_bytes"] / w["io"]["io_lower_bound_bytes"])
    assert w["io"]["traffic_over_bound"] >= 1
    assert f"{w['io']['traffic_over_bound']:.2f}× the I/O lower bound" in (out / "report.md").read_text()
    assert row["seconds"] == pytest.approx(w["latency_s"]) and row["algorithm"] == "Winograd F(2×2, 3×3)"
    # the project written is the network kernel's, for this one layer: against torch, its trips the model's
    project = out / e["project"]
    assert "network" in json.loads((project / "design.json").read_text())
    assert e["csim"]["passed"] is True and e["csim"]["mismatches"] == 0
    assert e["csim"]["trips"] == "every process ran the trips the model charges"
    assert cli("lint", project).code == 0
    assert f"{w['speedup_over_direct']:.2f}× the best direct design" in (out / "report.md").read_text()
    assert "conv2d (Winograd F(2×2, 3×3))" in (out / "report.html").read_text()  # the page names the algorithm
    # its share of the board's DSP roofline, as the direct row's: Winograd passes it by the multiplies it saves
    # (4,092 DSPs: 70 % of the 5,847 the shell leaves kernels; a float multiply-add takes 4)
    assert row["peak_fraction"] == pytest.approx(w["gops"] / (2 * 4092 / 4 * 250 / 1e3))
    # in int8 the network kernel requantises its output where this operator's kernel writes the int32 sums: auto
    # says so and keeps the direct design; on keeps the Winograd engine, bit for bit against the integer reference
    r = cli("explore", *_conv(128, 128, 28), "--board", "vu9p", "--dtype", "int8", "--out", tmp_path / "i",
            "--no-history")
    assert r.code == 0, r.err
    e, row = _exploration(tmp_path / "i")
    assert e["winograd"]["chosen"] is False and e["winograd"]["speedup_over_direct"] > 1
    assert "requantised to int8" in e["winograd"]["why"] and row["seconds"] == pytest.approx(e["best"]["latency_s"])
    r = cli("explore", *_conv(128, 128, 28), "--board", "vu9p", "--dtype", "int8", "--out", tmp_path / "j",
            "--no-history", "--winograd", "on", "--csim")
    assert r.code == 0, r.err
    e, row = _exploration(tmp_path / "j")
    assert e["winograd"]["chosen"] is True and e["csim"]["passed"] is True and e["csim"]["max_abs_error"] == 0.0


@needs_gxx
def test_winograd_off_never_asks_and_on_keeps_it_where_it_is_slower(cli, tmp_path):
    # 16 channels of 4x4 on zcu102: the Winograd engine is slower than the best direct design (0.64x)
    r = cli("explore", *_conv(16, 16, 4), "--board", "zcu102", "--dtype", "int8", "--out", tmp_path / "a",
            "--no-history")
    assert r.code == 0, r.err
    e, row = _exploration(tmp_path / "a")
    assert e["winograd"]["chosen"] is False and e["winograd"]["speedup_over_direct"] < 1
    assert row["seconds"] == pytest.approx(e["best"]["latency_s"]) and row.get("algorithm") is None
    assert "network" not in json.loads((tmp_path / "a" / e["project"] / "design.json").read_text())
    assert "not kept: the direct design is faster" in (tmp_path / "a" / "report.md").read_text()
    r = cli("explore", *_conv(16, 16, 4), "--board", "zcu102", "--dtype", "int8", "--out", tmp_path / "b",
            "--no-history", "--winograd", "on")
    assert r.code == 0, r.err
    e, row = _exploration(tmp_path / "b")
    assert e["winograd"]["chosen"] is True and row["seconds"] == pytest.approx(e["winograd"]["latency_s"])
    r = cli("explore", *_conv(16, 16, 4), "--board", "zcu102", "--dtype", "int8", "--out", tmp_path / "c",
            "--no-history", "--winograd", "off")
    assert r.code == 0, r.err
    assert _exploration(tmp_path / "c")[0]["winograd"] is None


def test_which_convolutions_the_winograd_engine_is_set_against():
    board = load_board("vu9p")

    def choice(**params):
        op = get_builtin("conv2d").instantiate(dict(C=32, K=32, H=14, W=14, padding=1, **params))
        return winograd_choice(op, board, "int8", 250.0, "auto", 1e-3)

    assert choice(kernel=3, stride=1).design is not None
    for params, why in [(dict(kernel=1, stride=1), "3×3 stride-1"), (dict(kernel=3, stride=2), "3×3 stride-1"),
                        (dict(kernel=3, stride=1, groups=2), "not one of 2 groups")]:
        w = choice(**params)
        assert w.design is None and not w.chosen and why in w.why, w.why
    op = get_builtin("conv2d").instantiate(dict(C=32, K=32, H=14, W=14, kernel=3, padding=1))
    assert winograd_choice(op, board, "int8", 250.0, "direct", 1e-3) is None
    w = winograd_choice(op, board, "int16", 250.0, "auto", 1e-3)
    assert w.design is None and "float32 and int8, not int16" in w.why
    # float32, faster, but the direct design's figure calibrated: said, not kept; kept where uncalibrated
    w = winograd_choice(op, board, "float32", 250.0, "auto", 1.0, calibrated=True)
    assert w.design is not None and not w.chosen and "calibrated" in w.why
    assert winograd_choice(op, board, "float32", 250.0, "auto", 1.0).chosen


def test_an_op_py_operator_named_conv2d_is_not_taken_for_the_built_in(write):
    """An op.py may call its operator conv2d and compute something else (its own parameters, another layout): the
    Winograd engine is offered to the built-in only, and the run does not trip over the other's parameters."""
    from hetero_dse.loader import load_operators

    path = write("mine.py", """
from tvm import te
import hetero_dse as hd

@hd.operator(N=64)
def conv2d(N, dtype="float32"):
    a = te.placeholder((N, N), name="A", dtype=dtype)
    return [a, te.compute((N, N), lambda i, j: a[i, j] * 2, name="O")]
""")
    (definition,) = load_operators(path)
    op = definition.instantiate({})
    assert op.name == "conv2d"
    assert winograd_choice(op, load_board("vu9p"), "float32", 250.0, "auto", 1e-3) is None
