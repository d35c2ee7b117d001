"""The operator frontend: loading op.py, parameters, and what a broken op.py is told."""

from __future__ import annotations

import pytest

import hetero_dse as hd
from hetero_dse.errors import OperatorError, ShapeError
from hetero_dse.loader import load_operators
from hetero_dse.ops import get_builtin

GEMM = """
    from tvm import te
    import hetero_dse as hd

    @hd.operator(M=8, N=8)
    def mm(M, N, K=4, dtype="float32"):
        A = te.placeholder((M, K), name="A", dtype=dtype)
        B = te.placeholder((K, N), name="B", dtype=dtype)
        k = te.reduce_axis((0, K), name="k")
        return [A, B, te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")]
"""


def test_load_and_instantiate_with_overrides(write):
    (mm,) = load_operators(write("op.py", GEMM))
    assert mm.name == "mm" and mm.defaults() == {"M": 8, "N": 8, "K": 4, "dtype": "float32"}
    op = mm.instantiate({"K": "16"})
    assert [tuple(int(d) for d in t.shape) for t in op.tensors] == [(8, 16), (16, 8), (8, 8)]
    assert op.reference(op.random_inputs()) is None  # no reference given: TVM's naive build is the truth


@pytest.mark.parametrize("raw,message", [
    ("0", "parameter K must be a positive integer, got 0"),
    ("-3", "parameter K must be a positive integer, got -3"),
    ("2.5", "parameter K must be an integer, got '2.5'"),
    ("abc", "parameter K must be an integer, got 'abc'"),
])
def test_bad_shape_values(write, raw, message):
    (mm,) = load_operators(write("op.py", GEMM))
    with pytest.raises(ShapeError, match=message):
        mm.instantiate({"K": raw})


def test_unknown_parameter_and_dtype():
    gemm = get_builtin("gemm")
    with pytest.raises(ShapeError, match="operator gemm has no parameter 'Q'; its parameters are: M, N, K, dtype"):
        gemm.instantiate({"Q": 3})
    with pytest.raises(ShapeError,
                       match="parameter dtype must be one of float32, float16, bfloat16, int8, int16, int32"):
        gemm.instantiate({"dtype": "float8"})


def test_padding_may_be_zero_but_not_negative():
    conv = get_builtin("conv2d")
    assert conv.instantiate({"padding": 0}).params["padding"] == 0
    with pytest.raises(ShapeError, match="parameter padding must be an integer >= 0, got -1"):
        conv.instantiate({"padding": -1})


def test_shape_set_errors():
    conv = get_builtin("conv2d")
    with pytest.raises(ShapeError, match="operator conv2d has no shape set 'resnet'; its shape sets are: yolo, small"):
        conv.instantiate(shape="resnet:C1")
    with pytest.raises(ShapeError, match="shape set yolo of operator conv2d has no shape 'C16'; it has: C1, C2"):
        conv.instantiate(shape="yolo:C16")


def test_a_shape_with_parameters_changed_is_named_for_the_change():
    conv = get_builtin("conv2d")
    assert conv.instantiate(shape="yolo:C8").shape_name == "yolo:C8"
    assert conv.instantiate({"C": 256}, shape="yolo:C8").shape_name == "yolo:C8"  # C8's own value: unchanged
    pruned = conv.instantiate({"K": "359", "C": 179}, shape="yolo:C8")
    assert pruned.shape_name == "yolo:C8[C=179,K=359]"
    assert pruned.slug == "conv2d_yolo_C8_C=179_K=359"  # the output directory's name
    assert conv.instantiate({"C": 5}).slug == "conv2d"


@pytest.mark.parametrize("body,message", [
    ("x = (\n", "has a syntax error at line 1"),
    ("import hetero_dse\nx = 1\n", "defines no operator; mark a function"),
    ("import hetero_dse\nraise RuntimeError('boom')\n", "failed while importing, at line 2: RuntimeError: boom"),
])
def test_broken_op_files(write, body, message):
    with pytest.raises(OperatorError, match=message):
        load_operators(write("op.py", body))


def test_missing_op_file_and_directory(tmp_path):
    with pytest.raises(OperatorError, match="does not exist"):
        load_operators(tmp_path / "missing.py")
    with pytest.raises(OperatorError, match="is a directory"):
        load_operators(tmp_path)


@pytest.mark.parametrize("ret,message", [
    ("42", "must return a list of tvm.te.Tensor .*; it returned int"),
    ("[A, 3]", "it returned a int among them"),
    ("[A]", "it returned 0 computed tensors"),
    ("[C]", "reads A but does not return it in its list of tensors"),
    ("[A, C, D]", r"it returned 2 computed tensors \(C, D\)"),
])
def test_builder_must_return_tensors(write, ret, message):
    path = write("op.py", f"""
        from tvm import te
        import hetero_dse as hd

        @hd.operator(N=4)
        def bad(N):
            A = te.placeholder((N,), name="A")
            C = te.compute((N,), lambda i: A[i] * 2, name="C")
            D = te.compute((N,), lambda i: A[i] + 1, name="D")
            return {ret}
    """)
    (bad,) = load_operators(path)
    with pytest.raises(OperatorError, match=message):
        bad.instantiate()


def test_builder_exception_becomes_one_message(write):
    (op,) = load_operators(write("op.py", """
        import hetero_dse as hd

        @hd.operator(N=4)
        def broken(N):
            return 1 / 0
    """))
    with pytest.raises(OperatorError, match=r"operator broken \(.*op.py\) failed to build with N=4: ZeroDivisionError"):
        op.instantiate()


def test_decorator_requires_defaults():
    with pytest.raises(OperatorError, match="parameter N has no default; give one, e.g. @operator"):
        @hd.operator
        def no_default(N):
            return []
    with pytest.raises(OperatorError, match="@operator names X, which the function f does not take"):
        @hd.operator(X=3)
        def f(N=2):
            return []


def test_weights_name_inputs_of_the_operator():
    from tvm import te

    def scale(N=8, dtype="float32"):
        X = te.placeholder((N,), name="X", dtype=dtype)
        S = te.placeholder((N,), name="S", dtype=dtype)
        return [X, S, te.compute((N,), lambda i: X[i] * S[i], name="O")]

    assert hd.operator(weights=("S",))(scale).instantiate().weights == ("S",)
    with pytest.raises(OperatorError, match=r"weights=\['T'\], but it has no input named 'T' \(its inputs: X, S\)"):
        hd.operator(weights=("T",))(scale).instantiate()
    with pytest.raises(OperatorError, match=r"weights= takes a tuple of input names, e.g. weights=\('S',\)"):
        hd.operator(weights="S")(scale)
    assert get_builtin("conv2d").instantiate(shape="small:s1").weights == ("W",)
