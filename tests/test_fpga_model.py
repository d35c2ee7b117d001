"""The FPGA model checked against figures computed by hand (vu9p: 250 MHz, 16 GB/s per DDR channel)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cost_models.fpga import FpgaModel
from cost_models.fpga_describe import describe
from cost_models.io_bounds import io_lower_bound
from hetero_dse.analysis.window import conv_window
from hetero_dse.analysis import analyze
from hetero_dse.hardware.board import load_board
from hetero_dse.ops import get_builtin
from hetero_dse.space.fpga import FpgaSpace
from hetero_dse.space.point import Point

NS = 1e-9


def design(op_name: str, params: dict, knobs: dict) -> tuple[FpgaSpace, FpgaModel, dict]:
    op = get_builtin(op_name).instantiate(params)
    space = FpgaSpace(analyze(op), load_board("vu9p"), ["float32"], [250.0])
    model = FpgaModel(space.tables)
    return space, model, describe(model, space.encode(Point(knobs)))


def test_gemm_design_by_hand():
    # GEMM 64^3, tiles i=16 j=16 k=64, PE = j x16 * k x4, tile loops i then j.
    space, model, d = design("gemm", {"M": 64, "N": 64, "K": 64}, {
        "tile.i": 16, "tile.j": 16, "tile.k": 64, "unroll.i": 1, "unroll.j": 16, "unroll.k": 4,
        "order": ("i", "j"), "dtype": "float32", "clock_mhz": 250.0})
    a, b, o = d["buffers"]
    # The AXI side (DDR4 defaults): a read burst takes at least 15.6 ns (3.9 cycles at 250 MHz), a write burst
    # 28.6 ns (7.15 cycles); a read process waits a 250 ns round trip (63 cycles) for a block's first word; a
    # port streams 0.87 x 16 GB/s with long bursts.
    read_floor, write_floor, fill = 15.6e-9 * 250e6, 28.6e-9 * 250e6, 63
    # A[i, k]: 16x64 box in 4 banks along k (the k lanes), read as 16 rows of 4 words of 16 floats. Rows are
    # 64 floats apart and tiles 16 rows apart, whole words: no funnel. Each word puts 4 lanes in each bank,
    # so one word every 4 cycles: 16 runs x 16 cycles + the round trip = 319 cycles = 1276 ns, 64 words =
    # 4096 bytes in 16 bursts. Reloaded only when i advances (4 times), so two blocks.
    assert (a["shape"], a["partition"], a["loads"], a["tile_bytes"]) == ([16, 64], [1, 4], 4, 4096)
    assert (a["lanes"], a["word_ii"], a["rows"], a["iterations_per_row"], a["funnel"]) == (16, 4, 16, 4, False)
    assert (a["cycles_per_load"], a["blocks"], a["run_words"], a["bursts_per_load"]) == (16 * 16 + fill, 2, 4, 16)
    assert a["seconds_per_load"] == pytest.approx(319 * 4 * NS)
    # B[k, j]: j completely partitioned (16 banks): a row of 16 is one word, 64 rows, whatever k's 4 banks (a
    # whole word goes to one of them, chosen at run time: 16 lanes x 4 write enables). The rows are 64 floats
    # apart in DDR: 64 runs of one word, each a burst of one beat that takes the read floor, not a cycle:
    # 64 x 3.9 + 63 cycles, with every tile (16 loads).
    assert (b["shape"], b["partition"], b["loads"], b["runtime_banks"]) == ([64, 16], [4, 16], 16, 4)
    assert (b["word_ii"], b["beats_per_load"], b["run_words"], b["bursts_per_load"]) == (1, 64, 1, 64)
    assert b["cycles_per_load"] == int(64 * read_floor + fill)
    assert b["seconds_per_load"] == pytest.approx((64 * read_floor + fill) * 4 * NS)
    # O: 16 rows of 16 -> 16 one-word runs, each a write burst of 7.15 cycles, per tile, 16 tiles; its rows
    # (64) are whole words.
    assert (o["shape"], o["loads"]) == ([16, 16], 16)
    assert o["seconds_per_load"] == pytest.approx(16 * write_floor * 4 * NS)
    assert o["pitch"] == 64 and o["extents"] == [64, 64]
    stages = d["stages_s"]
    one_a, one_b, one_o = 319 * 4 * NS, (64 * read_floor + fill) * 4 * NS, 16 * write_floor * 4 * NS
    assert stages["read A"] == pytest.approx(4 * one_a)
    assert stages["read B"] == pytest.approx(16 * one_b)
    assert stages["write O"] == pytest.approx(16 * one_o)
    # Compute: 16*1*16 = 256 iterations per tile. The output element's read-modify-write recurs every 16
    # iterations over fadd 5 (250 MHz) + LUTRAM read and write 2 = 7 cycles: II 1. Depth: fmul 4 + fadd 5 x
    # (tree of 4 lanes: 2 levels + the accumulation) + 4 = 23 -> 279 cycles per tile.
    assert (d["ii"], d["accumulation_distance"], d["recurrence"], d["pipeline_depth"]) == (1, 16, 7, 23)
    assert d["compute_cycles_per_tile"] == 279
    assert stages["compute"] == pytest.approx(16 * 279 / 250e6)
    # B's one-beat runs make it the bound: after its last block the last tile's compute and write follow
    assert d["bound"] == "read B"
    assert d["compute_start_s"] == pytest.approx(one_a)
    latency = 16 * one_b + 279 / 250e6 + one_o
    assert d["latency_s"] == pytest.approx(latency)
    assert d["gops"] == pytest.approx(2 * 64**3 / latency / 1e9)
    # 256 DSPs in one SLR, and A's element shared by the 16 j lanes (fan-out 16, free): the target clock holds
    assert d["clock"] == {"target_mhz": 250.0, "achieved_mhz": 250.0, "fanout": 16.0, "slrs_spanned": 1,
                          "basis": "estimate"}
    # the DSP roof: a lane's fmul (fulldsp) and fadd (fulldsp) take 2 + 2 DSPs
    assert d["peak_gops"] == pytest.approx((4092 // 4) * 2 * 250e6 / 1e9)  # 70 % of the 5,847 the shell leaves
    # The PE array as the code has it: 64 multiplies; per spatial lane a tree of 3 adders and the
    # accumulation: 16 x 4 = 64 adds. 64 x 2 + 64 x 2 = 256 DSP.
    assert d["units"] == {"mul": 64, "add": 64} and d["resources"]["dsp"] == 256
    # A: 4 banks x 256 words -> 1 BRAM18K each, double-buffered; B: 64 banks x 16 words and O: 16 banks x 16
    # words -> LUTRAM (2 LUT per 64x1 bit) x 32 bits, double-buffered.
    assert [bf["storage"] for bf in d["buffers"]] == ["bram", "lutram", "lutram"]
    res = d["resources"]
    # ... and each of the 3 m_axi ports' burst buffer: 16 bursts of 64 beats of 512 bits, 2 x 15 BRAM18K of 512 x 36
    assert d["axi"] == {"max_burst_beats": 64, "outstanding": 16, "buffer_bram18k_per_port": 30}
    assert res["bram18k"] == 4 * 2 + 3 * 30
    lutram = 2 * (64 + 16) * 2 * 32
    assert res["lut"] == lutram + 64 * 115 + 64 * 219 + 3000 + 3 * 1600 + 16 * 4  # + B's write enables
    assert res["ff"] == 64 * 128 + 64 * 205 + 4000 + 3 * 2400
    assert d["traffic_bytes"] == 4 * 4096 + 16 * 4096 + 16 * 1024
    assert d["feasible"]


def test_conv2d_design_by_hand():
    # conv2d C=4 8x8 K=8 3x3 stride 1 pad 1; tiles k=8 i=4 j=8 (two tiles along i), PE = k x4 * rc x4.
    space, model, d = design("conv2d", {"C": 4, "H": 8, "W": 8, "K": 8, "kernel": 3, "padding": 1}, {
        "tile.b": 1, "tile.k": 8, "tile.i": 4, "tile.j": 8, "tile.rc": 4, "tile.rx": 3, "tile.ry": 3,
        "unroll.b": 1, "unroll.k": 4, "unroll.i": 1, "unroll.j": 1, "unroll.rc": 4, "unroll.rx": 1, "unroll.ry": 1,
        "order": ("b", "k", "i", "j"), "dtype": "float32", "clock_mhz": 250.0})
    pad, w, o = d["buffers"]
    # pad[b, rc, i + rx, j + ry]: box 1x4x6x10 in 4 banks along rc, read from I (8x8 per channel) shifted by
    # the padding. As the operator lays I out, that is 24 runs of 10 floats at II 10 (a row's 10 lanes in
    # one bank), 480 cycles. With the channels moved innermost by the host (b, h, w, c), a run is a row of
    # 10 pixels x 4 channels: the 4 channels fill a word's lanes 4 at a time (packed), so a word holds 4
    # pixels, one bank each per channel bank: II 4. Runs start 12 floats into a word for every tile (rows
    # 32 floats apart, tiles 128), so the funnel is static: 3 words + 1 = 4 iterations, 6 runs: 96 cycles
    # and the 63 of a read's round trip, 24 words = 1536 bytes in 6 bursts; reloaded when i advances.
    assert (pad["shape"], pad["partition"], pad["loads"], pad["storage"]) == ([1, 4, 6, 10], [1, 4, 1, 1], 2, "bram")
    assert pad["layout"] == [0, 2, 3, 1] and (pad["packed"], pad["lanes"], pad["word_offset"]) == (4, 4, 12)
    assert (pad["rows"], pad["iterations_per_row"], pad["word_ii"], pad["funnel"]) == (6, 4, 4, True)
    assert (pad["cycles_per_load"], pad["tile_bytes"], pad["blocks"], pad["bursts_per_load"]) == (96 + 63, 1536, 2, 6)
    # W: the whole 8x4x3x3 tensor in 4x4 banks, loaded once, so one block. As the operator lays it out, its
    # rows of 3 do not divide a word: 96 runs of 3 (funnel, 2 iterations) at II 3 = 576 cycles. With k moved
    # innermost by the host (layout c, ry, rx, k) a run is rx x k = 24 floats: 2 words of 2 rx x 8 k lanes,
    # plus the funnel = 3 iterations; the 8 k lanes fill k's 4 banks twice and rx is not partitioned, so
    # II 4: 12 runs x 3 x 4 = 144 cycles, and the round trip: 207 cycles = 828 ns (each run's 3 words take
    # longer than a burst's floor of 3.9 cycles). The model picks that layout (channels innermost ties and
    # comes later). A word's lanes go to one of rc's 4 banks chosen at run time: 16 elements x 4 enables.
    assert (w["shape"], w["partition"], w["loads"], w["blocks"]) == ([8, 4, 3, 3], [4, 4, 1, 1], 1, 1)
    assert w["layout"] == [1, 2, 3, 0]
    assert (w["rows"], w["iterations_per_row"], w["word_ii"], w["lanes"], w["packed"]) == (12, 3, 4, 2, 8)
    assert w["cycles_per_load"] == 144 + 63 and w["seconds_per_load"] == pytest.approx(828 * NS)
    assert w["runtime_banks"] == 4
    # O: as the operator lays it out, rows of 8 floats padded to a word: 32 words of 8 lanes in one bank each,
    # II 8, 256 cycles. With k moved innermost (the host moves it back after the run), a word holds the 8 k
    # of one pixel, 2 lanes in each of k's 4 banks: II 2, 32 one-word runs each a write burst (7.15 cycles):
    # 228 cycles, and no bank picked at run time.
    assert (o["shape"], o["loads"], o["partition"], o["layout"]) == ([1, 8, 4, 8], 2, [1, 4, 1, 1], [0, 2, 3, 1])
    assert (o["word_ii"], o["cycles_per_load"], o["runtime_banks"]) == (2, int(32 * 28.6e-9 * 250e6), 1)
    assert (o["pitch"], o["extents"], o["beats_per_load"], o["tile_bytes"]) == (16, [1, 8, 8, 16], 32, 2048)
    assert d["bank_mux_luts"] == 16 * 4
    # 2*4*8 spatial x 9 reduce iterations = 576 per tile; the sum recurs every 64 > 7 cycles: II 1;
    # depth 4 + 5 * (2 + 1) + 4 = 23.
    assert (d["ii"], d["accumulation_distance"], d["pipeline_depth"], d["compute_cycles_per_tile"]) == (1, 64, 23, 599)
    # The compute waits for W, loaded whole once (828 ns, more than pad's first block), then the last write.
    latency = 828 * NS + 2 * 599 / 250e6 + 32 * 28.6 * NS
    assert d["latency_s"] == pytest.approx(latency) and d["bound"] == "compute"
    assert d["gops"] == pytest.approx(2 * 8 * 8 * 8 * 4 * 9 / latency / 1e9)
    # 4 spatial lanes x 4 products, trees of 3 adders + the accumulation: 16 fmul + 16 fadd = 64 DSP.
    assert d["units"] == {"mul": 16, "add": 16} and d["resources"]["dsp"] == 64


def test_a_buffer_loaded_once_delays_the_first_compute():
    """Review finding B5: nothing can compute before a once-loaded buffer is whole, whatever bounds the run.

    GEMM 64x64x1024 int8 with all of B (1024x64) on chip, loaded once; A and O stream per row tile."""
    op = get_builtin("gemm").instantiate({"M": 64, "N": 64, "K": 1024, "dtype": "int8"})
    space = FpgaSpace(analyze(op), load_board("vu9p"), ["int8"], [250.0])
    model = FpgaModel(space.tables)
    d = describe(model, space.encode(Point({
        "tile.i": 1, "tile.j": 64, "tile.k": 1024, "unroll.i": 1, "unroll.j": 64, "unroll.k": 1,
        "order": ("i", "j"), "dtype": "int8", "clock_mhz": 250.0})))
    a, b, o = d["buffers"]
    assert (b["loads"], b["blocks"], a["blocks"]) == (1, 1, 2)
    # A's element is broadcast to the 64 j lanes: 0.28 ns a doubling past 16 sinks, 0.56 ns on a 4 ns period
    mhz = 250 / (1 + 250e6 * 0.56e-9)
    assert d["clock"]["achieved_mhz"] == pytest.approx(mhz) and d["clock"]["fanout"] == 64
    # B: rows of 64 int8 = one 512-bit word, one run of 1024 words in 16 bursts of 64, and the round trip:
    # 1087 cycles at the target clock; at the clock achieved the round trip is still 250 ns (55 cycles); the
    # compute starts after it
    assert (b["cycles_per_load"], b["bursts_per_load"]) == (1024 + 63, 16)
    assert b["seconds_per_load"] == pytest.approx(1024 / mhz * 1e-6 + math.ceil(250e-3 * mhz) / mhz * 1e-6)
    assert d["compute_start_s"] == b["seconds_per_load"]
    # each tile: 1024 iterations (the k loop, no reduce lanes): the int32 read-modify-write of the 64-lane
    # output row recurs every iteration over add 1 + register... the row is registers: recurrence 1, II 1
    assert d["recurrence"] == 1 and d["ii"] == 1
    ends = d["compute_start_s"] + d["stages_s"]["compute"] + o["seconds_per_load"]
    assert d["latency_s"] == pytest.approx(max(ends, d["stages_s"]["read A"] + d["stages_s"]["compute"] / 64
                                               + o["seconds_per_load"]))
    # the old fill/drain would have charged only the first tile's reads, not all of B
    assert d["latency_s"] >= 4096 * NS + d["stages_s"]["compute"]


def test_integer_multiplies_take_one_dsp_each():
    """Review finding B4: Vitis does not pack two int8 products into one DSP48E2, and the code does not."""
    for dtype in ("int8", "int16"):
        op = get_builtin("gemm").instantiate({"M": 16, "N": 16, "K": 16, "dtype": dtype})
        space = FpgaSpace(analyze(op), load_board("vu9p"), [dtype], [250.0])
        d = describe(FpgaModel(space.tables), space.encode(Point({
            "tile.i": 16, "tile.j": 16, "tile.k": 16, "unroll.i": 1, "unroll.j": 8, "unroll.k": 4,
            "order": ("i", "j"), "dtype": dtype, "clock_mhz": 250.0})))
        # 32 multiplies at 1 DSP; the 8 x (3 + 1) int32 adds are fabric
        assert d["units"] == {"mul": 32, "add": 32} and d["resources"]["dsp"] == 32


def test_transfers_move_whole_words_into_banks_fixed_at_compile_time():
    """Every lane of a word a read or write process moves lands in a bank fixed at compile time, and the
    generator's view of the plan (cost_models.transfer) is the model's."""
    from cost_models.fpga import ddr_strides_of
    from cost_models.transfer import transfer_plan

    op = get_builtin("conv_transpose2d").instantiate(shape="small:s2")
    space = FpgaSpace(analyze(op), load_board("vu9p"), ["float32", "int8"], [250.0])
    model = FpgaModel(space.tables)
    rows = space.sample(300, np.random.default_rng(4))
    r = model.evaluate(rows, detail=True)
    checked = 0
    for p, (g, buf) in enumerate(zip(model.ports, r["buffers"], strict=True)):
        for i in range(len(rows)):
            if not r["feasible"][i]:
                continue
            perm = model.layouts[p][int(buf["layout"][i])]  # the DDR layout the model chose
            q, lanes = int(buf["split"][i]), int(buf["lanes"][i])
            width = [int(buf["width"][i][d]) for d in perm]
            factor = [int(buf["factor"][i][d]) for d in perm]
            registers = all(f >= w for f, w in zip(factor, width, strict=True))
            if q >= 0 and width[q] > lanes and lanes > 1 and not registers:
                assert lanes % factor[q] == 0
            word = 64 // (1 if space.dtypes[rows[i, space.col_dtype]] == "int8" and g is not space.write else 4)
            shape = [g.access.ddr.shape[d] for d in perm]
            if g is space.write:  # the output padded to whole tiles, its rows to whole words
                shape = [-(-n // w) * w for n, w in zip(shape[:-1], width[:-1], strict=True)] + [int(buf["pitch"][i])]
            plan = transfer_plan(width, shape, factor, word, ddr_strides_of(shape), bool(buf["static"][i]),
                                 int(buf["offset"][i]))
            # the plan's pipeline cycles; the model's besides are the AXI bursts' floors and a read's round trip
            assert (plan.q, plan.lanes, plan.ok) == (q, lanes, True)
            assert plan.cycles == buf["rows"][i] * buf["iterations"][i] * buf["word_ii"][i] <= buf["cycles"][i]
            checked += 1
    assert checked > 100


def test_accumulation_too_close_raises_the_ii():
    # Only 2 spatial iterations between updates of one fp32 output element held in LUTRAM: the recurrence
    # is fadd 5 + read and write 2 = 7 cycles, so II = ceil(7 / 2) = 4.
    space, model, d = design("gemm", {"M": 4, "N": 2, "K": 64}, {
        "tile.i": 1, "tile.j": 2, "tile.k": 64, "unroll.i": 1, "unroll.j": 1, "unroll.k": 1,
        "order": ("i", "j"), "dtype": "float32", "clock_mhz": 250.0})
    assert (d["accumulation_distance"], d["add_latency"], d["recurrence"], d["ii"]) == (2, 5, 7, 4)
    # An int32 accumulation is one cycle, but the same RAM read and write make it 3: II = ceil(3 / 2) = 2.
    op = get_builtin("gemm").instantiate({"M": 4, "N": 2, "K": 64, "dtype": "int8"})
    space = FpgaSpace(analyze(op), load_board("vu9p"), ["int8"], [250.0])
    row = space.encode(Point({"tile.i": 1, "tile.j": 2, "tile.k": 64, "unroll.i": 1, "unroll.j": 1, "unroll.k": 1,
                              "order": ("i", "j"), "dtype": "int8", "clock_mhz": 250.0}))
    d = describe(FpgaModel(space.tables), row)
    assert (d["recurrence"], d["ii"]) == (3, 2)


def test_every_design_meets_its_ii():
    """The rule the generated code relies on: distance x II >= the recurrence whenever the sum is carried."""
    op = get_builtin("conv2d").instantiate(shape="small:s2")
    space = FpgaSpace(analyze(op), load_board("vu9p"), ["float32", "int8"], [250.0, 300.0])
    model = FpgaModel(space.tables)
    rows = space.sample(5000, np.random.default_rng(0))
    r = model.evaluate(rows, detail=True)
    carried = r["reduce_outer"] > 1
    assert (r["spatial_iters"][carried] * r["ii"][carried] >= r["recurrence"][carried]).all()
    assert (r["ii"][~carried] == 1).all()


def test_over_cap_is_infeasible_and_says_which():
    space, model, d = design("gemm", {"M": 64, "N": 64, "K": 64}, {
        "tile.i": 64, "tile.j": 64, "tile.k": 64, "unroll.i": 1, "unroll.j": 64, "unroll.k": 32,
        "order": ("i", "j"), "dtype": "float32", "clock_mhz": 250.0})
    # 2048 lanes x 4 DSP (fmul 2 + fadd 2) = 8192 > 4,092, 70 % of the 5,847 the shell leaves kernels; its
    # 825,496 LUTs pass 70 % of the 869,268 left too
    assert not d["feasible"] and d["latency_s"] is None
    assert d["over_cap"] == pytest.approx({"dsp": 8192 / 4092, "lut": 825496 / 608487})
    # the VU9P's three SLRs hold 5,262.3 DSPs of kernels together (2,265, 1,317 and 2,265 the shell leaves them,
    # less 10 % for the infrastructure): no run of them holds 8,192, said as one SLR more than it has
    assert (d["slrs"], d["slrs_spanned"]) == (3, 4)


def test_a_design_within_one_slr_says_so():
    space, model, d = design("gemm", {"M": 64, "N": 64, "K": 64}, {
        "tile.i": 16, "tile.j": 16, "tile.k": 64, "unroll.i": 1, "unroll.j": 16, "unroll.k": 4,
        "order": ("i", "j"), "dtype": "float32", "clock_mhz": 250.0})
    # 256 DSP, 8 BRAM18K, ~39 k LUT: well inside one SLR (SLR2: 2,038.5 DSP, 1,148.4 BRAM18K, 319,355 LUT of kernels)
    assert (d["slrs"], d["slrs_spanned"]) == (3, 1)


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


def test_sliding_window_and_bank_sets_by_hand():
    """An input that slides along its unrolled dimension is read whole into registers (a window), and a
    partition factor larger than a word's lanes makes consecutive words land in rotating sets of banks."""
    # conv2d C=4 14x14 K=64 3x3 pad 1; tiles k=64 i=2 j=14; PE = k x64 * j x14 = 896 lanes.
    space, model, d = design("conv2d", {"C": 4, "H": 14, "W": 14, "K": 64, "kernel": 3, "padding": 1}, {
        "tile.b": 1, "tile.k": 64, "tile.i": 2, "tile.j": 14, "tile.rc": 4, "tile.rx": 3, "tile.ry": 3,
        "unroll.b": 1, "unroll.k": 64, "unroll.i": 1, "unroll.j": 14, "unroll.rc": 1, "unroll.rx": 1,
        "unroll.ry": 1, "order": ("b", "k", "i", "j"), "dtype": "float32", "clock_mhz": 250.0})
    pad, w, o = d["buffers"]
    # pad[b, rc, i + rx, j + ry]: lane j reads column j + ry, ry walked by the pipeline, so a cyclic factor
    # of 14 would put a lane's bank at run time. The 16 columns are partitioned completely instead (16
    # LUTRAM banks of 4x4 words), read whole each iteration, and each of the 14 lanes picks one of its
    # 16 - 13 = 3 columns: 14 x 32 bits x ceil(3 / 4) = 448 LUTs of multiplexers. A word of 16 columns
    # lands in 16 banks: II 1; 16 runs through the funnel (rows 14 floats apart), each two words, shorter
    # than a read burst's floor (3.9 cycles): 16 x 3.9 + the round trip 63 = 125 cycles.
    assert (pad["shape"], pad["partition"], pad["window"], pad["storage"]) == ([1, 4, 4, 16], [1, 1, 1, 16], [3],
                                                                              "lutram")
    assert (pad["word_ii"], pad["rows"], pad["iterations_per_row"], pad["cycles_per_load"]) == (1, 16, 2, 125)
    # W[k, rc, rx, ry], k moved innermost by the host: runs of 64 k = 4 words into k's 64 banks. Lane l of
    # word j lands in bank 16j + l: the 4 words of a run rotate through 4 sets of 16 banks, one word an
    # iteration at II 1 (each lane enables one of its 4 banks, 16 x 4 = 64 LUTs), 36 runs of one 4-beat burst
    # = 144 cycles for 144 words, and the round trip.
    assert (w["layout"], w["partition"], w["window"]) == ([1, 2, 3, 0], [64, 1, 1, 1], [])
    assert (w["bank_sets"], w["word_ii"], w["iterations_per_row"], w["rows"]) == (4, 1, 4, 36)
    assert (w["cycles_per_load"], w["beats_per_load"], w["tile_bytes"]) == (144 + 63, 144, 144 * 64)
    # O: as the operator lays it out, 128 rows (k x i) of one word each, every one a write burst of its own
    # (7.15 cycles), 915 cycles. With k moved innermost (the host moves it back), a run is a pixel's 64 k: 4
    # words from 4 sets of k's banks, 28 runs, each one burst of 4 beats that takes the write floor: 200
    # cycles; the rows walk j's 14 banks too, so each of a word's 16 lanes selects among 4 x 14 = 56 banks
    # (32 bits x ceil(56 / 4) LUTs)
    assert o["window"] == [] and (o["layout"], o["bank_sets"], o["rows"]) == ([0, 2, 3, 1], 4, 28)
    assert (o["cycles_per_load"], o["runtime_banks"], o["word_ii"]) == (int(28 * 28.6e-9 * 250e6), 56, 1)
    assert d["bank_mux_luts"] == 16 * 4 + 16 * 32 * 14
    # the clock: pad's element goes to the 64 k lanes (0.56 ns more on the 4 ns period), and the 3,584 DSPs are
    # past what two adjacent SLRs hold of kernels (3,223.8: each pair has the shell's SLR1 in it), so they span all
    # three (x 0.5)
    assert d["clock"]["achieved_mhz"] == pytest.approx(250 / (1 + 0.14) * 0.5)
    assert (d["clock"]["fanout"], d["clock"]["slrs_spanned"]) == (64, 3)
    # The window's pick is one more pipeline stage: fmul 4 + fadd 5 (the accumulation) + 4 + 1 = 14.
    assert d["pipeline_depth"] == 14
    # LUTs: the window's 448; pad's funnel (16 lanes x 32 bits x ceil(16 / 4)) 2,048; pad in LUTRAM
    # (2 blocks x 16 banks x 2 x 32 bits) 2,048; O in LUTRAM (2 x 896 banks x 64) 114,688; 896 fmul x 115
    # and 896 fadd x 219; the base and three ports; O's bank multiplexers.
    lut = 448 + 2048 + 2048 + 114688 + 896 * 115 + 896 * 219 + 3000 + 3 * 1600 + 16 * 4 + 16 * 32 * 14
    assert d["resources"]["lut"] == lut
    assert d["feasible"]


