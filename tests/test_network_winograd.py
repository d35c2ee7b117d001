"""The network kernel's Winograd engine (issue 40, item 4): its model against a hand count, the transforms' operations
against the matrices, the small network's 3×3 stride-1 layer run through F(2×2, 3×3) and F(4×4, 3×3) in
C-simulation against torch (float32) and bit for bit (int8), the lint on the code, each check broken on purpose,
and the explorer's choice of the algorithm."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cost_models.fpga_network import EngineShape, NetLayer, Tiles, layer_cycles, network_trips
from cost_models.fpga_network_algorithm import winograd_tiles
from cost_models.fpga_network_design import explore_network
from cost_models.fpga_winograd import (
    IntegerTypes,
    TransformOps,
    divide_adds,
    exact_division,
    integer_types,
    integer_weight_transform,
    transform_ops,
    weight_transform_ops,
)
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import load_board
from hetero_dse.hls.csim import csim
from hetero_dse.hls.network_lint import lint_network
from hetero_dse.hls.network_project import check_trips
from hetero_dse.model.layer_shape import LayerShape
from small_net import TINY_MODEL
from test_network_kernel import _mutate, _small_run

pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++")


def test_the_transforms_operations_are_the_matrices_counted_by_hand():
    # F(2x2): each row of Bᵀ has two non-zeros (one add); 4 columns then 4 rows of 4 outputs: 2 x 16 adds. Each
    # row of Aᵀ has three (two adds): Aᵀ M is 4 columns of 2 outputs (16), then 2 rows of 2 (8). No multiplies.
    assert transform_ops(2) == TransformOps(32, 0, 24, 0)
    # F(4x4) in float: Bᵀ's rows [4,0,-5,0,1,0] (2 adds, 2 multiplies) and [0,4,0,-5,0,1] (the same); rows
    # [0,4,4,-1,-1,0] and [0,4,-4,-1,1,0] are u ± v with u = 4x₁ - x₃ and v = 4x₂ - x₄ (an add and a multiply
    # each, then an add a row: 4 adds, 2 multiplies, not 6 and 4); [0,2,1,-2,-1,0] and [0,2,-1,-2,1,0] with
    # u = 2x₁ - 2x₃ (an add, 2 multiplies), v = x₂ - x₄ (an add): 4 adds, 2 multiplies. 12 adds and 8 multiplies a
    # column, not 16 and 12 as the rows one by one; and 4x₁ is taken by two of them, computed once: 7 multiplies
    ops = transform_ops(4)
    assert (ops.in_adds, ops.in_muls) == (2 * 6 * 12, 2 * 6 * 7)
    # Aᵀ's columns 1, 2 (the points ±1) and 3, 4 (±2) agree in size on every row: x₁ ± x₂, x₃ ± x₄ once (4 adds),
    # then [1,1,1,1,1,0] = x₀ + p + r (2), [0,1,-1,2,-2,0] = q + 2s (1, a multiply), [0,1,1,4,4,0] = p + 4r (1,
    # one), [0,1,-1,8,-8,1] = q + 8s + x₅ (2, one): 10 adds and 3 multiplies a column, over 6 columns and 4 rows
    assert (ops.out_adds, ops.out_muls) == (10 * 10, 10 * 3)
    # the int8 engine's weight transform G' = ±2G: rows [2,0,0], [1,1,1], [1,-1,1], [0,0,2] (a row that began
    # negative negated), the 2s shifts; the middle two u ± v with u = g₀ + g₂: 3 adds down each of g's 3 columns,
    # then 3 along each of G'g's 4 rows
    g, signs = integer_weight_transform(2)
    assert [[int(v) for v in row] for row in g] == [[2, 0, 0], [1, 1, 1], [1, -1, 1], [0, 0, 2]]
    assert weight_transform_ops(2) == TransformOps(3 * 3 + 4 * 3, 0, 0, 0) and signs == (1, 1, -1, -1)
    # F(2x2)'s Bᵀ and Aᵀ have nothing to share: as the rows one by one
    assert transform_ops(2, "int8") == transform_ops(2)
    # a row of only negative terms would be a negation, an adder in integers the model does not count: refused
    from fractions import Fraction

    from hetero_dse.hls.winograd_code import _Writer

    with pytest.raises(ValueError, match="negation"):
        _Writer("short", False).combination([(Fraction(-1), "a"), (Fraction(-2), "b")])


@pytest.mark.parametrize("m", [2, 4, 6])
def test_each_transforms_plan_computes_its_matrix(m):
    """A plan's shared sums and rows, evaluated on random integers, give the matrix times them exactly, for every
    matrix the engine transforms by (float: Bᵀ, Aᵀ, G; int8: Aᵀ·S, G'), and it is never dearer than the rows
    one by one."""
    from fractions import Fraction

    from cost_models.fpga_winograd import output_matrix
    from cost_models.winograd_plan import _plain, transform_plan
    from hetero_dse.ops.winograd import transforms

    t = transforms(m, 3)
    mats = [(t.BT, False), (t.AT, False), (t.G, False), (t.BT, True)]
    if m < 6:  # F(6x6)'s Aᵀ has halves: no integer engine; its float matrices and Bᵀ still plan
        mats += [(output_matrix(m, "int8"), True), (integer_weight_transform(m)[0], True)]
    rng = np.random.default_rng(m)
    for mat, integer in mats:
        plan = transform_plan(mat, integer)
        x = [Fraction(int(v)) for v in rng.integers(-1000, 1000, size=len(mat[0]))]
        values = list(x)
        for comb in plan.shared:
            values.append(sum(c * values[k] for c, k in comb))
        got = [sum(c * values[k] for c, k in comb) for comb in plan.rows]
        assert got == [sum(c * v for c, v in zip(row, x, strict=True)) for row in mat]
        assert plan.adds + plan.muls <= _plain(mat, integer).adds + _plain(mat, integer).muls


def test_a_winograd_layers_ddr_traffic_against_seed_001s_bound_by_hand():
    """Issue 40, item 2: a Winograd layer's DDR traffic set against Theorem 4.12's bound, by hand."""
    from cost_models.fpga_network_io import layer_io

    # F(2x2) on 4 x 4 lanes, buffers of 16 rows (a 64-pixel tile buffer); 64 -> 64 channels of 56x56, tiles
    # 4 x 4 x 8 x 8. On chip: the box 16 rows x 4 lanes x 32 bits in 16 banks (32,768 bits), the transformed
    # patches and their sums 16 rows x 16 x 4 lanes x 32 bits, two copies each (65,536 each), the output tile
    # 64 rows x 4 x 32, two copies (16,384): 180,224 bits, 5,632 float32 words
    engine = EngineShape("winograd", 4, 4, 4, 16, 16, 16, 3, tile=2, tile_rows=64)
    io = layer_io(engine, NetLayer("winograd", 64, 64, 56, 56, 3, 3, 1, 1), Tiles(4, 4, 8, 8), "float32")
    assert io["onchip_values"] == 5632
    # Theorem 4.12 (its Ω with constant 1): 56·56·64·64·(2 + 3 − 1)·3 / (2·√5632) = 1,026,965 words, past the
    # compulsory 438,272 (the input and output 64·56·56 each, the weights 64·64·9): the bound, 4 bytes a word
    assert io["io_bound_kind"] == "Winograd, Theorem 4.12 (its Ω with constant 1)"
    assert io["io_lower_bound_bytes"] == pytest.approx(4 * 56 * 56 * 64 * 64 * 4 * 3 / (2 * 5632 ** 0.5))
    # the traffic: 1,254,400 input words and 50,176 output words of 4 lanes, 802,816 weight words of 4, 16
    # parameter words of 4 32-bit values
    assert io["traffic_bytes"] == (1254400 * 4 + 50176 * 4 + 802816 * 4) * 4 + 16 * 4 * 4 == 33718528
    assert io["traffic_over_bound"] == pytest.approx(33718528 / io["io_lower_bound_bytes"])
    # a residual added: a word of it read beside each output word, in the traffic and the compulsory traffic
    layer = NetLayer("winograd", 64, 64, 56, 56, 3, 3, 1, 1)
    res = layer_io(engine, layer, Tiles(4, 4, 8, 8), "float32", residual=True)
    assert res["traffic_bytes"] == 33718528 + 50176 * 4 * 4
    # more on chip (the same engine with 64 times the buffer rows): the theorem's term falls below the compulsory
    # traffic, the network's own channels (48 and 40, here padded to 64 by the kernel), read once each
    big = EngineShape("winograd", 4, 4, 4, 1024, 16, 1024, 3, tile=2, tile_rows=4096)
    io = layer_io(big, layer, Tiles(4, 4, 8, 8), "float32", channels=(48, 40), residual=True)
    assert io["io_bound_kind"] == "compulsory traffic"
    assert io["io_lower_bound_bytes"] == (48 * 56 * 56 + 40 * 48 * 9 + 2 * 40 * 56 * 56) * 4
    # a direct layer, or a 1x1 one on the Winograd engine's pointwise mode: no Winograd bound
    assert layer_io(engine, NetLayer("winograd", 64, 64, 56, 56, 1, 1, 1, 0), Tiles(4, 4, 8, 8), "float32") is None


def test_int8_f4x4s_operations_types_and_division_counted_by_hand():
    # in integers a power of two is a shift, any other coefficient a constant multiply on the fabric (5 = 4 + 1: an
    # adder): Bᵀ's rows [4,0,-5,0,1,0] and [0,4,0,-5,0,1] 2 adds and a multiply by 5 each; the pairs u ± v as in
    # float (u = 4x₁ - x₃, v = 4x₂ - x₄; u = 2x₁ - 2x₃, v = x₂ - x₄: 4 adds a pair): 12 adds and 2 multiplies a
    # column; 6 columns then 6 rows. Aᵀ·S: the columns paired as in float (4 adds), then 2, 1, 1, 2, its 2, 4, 8
    # shifts: 10 adds down each of 6 columns, then along each of 4 rows
    assert transform_ops(4, "int8") == TransformOps(2 * 6 * 12, 2 * 6 * 2, (6 + 4) * 10, 0, 2 * 6 * 2, 0)
    # G' = ±24G: [6,0,0] and [0,0,24] a multiply each (6 = 8 - 2, 24 = 32 - 8: an adder each); [4,4,4] and
    # [4,-4,4] u ± v with u = 4g₀ + 4g₂ (1 add, then 2), [1,2,4] and [1,-2,4] with u = g₀ + 4g₂ (1, then 2): 6 adds
    # and 2 multiplies a column of g's 3, then along G'g's 6 rows
    g, signs = integer_weight_transform(4)
    assert [[int(v) for v in row] for row in g] == [[6, 0, 0], [4, 4, 4], [4, -4, 4], [1, 2, 4], [1, -2, 4],
                                                    [0, 0, 24]]
    assert weight_transform_ops(4) == TransformOps(9 * 6, 9 * 2, 0, 0, 9 * 2) and signs == (1, 1, -1, -1, 1, 1)
    # the output is 24² = 576 = 2⁶·9 times the sum: a shift by 6, then a multiply by 9's inverse modulo 2^32,
    # 0x38E38E39, whose canonical signed digits are 11 (0x38E38E39 = 2^30 − 2^27 + 2^24 − 2^21 + … + 1): 10 adders
    assert exact_division(4) == (6, 0x38E38E39) and 9 * 0x38E38E39 % 2 ** 32 == 1
    assert divide_adds(4) == 10 and exact_division(2) == (2, None) and divide_adds(2) == 0
    from cost_models.winograd_plan import csd_digits

    # canonical signed digits by hand: 7 = 8 − 1, 5 = 4 + 1, 6 = 8 − 2, 24 = 32 − 8, 11 = 16 − 4 − 1, 0x5555 alone
    assert [csd_digits(n) for n in (7, 5, 6, 24, 11, 0x5555)] == [2, 2, 2, 2, 3, 8]
    # widths: the input transform grows int8 by 10² (15 bits), the weights' by 24² (18: a DSP48E2's B port);
    # the sums and output transform modulo 2^(32 + 6); F(2×2)'s exact in int32 and 64 bits
    assert integer_types(4) == IntegerTypes(16, 18, 38, 38, True)
    assert integer_types(2) == IntegerTypes(16, 16, 32, 64, False)


def test_the_output_transforms_row_a_cycle_charged_by_hand(monkeypatch):
    """int8 F(4×4) on 4 × 4 lanes: a patch row of 4 pixels leaves a cycle, each lane of each divided exactly (10
    adders of 32 bits, LUTs and their registers: 16 dividers, not the 4 of a pixel a cycle), each pixel through a
    4:1 multiplexer of the patch's 4 rows (a LUT a bit), the pointwise mode's pixel through one of its block's 36
    beside them (9 LUTs a bit) and a 2:1 select into each of the 4 banks (two a LUT); the output tile in 4 banks by
    pixel of a quarter of its rows."""
    from cost_models import fpga_network_resources as res
    from hetero_dse.hardware.board import RESOURCE_KINDS

    engine = EngineShape("winograd", 4, 4, 4, 64, 64, 64, 3, tile=4, w_transform=True, tile_rows=1024)
    lut, ff = RESOURCE_KINDS.index("lut"), RESOURCE_KINDS.index("ff")
    assert (engine.out_banks, engine.out_cols) == (1, 4)
    divided = res.engine_resources(engine, "int8", False)
    monkeypatch.setattr(res, "divide_adds", lambda m: 0)
    undivided = res.engine_resources(engine, "int8", False)
    assert divided[lut] - undivided[lut] == divided[ff] - undivided[ff] == 10 * 32 * 4 * 4
    monkeypatch.undo()
    point = res.engine_resources(replace(engine, pointwise=True), "int8", False)
    # beside the funnel, the pointwise mode's pixels (36 not 16, in registers) and its 2:1 selects of each
    # product's 18-bit weight and each transformed input's bypass
    assert point[lut] - divided[lut] == 4 * 32 * (9 + 4 / 2) + 36 * (4 * 4 * 18 + 4 * 18) / 2
    tile = [b for b in res._buffers(engine, "int8") if b[0] == "tile"]
    assert tile == [("tile", 256, 4 * 32, 2.0 * 4, 32.0)]


def test_int8_f4x4_is_exact_where_its_sums_wrap(tmp_path):
    """The generated transforms, division and types, compiled alone on one lane: a patch and taps chosen so that
    one element's sum over 512 channels passes 2^37 (it wraps in the engine's 38 bits) and one output is the
    largest an int8 3×3 convolution of 512 channels has; every output is the direct convolution's, bit for bit.
    The check itself: with sums of 36 bits (9 times that output passes their 30 bits above the shift), or the
    inverse off by 2, the outputs are wrong."""
    from hetero_dse.hls.network_project import winograd_context
    from hetero_dse.hls.winograd_code import transform_functions
    from hetero_dse.ops.winograd import transforms

    ctx = winograd_context(EngineShape("winograd", 1, 1, 1, 1, 1, 1, 3, tile=4, w_transform=True), "int8")
    channels = 512
    sign = np.where(transforms(4, 3).arrays()[2][5] < 0, -1, 1)
    # every channel's patch 127 with Bᵀ's last row's signs (V[5][5] = 127·10² = 12,700), its taps 127 with the
    # patch's first window's (U[5][5] = 576·127; output (0, 0) the largest sum there is, 512·9·127²)
    x = np.repeat((127 * np.outer(sign, sign))[None], channels, axis=0)
    w = np.repeat((127 * np.outer(sign[:3], sign[:3]))[None], channels, axis=0)
    rng = np.random.default_rng(7)  # and one channel of any values: no output a multiple of a power of two
    x[-1], w[-1] = rng.integers(-128, 128, size=(6, 6)), rng.integers(-128, 128, size=(3, 3))
    assert (channels - 1) * 12700 * 576 * 127 > 2 ** 37  # past what 38 signed bits hold: the engine's sum wraps
    want = np.einsum("cxyij,cij->xy", np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(1, 2)), w)

    def run(m_ctype: str, functions: str) -> np.ndarray:
        src = tmp_path / "lane.cpp"
        src.write_text(f"""#include "ap_int.h"
