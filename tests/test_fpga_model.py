"""The FPGA model checked against figures computed by hand (vu9p: 250 MHz, 16 GB/s per DDR channel)."""

from __future__ import annotations

import numpy as np
import pytest

from cost_models.fpga import FpgaModel
from cost_models.io_bounds import conv_window, io_lower_bound
from hetero_dse.analysis import analyze
from hetero_dse.board import load_board
from hetero_dse.ops import get_builtin
from hetero_dse.space.fpga import FpgaSpace
from hetero_dse.space.point import Point

NS = 1e-9


def design(op_name: str, params: dict, knobs: dict) -> tuple[FpgaSpace, FpgaModel, dict]:
    op = get_builtin(op_name).instantiate(params)
    space = FpgaSpace(analyze(op), load_board("vu9p"), ["float32"], [250.0])
    model = FpgaModel(space)
    return space, model, model.describe(space.encode(Point(knobs)))


def test_gemm_design_by_hand():
    # GEMM 64^3, tiles i=16 j=16 k=64, PE = j x16 * k x4, tile loops i then j.
    space, model, d = design("gemm", {"M": 64, "N": 64, "K": 64}, {
        "tile.i": 16, "tile.j": 16, "tile.k": 64, "unroll.i": 1, "unroll.j": 16, "unroll.k": 4,
        "order": ("i", "j"), "dtype": "float32", "clock_mhz": 250.0})
    a, b, o = d["buffers"]
    # A[i, k]: 16x64 box, reloaded only when i advances (4 times); one 1024-element run = 64 beats = 256 ns,
    # the same as 4096 B at 16 GB/s.
    assert (a["shape"], a["loads"], a["tile_bytes"]) == ([16, 64], 4, 4096)
    assert a["seconds_per_load"] == pytest.approx(256 * NS)
    # B[k, j]: 64 rows of 16 -> 64 beats = 256 ns; it changes with every tile (16 loads).
    assert (b["shape"], b["loads"]) == ([64, 16], 16)
    assert b["seconds_per_load"] == pytest.approx(256 * NS)
    # O: 16 rows of 16 -> 16 beats = 64 ns per tile, 16 tiles.
    assert (o["shape"], o["loads"], o["seconds_per_load"]) == ([16, 16], 16, pytest.approx(64 * NS))
    stages = d["stages_s"]
    assert stages["read A"] == pytest.approx(4 * 256 * NS)
    assert stages["read B"] == pytest.approx(16 * 256 * NS)
    assert stages["write O"] == pytest.approx(16 * 64 * NS)
    # Compute: 16*1*16 = 256 iterations per tile; the fp32 sum recurs every 16 spatial iterations >= the
    # 5-cycle fadd at 250 MHz, so II = 1; depth = fmul 4 + fadd 5 * (1 + log2 4) + 4 = 23 -> 279 cycles.
    assert (d["ii"], d["accumulation_distance"], d["pipeline_depth"]) == (1, 16, 23)
    assert d["compute_cycles_per_tile"] == 279
    assert stages["compute"] == pytest.approx(16 * 279 / 250e6)
    assert d["bound"] == "compute"
    # Latency: the compute total plus fill (first read, 256 ns) and drain (last write, 64 ns).
    latency = 16 * 279 / 250e6 + 256 * NS + 64 * NS
    assert d["latency_s"] == pytest.approx(latency)
    assert d["gops"] == pytest.approx(2 * 64**3 / latency / 1e9)
    assert d["peak_gops"] == pytest.approx((4788 // 5) * 2 * 250e6 / 1e9)
    # Resources: 64 lanes x 5 DSP; A: 16 banks x 64 words -> 1 BRAM18K each, double-buffered;
    # B: 64 banks x 16 words and O: 16 banks x 16 words -> LUTRAM (2 LUT per 64x1 bit) x 32 bits.
    assert [bf["partition"] for bf in d["buffers"]] == [[1, 16], [4, 16], [1, 16]]
    assert [bf["storage"] for bf in d["buffers"]] == ["bram", "lutram", "lutram"]
    res = d["resources"]
    assert res["dsp"] == 320
    assert res["bram18k"] == 16 * 2
    lutram = 64 * 2 * 64 + 16 * 2 * 64
    assert res["lut"] == lutram + 64 * (100 + 220) + 3000 + 3 * 1600
    assert res["ff"] == 64 * (150 + 320) + 4000 + 3 * 2400
    assert d["traffic_bytes"] == 4 * 4096 + 16 * 4096 + 16 * 1024
    assert d["feasible"]


def test_conv2d_design_by_hand():
    # conv2d C=4 8x8 K=8 3x3 stride 1 pad 1; tiles k=8 i=4 j=8 (two tiles along i), PE = k x4 * j x8.
    space, model, d = design("conv2d", {"C": 4, "H": 8, "W": 8, "K": 8, "kernel": 3, "padding": 1}, {
        "tile.b": 1, "tile.k": 8, "tile.i": 4, "tile.j": 8, "tile.rc": 4, "tile.rx": 3, "tile.ry": 3,
        "unroll.b": 1, "unroll.k": 4, "unroll.i": 1, "unroll.j": 8, "unroll.rc": 1, "unroll.rx": 1, "unroll.ry": 1,
        "order": ("b", "k", "i", "j"), "dtype": "float32", "clock_mhz": 250.0})
    pad, w, o = d["buffers"]
    # pad[b, rc, i + rx, j + ry]: box 1x4x6x10 (i: 4 + 3 - 1; j: 8 + 3 - 1 = the whole padded row). A row of
    # 10 fits a 16-float word, two rows do not: 10 elements a cycle, 4*6 = 24 cycles = 96 ns; the row dimension
    # is completely partitioned for it. Reloaded when i advances.
    assert (pad["shape"], pad["loads"], pad["partition"], pad["storage"]) == ([1, 4, 6, 10], 2, [1, 1, 1, 10], "lutram")
    assert (pad["split"], pad["lanes"], pad["cycles_per_load"]) == (2, 1, 24)
    assert pad["seconds_per_load"] == pytest.approx(96 * NS)
    # W: the whole 8x4x3x3 tensor, loaded once; a 3x3 kernel (9 contiguous floats) per cycle: 32 cycles.
    assert (w["shape"], w["loads"], w["partition"]) == ([8, 4, 3, 3], 1, [4, 1, 3, 3])
    assert (w["split"], w["cycles_per_load"]) == (1, 32) and w["seconds_per_load"] == pytest.approx(128 * NS)
    # O tile 1x8x4x8 of 1x8x8x8: rows of 8 contiguous, two rows a word: 16 cycles = 64 ns.
    assert (o["shape"], o["loads"], o["partition"]) == ([1, 8, 4, 8], 2, [1, 4, 2, 8])
    assert (o["split"], o["lanes"], o["cycles_per_load"]) == (2, 2, 16)
    assert o["seconds_per_load"] == pytest.approx(64 * NS)
    # 2*4*1*4*3*3 = 288 iterations per tile, accumulation distance 8 >= 5: II 1, depth 4 + 5 + 4 = 13.
    assert (d["ii"], d["accumulation_distance"], d["pipeline_depth"], d["compute_cycles_per_tile"]) == (1, 8, 13, 301)
    latency = 2 * 301 / 250e6 + 128 * NS + 64 * NS
    assert d["latency_s"] == pytest.approx(latency)
    assert d["gops"] == pytest.approx(2 * 8 * 8 * 8 * 4 * 9 / latency / 1e9)
    res = d["resources"]
    assert res["dsp"] == 32 * 5 and res["bram18k"] == 0
    # LUTRAM: pad 10 banks x 24 words, W 36 banks x 8 words, O 64 banks x 4 words: 2 LUTs x 32 bits each,
    # double-buffered
    assert res["lut"] == (10 + 36 + 64) * 2 * 64 + 32 * 320 + 3000 + 3 * 1600


def test_transfer_plan_model_and_code_agree():
    """The vectorised plan in the model and the scalar one the code generator prints are the same."""
    from cost_models.transfer import transfer_plan

    op = get_builtin("conv_transpose2d").instantiate(shape="small:s2")
    space = FpgaSpace(analyze(op), load_board("vu9p"), ["float32", "int8"], [250.0])
    model = FpgaModel(space)
    rows = space.sample(300, np.random.default_rng(4))
    r = model.evaluate(rows, detail=True)
    for g, buf in zip(model.ports, r["buffers"], strict=True):
        for i in range(len(rows)):
            word = 64 // (1 if space.dtypes[rows[i, space.col_dtype]] == "int8" and g is not space.write else 4)
            plan = transfer_plan([int(x) for x in buf["width"][i]], list(g.shape), word)
            assert (plan.split, plan.lanes, plan.cycles) == (buf["split"][i], buf["lanes"][i], buf["cycles"][i])


def test_accumulation_too_close_raises_the_ii():
    # Only 2 spatial iterations between updates of one fp32 accumulator: II = ceil(5 / 2) = 3.
    space, model, d = design("gemm", {"M": 4, "N": 2, "K": 64}, {
        "tile.i": 1, "tile.j": 2, "tile.k": 64, "unroll.i": 1, "unroll.j": 1, "unroll.k": 1,
        "order": ("i", "j"), "dtype": "float32", "clock_mhz": 250.0})
    assert (d["accumulation_distance"], d["add_latency"], d["ii"]) == (2, 5, 3)
    # int8 accumulates in int32 in one cycle: II 1 whatever the distance.
    op = get_builtin("gemm").instantiate({"M": 4, "N": 2, "K": 64, "dtype": "int8"})
    space = FpgaSpace(analyze(op), load_board("vu9p"), ["int8"], [250.0])
    row = space.encode(Point({**{k: v for k, v in space.decode(np.zeros(space.num_knobs, dtype=int)).items()},
                              "tile.j": 2, "tile.k": 64, "dtype": "int8"}))
    assert FpgaModel(space).describe(row)["ii"] == 1


def test_every_design_meets_its_ii():
    """The rule the generated code relies on: distance x II >= fadd latency whenever the sum is carried."""
    op = get_builtin("conv2d").instantiate(shape="small:s2")
    space = FpgaSpace(analyze(op), load_board("vu9p"), ["float32"], [250.0, 300.0])
    model = FpgaModel(space)
    rows = space.sample(5000, np.random.default_rng(0))
    r = model.evaluate(rows, detail=True)
    carried = r["reduce_outer"] > 1
    assert (r["spatial_iters"][carried] * r["ii"][carried] >= r["add_latency"][carried]).all()
    assert (r["ii"][~carried] == 1).all()


def test_over_cap_is_infeasible_and_says_which():
    space, model, d = design("gemm", {"M": 64, "N": 64, "K": 64}, {
        "tile.i": 64, "tile.j": 64, "tile.k": 64, "unroll.i": 1, "unroll.j": 64, "unroll.k": 16,
        "order": ("i", "j"), "dtype": "float32", "clock_mhz": 250.0})
    # 1024 lanes x 5 DSP = 5120 > 70 % of 6840.
    assert not d["feasible"] and d["latency_s"] is None
    assert set(d["over_cap"]) == {"dsp"} and d["over_cap"]["dsp"] == pytest.approx(5120 / 4788)


def test_io_lower_bound_direct_convolution():
    op = get_builtin("conv2d").instantiate(shape="yolo:C8")
    a = analyze(op)
    w = conv_window(a)
    assert w is not None and w.ratio == 9.0 and set(w.output_loops) == {"i", "j"} and w.channel_loops == ("k",)
    bound = io_lower_bound(a, onchip_words=4096, word_bytes=4, compulsory_bytes=0)
    macs = 3 * 3 * 256 * 28 * 28 * 512
    assert bound.kind.startswith("direct convolution") and bound.bytes == pytest.approx(
        4 * macs / (4 * np.sqrt(2 * 9 * 4096)))
    # GEMM: 2 MACs / sqrt(S), raised to the compulsory traffic when that is larger.
    g = analyze(get_builtin("gemm").instantiate({"M": 64, "N": 64, "K": 64}))
    assert conv_window(g) is None
    small = io_lower_bound(g, onchip_words=64, word_bytes=4, compulsory_bytes=1)
    assert small.kind.startswith("matmul") and small.bytes == pytest.approx(4 * 2 * 64**3 / 8)
    large = io_lower_bound(g, onchip_words=1e9, word_bytes=4, compulsory_bytes=3 * 64 * 64 * 4)
    assert large.kind.startswith("compulsory") and large.bytes == 3 * 64 * 64 * 4


@pytest.mark.parametrize("name", ["gemv", "gemm", "bilinear", "conv1d", "conv_transpose1d", "conv2d",
                                  "conv_transpose2d", "conv3d", "conv_transpose3d", "group_conv2d",
                                  "depthwise_conv2d", "dilated_conv2d", "bcm", "shift_conv2d"])
def test_compiled_kernel_equals_numpy_model(name):
    """The search's fast path (numba) and the numpy model give the same figures for every design."""
    op = get_builtin(name).instantiate(shape="small:s2")
    for board in ("vu9p", "pynq-z2"):  # pynq-z2: no URAM, so some designs are infinitely over that cap
        space = FpgaSpace(analyze(op), load_board(board), ["float32", "int16", "int8"], [100.0, 150.0])
        model = FpgaModel(space)
        rows = space.sample(2000, np.random.default_rng(11))
        fast, ref = model.fast_evaluate(rows), model.evaluate_numpy(rows)
        for key in ("latency_s", "objective", "gops", "roofline", "traffic_bytes", "pe", "ii", "bound", "dsp",
                    "bram18k", "uram", "lut", "ff", "usage", "feasible"):
            np.testing.assert_allclose(np.asarray(fast[key], float), np.asarray(ref[key], float), rtol=1e-12,
                                       err_msg=f"{name} on {board}: {key}")
