"""HLS projects: generated from the best (and from many-tile) designs, C-simulated with g++ against the reference.

Each C-simulation compares every output element with the operator's numpy/torch reference (integers
exactly, floats within a tolerance growing with the reduction length) and fails on any mismatch.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from hetero_dse.board import load_board
from hetero_dse.fpga_flow import explore
from hetero_dse.hls.csim import csim
from hetero_dse.hls.project import write_project
from hetero_dse.ops import BUILTIN, get_builtin

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++ (scripts/bootstrap.sh)")

VU9P = load_board("vu9p")


def build(op, tmp_path, budget=4000, knobs=None):
    e = explore(op, VU9P, budget=budget, top_k=1, seed=0)
    op_d, analysis = e.best_operator()
    point, design = e.best
    if knobs is not None:
        row = e.space.encode(point.replace(**knobs))
        point, design = e.space.decode(row), e.model.describe(row)
    project = write_project(tmp_path / e.label / "hls", op_d, analysis, point, design, VU9P)
    return project, point, design


def assert_passes(project):
    result = csim(project)
    assert result.passed, result.output
    assert result.mismatches == 0 and result.elements > 0
    return result


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_best_design_of_every_builtin_passes_csim(name, dtype, tmp_path):
    op = get_builtin(name).instantiate({"dtype": dtype}, shape="small:s2")
    project, point, design = build(op, tmp_path)
    result = assert_passes(project)
    if dtype == "int8":
        assert result.max_abs_error == 0.0
    # The code asks for the II the model predicted, and a carried fp32 sum has the distance to meet it.
    kernel = (project / "src" / "kernel.cpp").read_text()
    compute = kernel[kernel.index("static void compute_tile"):]
    assert f"#pragma HLS PIPELINE II={design['ii']}" in compute
    if "DEPENDENCE" in compute:
        distance = int(re.search(r"distance=(\d+)", compute).group(1))
        assert distance == design["accumulation_distance"] and distance * design["ii"] >= design["add_latency"]


def yolo_reduced(layer: str, dtype: str):
    """A YOLO-v1 layer with its kernel, stride, padding and image size, channels divided by 8 (C1 keeps 3 in)."""
    params = dict(get_builtin("conv2d").shapes(f"yolo:{layer}")[0][1])
    params["C"] = max(3, params["C"] // 8) if params["C"] > 3 else params["C"]
    params["K"] = params["K"] // 8
    if layer == "C1":
        params["H"] = params["W"] = 112
    params["dtype"] = dtype
    return get_builtin("conv2d").instantiate(params)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("layer", ["C1", "C8", "C15"])
def test_yolo_layers_pass_csim(layer, dtype, tmp_path):
    project, _, design = build(yolo_reduced(layer, dtype), tmp_path)
    assert design["feasible"]
    assert_passes(project)


@pytest.mark.parametrize("name,knobs", [
    # partial last tiles on a prime extent (13 = 8 + 5), reduce tiles with a remainder (11 = 4 + 4 + 3)
    ("gemm", {"tile.i": 8, "tile.k": 4, "unroll.i": 1, "unroll.k": 4, "tile.j": 7, "unroll.j": 1}),
    # every spatial loop tiled, weights reloaded per output-channel tile, stride 2 with padding
    ("conv2d", {"tile.k": 4, "tile.i": 4, "tile.j": 2, "tile.rc": 1, "unroll.k": 1, "unroll.i": 1, "unroll.j": 2,
                "unroll.rc": 1, "unroll.rx": 1, "unroll.ry": 1}),
    # expansion + padding producers inlined in the read stage, tiles across the expanded image
    ("conv_transpose2d", {"tile.i": 5, "tile.j": 4, "tile.k": 4, "unroll.i": 1, "unroll.j": 4, "unroll.k": 1,
                          "unroll.rc": 1, "unroll.rx": 1, "unroll.ry": 1, "tile.rc": 1}),
    # the circulant producer of BCM and a split reduction over blocks
    ("bcm", {"tile.q": 1, "tile.i": 4, "unroll.q": 1, "unroll.i": 1, "tile.j": 7, "unroll.j": 7}),
])
def test_many_tile_designs_pass_csim(name, knobs, tmp_path):
    op = get_builtin(name).instantiate(shape="small:s2")
    project, point, design = build(op, tmp_path, knobs=knobs)
    assert design["tiles"] > 1
    assert_passes(project)


def test_a_wrong_result_fails(tmp_path):
    op = get_builtin("gemm").instantiate(shape="small:s1")
    project, _, _ = build(op, tmp_path)
    ref = project / "data" / "O.reference.bin"
    values = np.fromfile(ref, dtype=np.float32)
    values[5] += 1.0
    values.tofile(ref)
    result = csim(project)
    assert not result.passed and result.mismatches == 1 and result.max_abs_error == pytest.approx(1.0, rel=1e-3)


def test_design_json_holds_knobs_and_predictions(tmp_path):
    import json

    op = get_builtin("conv2d").instantiate(shape="small:s1")
    project, point, design = build(op, tmp_path)
    record = json.loads((project / "design.json").read_text())
    assert record["knobs"] == point.to_json() and record["predicted"]["latency_s"] == design["latency_s"]
    readme = (project / "README.md").read_text()
    assert f"{design['pe']} lanes" in readme and "vitis_hls -f run_hls.tcl" in readme
    tcl = (project / "project.tcl").read_text()
    assert "set part xcvu9p-flgb2104-2-i" in tcl and "set clock_period_ns 4.0" in tcl
    cfg = (project / "connectivity.cfg").read_text()
    assert "sp=conv2d_kernel_1.I:DDR[0]" in cfg and "sp=conv2d_kernel_1.O:DDR[2]" in cfg


def test_custom_operator_without_reference_uses_tvm_and_passes(cli, write, tmp_path):
    """A user's op.py with no library reference: the testbench compares with TVM's llvm build."""
    import json

    path = write("op.py", """
        import hetero_dse
        from tvm import te

        @hetero_dse.operator(N=12, M=10)
        def sym(N, M):
            A = te.placeholder((N, M), name="A")
            s = te.placeholder((M,), name="s")
            k = te.reduce_axis((0, M), name="k")
            return [A, s, te.compute((N, N), lambda i, j: te.sum(A[i, k] * s[k] * A[j, k], axis=k), name="G")]
        """)
    out = tmp_path / "o"
    r = cli("explore", path, "--board", "zcu104", "--out", out, "--csim")
    assert r.code == 0, r.err
    (e,) = json.loads((out / "report.json").read_text())["explorations"]
    assert e["csim"]["passed"] and e["csim"]["elements"] == 144
    assert "TVM's unscheduled llvm build" in (out / e["project"] / "tb" / "tb.cpp").read_text()