#include <cstdio>
typedef int acc_t;
typedef {ctx["tr_ctype"]} wino_tr_t;
typedef {ctx["u_ctype"]} wino_u_t;
typedef {m_ctype} wino_m_t;
typedef {ctx["y_ctype"]} wino_y_t;
{functions}
int main() {{
  wino_m_t sums[6][6];
  for (int a = 0; a < 36; ++a) sums[a / 6][a % 6] = 0;
  for (int c = 0; c < {channels}; ++c) {{
    wino_tr_t d[6][6], v[6][6];
    wino_u_t tap[3][3], u[6][6];
    for (int a = 0; a < 36; ++a) {{ int t; if (std::scanf("%d", &t) != 1) return 1; d[a / 6][a % 6] = t; }}
    for (int r = 0; r < 9; ++r) {{ int t; if (std::scanf("%d", &t) != 1) return 1; tap[r / 3][r % 3] = t; }}
    wino_in_transform(d, v);
    wino_w_transform(tap, u);
    for (int a = 0; a < 36; ++a)
      sums[a / 6][a % 6] = sums[a / 6][a % 6] + (wino_m_t)(v[a / 6][a % 6] * u[a / 6][a % 6]);
  }}
  wino_y_t s[6][6], y[4][4];
  for (int a = 0; a < 36; ++a) s[a / 6][a % 6] = (wino_y_t)sums[a / 6][a % 6];
  wino_out_transform(s, y);
  for (int i = 0; i < 16; ++i) std::printf("%d\\n", wino_divide((acc_t)(unsigned)(y[i / 4][i % 4] >> 6)));
}}
""")
        binary = tmp_path / "lane"
        import subprocess

        include = Path(__file__).resolve().parents[1] / "hls_templates" / "include"
        subprocess.run(["g++", "-std=c++14", "-O1", f"-I{include}", str(src), "-o", str(binary)], check=True,
                       capture_output=True, text=True)
        feed = "\n".join(" ".join(map(str, [*x[c].ravel(), *w[c].ravel()])) for c in range(channels))
        out = subprocess.run([str(binary)], input=feed, check=True, capture_output=True, text=True).stdout
        return np.array([int(v) for v in out.split()]).reshape(4, 4)

    functions = transform_functions(4, "int8")
    np.testing.assert_array_equal(run(ctx["m_ctype"], functions), want)
    assert ctx["m_ctype"] == "ap_int<38>" and ctx["u_ctype"] == "ap_int<18>"
    assert not np.array_equal(run("ap_int<36>", functions), want)
    assert not np.array_equal(run(ctx["m_ctype"], functions.replace(" * 954437177u;", " * 954437179u;")), want)


def test_the_models_trip_counts_and_cycles_are_the_loops_counted_by_hand():
    # 8 -> 8 channels, 8x8 image, pad 1, F(2x2) on 4 x 4 lanes, 4-element words; tiles 4 x 8 x 4 x 8
    engine = EngineShape("winograd", 4, 4, 4, 1000, 1000, 1000, 6, tile=2)
    layer = NetLayer("winograd", 8, 8, 8, 8, 3, 3, 1, 1)
    trips = network_trips(engine, layer, Tiles(4, 8, 4, 8))
    # 2 output-channel tiles x 2 row tiles = 4 steps; the box (4+2) x (8+2) pixels of 2 channel groups, a word each
    assert trips["steps"] == 4 and trips["read_in"] == 4 * 60 * 2
    # 8 patches of 2x2 a tile, each of 2 channel groups transformed once a step
    assert trips["transform_in"] == 4 * 2 * 8 and trips["in_rows"] == 16
    # a weight row is 16 elements x 4 x 4 lanes = 64 words; 1 output group x 2 input groups a step
    assert trips["read_w"] == 4 * 2 * 64 and trips["w_rows"] == 2
    # the PE loop: 1 x 2 groups of max(8 patches, distance 6); the output transform a patch row (2 pixels) a cycle
    assert trips["compute"] == 4 * 2 * 8 and trips["transform_out"] == 4 * 8 * 2 and trips["out_rows"] == 8
    assert trips["tile_rows"] == 32 and trips["write"] == 64 * 2 and trips["bias"] == 2
    # cycles with no latency: a step is its read (6 box rows of 20 words and the loop's 12 cycles, then 16 patches
    # and the transform's 5 stages: 153), against the weights' 128 words and the PE's 2 x 8 + 10; the output tile's
    # write (32 pixels of a word, and 12) against its transform (8 patches x 2 rows + 5). The first box, then a step
    # with no box read beside
    # it (the layer's last, charged at its weights' 128 words: an upper bound, two rows of them come during the
    # box), each other step at its read, the last tile's transform and write, 2 parameter words and the 32-word
    # descriptor
    t = {k: np.array([v]) for k, v in Tiles(4, 8, 4, 8).__dict__.items()}
    cycles = layer_cycles(engine, layer, t, clock_hz=100e6, elem_bytes=4, read_floor_ns=0.0, write_floor_ns=0.0,
                          latency_ns=0.0, port_gbps=1e3, depth=10, transform_depth=5)
    assert cycles[0] == pytest.approx(153 + 128 + 3 * 153 + 21 + 32 + 12 + 2 + 32)
    # the engine that transforms its weights reads a 3x3 layer's taps: 9 lane grids a row, 36 words, not 64
    taps = EngineShape("winograd", 4, 4, 4, 1000, 1000, 1000, 6, tile=2, w_transform=True)
    assert network_trips(taps, layer, Tiles(4, 8, 4, 8))["read_w"] == 4 * 2 * 36
    point = network_trips(taps, NetLayer("winograd", 8, 8, 8, 8, 1, 1), Tiles(4, 8, 8, 8))
    assert point["read_w"] == 2 * 2 * 4
    # a 1x1 layer's blocks of 4x4 pixels leave a pixel a cycle (their rows do not align with the 2 banks by pixel):
    # 2 output-channel tiles of 4 blocks
    assert point["transform_out"] == 2 * 4 * 16


def test_the_small_networks_layers_run_through_the_winograd_engine_against_torch(tmp_path):
    model, x, layers, design, project, _ = _small_run(tmp_path, algorithm="winograd", board="vu9p")
    engines = [(p.layer.engine, p.layer.R) for p in design.layers]
    # the 3x3 stride-1 layer (c4, with its residual) by F(2x2); in the pointwise mode the image's layer (im2col
    # on the host), the 1x1 layer and the linear layer (one pixel: a tile of part of a block); the stride-2
    # layer stays on the grid, the depthwise on its engine
    assert engines == [("winograd", 1), ("depthwise", 3), ("winograd", 1), ("winograd", 3), ("grid", 3),
                       ("winograd", 1)]
    assert design.layers[5].tiles.th == design.layers[5].tiles.tw == 1
    assert design.engines["winograd"].tile == 2 and design.engines["winograd"].pointwise
    assert design.layers[3].shape.engine == "grid"  # each layer keeps its own shape
    result = csim(project)
    assert result.passed and result.mismatches == 0, result.output[-2000:]
    assert check_trips(project, result.output) == []
    report = lint_network(project)
    assert report.ok, [str(f) for f in report.findings]
    e = design.engines["winograd"]
    # the grid's lanes, the depthwise engine's (each a 3×3 window's 9 taps), and 16 grids of the Winograd engine's
    grid, dw = design.engines["grid"], design.engines["depthwise"]
    assert dw.lane_sums == 9
    assert report.mul_per_iteration == grid.out_lanes * grid.in_lanes + dw.out_lanes * 9 + 16 * e.out_lanes * e.in_lanes
    record = json.loads((project / "design.json").read_text())["design"]
    wino = next(e for e in record["engines"] if e["kind"] == "winograd")
    assert wino["multiply_saving"] == 2.25 and 0 < wino["error"] < 1e-5


@pytest.mark.parametrize("dtype, tile", [("float32", 2), ("int8", 2), ("int8", 4)])
def test_a_winograd_layers_clamp_binds_in_the_write_loop_without_a_residual(tmp_path, dtype, tile):
    """The write process has two loops, with a residual and without, each its own epilogue. The small network's
    Winograd layer has a residual; here a 3×3 stride-1 layer's ReLU6 saturates with none beside it (``Clamped``):
    C-simulated against torch (int8: the quantised reference, bit for bit), the clamp binding on a part of its
    outputs, every process's trips the model's and the lint clean."""
    *_, design, project, run = _small_run(tmp_path, dtype, algorithm="winograd", board="vu9p", tile=tile,
                                          clamped=True)
    (wino,) = [r for r in run.layers if r.placed.layer.engine == "winograd" and r.placed.layer.R == 3]
    assert wino.residual is None and wino.activation[1] == 6.0  # ReLU6: the clamp's upper bound
    top = wino.quant["qhi"] if dtype == "int8" else 6.0
    assert 0.01 < float(np.mean(np.asarray(wino.reference) == top)) < 0.9  # it binds (on dozens), not everywhere
    result = csim(project)
    assert result.passed and result.mismatches == 0, result.output[-2000:]
    assert dtype == "float32" or result.max_abs_error == 0.0
    assert check_trips(project, result.output) == [] and lint_network(project).ok


def test_the_small_network_in_int8_runs_bit_exact_through_winograd(tmp_path):
    """int8 F(2x2): int16 transforms, the weights' taps transformed by the engine (times 2² to be integers), int32
    sums, the output divided by 4 exactly (a shift), then the same requantisation as direct: the direct integer
    reference, bit for bit."""
    *_, design, project, run = _small_run(tmp_path, "int8", algorithm="winograd")
    e = design.engines["winograd"]
    assert e.w_transform and e.row_grids(3) == 9
    # the host lays out the taps as int8: 9 lane grids a 3x3 layer's row, one a 1x1 layer's, the 3x3 layer's
    # first row its first output and input lanes' tap (0, 0), then tap (0, 1)
    from hetero_dse.hls.network_layout import _weight_blocks

    record = json.loads((project / "design.json").read_text())["design"]
    assert [x["w_transform"] for x in record["engines"] if x["kind"] == "winograd"] == [True]
    for r in run.layers:
        if r.placed.layer.engine == "winograd":
            blocks, _ = _weight_blocks(r, design)
            layer, t = r.placed.layer, r.placed.tiles
            assert blocks.dtype == np.int8
            assert blocks.size == -(-layer.K // t.tk) * t.tk * -(-layer.C // t.tc) * t.tc * e.row_grids(layer.R)
            if layer.R == 3:
                w = np.asarray(r.weight)
                grid = e.out_lanes * e.in_lanes
                assert blocks[0] == w[0, 0, 0, 0] and blocks[grid] == w[0, 0, 0, 1]
                assert blocks[1] == w[0, 1, 0, 0] and blocks[e.in_lanes] == w[1, 0, 0, 0]
    result = csim(project)
    assert result.passed and result.max_abs_error == 0.0, result.output[-2000:]
    assert check_trips(project, result.output) == [] and lint_network(project).ok
    assert json.loads((project / "design.json").read_text())["design"]["engines"][-1]["error"] == 0.0
    # a project written before the engine transformed its weights is refused in one sentence, not linted wrong
    from hetero_dse.hls.cparse import LintError

    record = json.loads((project / "design.json").read_text())
    record["design"]["engines"][-1]["w_span"] = 2
    (project / "design.json").write_text(json.dumps(record))
    with pytest.raises(LintError, match="older hetero_dse"):
        lint_network(project)


def test_f4x4_runs_in_float_against_torch(tmp_path):
    # F(4x4)'s transforms take constant multiplies; 2 x 2 lanes, for its transforms fill a device at more
    *_, design, project, _ = _small_run(tmp_path, algorithm="winograd", board="vu9p", lanes=(2,), tile=4, taps=1)
    assert design.engines["winograd"].tile == 4
    result = csim(project)
    assert result.passed, result.output[-2000:]
    assert check_trips(project, result.output) == [] and lint_network(project).ok


@pytest.mark.parametrize("mutant, check", [
    # a sign of the input transform flipped: the output is wrong
    (("const wino_tr_t s1 = x[0][0] - x[2][0];", "const wino_tr_t s1 = x[0][0] + x[2][0];"), "csim"),
    # the output divided by 2 instead of 4: wrong by twice
    (("(acc_t)(y[i][j] >> 2)", "(acc_t)(y[i][j] >> 1)"), "csim"),
    # the engine's weight transform: a lane's taps taken transposed, or an element scaled twice: wrong products
    (("tap[r / 3][r % 3] = ", "tap[r % 3][r / 3] = "), "csim"),
    (("y[1][0] = (s2 * 2);", "y[1][0] = (s2 * 4);"), "csim"),
    # an add of the weight transform bound to no core, or its taps in a RAM: the lint
    (("static void wino_w_transform", "  #pragma HLS BIND_OP variable=s14 op=add impl=fabric\n", ""), "lint"),
    (("            #pragma HLS ARRAY_PARTITION variable=tap type=complete dim=0\n", ""), "lint"),
    # the host's layout of the taps in the port's row and the engine's reading of them disagree
    (("raw[r * ", "raw[(8 - r) * "), "csim"),
    # an operation of the output transform bound to no core
    (("  #pragma HLS BIND_OP variable=s24 op=sub impl=fabric\n", ""), "lint"),
    # the box in one bank along a patch's rows: a patch would take four cycles to read
    (("  #pragma HLS ARRAY_PARTITION variable=box type=complete dim=2\n", ""), "lint"),
    # the accumulation's dependence distance shorter than the model's
    (("type=inter direction=RAW dependent=true distance=3", "type=inter direction=RAW dependent=true distance=2"),
     "lint"),
    # the dependence declared false: Vitis would drop the read-modify-write hazard, which no C-simulation sees
    (("type=inter direction=RAW dependent=true distance=3", "type=inter direction=RAW dependent=false distance=3"),
     "lint"),
    # the output transform's pixels in a RAM: m² writes an iteration on two ports, II 1 lost
    (("    #pragma HLS ARRAY_PARTITION variable=pix type=complete\n", ""), "lint"),
])
def test_each_winograd_check_fails_when_the_code_is_broken_on_purpose(tmp_path, mutant, check):
    project = _small_run(tmp_path, "int8", algorithm="winograd")[4]
    if len(mutant) == 3 or mutant[0].startswith("type=inter"):  # in one function: the Winograd engine's, not the grid's
        where, *mutant = mutant if len(mutant) == 3 else ("static void wino_compute", *mutant)
        _mutate(project, *mutant, after=where)
    else:
        _mutate(project, *mutant)
    if check == "lint":
        assert not lint_network(project).ok
        return
    assert not csim(project).passed


@pytest.mark.parametrize("mutant, check", [
    (None, None),
    # the row leaving not divided: 9 times the sum
    (("wino_divide(pix[(e % 4) * 4 + l / 4][l % 4]);", "pix[(e % 4) * 4 + l / 4][l % 4];"), "csim"),
    # 9's inverse off by 2
    (("(unsigned)x * 954437177u;", "(unsigned)x * 954437179u;"), "csim"),
    # Bᵀ's 5 taken as 4: a wrong transformed input
    (("const wino_tr_t s5 = x[2][0] * 5;", "const wino_tr_t s5 = x[2][0] * 4;"), "csim"),
    # a shared pair's difference taken as its sum: two rows of Bᵀ alike
    (("const wino_tr_t s9 = s1 - s2;", "const wino_tr_t s9 = s1 + s2;"), "csim"),
    # the sums typed narrower than the model's 38 bits: the lint (the small network's sums would not show it)
    (("typedef ap_int<38> wino_m_t;", "typedef ap_int<36> wino_m_t;"), "lint"),
    # the division's multiply bound to no core (Vitis free to take DSPs), the division not on every lane of the
    # row leaving, or on every pixel of the patch (16 dividers a lane where the model charges 4: a row's)
    (("wraps\n  #pragma HLS BIND_OP variable=s1 op=mul impl=fabric\n", "wraps\n"), "lint"),
    (("divide_lane: for (int l = 0; l < 16; ++l)", "divide_lane: for (int l = 0; l < 8; ++l)"), "lint"),
    (("wino_divide(pix[(e % 4) * 4 + l / 4][l % 4]);", "pix[(e % 4) * 4 + l / 4][l % 4];",
      "pix[i * 4 + j][l] = (acc_t)(unsigned)(y[i][j] >> 6);",
      "pix[i * 4 + j][l] = wino_divide((acc_t)(unsigned)(y[i][j] >> 6));"), "lint"),
    # the tree's sum declared narrower than the model's 38 bits: C-simulation of small values passes, the lint not
    (("const wino_m_t pair = prod[q] + prod[q + h];", "const int pair = prod[q] + prod[q + h];"), "lint"),
    # the PE array's chain of DSP multiply-adds: a product dropped from the sum, the multiply bound to a core (no
    # DSP match with the add), the expression balanced (a fabric tree where the model has DSP post-adders)
    (("sum = sum + (wino_m_t)(a[x * 4 + q]", "sum = (wino_m_t)(a[x * 4 + q]"), "csim"),
    (("const int q = c * 4 + k;\n                  sum = sum", "const int q = c * 4 + k;\n"
      "                  #pragma HLS BIND_OP variable=sum op=mul impl=dsp\n                  sum = sum"), "lint"),
    (("                #pragma HLS EXPRESSION_BALANCE off\n                wino_m_t sum",
      "                wino_m_t sum"), "lint"),
    # the chain's sum bound to a core where it is declared (no DSP match), or the accumulation bound to none (a
    # single chain a lane: the tree's pragma still written, its loop never run)
    (("                wino_m_t sum = 0;\n", "                wino_m_t sum = 0;\n"
      "                #pragma HLS BIND_OP variable=sum op=add impl=fabric\n"), "lint"),
    (("static void wino_compute", "              #pragma HLS BIND_OP variable=acc op=add impl=fabric\n", ""), "lint"),
])
def test_int8_f4x4_runs_bit_exact_and_each_check_fails_when_broken(tmp_path, mutant, check):
    """int8 F(4×4): 16-bit transformed inputs, 18-bit transformed weights, sums and the output transform modulo
    2^38, the shift by 6 and the division by 9 as the pixel leaves: the small network bit for bit, the trips the
    model's, the lint clean; then each defect put in on purpose caught."""
    *_, design, project, _ = _small_run(tmp_path, "int8", algorithm="winograd", board="vu9p", lanes=(2, 4), tile=4)
    assert design.engines["winograd"].tile == 4 and design.engines["winograd"].w_transform
    if mutant is None:
        result = csim(project)
        assert result.passed and result.max_abs_error == 0.0, result.output[-2000:]
        assert check_trips(project, result.output) == [] and lint_network(project).ok
        return
    if len(mutant) == 3:  # in one function: the Winograd engine's, not the grid's
        where, old, new = mutant
        _mutate(project, old, new, after=where)
    else:
        for old, new in zip(mutant[::2], mutant[1::2], strict=True):
            _mutate(project, old, new)
    if check == "lint":
        assert not lint_network(project).ok
    else:
        assert not csim(project).passed


