"""The command line: what a user sees, for good input and for every kind of bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO


def test_version_and_help(cli):
    r = cli("--version")
    assert r.code == 0 and "hetero_dse, version 0.1.0" in r.out
    r = cli("--help")
    assert r.code == 0
    for command in ("ops", "analyze", "boards"):
        assert command in r.out


def test_ops_lists_all_14(cli):
    r = cli("ops")
    assert r.code == 0
    for name in ("gemv", "gemm", "bilinear", "conv1d", "conv_transpose3d", "group_conv2d", "depthwise_conv2d",
                 "dilated_conv2d", "bcm", "shift_conv2d"):
        assert name in r.out
    r = cli("ops", "c2d")
    assert r.code == 0 and "yolo:C15" in r.out and "C=1024" in r.out


def test_analyze_builtin_json_numbers(cli):
    r = cli("analyze", "--op", "conv2d", "--shape", "yolo:C8", "--json")
    assert r.code == 0, r.err
    (a,) = json.loads(r.out)
    assert a["shape"] == "yolo:C8"
    assert (a["sl"], a["rl"], a["num_nodes"]) == (8, 3, 2)
    assert a["flops"] == 2 * 512 * 28 * 28 * 256 * 9
    weight = next(x for x in a["accesses"] if x["tensor"] == "W")
    assert weight["footprint_bytes"] == 512 * 256 * 9 * 4


def test_analyze_whole_shape_set_prints_every_layer(cli):
    r = cli("analyze", "--op", "conv2d", "--shape", "yolo")
    assert r.code == 0
    assert all(f"yolo:C{i}" in r.out for i in range(1, 16))


def test_analyze_example_file_with_param(cli):
    r = cli("analyze", REPO / "examples" / "gemm.py", "--param", "K=256", "--json")
    assert r.code == 0, r.err
    (a,) = json.loads(r.out)
    assert a["flops"] == 2 * 512 * 512 * 256
    r = cli("analyze", REPO / "examples" / "mttkrp.py")
    assert r.code == 0 and "X[i, k, l]" in r.out


def test_analyze_a_networks_layer_shows_its_epilogue_and_tensors(cli):
    """Issue 39 item 4: analyze showed neither a layer's epilogue (bias, residual, activation) nor its tensors."""
    r = cli("analyze", "--model", "resnet18", "--layer", "3", "--json")
    assert r.code == 0, r.err
    (a,) = json.loads(r.out)
    # ResNet-18's L3: the second 3x3 convolution of a basic block, its batch norm folded into a bias, then the
    # block's residual add and the ReLU
    assert a["shape"] == "resnet18:L3" and a["epilogue"] == ["bias", "add", "relu"]
    assert [(t["name"], t["shape"], t["role"]) for t in a["tensors"]] == [
        ("I", "1x64x56x56", "input"), ("W", "64x64x3x3", "input"), ("bias", "64", "epilogue input"),
        ("residual1", "1x64x56x56", "epilogue input"), ("E", "1x64x56x56", "output")]
    r = cli("analyze", "--model", "resnet18", "--layer", "3")
    assert "epilogue: bias + add + relu, element-wise after O's reduction, reading bias, residual1" in r.out
    assert "bias 64 float32 (epilogue input)" in r.out
    r = cli("analyze", "--op", "conv2d", "--shape", "yolo:C8")
    assert "tensors: I 1x256x28x28 float32 (input)" in r.out and "epilogue:" not in r.out
    r = cli("analyze", "--model", "resnet18", "--layer", "17")
    assert r.code == 1 and "resnet18 has 16 distinct layers; there is no layer 17" in r.err
    r = cli("analyze", "--op", "gemm", "--layer", "2")
    assert r.code == 1 and "give the network with --model" in r.err


