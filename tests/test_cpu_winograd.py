"""Winograd F(m×m, 3×3) on the CPU (``gpu_cpu/winograd.py``): the three kernels against the convolution's
reference for every tile size, with padding, ragged tiles and a fused epilogue; the product's points as the
CPU space proposes them; the transforms' sums free of the multiplies a matrix form would do."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_cpu.schedule import apply_cpu, build_cpu, run_cpu
from gpu_cpu.winograd import WinogradKernel, apply_winograd, input_transform, product_operator, winograd_shape
from hetero_dse.analysis import analyze
from hetero_dse.epilogue import fuse
from hetero_dse.errors import HeteroDSEError
from hetero_dse.ops import get_builtin
from hetero_dse.ops.winograd import TOLERANCE
from hetero_dse.space.cpu import CpuSpace

pytest.importorskip("tvm")


def _conv(**params):
    base = dict(C=8, K=16, H=10, W=10, kernel=3, stride=1, padding=1)
    return get_builtin("conv2d").instantiate({**base, **params})


def relative_error(op, kernel, seed=0):
    """The Winograd ``kernel``'s largest error on ``op``'s random inputs, relative to the reference's largest
    magnitude (``tests/test_grouped_winograd.py`` checks with it too)."""
    inputs = op.random_inputs(seed)
    want = op.reference(inputs)
    got = kernel.run(inputs)
    assert got.shape == want.shape
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.mark.parametrize("m", [2, 4, 6])
def test_each_tile_size_computes_the_convolution_with_its_epilogue(m):
    # 10×10 output: F(4×4) and F(6×6) leave a ragged last tile (3 and 2 tiles a side), cropped on the way out
    op = fuse(_conv(), ("bias", "add", "relu"), (1,))
    product = product_operator(winograd_shape(op, m))
    point = CpuSpace(analyze(product)).default_point()
    assert relative_error(op, WinogradKernel(op, m, point)) < TOLERANCE["float32"]


def test_without_padding_and_on_a_non_square_map():
    op = _conv(H=9, W=12, padding=0, C=5, K=7)  # 7×10 out, 5 and 7 channels: vectors narrower than the lanes
    shape = winograd_shape(op, 4)
    assert (shape.out_h, shape.out_w, shape.tiles_h, shape.tiles_w) == (7, 10, 2, 3)
    point = CpuSpace(analyze(product_operator(shape))).default_point()
    assert relative_error(op, WinogradKernel(op, 4, point)) < TOLERANCE["float32"]


def test_the_products_points_run_whichever_loop_they_vectorise_and_with_u_packed_where_they_ask():
    from gpu_cpu.schedule import weight_layouts

    op = _conv(C=16, K=32, H=8, W=8)
    product = product_operator(winograd_shape(op, 2))
    space = CpuSpace(analyze(product))
    rows = space.sample(200, np.random.default_rng(3))
    by_vector = {}
    for row in rows:
        point = space.decode(row)
        by_vector.setdefault(point["vector"], point)
    assert set(by_vector) == {"e", "p", "k"}
    assert weight_layouts(product, by_vector["e"]) == {1: (1, 2, 0)}  # U read with its points innermost
    for point in by_vector.values():
        assert relative_error(op, WinogradKernel(op, 2, point)) < TOLERANCE["float32"]


def test_several_vectors_of_channels_each_tile():
    # 4 lanes: 4 vectors of the 16 input channels and 6 of the 24 output channels per tile
    op = fuse(_conv(C=16, K=24, H=9, W=9), ("bias",), (1,))
    point = CpuSpace(analyze(product_operator(winograd_shape(op, 4)))).default_point()
    assert relative_error(op, WinogradKernel(op, 4, point, lanes=4)) < TOLERANCE["float32"]


def test_the_product_operator_matches_its_reference():
    product = product_operator(winograd_shape(_conv(), 4))
    assert [int(d) for d in product.output.shape] == [36, 9, 16]  # α² × tiles × K
    point = CpuSpace(analyze(product)).default_point()
    inputs = product.random_inputs(1)
    got = run_cpu(build_cpu(apply_cpu(product, point)), product, inputs, point)
    np.testing.assert_allclose(got, product.reference(inputs), rtol=1e-4, atol=1e-4)


def _float_multiplies(mod) -> int:
    # the transform's coefficients are the only float constants its blocks multiply by; each block's body is
    # printed once (the select over the points), before unrolling
    return mod.script().count("* T.float32(")


def test_the_input_transform_multiplies_only_by_the_entries_of_its_matrix_other_than_0_and_1():
    from hetero_dse.ops.winograd import transforms

    for m, expected in ((2, 0), (4, 24)):  # F(2×2)'s Bᵀ: 0 and ±1 only; F(4×4)'s: twelve 2s, 4s and 5s
        bt = transforms(m, 3).BT
        entries = sum(abs(v) not in (0, 1) for row in bt for v in row)
        assert 2 * entries == expected  # one side Bᵀ d (block T), the other · B (block V)
        assert _float_multiplies(input_transform(winograd_shape(_conv(), m), 16)) == expected


@pytest.mark.parametrize("params, said", [
    (dict(stride=2), "stride 2"), (dict(kernel=5, padding=2), "kernel 5"), (dict(dilation=2, padding=2), "dilation 2")])
def test_a_convolution_winograd_does_not_take_is_refused_in_a_sentence(params, said):
    with pytest.raises(HeteroDSEError, match=said):
        winograd_shape(_conv(**params), 4)


def test_a_tile_not_offered_is_refused():
    with pytest.raises(HeteroDSEError, match="one of 2, 4, 6, not 8"):
        winograd_shape(_conv(), 8)


def test_each_transform_splits_its_tiles_across_the_cores_and_unrolls_only_within_a_tile():
    import re

    from gpu_cpu.winograd import output_transform

    shape = winograd_shape(_conv(C=32, K=32, H=28, W=28), 4)  # 7×7 tiles, two vectors of channels
    op = fuse(_conv(C=32, K=32, H=28, W=28), ("bias", "relu"), (1,))
    whole = apply_winograd(op, 4, CpuSpace(analyze(product_operator(shape))).default_point(), lanes=16)
    for mod in (input_transform(shape, 16), output_transform(shape, ("bias", "relu"), 16), whole):
        script = mod.script()
        assert re.search(r"in T\.parallel\((49|98)\)", script), script  # the tiles (and channel vectors)
        unrolled = [int(n) for n in re.findall(r"in T\.unroll\((\d+)\)", script)]
        assert unrolled and max(unrolled) <= shape.alpha  # a tile's points, never the tiles themselves


def _winograd_point(op, m):
    from gpu_cpu.winograd import winograd_point

    product = product_operator(winograd_shape(op, m))
    return winograd_point(m, CpuSpace(analyze(product)).default_point())


def test_a_winograd_point_is_a_cpu_point_of_the_convolution_built_checked_and_timed_as_any():
    # what explore's workers, its writer and the network's layers call: apply_cpu, pack_weights, run_cpu and the
    # measuring job, each given the convolution and a point with a Winograd tile
    from gpu_cpu.measure import MeasureJob, measure_cpu_job

    op = fuse(_conv(C=16, K=24, H=12, W=12), ("bias", "relu"), (1,))
    point = _winograd_point(op, 4)
    inputs = op.random_inputs(2)
    got = run_cpu(build_cpu(apply_cpu(op, point)), op, inputs, point)
    np.testing.assert_allclose(got, op.reference(inputs), rtol=1e-3, atol=1e-3)
    timed = measure_cpu_job(MeasureJob.of(op, "builtin", point.to_json()))  # checks against the reference first
    assert timed["seconds"] > 0


def test_the_weights_of_a_winograd_point_are_transformed_for_numpy_and_torch_alike():
    import torch

    from gpu_cpu.schedule import pack_weights, weight_layouts
    from gpu_cpu.winograd import transform_weights

    op = _conv(C=8, K=16)
    point = _winograd_point(op, 2)
    w = op.random_inputs(0)[1]
    as_numpy = pack_weights(op, point, [None, w])[1]
    # a network's folded weight keeps its parameter's grad; TVM takes a tensor's memory aligned to 64 bytes
    as_torch = pack_weights(op, point, [None, torch.from_numpy(w).clone().requires_grad_()])[1]
    assert isinstance(as_torch, torch.Tensor) and as_torch.data_ptr() % 64 == 0
    np.testing.assert_array_equal(as_torch.numpy(), as_numpy)
    # the default product point vectorises K, the innermost already: the transform as it is, [16 points, C, K]
    assert weight_layouts(op, point) == {}
    np.testing.assert_allclose(as_numpy, transform_weights(w, 2))
    assert as_numpy.shape == (16, 8, 16)


def test_schedule_json_says_how_a_winograd_kernel_takes_its_weights_and_replay_accepts_its_knobs(tmp_path):
    import json

    from hetero_dse.targets.cpu import packed_weights
    from hetero_dse.targets.replay import _check_knobs

    op = _conv(C=8, K=16)
    point = _winograd_point(op, 4)
    said = packed_weights(op, point)["W"]
    assert said["winograd"] == 4 and said["shape"] == [36, 8, 16]
    record = {"signature": op.signature(), "target": {"kind": "llvm"}, "knobs": json.loads(json.dumps(point.to_json()))}
    _check_knobs(tmp_path, record, op)  # the product's space holds its knobs
    record["knobs"]["split.k"] = [1, 1, 1, 15]
    with pytest.raises(HeteroDSEError, match="outside the operator's space"):
        _check_knobs(tmp_path, record, op)