def test_a_winograd_tile_that_is_not_whole_patches_fails_the_lint(tmp_path):
    from hetero_dse.hls.network_run import FIELDS

    project = _small_run(tmp_path, "int8", algorithm="winograd")[4]
    rows = json.loads((project / "design.json").read_text())["table"]
    table = np.fromfile(project / "data" / "table.bin", dtype=np.int32).reshape(len(rows), -1)
    table[3, FIELDS.index("th")] -= 1
    table.tofile(project / "data" / "table.bin")
    findings = [str(f) for f in lint_network(project).findings]
    assert any("layer 3" in f and "whole 2×2 patches" in f for f in findings), findings


def test_which_layers_the_winograd_engine_runs():
    conv = LayerShape("grid", 64, 64, 28, 28, 3, 3, 1, 1)
    assert winograd_tiles(conv, "float32") == (2, 4) and winograd_tiles(conv, "int8") == (2, 4)
    # in the pointwise mode, any tile: a 1x1 layer, a linear layer, the image's layer as im2col
    for pointwise in (LayerShape("grid", 64, 64, 28, 28, 1, 1), LayerShape("grid", 512, 10, 1, 1),
                      LayerShape("grid", 3, 64, 224, 224, 7, 7, 2, 3, from_host=True)):
        assert winograd_tiles(pointwise, "int8") == (2, 4)
    for other in (LayerShape("grid", 64, 64, 28, 28, 3, 3, 2, 1),  # strided
                  LayerShape("grid", 64, 64, 28, 28, 1, 1, 2),  # a strided 1x1
                  LayerShape("grid", 64, 64, 28, 28, 5, 5, 1, 2),
                  LayerShape("depthwise", 64, 64, 28, 28, 3, 3, 1, 1),
                  LayerShape("grid", 16, 64, 28, 28, 3, 3, 1, 1, from_host=True)):  # from the host, not im2col
        assert winograd_tiles(other, "float32") == ()
    # int8 sums of 2^23 channels pass int32: refused (F(2×2) sums them so; F(4×4) returns the convolution's sum)
    assert winograd_tiles(LayerShape("grid", 2 ** 23, 64, 8, 8, 3, 3, 1, 1), "int8") == ()
    # F(4×4) keeps its sums modulo 2^38, exact while the convolution's own sum fits 32 bits: 9·C·2^14 < 2^31
    assert winograd_tiles(LayerShape("grid", 14563, 64, 8, 8, 3, 3, 1, 1), "int8") == (4,)
    assert winograd_tiles(LayerShape("grid", 14564, 64, 8, 8, 3, 3, 1, 1), "int8") == ()


