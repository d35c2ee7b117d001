"""The layer-pipelined architecture's model (``cost_models/fpga_pipeline.py``, issue 38 item 5): a stage's
cycles and layout by hand, the folding's stopping rule, the one-sentence refusal where the weights do not fit,
and the report's sentence on which architecture serves throughput."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from cost_models.fpga_network import NetLayer
from cost_models.fpga_pipeline_balance import balance, lane_ladder
from cost_models.fpga_pipeline_storage import fifo_storage
from cost_models.fpga_pipeline import (
    explore_pipeline,
    stage_cycles,
    stage_fifos,
    stage_layer,
    stage_resources,
    stage_time,
    window_trips,
)
from hetero_dse.network_report import _pipeline_note
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import RESOURCE_KINDS, load_board
from hetero_dse.model.layer_shape import LayerShape

VU9P_CAPS = {k: float(v) for k, v in load_board("vu9p").caps.items()}
SMALL = [(LayerShape("grid", 3, 16, 32, 32, 3, 3, 1, 1, from_host=True, name="stem"), 1),
         (LayerShape("depthwise", 16, 16, 32, 32, 3, 3, 2, 1, name="dw"), 1),
         (LayerShape("grid", 16, 32, 16, 16, 1, 1, name="pw"), 2),
         (LayerShape("grid", 32, 10, 1, 16 * 16, name="fc"), 1)]


def test_stage_cycles_by_hand():
    conv = NetLayer("grid", 16, 32, 8, 8, 3, 3, 1, 1)  # 8 × 8 outputs, 9 taps
    assert stage_cycles(conv, 4, 8) == 64 * 9 * (16 // 4) * (32 // 8)
    assert stage_cycles(conv, 5, 8) == 64 * 9 * 4 * 4  # a partial fold costs a whole one
    dw = NetLayer("depthwise", 32, 32, 8, 8, 3, 3, 1, 1)
    assert stage_cycles(dw, 4, 8) == 64 * 3 * 4  # ⌈9 / 4⌉ window folds × ⌈32 / 8⌉ channel folds
    assert stage_cycles(dw, 16, 32) == 64
    # the window process: the two rows the first output row reaches (pad 1), a fold a trip; then each output
    # row's windows, a word a trip, while the next row's 8 × 4 folds are read in the same trips
    assert window_trips(conv, 4, 8) == 2 * 8 * 4 + 8 * max(8 * 9 * 4, 8 * 4)
    assert window_trips(dw, 4, 8) == 2 * 8 * 4 + 8 * max(8 * 4 * 3, 8 * 4)
    strided = NetLayer("grid", 16, 32, 8, 8, 3, 3, 2, 1)  # 4 × 4 outputs, two rows read ahead a row
    assert window_trips(strided, 16, 8) == 2 * 8 + 4 * max(4 * 9, 2 * 8)
    # one output fold: the window (its trips and its loop's fill each output row, and before the first) is slower
    from cost_models.fpga_pipeline import WINDOW_ROW_FILL

    assert stage_cycles(conv, 4, 32) == 64 * 9 * 4 < window_trips(conv, 4, 32)
    assert stage_time(conv, 4, 32) == window_trips(conv, 4, 32) + 9 * WINDOW_ROW_FILL
    pw = NetLayer("grid", 16, 32, 8, 8, 1, 1)
    assert window_trips(pw, 4, 8) == 64 * 4  # a 1×1 convolution's pixels pass, fold by fold
    assert stage_time(pw, 4, 32) == 64 * 4  # one output fold: the window process is as slow as the array
    # float: a fold of fewer steps than the adder's latency idles up to it (its partial sums rotate over that many)
    assert stage_cycles(pw, 16, 32, distance=5) == 64 * 1 * 5
    assert stage_cycles(conv, 4, 8, distance=5) == stage_cycles(conv, 4, 8)  # 36 steps a fold: no idling


def test_a_stages_fifos_by_hand():
    """The FIFOs a stage's code declares and the model charges: its input's words (a fold of the lanes its window
    reads), its window's words, its weight rows and the residual it adds (as many words of its output lanes as
    its block holds back pixels, and two more), shallow ones in shift registers (half a LUT a bit up to 16 words,
    a LUT a bit up to 32), a residual's 82 words in memory, each with its control; left to Vitis a word of 960
    int8 channels would go to block RAM."""
    from cost_models.fpga_pipeline_storage import FIFO_CONTROL_FF, FIFO_CONTROL_LUT

    dw = NetLayer("depthwise", 96, 96, 14, 14, 3, 3, 1, 1)
    assert stage_fifos(dw, 1, 12, "int8", VU9P_CAPS) == [("in", 2, 12 * 8, "srl"), ("win", 2, 12 * 8, "srl"),
                                                         ("wload", 2, 12 * 8, "srl")]
    pw = NetLayer("grid", 40, 24, 14, 14, 1, 1)  # 24 out on 16 lanes: 2 folds, so 40 pixels are 80 words and 2
    fifos = stage_fifos(pw, 12, 16, "float32", VU9P_CAPS, residual=True, skip_pixels=40)
    assert fifos[0] == ("in", 2, 12 * 32, "srl") and fifos[1] == ("win", 2, 12 * 32, "srl")
    assert fifos[2] == ("wload", 2, 12 * 16 * 32, "srl") and fifos[3][:3] == ("skip", 82, 16 * 32)
    assert fifos[3][3] != "srl"
    lut = RESOURCE_KINDS.index("lut")
    res = np.zeros(len(RESOURCE_KINDS))
    assert fifo_storage(2, 960 * 8, VU9P_CAPS, res) == "srl" and res[lut] == 960 * 8 / 2 + FIFO_CONTROL_LUT
    assert res[RESOURCE_KINDS.index("ff")] == FIFO_CONTROL_FF
    res = np.zeros(len(RESOURCE_KINDS))
    assert fifo_storage(32, 96 * 8, VU9P_CAPS, res) == "srl" and res[lut] == 96 * 8 + FIFO_CONTROL_LUT
    assert fifo_storage(33, 96 * 8, VU9P_CAPS) != "srl"
    # each of the stage's FIFOs is in its resources: twice the lanes, 12 × 8 more bits in each of the three
    plain = stage_resources(dw, 1, 12, "int8", VU9P_CAPS)
    wider = stage_resources(dw, 1, 24, "int8", VU9P_CAPS)
    fifo_luts = sum(b for _, _, b, _ in stage_fifos(dw, 1, 24, "int8", VU9P_CAPS)) - sum(
        b for _, _, b, _ in stage_fifos(dw, 1, 12, "int8", VU9P_CAPS))
    assert fifo_luts == 3 * 12 * 8
    assert stage_resources(dw, 1, 24, "int8", {**VU9P_CAPS, "lut": 1e12})[lut] - stage_resources(
        dw, 1, 12, "int8", {**VU9P_CAPS, "lut": 1e12})[lut] >= fifo_luts
    assert wider[lut] > plain[lut]


def test_a_regroup_by_hand():
    """The three regroups, by hand (int8): a gather of 2-lane words into 12 (6 a word): a register of a word, no
    multiplexer (each lane's place fixed), a trip an input word; a split of 12-lane words into 2 (6 a word): a
    register of a word, each output lane a 6:1 multiplexer (two LUTs a bit), a trip an output word; 8 lanes to
    12: the pixel's 36 channels in a register, each output lane a multiplexer of the 3 words its masked index
    reaches, both counts of trips. Each with its input FIFO (two words: half a LUT a bit, and its control)."""
    from cost_models.fpga_pipeline_storage import FIFO_CONTROL_FF, FIFO_CONTROL_LUT
    from cost_models.fpga_pipeline_streams import REGROUP_CONTROL_FF, REGROUP_CONTROL_LUT, Regroup, regroups

    lut, ff = RESOURCE_KINDS.index("lut"), RESOURCE_KINDS.index("ff")
    fixed_lut, fixed_ff = REGROUP_CONTROL_LUT + FIFO_CONTROL_LUT, REGROUP_CONTROL_FF + FIFO_CONTROL_FF
    gather, split, pixel = (Regroup("a", 256, 16, 2, 3, 12), Regroup("b", 256, 3, 12, 18, 2),
                            Regroup("c", 256, 4, 8, 3, 12))
    assert [g.kind for g in (gather, split, pixel)] == ["gather", "split", "pixel"]
    assert (gather.size, gather.trips, gather.mux_inputs) == (12, 256 * 16, 1)
    assert gather.resources("int8")[[ff, lut]].tolist() == [12 * 8 + fixed_ff, 0 + 2 * 8 / 2 + fixed_lut]
    assert (split.size, split.trips, split.mux_inputs) == (12, 256 * 18, 6)
    assert split.resources("int8")[[ff, lut]].tolist() == [12 * 8 + fixed_ff, 2 * 8 * 2 + 12 * 8 / 2 + fixed_lut]
    assert (pixel.size, pixel.trips, pixel.in_mask, pixel.out_mask, pixel.mux_inputs) == (36, 256 * 7, 3, 3, 3)
    assert pixel.resources("int8")[[ff, lut]].tolist() == [36 * 8 + fixed_ff, 12 * 8 * 1 + 8 * 8 / 2 + fixed_lut]
    assert Regroup("x", 1, 3, 12, 5, 8).mux_inputs == 5  # 5 words: masked to 0..7, 5 of them in the register
    layers = [NetLayer("grid", 27, 32, 16, 16, 1, 1), NetLayer("grid", 32, 64, 16, 16, 1, 1),
              NetLayer("grid", 64, 10, 16, 16, 1, 1)]
    # the image: 27 channels on 8 lanes are 32, a word of 8 on a 16-element port: as the stage reads them
    got = regroups(layers, [(8, 2), (12, 16), (16, 4)], [None, None, None], 16)
    assert [(x.consumer, x.in_words, x.in_lanes, x.out_words, x.out_lanes) for x in got] == [
        ("t1_to_s1", 16, 2, 3, 12)]  # 16 lanes to 16: none; 4 result lanes, a port word of 4: none
    got = regroups(layers, [(8, 2), (12, 16), (16, 3)], [None, None, 1], 16)
    assert [x.consumer for x in got] == ["t1_to_s1", "t1_skip_s2", "t3_result"]
    assert got[1].in_lanes == 2 and got[1].out_lanes == 3 and got[2].out_lanes == 2


def test_host_image_runs_as_im2col():
    stem = stage_layer(LayerShape("grid", 3, 64, 224, 224, 7, 7, 2, 3, from_host=True))
    assert (stem.C, stem.K, stem.H, stem.W, stem.R, stem.S) == (147, 64, 112, 112, 1, 1)
    inner = stage_layer(LayerShape("grid", 64, 64, 56, 56, 3, 3, 1, 1))
    assert (inner.C, inner.H, inner.R, inner.pad) == (64, 56, 3, 1)


def test_packing_halves_the_multipliers():
    conv = NetLayer("grid", 64, 64, 8, 8, 1, 1)
    dsp = RESOURCE_KINDS.index("dsp")
    int8 = stage_resources(conv, 8, 8, "int8", VU9P_CAPS)[dsp]
    odd = stage_resources(conv, 8, 7, "int8", VU9P_CAPS)[dsp]
    assert int8 == 64 / 2 + 8 * 2  # 64 products two a DSP, the requantising multiplies of 8 lanes
    assert odd == 56 + 7 * 2  # 7 output lanes do not pair: one a DSP


def test_a_packed_stage_chains_four_input_lanes_in_its_dsps(monkeypatch):
    """8 x 8 int8 lanes: 32 DSPs, each chain of 4 input lanes summed in their post-adders. The fabric adds 64 / 4
    chain sums (32 LUTs each) and splits 32 / 4 packed sums (40 LUTs each), where without chains it added each
    of the 64 products and split each of the 32."""
    import cost_models.fpga_pipeline as fp
    from cost_models.fpga_costs import packed_chain

    assert (packed_chain(8), packed_chain(6), packed_chain(5), packed_chain(2)) == (4, 3, 1, 2)
    conv = NetLayer("grid", 64, 64, 8, 8, 1, 1)
    lut = RESOURCE_KINDS.index("lut")
    chained = stage_resources(conv, 8, 8, "int8", VU9P_CAPS)[lut]
    monkeypatch.setattr(fp, "packed_chain", lambda lanes: 1)
    alone = stage_resources(conv, 8, 8, "int8", VU9P_CAPS)[lut]
    assert alone - chained == pytest.approx((64 * 32 + 32 * 40) - (16 * 32 + 8 * 40))


def test_pipeline_rate_is_its_slowest_stage_and_fits():
    board = load_board("vu9p")
    design = explore_pipeline(SMALL, board, "int8")
    assert len(design.stages) == 5  # the pointwise layer twice: a stage each
    for s in design.stages:
        assert s.cycles == stage_time(s.layer, s.in_lanes, s.out_lanes)
    slowest = max(s.cycles for s in design.stages)
    assert design.interval_cycles == max(slowest, design.io_cycles, *(g.trips for g in design.regroups))
    assert design.fps == pytest.approx(design.achieved_mhz * 1e6 / design.interval_cycles)
    caps = board.caps
    assert all(design.resources[k] <= caps[k] for k in RESOURCE_KINDS)


def test_a_sides_lanes_each_take_a_fold_fewer():
    # 147 im2col channels: 32 lanes take 5 folds, 40 take 4, 52 take 3 (powers of two alone: 5 or 3 of 64)
    assert lane_ladder(147, 64) == [1, 2, 3, 4, 8, 12, 16, 20, 24, 28, 32, 40, 52]
    assert lane_ladder(64, 64) == [1, 2, 3, 4, 8, 12, 16, 24, 32, 64]
    assert lane_ladder(10, 64) == [1, 2, 3, 4, 8, 12]
    for width in (3, 24, 96, 147, 960):
        ladder = lane_ladder(width, 64)
        folds = [-(-width // v) for v in ladder]
        assert folds == sorted(set(folds), reverse=True)  # every count takes fewer folds than the last
        assert all(v <= 4 or v % 4 == 0 for v in ladder)  # whole chains of four, pairs of output lanes


def test_the_balance_meets_the_least_interval_any_choice_meets_with_one_resource():
    """With one resource, each stage's cheapest option within an interval is the whole answer: the balance must
    find the least interval of every combination that fits (brute force over random stages)."""
    rng = np.random.default_rng(7)
    for _ in range(30):
        times = [rng.integers(10, 200, size=rng.integers(1, 6)).astype(float) for _ in range(3)]
        costs = [np.stack([rng.integers(1, 50, size=len(t)).astype(float), np.zeros(len(t))], axis=1) for t in times]
        caps = np.array([float(rng.integers(20, 120)), 0.0])
        fixed = np.zeros(2)
        best = np.inf
        for combo in itertools.product(*(range(len(t)) for t in times)):
            if sum(c[k][0] for c, k in zip(costs, combo, strict=True)) <= caps[0]:
                best = min(best, max(t[k] for t, k in zip(times, combo, strict=True)))
        score = lambda pick, total: 1.0 / max(t[k] for t, k in zip(times, pick, strict=True))  # noqa: E731,B023
        found = balance(times, costs, fixed, caps, lambda interval: 1.0 / interval, score)
        if best == np.inf:
            assert found is None
        else:
            pick, total = found
            assert max(t[k] for t, k in zip(times, pick, strict=True)) == best
            assert total[0] <= caps[0]


def test_the_balance_weighs_the_resource_that_binds(monkeypatch):
    """Two stages, two resources (a: 100, b: 10). Within 10 cycles stage A may take 1 of a and 6 of b or 90 of a
    and 2 of b; stage B takes 5 and 6. The even weighing takes A's option of least total share (the first), which
    with B's needs 12 of b: only weighing b eight times meets 10 cycles; else 20."""
    import cost_models.fpga_pipeline_balance as fb

    times = [np.array([10.0, 10.0, 20.0]), np.array([10.0, 20.0])]
    costs = [np.array([[1.0, 6.0], [90.0, 2.0], [1.0, 1.0]]), np.array([[5.0, 6.0], [1.0, 1.0]])]
    caps, fixed = np.array([100.0, 10.0]), np.zeros(2)
    score = lambda pick, total: 1.0 / max(t[k] for t, k in zip(times, pick, strict=True))  # noqa: E731
    pick, total = balance(times, costs, fixed, caps, lambda interval: 1.0 / interval, score)
    assert pick == [1, 0] and total.tolist() == [95.0, 8.0]
    monkeypatch.setattr(fb, "WEIGHING", 1.0)  # the even weighing alone
    pick, _ = balance(times, costs, fixed, caps, lambda interval: 1.0 / interval, score)
    assert max(t[k] for t, k in zip(times, pick, strict=True)) == 20.0


def test_of_choices_as_fast_the_balance_keeps_the_one_of_fewest_lanes():
    """One stage of 10, 20 or 40 cycles for 8, 4 or 2 of a resource, its image's transfer taking 20 cycles: the 10-
    and 20-cycle choices are as fast (the transfer binds both), and the balance keeps the 20's, half the lanes; the
    40's is slower. Where the score is not bound (no transfer), the 10's."""
    times = [np.array([10.0, 20.0, 40.0])]
    costs = [np.array([[8.0], [4.0], [2.0]])]
    caps, fixed = np.array([16.0]), np.zeros(1)
    for transfer, want in ((20.0, [1]), (0.0, [0])):
        score = lambda pick, total: 1.0 / max(times[0][pick[0]], transfer)  # noqa: E731,B023
        pick, total = balance(times, costs, fixed, caps, lambda interval: 1.0 / interval, score)
        assert pick == want and total.tolist() == [costs[0][want[0]][0]]


def test_every_stage_of_a_network_takes_lanes_from_its_ladders():
    design = explore_pipeline(SMALL, load_board("vu9p"), "int8")
    for s in design.stages:
        grid = s.layer.engine == "grid"
        assert s.out_lanes in lane_ladder(s.layer.K if grid else s.layer.C, 64)
        assert s.in_lanes in (lane_ladder(s.layer.C, 64) if grid else [1])


def test_weights_that_do_not_fit_are_one_sentence():
    big = [(LayerShape("grid", 512, 1024, 14, 14, 3, 3, 1, 1, name="c"), 1)]  # 4.5 MiB: 196 pixels
    with pytest.raises(HeteroDSEError, match=r"4\.5 MiB of weights.*shared network kernel"):
        explore_pipeline(big, load_board("zcu102"), "int8")


def test_a_classifiers_weights_stream_from_ddr_each_image():
    """A stage of one output pixel reads each weight once an image either way, so its weights may stream from DDR
    (FINN's external weights): VGG's fc6 (98 MiB in int8) on ZCU102, whose block RAM holds 4 MiB. Its reader's
    trips and its burst's latency bound the stage (a row of its lane grid in whole port words), the weights' bytes
    share the channel with the image, and it takes an m_axi port of its own."""
    from cost_models.fpga_pipeline import io_trips, stream_trips

    fc6 = [(LayerShape("grid", 25088, 4096, 1, 1, name="fc6"), 1)]
    board = load_board("zcu102")
    design = explore_pipeline(fc6, board, "int8")
    (s,) = design.stages
    assert s.weights == "ddr"
    port = board.memory.port_bits // 8
    late = -(-board.memory.latency_ns * board.default_clock_mhz // 1e3)  # its burst's first word, each image
    assert s.cycles >= stream_trips(s.layer, s.in_lanes, s.out_lanes, port) + late
    frame_bytes = 25088 + 4096 + stream_trips(s.layer, s.in_lanes, s.out_lanes, port) * port
    on_channel = frame_bytes * design.achieved_mhz / (board.memory.sustained_gbps_per_channel * 1e3)
    assert design.io_cycles == pytest.approx(max(on_channel, *io_trips(design.stages, port).values()))
    assert design.resources["bram18k"] < 100  # no weights on chip
    on_chip = explore_pipeline([(LayerShape("grid", 256, 64, 1, 1, name="fc"), 1)], board, "int8")
    assert on_chip.stages[0].weights != "ddr"  # 16 KiB: cheaper on chip than a port
    with pytest.raises(HeteroDSEError, match="float32 and int8"):
        explore_pipeline(SMALL, load_board("vu9p"), "float16")


def test_report_says_which_architecture_serves_throughput():
    p = {"fps": 900.0, "stages": 5, "achieved_mhz": 200.0, "bottleneck": "dw"}
    assert "would serve throughput better" in _pipeline_note(p, 500.0)
    assert "would not serve throughput better" in _pipeline_note(p, 1000.0)
    assert "by the model only" in _pipeline_note(p, 500.0)
    assert "weights on chip;" in _pipeline_note(p, 500.0)
    assert "weights on chip, but those of its 1 stage of one output pixel read from DDR each image" in \
        _pipeline_note({**p, "ddr_weights": ["fc"]}, 500.0)
    assert "(5 stages in 3 kernels, one an SLR, weights on chip;" in _pipeline_note(
        {**p, "kernels": [{"first": 0}, {"first": 2}, {"first": 4}]}, 500.0)
    written = {**p, "directory": "network-x/vu9p/pipeline", "check": {"passed": True}}
    assert "its project `network-x/vu9p/pipeline`, C-simulated against its reference: passed" in _pipeline_note(
        written, 1.0)
    # a C-simulation that could not run, or whose trips were off, is said so: never a bare project path
    timed_out = {**written, "check": {"passed": None, "why": "ran for more than 60 s"}}
    assert "C-simulation not run: ran for more than 60 s" in _pipeline_note(timed_out, 1.0)
    off = {**written, "check": {"passed": False, "mismatches": 0}}
    assert "**FAILED** (trip counts off the model's)" in _pipeline_note(off, 1.0)
    assert "MiB" in _pipeline_note({"why": "no layer-pipelined design fits: 11.1 MiB of weights"}, 1.0)
    assert _pipeline_note(None, 1.0) == ""


def test_the_best_point_of_the_folding_path_is_kept_across_slrs():
    # twelve 3 × 3 convolutions of 128 channels on 28 × 28: int8 weights that fit a VU9P, lanes that span its SLRs
    layers = [(LayerShape("grid", 128, 128, 28, 28, 3, 3, 1, 1, name=f"c{i}"), 1) for i in range(12)]
    board = load_board("vu9p")
    best = explore_pipeline(layers, board, "int8")
    # a design folded within less of the part is a point on the same greedy path: never better than the one kept
    for share in (0.3, 0.45, 0.6, 0.8):
        smaller = explore_pipeline(layers, replace(board, usable={k: v * share for k, v in board.usable.items()}),
                                   "int8")
        assert best.fps >= smaller.fps * (1 - 1e-9), share
    # here the kept point is wider than an SLR holds: cut into kernels, one an SLR, each closing at the target
    assert len(best.kernels) > 1 and best.achieved_mhz == board.default_clock_mhz


def test_the_slope_is_charged_only_where_the_activation_is_leaky():
    conv = NetLayer("grid", 64, 64, 8, 8, 1, 1)
    dsp = RESOURCE_KINDS.index("dsp")
    relu = stage_resources(conv, 8, 8, "int8", VU9P_CAPS)[dsp]
    leaky = stage_resources(conv, 8, 8, "int8", VU9P_CAPS, leaky=True)[dsp]
    assert leaky - relu == 8 * 2  # a 32 × 16 multiply a lane


def _replayed(layer, cf=3):
    """The window's schedule replayed trip by trip as kernel.cpp.j2 runs it (a fold a trip read, a word a trip
    sent): for each output pixel, the input pixels read when its last window word goes out."""
    from cost_models.fpga_pipeline_storage import line_reads

    first, ahead = line_reads(layer)
    read, out, per_pixel = first * layer.W * cf, [], layer.R * layer.S * cf
    for rows in ahead:
        reads, emits = rows * layer.W * cf, layer.OW * per_pixel
        credit, trips = 0, max(reads, emits)
        for it in range(trips):
            credit += reads
            if credit >= trips:
                credit -= trips
                read += 1
            if it < emits and (it + 1) % per_pixel == 0:
                out.append(-(-read // cf))
    return out


@pytest.mark.parametrize("h,r,stride,pad", [(7, 3, 1, 1), (8, 3, 2, 1), (9, 3, 2, 1), (6, 6, 1, 0), (10, 5, 3, 2),
                                            (5, 1, 2, 0)])
def test_the_windows_reads_ahead_and_the_residuals_fifo_that_absorbs_them(h, r, stride, pad):
    """What a window has read when each output pixel goes out (``consumed``) is its schedule's, replayed trip by
    trip (the next rows' reads spread evenly over the row's trips), or a pixel more; a block's lag
    (``block_lag``) by hand for one 3 × 3 stage of 7 × 7; and every residual's FIFO the explorer sizes holds its
    block's lag, a pixel a stage besides, so the block never stalls on it."""
    from cost_models.fpga_pipeline_storage import block_lag, consumed

    layer = NetLayer("grid", 16, 16, h, h, r, r, stride, pad)
    for cf in (1, 3, 4):  # the model's count is never below the schedule's, and at most a pixel above
        assert all(0 <= m - c <= 1 for m, c in zip(consumed(layer), _replayed(layer, cf), strict=True))
    # a 3 × 3 stage of 7 × 7: its first pixel goes out with two rows in and the next row's first pixel read
    # (7 reads over 63 trips, one each 9: by the 9th trip, one), and a pixel for the rounding: 16
    assert block_lag([NetLayer("grid", 8, 8, 7, 7, 3, 3, 1, 1)]) == 16
    blocks = [(LayerShape("grid", 16, 16, 14, 14, 3, 3, 1, 1, name="a"), 1),
              (LayerShape("grid", 16, 16, 14, 14, 3, 3, 1, 1, name="b", residual=True), 1)]
    design = explore_pipeline(blocks, load_board("vu9p"), "int8", residuals=[None, 0])  # b adds the image
    adder = design.stages[1]
    lag = block_lag([s.layer for s in design.stages])
    assert adder.skip_pixels == lag + 2
    (skip,) = [f for f in adder.fifos if f[0] == "skip"]
    assert skip[1] == adder.skip_pixels * -(-16 // adder.out_lanes) + 2


def test_align_moves_a_stage_to_its_producers_lanes_where_that_spends_less():
    """Two stages: the second's cheapest option reads 4 lanes of a producer that writes 8, so a regroup stands
    between them; its option of 8 lanes meets the same interval and, without the regroup, spends less of the
    device: ``align`` takes it. An option past the interval, or one that spends more, is left."""
    from cost_models.fpga_pipeline_align import align

    layers = [NetLayer("grid", 16, 8, 4, 4, 1, 1), NetLayer("grid", 8, 8, 4, 4, 1, 1)]
    options = [[(16, 8)], [(4, 8), (8, 8), (8, 4)]]
    times = [np.array([10.0]), np.array([10.0, 10.0, 20.0])]
    costs = [np.array([[1.0]]), np.array([[1.0], [1.5], [0.5]])]
    regroup = 2.0  # what a regroup between 8 and 4 lanes costs here

    def spend(pick):
        lanes_in = options[1][pick[1]][0]
        return costs[0][pick[0]][0] + costs[1][pick[1]][0] + (regroup if lanes_in != 8 else 0.0)

    assert align([0, 0], options, times, costs, layers, spend) == [0, 1]  # 1.5 < 1.0 + 2.0
    regroup = 0.25
    assert align([0, 0], options, times, costs, layers, spend) == [0, 0]  # 1.5 > 1.0 + 0.25: left
    options[1][2] = (8, 2)  # 8 lanes in and the cheapest, but past the interval: not taken
    costs[1] = np.array([[1.0], [9.0], [0.1]])
    assert spend([0, 2]) < spend([0, 0])
    assert align([0, 0], options, times, costs, layers, spend) == [0, 0]