def test_boards_table_and_detail(cli):
    r = cli("boards")
    assert r.code == 0 and "xcvu9p-flgb2104-2-i" in r.out and "32×hbm2" in r.out
    r = cli("boards", "zcu104")
    assert r.code == 0 and "1,728 × 80% usable = 1,382" in r.out
    r = cli("boards", "vu9p")  # the budget is 70 % of what the shell leaves kernels over the SLRs
    assert r.code == 0 and "6,840 (5,847 left by the shell) × 70% usable = 4,092" in r.out


def one_line_error(r, fragment: str) -> None:
    assert r.code == 1, (r.code, r.out, r.err)
    assert "Traceback" not in r.err + r.out
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hetero_dse: error: "), r.err
    assert fragment in lines[0]


@pytest.mark.parametrize("args,fragment", [
    (["analyze", "missing_op.py"], "op file missing_op.py does not exist"),
    (["analyze"], "name an operator: an op.py file"),
    (["analyze", "--op", "conv9d"], "unknown operator 'conv9d'"),
    (["analyze", "--op", "conv2d", "--shape", "resnet:C1"], "has no shape set 'resnet'"),
    (["analyze", "--op", "conv2d", "--shape", "yolo:C99"], "has no shape 'C99'"),
    (["analyze", "--op", "gemm", "--param", "K=0"], "parameter K must be a positive integer, got 0"),
    (["analyze", "--op", "gemm", "--param", "K=1.5"], "parameter K must be an integer, got '1.5'"),
    (["analyze", "--op", "gemm", "--param", "K"], "--param expects NAME=VALUE"),
    (["boards", "vu7p"], "unknown board 'vu7p'"),
    # review findings D15: a value given twice, a clock that is not a number, --csim with nothing to simulate
    (["analyze", "--op", "gemm", "--param", "M=4", "--param", "M=8"], "--param M is given twice (4 and 8)"),
    (["explore", "--op", "gemm", "--board", "vu9p", "--clock", "nan"], "a clock target must be a positive number"),
    (["explore", "--op", "gemm", "--target", "cpu", "--csim"], "--csim C-simulates FPGA designs: add --board"),
])
def test_bad_arguments(cli, args, fragment):
    one_line_error(cli(*args), fragment)


@pytest.mark.parametrize("body,fragment", [
    ("def broken(:\n", "has a syntax error at line 1"),
    ("x = 1\n", "defines no operator"),
    ("import hetero_dse as hd\n@hd.operator(N=2)\ndef f(N):\n    return 'tensors'\n", "it returned str"),
])
def test_bad_op_files(cli, write, body, fragment):
    one_line_error(cli("analyze", write("op.py", body)), fragment)


def test_malformed_board_file(cli, write):
    path = write("b.yaml", "name: b\ndescription: d\npart: p\n")
    one_line_error(cli("boards", path), f"board file {path}: missing field clock")


def test_non_affine_operator(cli, write):
    path = write("op.py", """
        from tvm import te
        import hetero_dse as hd

        @hd.operator(N=8)
        def pool(N):
            A = te.placeholder((N,), name="A")
            return [A, te.compute((N // 2,), lambda i: A[i * i], name="O")]
    """)
    one_line_error(cli("analyze", path), "reads tensor A at index 'i * i', which is not an affine function")


def test_debug_shows_the_traceback(cli):
    from hetero_dse.errors import OperatorError

    with pytest.raises(OperatorError):
        cli("--debug", "analyze", "--op", "nope")


def test_large_counts_print_in_their_own_prefix():
    """Review finding D15: a huge shape's analysis printed 'FLOPs 2000000000000000.00 T'."""
    from hetero_dse.units import si

    assert (si(2e15), si(3.5e18, "B"), si(4.2e12), si(999.0)) == ("2.00 P", "3.50 EB", "4.20 T", "999")


