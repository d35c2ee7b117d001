"""Names are data (review findings D1, D6, D7, D15): an operator name never reaches a path outside --out or a
line of generated C++, two results never share a directory, and op.py code cannot end or hang the tool."""

from __future__ import annotations

import sys

import pytest

from hetero_dse.errors import OperatorError
from hetero_dse.loader import load_operators

GEMM = '''
import hetero_dse as hd
from tvm import te

@hd.operator(name={name!r}, M=16, N=16, K=16)
def gemm(M, N, K, dtype="float32"):
    A = te.placeholder((M, K), name="A", dtype=dtype)
    B = te.placeholder((K, N), name="B", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")
    return [A, B, te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")]
'''


@pytest.mark.parametrize("name", ["..", ".", "gemm\n#define X 1", "new\nline", 'a"b', "a b", "α-β", "../x"])
def test_a_name_that_is_not_data_is_refused_in_one_sentence(cli, write, tmp_path, name):
    op = write("op.py", GEMM.format(name=name))
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    r = cli("explore", op, "--board", "vu9p", "--budget", "100", "--out", tmp_path / "o")
    assert r.code == 1 and "must start with a letter or _ and hold only letters, digits and _ . + -" in r.err
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    assert not (tmp_path / "o").exists() and (outside / "keep.txt").read_text() == "keep"


def test_two_results_that_would_share_a_directory_are_refused_before_any_search(cli, write, tmp_path):
    two = write("two.py", GEMM.format(name="a_b") + GEMM.format(name="a_b").replace("def gemm", "def gemm2"))
    r = cli("explore", two, "--board", "vu9p", "--out", tmp_path / "o")
    assert r.code == 1 and "would both be written to" in r.err
    r = cli("explore", "--op", "gemm", "--board", "vu9p", "--board", "vu9p", "--out", tmp_path / "o")
    assert r.code == 1 and "give each board once" in r.err
    shadow = (tmp_path / "vu9p.yaml")
    from hetero_dse.resources import data_dir

    shadow.write_text((data_dir("boards") / "vu9p.yaml").read_text())
    r = cli("explore", "--op", "gemm", "--board", shadow, "--board", "vu9p", "--out", tmp_path / "o")
    assert r.code == 1 and "would both be written to" in r.err and not (tmp_path / "o").exists()


def test_op_code_that_exits_or_never_returns_is_one_sentence(write, monkeypatch):
    exits = write("exits.py", "import sys\nsys.exit(3)\n")
    with pytest.raises(OperatorError, match=r"called sys.exit\(3\) while importing"):
        load_operators(exits)
    monkeypatch.setattr("hetero_dse.loader.IMPORT_TIMEOUT_S", 0.5)
    loops = write("loops.py", "while True:\n    pass\n")
    with pytest.raises(OperatorError, match=r"loops.py: it did not finish importing in 0.5 s"):
        load_operators(loops)
    forever = GEMM.format(name="slow").replace("    A = te", "    while True:\n        pass\n    A = te", 1)
    builds_forever = write("slow.py", forever)
    (definition,) = load_operators(builds_forever)
    monkeypatch.setattr(sys.modules["hetero_dse.operator"], "BUILD_TIMEOUT_S", 0.5)  # the package's
    # 'operator' is the decorator
    with pytest.raises(OperatorError, match="did not finish building"):
        definition.instantiate()


def test_an_fpga_shape_beyond_the_models_counts_is_refused_at_once(cli, tmp_path):
    """Review finding D8: M = N = K = 10^9 spent minutes enumerating divisors (O(n)), then its 10^27
    iterations overflowed the model's 64-bit counts. Now: divisors in O(sqrt n), and one sentence."""
    from hetero_dse.space.base import divisors

    assert divisors(10**9)[:4] == [1, 2, 4, 5] and len(divisors(10**9)) == 100 and divisors(1) == [1]
    assert divisors(36) == [1, 2, 3, 4, 6, 9, 12, 18, 36]
    r = cli("explore", "--op", "gemm", "--param", "M=1000000000", "--param", "N=1000000000", "--param",
            "K=1000000000", "--board", "vu9p", "--out", tmp_path / "o")
    assert r.code == 1 and "more than the FPGA model counts" in r.err and not (tmp_path / "o").exists()