def test_the_algorithm_is_chosen_by_latency_and_bad_choices_are_one_sentence():
    layers = [(LayerShape("grid", 64, 64, 28, 28, 3, 3, 1, 1, name="c"), 3),
              (LayerShape("grid", 64, 10, 1, 1, name="fc"), 1)]
    board = load_board("zcu102")
    direct = explore_network(layers, board, "int8", algorithm="direct")
    wino = explore_network(layers, board, "int8", algorithm="winograd")
    auto = explore_network(layers, board, "int8")
    assert "winograd" not in direct.engines and wino.layers[0].layer.engine == "winograd"
    # every layer on the Winograd engine alone (the linear one in its pointwise mode), or with a grid beside it for
    # the linear layer (``winograd_layouts``), which here beats both
    assert set(auto.engines) == {"grid", "winograd"} and auto.latency_s < min(direct.latency_s, wino.latency_s)
    assert [p.layer.engine for p in auto.layers] == ["winograd", "grid"]
    with pytest.raises(HeteroDSEError, match="unknown algorithm 'fft'"):
        explore_network(layers, board, "int8", algorithm="fft")
    with pytest.raises(HeteroDSEError, match="no layer of this network runs on the Winograd engine"):
        explore_network([(LayerShape("grid", 64, 64, 28, 28, 3, 3, 2, 1), 1)], board, "int8", algorithm="winograd")