def test_usage_error_is_clicks_exit_code_in_one_line(cli):
    """Review finding D14: click's usage errors took three lines (Usage, Try, Error)."""
    for args, fragment in ((("analyze", "--frobnicate"), "No such option '--frobnicate'"),
                           (("explore", "--op", "gemm", "--trials", "0"), "0 is not in the range x>=1"),
                           (("explore", "--op", "gemm", "--time-budget", "nan"), "'nan' is not a finite number"),
                           (("history", "show", "abc"), "'abc' is not a valid integer")):
        r = cli(*args)
        assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and fragment in r.err, r.err
        assert r.err.startswith("hetero_dse: error: ") and "--help')" in r.err


@pytest.mark.parametrize("change,fragment", [
    ({"dsp: 6840": "dsp: 0"}, "resources.dsp and resources.lut must be above 0"),
    ({"bram18k: 4320": "bram18k: 0", "uram: 960": "uram: 0"}, "the board has no on-chip memory"),
])
def test_a_board_the_model_cannot_use_is_one_sentence(cli, write, change, fragment):
    """Review finding D12: no BRAM or URAM ended in ZeroDivisionError, no DSP in 'needs nan DSP'."""
    text = (REPO / "boards" / "vu9p.yaml").read_text()
    for old, new in change.items():
        text = text.replace(old, new)
    one_line_error(cli("boards", write("b.yaml", text)), fragment)


def test_a_board_file_that_is_not_utf8_is_one_sentence(cli, tmp_path):
    path = tmp_path / "b.yaml"
    path.write_bytes((REPO / "boards" / "vu9p.yaml").read_bytes().replace(b"description:", b"description: caf\xe9"))
    one_line_error(cli("boards", path), "is not UTF-8 text")


def test_console_script_process_exit_code(tmp_path):
    """The installed entry point, as a separate process: one line on stderr, exit code 1."""
    exe = [sys.executable, "-m", "hetero_dse.cli.main"]
    r = subprocess.run([*exe, "analyze", "--op", "gemm", "--param", "M=-1"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 1
    assert r.stderr.strip() == "hetero_dse: error: operator gemm: parameter M must be a positive integer, got -1"


def test_name_picks_one_operator_of_a_file(cli, write):
    path = write("two.py", """
        from tvm import te
        import hetero_dse as hd

        def _scale(N, factor):
            A = te.placeholder((N,), name="A")
            return [A, te.compute((N,), lambda i: A[i] * factor, name="O")]

        @hd.operator(N=8)
        def double(N):
            return _scale(N, 2.0)

        @hd.operator(N=8)
        def triple(N):
            return _scale(N, 3.0)
    """)
    r = cli("analyze", path, "--json")
    assert r.code == 0 and [a["operator"] for a in json.loads(r.out)] == ["double", "triple"]
    r = cli("analyze", path, "--name", "triple", "--json")
    assert [a["operator"] for a in json.loads(r.out)] == ["triple"]
    one_line_error(cli("analyze", path, "--name", "quadruple"), "has no operator 'quadruple'; it has: double, triple")
    one_line_error(cli("analyze", path, "--op", "gemm"), "give either an op.py file or --op NAME, not both")


@pytest.mark.parametrize("name", ["gemv", "gemm", "bilinear", "conv1d", "conv_transpose1d", "conv2d",
                                  "conv_transpose2d", "conv3d", "conv_transpose3d", "group_conv2d",
                                  "depthwise_conv2d", "dilated_conv2d", "bcm", "shift_conv2d"])
def test_analysis_table_prints_for_every_builtin(cli, name):
    from hetero_dse.analysis import analyze
    from hetero_dse.ops import get_builtin

    r = cli("analyze", "--op", name, "--shape", "small:s2")
    assert r.code == 0, r.err
    a = analyze(get_builtin(name).instantiate(shape="small:s2"))
    assert f"{a.main.name} (main)" in r.out
    assert f"#sl/#rl {a.num_spatial_loops}/{a.num_reduce_loops}" in r.out
    for access in a.reads:
        assert str(access) in r.out


def test_undecodable_op_file(cli, tmp_path):
    path = tmp_path / "op.py"
    path.write_bytes(b"\xff\xfe\x00binary")
    one_line_error(cli("analyze", path), f"op file {path} cannot be read")
