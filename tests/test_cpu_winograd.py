"""Winograd F(m×m, 3×3) on the CPU (``gpu_cpu/winograd.py``): the three kernels against the convolution's
reference for every tile size, with padding, ragged tiles and a fused epilogue; the product's points as the
CPU space proposes them; the transforms' sums free of the multiplies a matrix form would do."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_cpu.schedule import apply_cpu, build_cpu, run_cpu
from gpu_cpu.winograd import WinogradKernel, input_transform, product_operator, winograd_shape
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


def _relative_error(op, kernel, seed=0):
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
    assert _relative_error(op, WinogradKernel(op, m, point)) < TOLERANCE["float32"]


def test_without_padding_and_on_a_non_square_map():
    op = _conv(H=9, W=12, padding=0, C=5, K=7)  # 7×10 out, 5 and 7 channels: vectors narrower than the lanes
    shape = winograd_shape(op, 4)
    assert (shape.out_h, shape.out_w, shape.tiles_h, shape.tiles_w) == (7, 10, 2, 3)
    point = CpuSpace(analyze(product_operator(shape))).default_point()
    assert _relative_error(op, WinogradKernel(op, 4, point)) < TOLERANCE["float32"]


def test_the_products_points_each_run_with_their_weights_packed():
    op = _conv(C=16, K=32, H=8, W=8)
    space = CpuSpace(analyze(product_operator(winograd_shape(op, 2))))
    rng = np.random.default_rng(3)
    points = [space.decode(row) for row in space.sample(4, rng)]
    assert {p["vector"] for p in points} != {"k"} or len(points) == 1  # not every one the default's layout
    for point in points:
        assert _relative_error(op, WinogradKernel(op, 2, point)) < TOLERANCE["float32"]


def test_the_product_operator_matches_its_reference():
    product = product_operator(winograd_shape(_conv(), 4))
    assert [int(d) for d in product.output.shape] == [36, 9, 16]  # α² × tiles × K
    point = CpuSpace(analyze(product)).default_point()
    inputs = product.random_inputs(1)
    got = run_cpu(build_cpu(apply_cpu(product, point)), product, inputs, point)
    np.testing.assert_allclose(got, product.reference(inputs), rtol=1e-4, atol=1e-4)


def _float_multiplies(mod) -> int:
    # the transform's coefficients are the only float constants its block multiplies by
    return mod.script().count("* T.float32(")


def test_the_input_transform_is_additions_only_where_its_matrix_is_plus_minus_one():
    shape = winograd_shape(_conv(), 2)  # F(2×2)'s Bᵀ: entries 0 and ±1
    assert _float_multiplies(input_transform(shape, 16)) == 0
    # F(4×4)'s Bᵀ has 4s and 5s: a multiply for each, never one by 0 or 1 (at most 36 points × 2 sides × 6 terms)
    count = _float_multiplies(input_transform(winograd_shape(_conv(), 4), 16))
    assert 0 < count <= 36 * 2 * 6


@pytest.mark.parametrize("params, said", [
    (dict(stride=2), "stride 2"), (dict(kernel=5, padding=2), "kernel 5"), (dict(groups=2), "groups 2")])
def test_a_convolution_winograd_does_not_take_is_refused_in_a_sentence(params, said):
    with pytest.raises(HeteroDSEError, match=said):
        winograd_shape(_conv(**params), 4)


def test_each_transform_splits_its_tiles_across_the_cores_and_unrolls_only_within_a_tile():
    import re

    from gpu_cpu.winograd import output_transform

    shape = winograd_shape(_conv(C=32, K=32, H=28, W=28), 4)  # 7×7 tiles, two vectors of channels
    for mod in (input_transform(shape, 16), output_transform(shape, ("bias", "relu"), 16)):
        script = mod.script()
        assert re.search(r"in T\.parallel\((49|98)\)", script), script  # the tiles (and channel vectors)
        unrolled = [int(n) for n in re.findall(r"in T\.unroll\((\d+)\)", script)]
        assert unrolled and max(unrolled) <= shape.alpha  # a tile's points, never the tiles themselves