def test_explore_a_model_with_winograd_on_runs_every_layer_on_one_winograd_array(write, cli, tmp_path):
    path = write("tiny.py", TINY_MODEL)
    out = tmp_path / "o"
    r = cli("explore", "--model", path, "--board", "vu9p", "--budget", "200", "--out", out, "--csim",
            "--winograd", "on", "--no-history")
    assert r.code == 0, r.err
    (shared,) = json.loads((out / "report.json").read_text())["model"]["networks"]
    # the image's layer (im2col: pointwise), the 3x3 layer and the linear layer (pointwise): no grid at all
    assert [e["kind"] for e in shared["engines"]] == ["winograd"]
    assert [layer["engine"] for layer in shared["layers"]] == ["winograd"] * 3
    assert shared["check"]["passed"] is True and shared["check"]["mismatches"] == 0
    assert shared["check"]["trips"] == "every process ran the trips the model charges"
    assert cli("lint", out / shared["directory"]).code == 0
    assert "3 layer(s) on a Winograd F(2×2) engine" in r.out
    assert "a Winograd F(2×2, 3×3) engine of" in (out / "report.md").read_text()
    # one operator that Winograd does not take: asked for on the board, it stays direct and says nothing of it
    r = cli("explore", "--op", "gemm", "--board", "vu9p", "--winograd", "on", "--out", tmp_path / "x")
    assert r.code == 0, r.err
    assert json.loads((tmp_path / "x" / "report.json").read_text())["explorations"][0]["winograd"] is None


