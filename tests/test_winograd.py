"""Winograd's F(m×m, r×r) (issue 40): the transforms, their numbers against torch's convolution in each type,
the integer widths of an int8 pipeline, and seed 001's I/O bound of the algorithm, each against a hand
computation."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from cost_models.io_bounds import (
    winograd_dataflow_words,
    winograd_lower_bound_words,
    winograd_optimal_tile,
    winograd_t,
    winograd_vertices,
)
from hetero_dse.ops import get_builtin
from hetero_dse.ops.winograd import (
    TILES_3X3,
    TOLERANCE,
    direct_conv2d,
    integer_bits,
    measured_error,
    refused,
    transforms,
    winograd_conv2d,
    winograd_conv2d_int8,
)


def test_f2x2_3x3_is_lavin_and_grays_up_to_the_signs_of_rows():
    t = transforms(2, 3)
    half = Fraction(1, 2)
    # ours: each row of Bᵀ starts positive; Lavin & Gray's (arXiv 1509.09308) negate row 2 of Bᵀ and G and carry
    # the last point's sign in Aᵀ instead of G: the same products
    assert t.BT == ((1, 0, -1, 0), (0, 1, 1, 0), (0, 1, -1, 0), (0, 1, 0, -1))
    assert t.G == ((1, 0, 0), (half, half, half), (-half, half, -half), (0, 0, -1))
    assert t.AT == ((1, 1, 1, 0), (0, 1, -1, 1))
    lavin_bt = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=float)
    lavin_g = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
    lavin_at = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=float)
    at, g, bt = t.arrays()
    rng = np.random.default_rng(0)
    d, w = rng.standard_normal((4, 4)), rng.standard_normal((3, 3))
    np.testing.assert_allclose(at @ ((g @ w @ g.T) * (bt @ d @ bt.T)) @ at.T,
                               lavin_at @ ((lavin_g @ w @ lavin_g.T) * (lavin_bt @ d @ lavin_bt.T)) @ lavin_at.T)
    assert t.alpha == 4 and t.multiply_saving == 36 / 16 and t.weight_scale == 2 and t.output_scale == 1


@pytest.mark.parametrize("m", TILES_3X3)
def test_every_tile_computes_torchs_convolution(m):
    import torch

    op = get_builtin("conv2d").instantiate(shape="small:s1")  # 3×3, stride 1, padding 1
    x, w = op.random_inputs(0)
    want = torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), padding=1).numpy()
    padded = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
    np.testing.assert_allclose(winograd_conv2d(padded, w, m, "float64"), want[0], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(winograd_conv2d(padded, w, m, "float32"), want[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m", TILES_3X3)
def test_int8_is_exact_in_integers(m):
    rng = np.random.default_rng(m)
    x = rng.integers(-128, 128, (5, 11, 9))
    w = rng.integers(-128, 128, (3, 5, 3, 3))
    assert (winograd_conv2d_int8(x, w, m) == direct_conv2d(x, w)).all()


def test_int8_widths_by_hand():
    # F(2×2, 3×3), 256 channels: Bᵀ's rows sum to 2 in magnitude, 2·G's to 3, Aᵀ's to 3
    bits = integer_bits(2, 3, 256)
    assert bits.input_transform == 11  # 128·2² = 512 -> 10 bits of magnitude and a sign
    assert bits.weight_transform == 12  # 128·3² = 1,152
    assert bits.channel_sum == 29  # 256·1,152·512 = 150,994,944 < 2²⁸
    assert bits.output_transform == 32  # ·3² = 1,358,954,496 < 2³¹
    assert bits.types() == {"input_transform": "int16", "weight_transform": "int16", "channel_sum": "int32",
                            "output_transform": "int32"}
    assert integer_bits(4, 3, 256).types()["channel_sum"] == "int64"
    assert refused(4, 3, "int8", 256) is None
    assert "needs 73-bit integers in its output transform over 256 channels, beyond int64" in refused(6, 3, "int8", 256)


def test_error_per_tile_and_type_and_what_is_refused():
    errors = {(m, dt): measured_error(m, 3, dt) for m in TILES_3X3 for dt in ("float32", "float16")}
    assert errors[(2, "float32")] < errors[(4, "float32")] < errors[(6, "float32")] < 1e-4  # larger tiles err more
    assert all(refused(m, 3, "float32") is None for m in TILES_3X3)
    assert refused(2, 3, "float16") is None and errors[(2, "float16")] < 1e-2
    for m in (4, 6):
        assert errors[(m, "float16")] > 1e-2
        assert f"F({m}×{m}, 3×3) in float16 errs by" in refused(m, 3, "float16")
    assert "not bfloat16" in refused(2, 3, "bfloat16")


def test_seed_001_winograd_bound_by_hand():
    # a 14×14×256 -> 256 layer, F(2×2, 3×3), S = 32,768 words
    args = (14, 14, 256, 256, 2, 3)
    # Theorem 4.12: 196·65,536·(2+3−1)·3 / (2·√32,768) = 154,140,672 / 362.039
    assert winograd_lower_bound_words(*args, 32768) == pytest.approx(425757.478, rel=1e-6)
    # Lemma 4.10: 196·65,536·4⁴ / 2²
    assert winograd_vertices(*args) == 822083584
    # Lemma 4.11: 2·4³/6·1,024·32 + 6·4²/6·1,024
    assert winograd_t(1024, 2, 3) == pytest.approx(699050.667 + 16384, rel=1e-6)
    # §5.3: twice the bound's reading term, plus the output written once (196·256 words)
    assert winograd_dataflow_words(*args, 32768) == pytest.approx(2 * 425757.478 + 50176, rel=1e-6)
    # the tile: 2·4²/2²·x·y·z = 32,768 -> x·y·z = 4,096, and x·y = 9·z -> z = 64/3, x·y = 192
    xy, z = winograd_optimal_tile(2, 3, 32768)
    assert xy == pytest.approx(192) and z == pytest.approx(64 / 3)


def _three_by_three_shapes():
    """Every built-in shape set's 3×3 stride-1 convolutions: the small conv2d, group and depthwise shapes, and
    YOLO-v1's 3×3 stride-1 layers with their channels divided by 32 and their image cut to 10×10 (the
    arithmetic of a tile does not depend on the extents)."""
    from hetero_dse.ops.shapes import _YOLO_TABLE, CONV2D_SMALL, DEPTHWISE_SMALL, GROUP_SMALL

    out = [("conv2d small:s1", CONV2D_SMALL.shapes["s1"]["C"], CONV2D_SMALL.shapes["s1"]["K"], 8, 1),
           ("group small:s1", 8, 8, 8, GROUP_SMALL.shapes["s1"]["groups"]),
           ("depthwise small:s1", DEPTHWISE_SMALL.shapes["s1"]["C"], DEPTHWISE_SMALL.shapes["s1"]["C"], 8,
            DEPTHWISE_SMALL.shapes["s1"]["C"])]
    out += [(f"yolo:{name}", c // 32 or 1, k // 32, min(hw, 10), 1)
            for name, (c, k, hw, ks, st) in _YOLO_TABLE.items() if (ks, st) == (3, 1)]
    return out


@pytest.mark.parametrize("m", TILES_3X3)
@pytest.mark.parametrize("name, C, K, H, groups", _three_by_three_shapes())
def test_every_tile_on_every_built_in_3x3_shape_against_torch_float32_and_int8(name, C, K, H, groups, m):
    import torch

    rng = np.random.default_rng(H + C + m)
    x = rng.standard_normal((C, H + 2, H + 2))  # padded by 1 around an H×H image
    w = rng.standard_normal((K, C // groups, 3, 3)) / np.sqrt(9 * C // groups)
    want = torch.nn.functional.conv2d(torch.from_numpy(x[None]), torch.from_numpy(w), groups=groups).numpy()[0]
    got = winograd_conv2d(x.astype(np.float32), w.astype(np.float32), m, "float32", groups=groups)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= TOLERANCE["float32"] * np.abs(want).max(), name
    xq, wq = rng.integers(-128, 128, x.shape), rng.integers(-128, 128, w.shape)
    exact = torch.nn.functional.conv2d(torch.from_numpy(xq[None]).double(), torch.from_numpy(wq).double(),
                                       groups=groups).numpy()[0]
    assert (winograd_conv2d_int8(xq, wq, m, groups=groups) == exact).all(), name
