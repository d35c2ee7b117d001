"""Every built-in operator computes what its library reference computes (torch or numpy)."""

from __future__ import annotations

import numpy as np
import pytest

from hetero_dse.reference import run_naive
from hetero_dse.errors import OperatorError, ShapeError
from hetero_dse.ops import ABBREVIATIONS, BUILTIN, get_builtin

CASES = [(name, shape) for name, d in BUILTIN.items() for shape, _ in d.shapes("small")]


def test_library_has_flextensor_table1_plus_bcm_and_sho():
    assert len(BUILTIN) == 14
    assert set(ABBREVIATIONS.values()) | {"bcm"} == set(BUILTIN)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("name,shape", CASES)
def test_builtin_matches_reference(name, shape, dtype):
    op = get_builtin(name).instantiate({"dtype": dtype}, shape=shape)
    inputs = op.random_inputs(seed=7)
    expected = op.reference(inputs)
    got = run_naive(op, inputs)
    assert got.shape == expected.shape
    if dtype == "int8":
        assert str(op.output.dtype) == "int32"
        np.testing.assert_array_equal(got, expected.astype(np.int64))
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert np.abs(expected).max() > 0  # the check is not vacuous


@pytest.mark.parametrize("layer,out_hw", [("C1", 224), ("C2", 112), ("C8", 28), ("C14", 7), ("C15", 7)])
def test_yolo_layers_have_flextensor_table4_shapes(layer, out_hw):
    op = get_builtin("conv2d").instantiate(shape=f"yolo:{layer}")
    spec = dict(op.params)
    assert tuple(int(d) for d in op.output.shape) == (1, spec["K"], out_hw, out_hw)


def test_yolo_set_has_15_layers_and_batch_override():
    d = get_builtin("c2d")
    assert [n for n, _ in d.shapes("yolo")] == [f"yolo:C{i}" for i in range(1, 16)]
    op = d.instantiate({"batch": "8"}, shape="yolo:C13")
    assert tuple(int(x) for x in op.inputs[0].shape) == (8, 1024, 14, 14)


def test_transposed_conv_output_size_matches_torch_formula():
    # (L - 1) * stride - 2 * padding + dilation * (kernel - 1) + 1
    op = get_builtin("conv_transpose1d").instantiate({"L": 10, "stride": 3, "padding": 1, "kernel": 4, "C": 2, "K": 2})
    assert int(op.output.shape[-1]) == (10 - 1) * 3 - 2 + 3 + 1


def test_group_conv_rejects_groups_not_dividing_channels():
    with pytest.raises(ShapeError, match="groups=3 must divide both the input channels C=8"):
        get_builtin("group_conv2d").instantiate({"C": 8, "groups": 3})


def test_kernel_larger_than_input_is_a_shape_error():
    with pytest.raises(ShapeError, match=r"^operator conv2d with .*H=2.*: the kernel \(5, dilation 1\) is larger "
                                         r"than the padded input \(2x2\): the output would be empty$"):
        get_builtin("conv2d").instantiate({"H": 2, "W": 2, "kernel": 5, "padding": 0})


def test_unknown_operator_suggests_close_names():
    with pytest.raises(OperatorError, match=r"unknown operator 'conv2' \(did you mean conv2d"):
        get_builtin("conv2")


def test_signature_is_stable_and_distinguishes_shapes():
    d = get_builtin("gemm")
    a, b = d.instantiate({"K": 64}), d.instantiate({"K": 64})
    assert a.signature() == b.signature()
    assert "A:512x64:float32" in a.signature()
    assert d.instantiate({"K": 32}).signature() != a.signature()


def test_depthwise_kernel_larger_than_input_is_a_shape_error():
    with pytest.raises(ShapeError, match=r"larger than the padded input \(2x2\): the output would be empty"):
        get_builtin("depthwise_conv2d").instantiate({"H": 2, "W": 2, "kernel": 5, "padding": 0})