@pytest.mark.parametrize("dtype, board", [("float32", "vu9p"), ("int8", "zcu102")])
def test_the_winograd_engine_reads_two_weight_ports_bit_for_bit(tmp_path, dtype, board):
    """The Winograd engine's weight process takes a word from each of two ports a cycle, as the grid's: the same
    outputs (int8 bit for bit, float32 against torch), its read_w loop half the trips where a row is two words or
    more (the C-simulation counts them), the lint clean; one port read twice where the model has two is caught by
    the lint and the run."""
    from dataclasses import replace

    from cost_models.fpga_network import network_trips

    *_, design, project, _ = _small_run(tmp_path, dtype, algorithm="winograd", board=board, weight_ports=(2,))
    e = design.engines["winograd"]
    assert e.w_ports == 2 and design.w_ports == 2
    result = csim(project)
    assert result.passed and result.mismatches == 0, result.output[-2000:]
    assert check_trips(project, result.output) == [] and lint_network(project).ok
    halved = 0
    for p in design.layers:
        if p.layer.engine == "winograd":
            alone = network_trips(replace(e, w_ports=1), p.layer, p.tiles)["read_w"]
            two = network_trips(e, p.layer, p.tiles)["read_w"]
            # a row of one word is an iteration either way (padded to a word from each port: ``row_reads``)
            assert two == alone if e.row_words(p.layer) == 1 else two * 2 == alone
            halved += two * 2 == alone
    assert halved
    source = (project / "src" / "kernel.cpp").read_text()
    at = source.index("static void wino_read_w")
    wrong = source[at:].replace("const wword_t v1 = wgt1[base + it];", "const wword_t v1 = wgt[base + it];", 1)
    (project / "src" / "kernel.cpp").write_text(source[:at] + wrong)
    assert any("wino_read_w" in str(f) and "weight port" in str(f) for f in lint_network(project).findings)
    assert not csim(project).passed