def test_a_depthwise_layer_writes_its_channels_innermost():
    """Review finding 8: a depthwise layer's PEs are its channels, so its output is banked along c only. As
    the operator lays the output out (rows of j innermost), a 128-bit word's 4 lanes sit in one bank: II 4. With
    the channels moved innermost (the host moves them back after the run) a word's lanes come from 4 banks."""
    op = get_builtin("depthwise_conv2d").instantiate({"C": 16, "H": 8, "W": 8, "kernel": 3, "padding": 1})
    space = FpgaSpace(analyze(op), load_board("zcu104"), ["float32"], [200.0])
    d = describe(FpgaModel(space.tables), space.encode(Point({
        "tile.b": 1, "tile.c": 16, "tile.i": 8, "tile.j": 8, "tile.rx": 3, "tile.ry": 3, "unroll.b": 1, "unroll.c": 16,
        "unroll.i": 1, "unroll.j": 1, "unroll.rx": 1, "unroll.ry": 1, "order": ("b", "c", "i", "j"),
        "dtype": "float32", "clock_mhz": 200.0})))
    o = d["buffers"][-1]
    # natural layout: 128 runs (c x i) of 2 words, each word at II 4: 128 x 8 = 1,024 cycles a tile.
    # channels innermost: 64 runs (i x j) of 16 channels = 4 words, whose lanes come from 4 rotating sets of
    # 4 of c's 16 banks: a word an iteration at II 1, and each run is one 4-beat write burst that takes the
    # Zynq PS DDR's write floor (28.6 ns = 5.72 cycles at 200 MHz): 64 x 5.72 = 366 cycles
    assert (o["layout"], o["extents"], o["partition"]) == ([0, 2, 3, 1], [1, 8, 8, 16], [1, 16, 1, 1])
    assert (o["rows"], o["bank_sets"], o["word_ii"], o["run_words"], o["runtime_banks"]) == (64, 4, 1, 4, 4)
    assert o["cycles_per_load"] == int(64 * 28.6e-9 * 200e6) < 128 * 8
