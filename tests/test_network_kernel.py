"""One FPGA kernel for a whole network (issue 38): the shared kernel's model against a hand count, a small
network traced from torch and C-simulated end to end through the generated kernel (every layer's output
against torch's, every process's trip count against the model's, the lint on the code), ResNet-18's layers
through the kernel, and each check broken on purpose to show it fails."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest

from cost_models.fpga_costs import ARITHMETIC
from cost_models.fpga_network import EngineShape, NetLayer, Tiles, layer_cycles, network_trips
from cost_models.fpga_network_design import explore_network
from cost_models.fpga_network_shapes import depthwise_taps
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import load_board
from hetero_dse.hls.csim import csim
from hetero_dse.hls.network_lint import lint_network
from hetero_dse.hls.network_project import check_trips, write_network_project
from hetero_dse.hls.network_run import random_run
from hetero_dse.model.chain import trace_chain
from hetero_dse.model.layer_shape import LayerShape
from small_net import retiled, small_design

torch = pytest.importorskip("torch")
nn = torch.nn

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++")


def test_the_models_trip_counts_and_buffer_rows_are_the_loops_counted_by_hand():
    # 16 -> 16 channels, 8x8 image, 3x3 taps, pad 1, on 8 x 8 lanes, 4-element words; tiles 8 x 16 x 4 x 8
    engine = EngineShape("grid", 8, 8, 4, 1000, 1000, 1000, 6)
    layer = NetLayer("grid", 16, 16, 8, 8, 3, 3, 1, 1)
    trips = network_trips(engine, layer, Tiles(8, 16, 4, 8))
    # 2 output-channel tiles x 2 row tiles x 1 column tile x 1 input-channel tile = 4 steps; the input box is
    # (4-1+3) x (8-1+3) = 60 pixels of 2 channel groups of 2 words
    assert trips["steps"] == 4 and trips["in_rows"] == 2 * 60 and trips["read_in"] == 4 * 60 * 2 * 2
    # weights: 1 group x 9 taps x 2 channel groups, a row of 8x8 lanes is 16 words
    assert trips["w_rows"] == 18 and trips["read_w"] == 4 * 18 * 16
    # the PE loop: 1 x 9 x 2 slots of max(32 pixels, distance 6); the write: 32 pixels x 2 words a tile
    assert trips["compute"] == 4 * 18 * 32 and trips["write"] == 4 * 32 * 2
    assert trips["bias"] == 2 * 2  # the parameters once for each of the 2 output-channel tiles: 8 / 4 words
    assert trips["out_rows"] == 32
    # the runs: each step's box takes every channel, a run a box row (6); each tile's output takes half of them, a
    # run a pixel (32 a tile, 8 x 8 for each of the 2 output-channel tiles); no residual, no runs of one
    assert trips["in_runs"] == 4 * 6 and trips["out_runs"] == 2 * 64 and trips["res_runs"] == 0
    # a tile of fewer pixels than the accumulation's distance idles up to it, and the model charges it
    small = network_trips(engine, layer, Tiles(8, 16, 1, 2))
    assert small["compute"] == small["steps"] * 18 * 6
    # tiles of 16 output channels and 3 x 3 pixels (the last row and column tiles of 2, past the map's end),
    # input channels 8 a step: each box (5 x 5) a run a pixel, 2 steps a tile of 3 x 3 = 9 tiles; the output a
    # run a tile row inside the map (8 rows for each of the 3 column tiles), the residual's alike
    odd = network_trips(engine, layer, Tiles(16, 8, 3, 3), residual=True)
    assert odd["in_runs"] == 9 * 2 * 25 and odd["out_runs"] == odd["res_runs"] == 8 * 3
    # cycles: per step the slowest of its reads and compute, here the compute (18 x 32 + depth 10), with no DDR
    # floor, latency or bandwidth to speak of; then the first step's input box (240 words, one loop over its 6 runs,
    # and that loop's 12 cycles of requests and pipeline: its weights' 288 stream beside the PE array through a FIFO
    # of two rows, in the step's slowest), the last tile's 64 words (and 12), the parameters of 2 output-channel
    # tiles (2 words each) and the 32-word descriptor
    t = {k: np.array([v]) for k, v in Tiles(8, 16, 4, 8).__dict__.items()}
    timing = dict(clock_hz=100e6, elem_bytes=4, read_floor_ns=0.0, write_floor_ns=0.0, port_gbps=1e3, depth=10)
    cycles = layer_cycles(engine, layer, t, latency_ns=0.0, **timing)
    assert cycles[0] == pytest.approx(4 * (18 * 32 + 10) + 240 + 12 + 64 + 12 + 2 * 2 + 32)
    # a round trip of 1 us (100 cycles): the input box's 6 runs of 40 words (a box row: the tile takes every
    # channel) and the output tile's 32 runs of 2 words (a pixel: the tile takes 8 of 16 channels), four in flight,
    # each requested three runs before it starts: one round trip, then a run at its words (the box's 40) or a third
    # of a round trip where they are fewer (the write's 2: 100 + 32 x 100 / 3 cycles, which bound every tile); the
    # weights' one burst a step, each output-channel tile's parameters and the descriptor wait one each. The first
    # box, the first tile's step (charged as any step, its PE array waiting out the weights' burst: 100 cycles and a
    # row's 16 words past the FIFO's two rows of 32 slots, 52; an upper bound, the first burst being back during the
    # box), then the
    # four tiles' writes one after the other
    slow = layer_cycles(engine, layer, t, latency_ns=1000.0, **{**timing, "read_floor_ns": 20.0})
    read_in, write, step = 12 + 100 + 6 * 40, 12 + 100 + 32 * 100 / 3, 18 * 32 + 10 + (100 + 16 - 2 * 32)
    assert slow[0] == pytest.approx(read_in + step + 4 * write + 2 * (2 + 100) + 100 + 32)
    # a residual read beside each word written shares the arena's channel with the write, always together; the
    # input box's reads overlap them, and the channel bounds the bytes of all three over a tile. At one word a
    # cycle (1.6 GB/s of 16-byte words at 100 MHz) a tile's box and write (240 + 64 words, 368 with the residual's
    # 64) take less than its step (the compute's 586): only the last tile's write, which overlaps nothing, is
    # longer (64 words at half a word a cycle: 128 cycles)
    narrow = {**timing, "port_gbps": 1.6}
    alone = layer_cycles(engine, layer, t, latency_ns=0.0, **narrow)
    residual = layer_cycles(engine, layer, t, latency_ns=0.0, residual=True, **narrow)
    assert residual[0] - alone[0] == pytest.approx(128 - 64)
    # at half a word a cycle the channel bounds each tile after the first (whose box is the first read): 304 words
    # 608 cycles (the step 586), with the residual 368 words 736; and the last tile's write 128 cycles alone, 256
    # with the residual (and each loop's 12)
    half = {**timing, "port_gbps": 0.8}
    alone = layer_cycles(engine, layer, t, latency_ns=0.0, **half)
    residual = layer_cycles(engine, layer, t, latency_ns=0.0, residual=True, **half)
    assert alone[0] == pytest.approx(480 + 12 + 586 + 3 * 608 + 128 + 12 + 2 * 4 + 32)
    assert residual[0] - alone[0] == pytest.approx(3 * (736 - 608) + (256 - 128))


def test_the_depthwise_engines_taps_a_cycle_are_counted_by_hand():
    """The depthwise engine of 3 taps a cycle takes a 3×3 window in 3 passes of a row, a weight row a pass of 8
    lanes × 3 taps, its box in 3 banks by column; against the same engine a tap a cycle."""
    one = EngineShape("depthwise", 8, 1, 4, 1000, 1000, 1000, 6, wword=4)
    three = replace(one, taps=3)
    layer = NetLayer("depthwise", 16, 16, 8, 8, 3, 3, 2, 1)  # stride 2: a 4 x 4 output
    a, b = (network_trips(e, layer, Tiles(16, 16, 2, 4)) for e in (one, three))
    # 2 row tiles, each box (2-1)*2+3 = 5 rows of (4-1)*2+3 = 9 columns, 2 channel groups of 2 words a pixel: the
    # read process moves the same words into 3 banks of 5 rows x 3 columns a group
    assert a["steps"] == b["steps"] == 2 and a["read_in"] == b["read_in"] == 2 * 45 * 2 * 2
    assert a["in_rows"] == 2 * 45 and b["in_rows"] == 2 * 5 * 3
    # weight rows: 2 groups x 9 taps of 2 words, or 2 groups x 3 passes of 8 x 3 = 24 weights, 6 words
    assert (a["w_rows"], a["read_w"]) == (18, 2 * 18 * 2) and (b["w_rows"], b["read_w"]) == (6, 2 * 6 * 6)
    # the PE loop: rows x max(8 pixels, distance 6) slots; a third of the passes
    assert a["compute"] == 2 * 18 * 8 and b["compute"] == 2 * 6 * 8
    # a row of 8 lanes x 3 taps is 6 words of 4 but 3 of 8 (whole), 2 of 16 (padded at its front by 8 zeros)
    assert [replace(three, wword=w).row_words(layer) for w in (4, 8, 16)] == [6, 3, 2]
    # resources: 3 products a lane and a tree of 2 adds besides the accumulation; each tap from one of 3 banks
    from cost_models.fpga_network_resources import engine_resources, mux_luts
    from hetero_dse.hardware.board import RESOURCE_KINDS

    dsp, lut = RESOURCE_KINDS.index("dsp"), RESOURCE_KINDS.index("lut")
    r1, r3 = (engine_resources(e, "float32", False) for e in (one, three))
    a32 = ARITHMETIC["float32"]
    assert r3[dsp] - r1[dsp] == pytest.approx(8 * 2 * (a32.dsp_mul + a32.dsp_add))
    assert r3[lut] - r1[lut] >= 8 * 3 * 32 * mux_luts(3)
    # the explorer offers taps that divide every depthwise layer's width, and says so in one sentence otherwise
    with pytest.raises(HeteroDSEError, match="divide the width"):
        explore_network([(LayerShape("depthwise", 16, 16, 8, 8, 5, 5, 1, 2), 1)], load_board("zcu102"), taps=3)
    # a network of no depthwise layer builds no depthwise engine: the taps asked of it are no matter
    grid = explore_network([(LayerShape("grid", 16, 16, 8, 8, 3, 3, 1, 1), 1)], load_board("zcu102"), taps=3)
    assert list(grid.engines) == ["grid"]


def test_the_depthwise_engines_window_a_cycle_is_counted_by_hand():
    """The depthwise engine of a 3×3 window a cycle (3 taps of 3 window rows): one pass a window, a weight row of
    8 lanes × 9 taps, its box in 9 banks (3 by row × 3 by column); against the same engine a row's taps a cycle."""
    three = EngineShape("depthwise", 8, 1, 4, 1000, 1000, 1000, 6, wword=4, taps=3)
    nine = replace(three, tap_rows=3)
    layer = NetLayer("depthwise", 16, 16, 8, 8, 3, 3, 2, 1)  # stride 2: a 4 x 4 output
    a, b = (network_trips(e, layer, Tiles(16, 16, 2, 4)) for e in (three, nine))
    # each box 5 rows x 9 columns, 2 channel groups: the same words, into 9 banks of 2 rows x 3 columns a group
    assert a["read_in"] == b["read_in"] == 2 * 45 * 2 * 2
    assert a["in_rows"] == 2 * 5 * 3 and b["in_rows"] == 2 * 2 * 3
    assert nine.box_banks == nine.lane_sums == 9 and nine.tap_steps(layer) == 1
    # weight rows: 2 groups x 3 passes of 24 weights (6 words), or 2 groups x 1 pass of 72 (18 words)
    assert (b["w_rows"], b["read_w"]) == (2, 2 * 2 * 18) and nine.row_elements(layer) == 72
    # the PE loop: a third of the slots; the box's banks read at latency 2 (each tap a pick of nine of them), the
    # loop a stage deeper for it
    assert a["compute"] == 2 * 6 * 8 and b["compute"] == 2 * 2 * 8
    from cost_models.fpga_network_choices import pipeline_depths
    from cost_models.fpga_network_depths import compute_depth

    assert (three.box_latency, nine.box_latency) == (1, 2)
    for e in (three, nine):
        assert pipeline_depths(e, "float32", 200.0)["depth"] == compute_depth("float32", 200.0, e.lane_sums) + (
            e.box_latency - 1)
    # resources: 9 products a lane, a tree of 8 adds; each tap a multiplexer of the 9 banks
    from cost_models.fpga_network_resources import engine_resources, mux_luts
    from hetero_dse.hardware.board import RESOURCE_KINDS

    dsp, lut = RESOURCE_KINDS.index("dsp"), RESOURCE_KINDS.index("lut")
    r3, r9 = (engine_resources(e, "float32", False) for e in (three, nine))
    a32 = ARITHMETIC["float32"]
    assert r9[dsp] - r3[dsp] == pytest.approx(8 * 6 * (a32.dsp_mul + a32.dsp_add))
    assert r9[lut] - r3[lut] >= 8 * 9 * 32 * mux_luts(9) - 8 * 3 * 32 * mux_luts(3)
    # registers: 48 products and adds more, the weight row's 48 values more (as gathered and as used), and each
    # bank's row read and each tap's pick of them (twice a lane's taps' bits; 3 taps: twice 24 values)
    ff = RESOURCE_KINDS.index("ff")
    assert r9[ff] - r3[ff] == 48 * (a32.ff_mul + a32.ff_add) + 2 * 48 * 32 + (2 * 72 * 32 - 2 * 24 * 32)
    # the explorer offers the window's rows where every depthwise layer's window is as wide and its height a
    # multiple; else one sentence
    options = depthwise_taps([LayerShape("depthwise", 16, 16, 8, 8, 3, 3, 1, 1)])
    assert options == ((1, 1), (3, 1), (3, 3))
    mixed = [LayerShape("depthwise", 16, 16, 8, 8, 3, 3, 1, 1), LayerShape("depthwise", 16, 16, 8, 8, 5, 5, 1, 2)]
    assert depthwise_taps(mixed) == ((1, 1),)
    with pytest.raises(HeteroDSEError, match="window rows a cycle on the depthwise engine: they must divide"):
        explore_network([(s, 1) for s in mixed], load_board("zcu102"), tap_rows=3)


def _small_run(tmp_path, dtype="float32", **options):
    layers, design, run, model, x = small_design(dtype, **options)
    return model, x, layers, design, write_network_project(tmp_path / "small", design, run), run


def test_two_weight_ports_halve_the_weight_process_by_hand_where_their_channels_allow():
    # the layer and tiles of the test above: 4 steps of 18 weight rows of 16 words, 288 words a step
    engine = EngineShape("grid", 8, 8, 4, 1000, 1000, 1000, 6, w_ports=2)
    layer = NetLayer("grid", 16, 16, 8, 8, 3, 3, 1, 1)
    assert network_trips(engine, layer, Tiles(8, 16, 4, 8))["read_w"] == 4 * 288 // 2  # two words an iteration
    t = {k: np.array([v]) for k, v in Tiles(8, 16, 4, 8).__dict__.items()}
    timing = dict(clock_hz=100e6, elem_bytes=4, read_floor_ns=0.0, write_floor_ns=0.0, latency_ns=0.0, depth=10)
    # the first step's reads: the input box's 240 words now outlast the weights' 144 (one port: 288)
    fast = layer_cycles(engine, layer, t, port_gbps=1e3, **timing)
    assert fast[0] == pytest.approx(4 * (18 * 32 + 10) + 240 + 12 + 64 + 12 + 2 * 2 + 32)
    # tiles of 1 x 2 pixels (64 tiles of one step): the weights bound each step. At a word a cycle of bandwidth
    # (1.6 GB/s) a channel, one port on a channel past the arena's moves its 288 words in 288 cycles a step; two,
    # each on its own channel past the arena's (a board of three), 144 (every step and the first one's reads)
    t = {k: np.array([v]) for k, v in Tiles(8, 16, 1, 2).__dict__.items()}
    one = layer_cycles(replace(engine, w_ports=1), layer, t, port_gbps=1.6, **timing)
    two = layer_cycles(engine, layer, t, port_gbps=1.6, channels=3, **timing)
    assert one[0] - two[0] == pytest.approx(64 * (288 - 144))  # (before the first step only its box is waited for)
    # on a board of two the second port is on the arena's channel (``weight_banks``): it still moves a word a cycle,
    # but that channel then carries each tile's 144 weight words beside its box (48 words) and write (4): 196
    # cycles a tile after the first, where the step is 144
    arena = layer_cycles(engine, layer, t, port_gbps=1.6, channels=2, **timing)
    assert one[0] - arena[0] == pytest.approx(63 * (288 - 196) + (288 - 144))
    # four ports: on a board of 32 channels each its own, 72 words a step, and the PE array (18 rows of 6 slots and
    # its depth of 10: 118) bounds each step; on vu9p's four the fourth is on the arena's (the tile's channel: 72 +
    # 52 = 124 cycles, past the PE array's 118); on three, two share one (``weight_layout``) and the process takes a
    # word from each a cycle, so all four move at half a word a cycle: 144 a step, no faster than two
    four = replace(engine, w_ports=4)
    own = layer_cycles(four, layer, t, port_gbps=1.6, channels=32, **timing)
    assert two[0] - own[0] == pytest.approx(64 * (144 - 118))
    assert layer_cycles(four, layer, t, port_gbps=1.6, channels=4, **timing)[0] - own[0] == pytest.approx(
        63 * (124 - 118))
    assert layer_cycles(four, layer, t, port_gbps=1.6, channels=3, **timing)[0] == pytest.approx(two[0])


def test_each_engine_reads_the_most_weight_ports_its_rows_split_into():
    from cost_models.fpga_network_ports import weight_bandwidth, weight_channels, weight_reads

    # an 8 x 8 grid's row of 64 weights is 8 words of 8: four ports of four (2 iterations a row); of three, three
    # (3 iterations, the row padded with a word of zeros: two ports take 4); never more ports than its words
    assert weight_reads(64, 8, 4, (1,)) == 4 and weight_reads(64, 8, 3, (1,)) == 3
    assert weight_reads(64, 16, 4, (1,)) == 4 and weight_reads(64, 32, 4, (1,)) == 2
    # int8 F(4x4) on 8 x 4 lanes (ZCU102's), words of 16: its 9 taps' grids are 18 words a row, 5 iterations over
    # four ports (padded to 20 words), 6 over three; in its pointwise mode a row is one grid of 2 words, an
    # iteration over two ports or four, so four. Where four take no fewer iterations than three, three
    assert weight_reads(32, 16, 4, (9,)) == 4 and weight_reads(32, 16, 4, (9, 1)) == 4
    assert weight_reads(32, 16, 4, (1,)) == 2 and weight_reads(8, 8, 4, (9,)) == 3  # 9 words: 3 iterations either way
    # where its 3x3 rows lie end to end (EngineShape.row_picks), 9 words take 2.25 iterations over four ports, 3
    # over three: four
    assert weight_reads(8, 8, 4, (9,), (9,)) == 4 and weight_reads(8, 8, 4, (9, 1), (9,)) == 4
    # the channels they spread over: the arena keeps the first; vu9p's other three, u280's first four; zcu102's one
    assert (weight_channels(4), weight_channels(32), weight_channels(1)) == (3, 4, 1)
    # what they bring, read in lockstep: on vu9p (a channel a word of 64 bytes a cycle at most) each port a word a
    # cycle, the fourth on the arena's channel (whose streams the model bounds beside it); on a board of three, four
    # ports crowd two on one channel and bring 2 words a cycle, three bring 3; on zcu102's one channel of 5.1 words
    # of 16 bytes each of four ports moves its word a cycle
    assert [weight_bandwidth(p, 4, 1.0) for p in (1, 2, 3, 4)] == [1.0, 2.0, 3.0, 4.0]
    assert [weight_bandwidth(p, 3, 1.0) for p in (1, 2, 3, 4)] == [1.0, 2.0, 3.0, 2.0]
    assert weight_bandwidth(4, 1, 5.1) == 4.0 and weight_bandwidth(4, 1, 2.0) == 2.0


def test_weight_ports_sit_on_the_channels_the_model_spreads_them_over(tmp_path):
    """vu9p: the arena on DDR[0], four weight ports in turn over the other three (``weight_channels``), the fourth
    on the arena's (``weight_banks``, as the model places them); the host passes each its part of weights.bin."""
    project = _small_run(tmp_path, "int8", board="vu9p", weight_ports=(4,))[4]
    cfg = (project / "connectivity.cfg").read_text()
    banks = dict(line.split(".", 1)[1].split(":") for line in cfg.splitlines() if line.startswith("sp="))
    assert {k: v for k, v in banks.items() if k.startswith("wgt")} == {
        "wgt": "DDR[1]", "wgt1": "DDR[2]", "wgt2": "DDR[3]", "wgt3": "DDR[0]"}
    assert banks["act_in"] == banks["act_out"] == "DDR[0]"
    host = (project / "host" / "host.cpp").read_text()
    assert "weights3.size(), 3 * weights.size())" in host and "weights, weights1, weights2, weights3, params)" in host


def test_four_weight_ports_feed_the_grid_where_the_weights_bound_a_layer_on_zcu102():
    """ResNet-18's last 3x3 layer (512 -> 512 on 7 x 7, 2.36 MB of int8 weights) on ZCU102: its 32 x 64 grid waits
    for its weights over two 128-bit ports; over four (each a port of the DDR controller, the one channel's
    16.3 GB/s carrying them) the PE array bounds it instead."""
    from cost_models.fpga_network_ports import WEIGHT_PORTS
    from hetero_dse.model.layer_shape import LayerShape

    shape = LayerShape("grid", 512, 512, 7, 7, 3, 3, 1, 1, name="L15")
    board = load_board("zcu102")
    two = explore_network([(shape, 1)], board, "int8", algorithm="direct", weight_ports=(1, 2))
    four = explore_network([(shape, 1)], board, "int8", algorithm="direct", weight_ports=WEIGHT_PORTS)
    assert two.w_ports == 2 and four.w_ports == 4
    assert four.latency_s < 0.8 * two.latency_s
    from hetero_dse.network_report import _engine_words  # what the cross-device report says of the engine

    assert _engine_words(four.to_json()["engines"][0]).endswith("input-channel lanes, its weights over 4 ports")
    for ports in ((5,), (), (0, 2)):  # what the kernel cannot read: one sentence
        with pytest.raises(HeteroDSEError, match=r"the kernel reads 1 to 4 at once"):
            explore_network([(shape, 1)], board, "int8", weight_ports=ports)


def test_the_packed_grids_dsp_chains_are_charged_by_hand():
    """int8 on a 16 x 64 grid: 512 DSPs of two products each (30 LUTs a multiply's wrapper); a chain of 4 DSPs sums
    4 input lanes in their post-adders, so each output lane's fabric tree adds 16 chains' sums (15 adders and the
    accumulation, 32 LUTs each) and the fabric splits 512 / 4 packed sums (40 LUTs each). Unpacked: 1,024 DSPs and
    every product in the fabric's tree. The rest of the engine is the same."""
    from dataclasses import replace

    from cost_models.fpga_network_depths import compute_depth
    from cost_models.fpga_network_resources import engine_resources
    from hetero_dse.hardware.board import RESOURCE_KINDS

    packed = EngineShape("grid", 16, 64, 16, 900, 144, 1568, 3, 2, True)
    plain = replace(packed, packed=False)
    assert (packed.chain, plain.chain) == (4, 1)
    lut, dsp = RESOURCE_KINDS.index("lut"), RESOURCE_KINDS.index("dsp")
    ours, theirs = engine_resources(packed, "int8", False), engine_resources(plain, "int8", False)
    assert ours[lut] - theirs[lut] == pytest.approx((512 * 30 + 16 * 16 * 32 + 128 * 40) - (1024 * 30 + 1024 * 32))
    assert theirs[dsp] - ours[dsp] == 512
    # the pipeline: 4 buffer stages, the chain's 4 multiply-adds of 3 stages each one after the other and the
    # split, then a tree of 4 levels over 16 sums and the accumulation, an int add a cycle each
    assert compute_depth("int8", 200, 64, 4) == 4 + 4 * 3 + 1 + 5 and compute_depth("int8", 200, 64) == 4 + 3 + 7


def test_a_small_network_runs_end_to_end_through_the_kernel_against_torch(tmp_path):
    model, x, layers, design, project, _ = _small_run(tmp_path)
    assert [layer.shape.engine for layer in layers] == ["grid", "depthwise", "grid", "grid", "grid", "grid"]
    assert layers[3].residual == 2 and layers[4].activation == (-np.inf, np.inf, 0.1)
    assert layers[5].flatten == (16, 4, 4)
    # the ReLU6s saturate: the epilogue's upper clamp is C-simulated, with and without a residual
    assert (layers[1].reference == 6.0).any() and (layers[3].reference == 6.0).any()
    assert design.layers[0].im2col  # 3 channels on the image: the host lays it out as 27-channel windows
    result = csim(project)
    assert result.passed, result.output[-2000:]
    # every layer's output checked, its padded channels too (they must be zero: the next layer reads them)
    assert result.elements == sum(p.layer.OH * p.layer.OW * p.layer.K for p in design.layers)
    assert not result.warnings
    # the last layer's output is the network's: torch's, within float32 rounding
    with torch.no_grad():
        final = model(x).numpy()
    assert np.allclose(layers[-1].reference, final)
    assert check_trips(project, result.output) == []
    report = lint_network(project)
    assert report.ok, [str(f) for f in report.findings]
    # the grid's 8 x 8 lanes and the depthwise engine's 8 lanes of a 3×3 window's 9 taps (its box in 9 banks, by
    # row and column)
    assert (design.engines["depthwise"].taps, design.engines["depthwise"].tap_rows) == (3, 3)
    assert report.mul_per_iteration == 8 * 8 + 8 * 9


def test_the_small_network_in_int8_runs_bit_exact_with_two_products_a_dsp(tmp_path):
    """int8 as deployed: per-channel weight scales, int32 sums, requantised in the epilogue; two int8 multiplies
    of neighbouring output lanes in one DSP48E2. The reference is the same integer arithmetic: bit for bit."""
    *_, design, project, run = _small_run(tmp_path, "int8")
    assert design.engines["grid"].packed and not design.engines["depthwise"].packed
    result = csim(project)
    assert result.passed and result.mismatches == 0 and result.max_abs_error == 0.0, result.output[-2000:]
    assert check_trips(project, result.output) == []
    report = lint_network(project)
    assert report.ok and report.mul_per_iteration == 8 * 8 // 2 + 8 * 9  # the grid's DSPs take two products each
    # the quantisation's own error against torch's float network, each layer's input its producer's int8 output:
    # within 3 % of the layer's largest value (a few steps of 1/127 of it, accumulated over the chain)
    for layer in run.layers:
        dequantised = layer.reference.astype(np.float64) * layer.quant["scale"]
        assert np.abs(dequantised - layer.float_reference).max() < 0.03 * np.abs(layer.float_reference).max()
    table = json.loads((project / "design.json").read_text())["table"]
    assert all(row["qlo"] >= -128 and row["qhi"] <= 127 and row["shift"] > 0 for row in table)
    assert table[1]["qlo"] == 0 and table[0]["qlo"] == -128  # ReLU6 clamps at 0; ReLU's slope of 0 does it
    assert all((run.layers[i].reference == table[i]["qhi"]).any() for i in (1, 3))  # and at 6, where they bind
    assert table[0]["slope_mult"] == 0 and table[4]["slope_mult"] == round(0.1 * 2 ** 14)


@pytest.mark.parametrize("kw", [
    dict(dtype="float32"),
    dict(dtype="int8"),
    dict(dtype="int8", algorithm="winograd", board="vu9p", lanes=(2,), tile=4, weight_ports=(4,)),
    # F(2x2): its 3x3 layer's tiles whole patches of 2, one past the map's end
    dict(dtype="int8", algorithm="winograd", board="vu9p", lanes=(2,), tile=2),
    # a word of 4 output groups: the write gathers a word's rows from 4 banks (write_out_4x1)
    dict(dtype="int8", algorithm="winograd", board="vu9p", tile=4, word=8,
         lanes={"grid": (8,), "depthwise": (8,), "winograd": (2,)}),
    # the depthwise engine a tap a cycle (its box one memory), and of 3 (in 3 banks by column) on a stride of 2,
    # and of 4 (a pixel a whole group of 3 columns and one on)
    dict(dtype="int8", taps=1),
    dict(dtype="float32", strided=2),
    dict(dtype="int8", strided=2),
    dict(dtype="float32", strided=4),
    # and of a window row's 3 taps a cycle (its box in 3 banks by column only), on strides of 1 and 2
    dict(dtype="int8", tap_rows=1),
    dict(dtype="float32", strided=2, tap_rows=1),
], ids=["float32", "int8", "int8-winograd", "int8-winograd-f2", "int8-winograd-banks", "int8-one-tap",
        "float32-stride-2", "int8-stride-2", "float32-stride-4", "int8-row-taps", "float32-stride-2-row-taps"])
def test_the_kernel_runs_any_tiles_its_buffers_hold_as_the_model_counts_them(tmp_path, kw):
    """The explorer's tables for the small network take every channel in one tile and most maps in one column
    tile, so half the kernel's paths (a run a pixel, several steps and channel tiles, a tile past the map's end)
    would run nowhere (``bench/network_mutants.py`` found defects there that no check saw). The same hardware with
    every layer in channel tiles of one lane group and row and column tiles that leave a partial last one where
    whole patches allow: the network bit for bit (float32: within rounding), every process's trips and the arena's
    runs the model's, the lint clean."""
    *_, design, _, run = _small_run(tmp_path, **kw)
    design, run = retiled(design, run)
    for kind in design.engines:
        mine = [p for p in design.layers if p.layer.engine == kind]
        assert any(p.tiles.tc < p.layer.C for p in mine), kind  # steps of one channel group, a run a pixel
        assert kind == "depthwise" or any(p.tiles.tk < p.layer.K for p in mine), kind  # output-channel tiles
        assert any(p.layer.OH % p.tiles.th and p.layer.OW % p.tiles.tw for p in mine), kind  # past the map's end
    if "word" in kw:
        assert design.engines["winograd"].out_banks == 4
    assert design.engines["depthwise"].taps == kw.get("taps", 3)
    assert [p.layer.stride for p in design.layers if p.layer.engine == "depthwise"] == [kw.get("strided", 1)]
    project = write_network_project(tmp_path / "retiled", design, run)
    result = csim(project)
    assert result.passed and result.mismatches == 0, result.output[-2000:]
    assert check_trips(project, result.output) == [] and lint_network(project).ok


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_the_kernel_runs_tiles_a_column_wide_and_more_rows_tall_than_its_runs_in_flight(tmp_path, dtype):
    """``small_net.retiled(column=True)``: a 3×3 layer's box rows three pixels (its first three runs, a pixel
    each, wrap to the box's next row before the loop), and an output tile of every channel more rows tall than
    RUNS_AHEAD (the residual's runs requested in the write loop step to its next row). In float32 the arena's word
    over two ports. The network bit for bit (float32: within rounding), the trips the model's, the lint clean."""
    *_, design, _, run = _small_run(tmp_path, dtype)
    design, run = retiled(design, run, column=True)
    assert design.arena_ports == (2 if dtype == "float32" else 1)
    three = [p for p in design.layers if p.layer.S == 3 and p.tiles.tc < p.layer.C]
    assert {p.layer.engine for p in three} == {"grid", "depthwise"} and all(p.tiles.tw == 1 for p in three)
    residual = next(p for p in design.layers if p.shape.residual)
    assert residual.tiles.tk == residual.layer.K and residual.tiles.th > 4  # RUNS_AHEAD 4: rows requested in the loop
    project = write_network_project(tmp_path / "column", design, run)
    result = csim(project)
    assert result.passed and result.mismatches == 0, result.output[-2000:]
    assert check_trips(project, result.output) == [] and lint_network(project).ok


@pytest.mark.parametrize("dtype, ports", [("int8", 1), ("int8", 2), ("float32", 2)])
def test_the_host_program_runs_the_network_through_an_xrt_test_double(tmp_path, dtype, ports):
    """host/host.cpp (XRT's native API) compiled against the project's XRT test double, whose kernel run calls
    the kernel's C model on the card's copies of the buffers when the host waits: the buffers, their groups and the
    argument order the host passes are the kernel's (with one weight port and with two, each its half of
    weights.bin; in float32 the arena's word over two ports, its two buffers split from arena.bin and joined back),
    and it checks every layer. Says nothing about a card (there is none here)."""
    _, _, _, design, project, _ = _small_run(tmp_path, dtype, weight_ports=(ports,))
    assert design.w_ports == ports and design.arena_ports == (2 if dtype == "float32" else 1)
    ran = _run_host(tmp_path, project)
    assert ran.returncode == 0 and "mismatches=0" in ran.stdout and "PASS" in ran.stdout, ran.stdout + ran.stderr
    if dtype == "float32":  # the double keeps the card's copy of each buffer apart and runs the kernel on wait: a
        # host that forgets a sync or the wait is caught (each defect put in on purpose, one buffer's at a time)
        host = project / "host" / "host.cpp"
        good = host.read_text()
        assert "{&table, &arena, &arena_hi, &weights, &weights1, &params}) bo->sync(XCL_BO_SYNC_BO_TO_DEVICE)" in good
        for old, new in ((" &weights1, &params}", " &params}"), (", &params}", "}"),
                         ("    arena.sync(XCL_BO_SYNC_BO_FROM_DEVICE);\n", ""),
                         ("    arena_hi.sync(XCL_BO_SYNC_BO_FROM_DEVICE);\n", ""),
                         ("emulated ? runs[u].wait() : runs[u].wait(limit)",
                          "((void)emulated, (void)limit, ERT_CMD_STATE_COMPLETED)")):
            assert old in good, old
            host.write_text(good.replace(old, new))
            ran = _run_host(tmp_path, project)
            assert ran.returncode == 1 and "FAIL" in ran.stdout and "mismatches=0" not in ran.stdout, (old, ran.stdout)
        host.write_text(good)
        # a card that never ends the run: the host gives up at its limit and says so; in XRT's emulation it waits
        hung = _run_host(tmp_path, project, HDSE_XRT_HANG="1")
        assert hung.returncode == 1 and "the run did not end within 10000 ms" in hung.stderr, hung.stderr
        emulated = _run_host(tmp_path, project, HDSE_XRT_HANG="1", XCL_EMULATION_MODE="hw_emu")
        assert emulated.returncode == 0 and "PASS" in emulated.stdout, emulated.stdout + emulated.stderr
    readme = (project / "README.md").read_text()
    assert "make ip" in readme and ("two int8 products a DSP48E2" in readme or dtype == "float32")  # zcu102: an IP
    # each read stream on a Zynq HP port of its own, the output's writes beside the box's reads
    hp = ("HP0", "HP3", "HP1", "HPC0", "HPC1", "HP2")
    arena = ["act_in", "act_in_hi", "act_res", "act_res_hi"][::1 if dtype == "float32" else 2]
    streams = arena + ["wgt", "wgt1"][:ports]
    assert [line.split("`")[1] for line in readme.splitlines() if line.startswith("  - HP")] == streams
    assert all(f"  - {p}: `{s}`" in readme for p, s in zip(hp, streams, strict=False))


@pytest.mark.parametrize("dtype, ports, units", [("float32", 2, 1), ("int8", 1, 2)])
def test_the_zynq_host_program_drives_the_ip_through_its_drivers_test_double(tmp_path, dtype, ports, units):
    """On a Zynq (no acceleration platform) the project's host program is host/zynq/main.cpp: a standalone
    application with the driver Vitis HLS exports. Compiled against the project's test doubles of that driver and of
    the BSP (whose driver runs the kernel's C model on the addresses the host sets, and stops on a buffer the host
    did not flush from the data cache), it reads the data files, sets every argument in the kernel's order (the
    arena's two buffers in float32, two compute units as two IP instances in int8), and checks every layer. Says
    nothing about a board (there is none here); each defect below is caught."""
    import subprocess

    _, design, run, _, _ = small_design(dtype, weight_ports=(ports,))
    design.compute_units = units
    project = write_network_project(tmp_path / "zynq", design, run)
    assert design.arena_ports == (2 if dtype == "float32" else 1) and design.w_ports == ports
    good = (project / "host" / "zynq" / "main.cpp").read_text()
    assert "XNetwork_kernel_Set_act_in_hi" in good or dtype == "int8"

    def run_host(*flags):
        binary = tmp_path / "zynq.exe"
        subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-Wno-unknown-pragmas",
                        "-Wno-unused-label", *flags, f"-I{project / 'sim' / 'include' / 'bsp'}",
                        f"-I{project / 'sim' / 'include'}", f"-I{project / 'src'}",
                        str(project / "host" / "zynq" / "main.cpp"), str(project / "src" / "kernel.cpp"), "-o",
                        str(binary)], check=True, capture_output=True)
        return subprocess.run([str(binary)], cwd=project, capture_output=True, text=True)

    # the driver's two ways to find an instance: by device id, and by base address in the system-device-tree flow
    for flags in ((), ("-DSDT",)):
        ran = run_host(*flags)
        assert ran.returncode == 0 and "mismatches=0" in ran.stdout and "PASS" in ran.stdout, ran.stdout + ran.stderr
        assert f"on {units} unit" in ran.stdout
    readme = (project / "README.md").read_text()
    assert "host/zynq/main.cpp" in readme and "xnetwork_kernel.h" in readme
    first = "XNetwork_kernel_Set_wgt(&ip[u], (u64)(UINTPTR)b.wgt);"
    for old, new, says in [
        # the buffers not flushed from the data cache before the IP starts
        ("  Xil_DCacheFlushRange((INTPTR)&b, sizeof(Buffers));\n", "", "before flushing table"),
        # the weights' port given the parameters' buffer: wrong outputs, or reads past the buffer's end
        (first, "XNetwork_kernel_Set_wgt(&ip[u], (u64)(UINTPTR)b.params);", ""),
        # the arena's word halves stored the other way round (float32), or the count of layers one short (int8)
        (("std::memcpy(&b.arena[w * HALF_BYTES], &image[w * WORD_BYTES], HALF_BYTES);",
          "std::memcpy(&b.arena[w * HALF_BYTES], &image[w * WORD_BYTES + HALF_BYTES], HALF_BYTES);")
         if dtype == "float32" else ("XNetwork_kernel_Set_count(&ip[u], LAYERS);",
                                     "XNetwork_kernel_Set_count(&ip[u], LAYERS - 1);")) + ("FAIL",),
    ]:
        assert old in good, old
        (project / "host" / "zynq" / "main.cpp").write_text(good.replace(old, new))
        ran = run_host()
        assert ran.returncode != 0 and says in ran.stdout + ran.stderr, ran.stdout + ran.stderr


def _port(q):
    return "wgt" if q == 0 else f"wgt{q}"


@pytest.mark.parametrize("dtype,ports", [("float32", 2), ("int8", 2), ("int8", 3), ("int8", 4)])
def test_weight_ports_deal_the_rows_words_out_and_run_bit_for_bit(tmp_path, dtype, ports):
    """The weight process reads a word from each of two (three, four) ports a cycle (the host deals a layer's
    words out to them in turn; over three, the grid's rows of 8 words padded at their front to 9): the same
    outputs, the read_w loop a half (a third of 9, a quarter) of the trips (the C-simulation counts them, the
    model says so), the lint clean; each change below is caught."""
    _, _, _, design, project, _ = _small_run(tmp_path, dtype, weight_ports=(ports,))
    grid = design.engines["grid"]
    assert grid.w_ports == ports and design.w_ports == ports
    result = csim(project)
    assert result.passed and check_trips(project, result.output) == [] and lint_network(project).ok
    for p in design.layers:  # what the C-simulation counted (check_trips): a row's words over the ports, whole
        e = design.engines[p.layer.engine]
        alone = network_trips(replace(e, w_ports=1), p.layer, p.tiles)["read_w"]
        rows, words = alone // e.row_words(p.layer), e.row_words(p.layer)
        assert network_trips(e, p.layer, p.tiles)["read_w"] == rows * -(-words // e.w_ports)
    if ports == 3:  # the grid's rows: 8 words, 3 iterations of 3 (a word of zeros first)
        assert grid.row_words(design.layers[0].layer) == 8 and grid.row_reads(design.layers[0].layer) == 3
        # a row taken in whole iterations' floor: its last words are the next row's, which C-simulation sees
        padded = project / "padded"
        shutil.copytree(project, padded)
        _mutate(padded, "const int per_row = (64 + 3 * WV - 1) / (3 * WV);", "const int per_row = 64 / (3 * WV);")
        assert not csim(padded).passed
    # zcu102 (no platform, an IP): the README maps each to a Zynq HP port of its own, past the arena's read streams
    readme = (project / "README.md").read_text()
    mapped = [line.split("`")[1] for line in readme.splitlines() if line.startswith("  - HP")]
    assert mapped[-ports:] == [_port(q) for q in range(ports)] and len(mapped) == len(set(mapped)) <= 6
    # one port read twice where the model has two (four): the lint says so, and the rows are wrong
    last = ports - 1
    _mutate(project, f"const wword_t v{last} = {_port(last)}[base + it];",
            f"const wword_t v{last} = {_port(last - 1)}[base + it];")
    assert any("weight port" in str(f) for f in lint_network(project).findings)
    assert not csim(project).passed


@pytest.mark.parametrize("ports", [2, 4])
def test_weight_ports_words_taken_in_the_wrong_order_fail_the_c_simulation(tmp_path, ports):
    project = _small_run(tmp_path, "int8", weight_ports=(ports,))[4]
    at = lambda q: "WV" if ports - q == 1 else f"{ports - q} * WV"  # noqa: E731
    v = lambda q: "v" if q == 0 else f"v{q}"  # noqa: E731
    _mutate(project, f"row[64 - {at(ports - 2)} + j] = {v(ports - 2)}[j];", f"row[64 - {at(ports - 2)} + j] = X[j];")
    _mutate(project, f"row[64 - {at(ports - 1)} + j] = {v(ports - 1)}[j];",
            f"row[64 - {at(ports - 1)} + j] = {v(ports - 2)}[j];")
    _mutate(project, f"row[64 - {at(ports - 2)} + j] = X[j];", f"row[64 - {at(ports - 2)} + j] = {v(ports - 1)}[j];")
    assert not csim(project).passed


def test_breaking_the_dsp_packings_signed_correction_fails_the_c_simulation(tmp_path):
    project = _small_run(tmp_path, "int8")[4]
    _mutate(project, "if (low & 0x20000) low -= 0x40000;", "")
    assert not csim(project).passed


def _packed_chain(a, w0, w1):
    """The int8 grid's DSP chain as kernel.cpp.j2 writes it: (w1 * 2^18 + w0) * a summed over the chain, the
    low 18 bits sign-extended for the sum of a * w0, the rest for that of a * w1."""
    p = sum((int(h) * 2 ** 18 + int(lo)) * int(x) for x, lo, h in zip(a, w0, w1, strict=True))
    low = p & 0x3FFFF
    low -= 0x40000 if low & 0x20000 else 0
    return low, (p - low) // 2 ** 18


@pytest.mark.parametrize("a, w0, w1", [(-128, -128, 127), (-128, 127, -128), (127, -128, -128), (-128, -128, -128)])
def test_a_chain_of_packed_products_is_exact_at_the_extremes_up_to_seven_and_not_at_eight(a, w0, w1):
    """Why the chain is PACKED_CHAIN long (at most 7): each |a * w| <= 2^14, so seven products' sum stays inside the
    low lane's 18-bit field and eight of -128 * -128 pass it."""
    from cost_models.fpga_costs import PACKED_CHAIN

    for n in (PACKED_CHAIN, 7):
        assert _packed_chain([a] * n, [w0] * n, [w1] * n) == (n * a * w0, n * a * w1)
    if a * w0 == 2 ** 14:
        assert _packed_chain([a] * 8, [w0] * 8, [w1] * 8) != (8 * a * w0, 8 * a * w1)


@pytest.mark.parametrize("changes, words", [
    # a core bound to the chain's multiply-add: Vitis would no longer match it into one DSP (UG1399)
    ([("sum += (long long)pair * a[q];", "sum += (long long)pair * a[q];\n#pragma HLS BIND_OP variable=sum op=add "
       "impl=dsp")], "stops Vitis matching"),
    # the expression balanced: Vitis may rebuild the chain as a tree of fabric adds
    ([("#pragma HLS EXPRESSION_BALANCE off\n", "")], "does not start afresh"),
    # the sum started once for every chain: it runs on over all eight lanes' products
    ([("              long long sum = 0;\n", ""), ("chain: for (int c", "long long sum = 0;\nchain: for (int c")],
     "does not start afresh"),
    # one chain of eight products: -128 * -128 eight times passes the low lane's 18 bits (random data may not)
    ([("c < 2; ++c", "c < 1; ++c"), ("k < 4; ++k", "k < 8; ++k"), ("c * 4 + k", "c * 8 + k")],
     "the model's chain is 4"),
])
def test_each_change_to_the_packed_dsp_chain_fails_the_lint(tmp_path, changes, words):
    project = _small_run(tmp_path, "int8")[4]
    assert lint_network(project).ok
    for old, new in changes:
        _mutate(project, old, new)
    findings = [str(f) for f in lint_network(project).findings]
    assert any(words in f for f in findings), findings


def test_a_packed_chains_borrow_taken_at_the_wrong_value_is_a_lint_finding(tmp_path):
    """The high lane's borrow taken where the low field is below -1, not below 0, is off only where a field sums to
    exactly -1, which random images rarely make (the pipeline's mutation test found such a survivor): the lint
    holds the split to the signed correction (``packed_split_ok``)."""
    project = _small_run(tmp_path, "int8")[4]
    _mutate(project, "(low < 0 ? 1 : 0)", "(low < -1 ? 1 : 0)")
    findings = [str(f) for f in lint_network(project).findings]
    assert len(findings) == 1 and "not split as the signed correction needs" in findings[0], findings


def _mutate(project, old, new, path="src/kernel.cpp", after=""):
    """Replace the first ``old`` in the project's file past the first ``after`` (a function's head, say) with
    ``new``; ``old`` must be there."""
    file = project / path
    text = file.read_text()
    at = text.index(after)
    assert old in text[at:], old
    file.write_text(text[:at] + text[at:].replace(old, new, 1))


@pytest.mark.parametrize("mutant, check", [
    # no idle slots: the PE loop would read a sum still in the adder; C-simulation cannot see it, the trips can
    (("slots = pixels > 6 ? pixels : 6", "slots = pixels"), "trips"),
    # a weight word's lanes gathered in the wrong order: the output is wrong
    (("row[64 - WV + j] = v[j];", "row[64 - WV + j] = v[WV - 1 - j];"), "csim"),
    # the layer's first run written a word early, into the halo a later layer reads as its padding: the arena
    # check sees it
    (("act_out.write_request(d.out_off + ", "act_out.write_request(d.out_off - (r + yt + xt + kt == 0) + "), "csim"),
    # the accumulation's dependence distance shorter than the model's
    (("dependent=true distance=6", "dependent=true distance=3"), "lint"),
    # the dependence declared false: Vitis would drop the read-modify-write hazard, which no C-simulation sees
    (("dependent=true distance=6", "dependent=false distance=6"), "lint"),
    # one input lane fewer in the PE array than the model charges
    (("mul: for (int q = 0; q < 8; ++q)", "mul: for (int q = 0; q < 4; ++q)"), "lint"),
    # the input read only inside the image (a condition): the loop no longer moves a word a cycle as charged
    (("const word_t v = act.read();", "const word_t v = i < run_words ? act.read() : word_t((data_t)0);"),
     "lint"),
    # the read under a condition of its own block: not a word a cycle
    (("const word_t v = act.read();", "word_t v;\n      if (t >= 0) {\n        v = act.read();\n      }"), "lint"),
    # a loop over one run's words (a loop over the runs around it would enter it once a run, uncharged)
    (("read_in: for (int t = 0; t < runs * run_words; ++t)", "read_in: for (int t = 0; t < run_words; ++t)"), "lint"),
    # each box run requested as its words are read: it waits out its round trip, which the model does not charge
    (("if (i == 0 && q < runs) {", "if (i == 0 && q < runs && false) {", "src/kernel.cpp", "static void grid_read_in("),
     "lint"),
    (("q < RUNS_AHEAD - 1; ++q", "q < 1; ++q", "src/kernel.cpp", "static void grid_read_in("), "lint"),
    # the residual's runs likewise
    (("q < RUNS_AHEAD - 1; ++q", "q < 0; ++q"), "lint"),
    # each write's response taken as soon as its words are out: a round trip a run
    (("if (r + 1 >= RUNS_AHEAD) act_out.write_response();", "act_out.write_response();"), "lint"),
    # the box's port with no margin of transactions past its runs in flight: a request may stall the loop that would
    # free a slot
    (("num_read_outstanding=8", "num_read_outstanding=4"), "lint"),
    # more runs in flight than the ports' outstanding transactions: the process would stall on its own requests
    (("#define HDSE_RUNS_AHEAD 4", "#define HDSE_RUNS_AHEAD 8", "src/kernel.h"), "lint"),
    # a box run requested a word short: its words and the next run's are taken out of place (the test double
    # hands them over as the adapter would, and aborts where more are read than requested)
    (("c0 / V, run_words);", "c0 / V, run_words - 1);"), "csim"),
    # the tile's last writes never answered: the next layer might read memory they have not reached (the test
    # double aborts at the kernel's end)
    (("act_out.write_response();\n", "\n", "src/kernel.cpp", "    answer: for"), "csim"),
    # the table's port left for Vitis to widen: its burst buffer as wide as the port, not the 32 bits charged
    ((" max_widen_bitwidth=32", ""), "lint"),
    # every box run a pixel's channels though the tile takes them all, or every output run a pixel's: the same
    # words in the same order (C-simulation passes), each pixel a burst where the model charges a row; the runs
    # the C-simulation counts are not the model's
    (("whole = d.tc == d.C;", "whole = d.tc != d.C;", "src/kernel.cpp", "static void grid_read_in("), "trips"),
    (("const bool whole = tch == d.K;", "const bool whole = tch != d.K;"), "trips"),
    # the residual epilogue's clamp at the activation's top dropped: the residual block's ReLU6 saturates
    (("(v > (acc_t)d.hi ? (acc_t)d.hi : v)", "v"), "csim"),
    # the residual's and the output's ports swapped in an engine's signature: the output would leave through the
    # residual's adapter (the C-simulation, one buffer behind all three, cannot tell)
    (("hls::burst_maxi<word_t> act_res, hls::burst_maxi<word_t> act_out,\n",
      "hls::burst_maxi<word_t> act_out, hls::burst_maxi<word_t> act_res,\n", "src/kernel.cpp",
      "static void grid_layer("), "lint"),
    # a run requested uncounted: the C-simulation could no longer hold the runs to the model's bursts
    (("hdse_count(HDSE_IN_RUNS);\n", "\n", "src/kernel.cpp", "static void grid_read_in("), "lint"),
    (("hdse_count(HDSE_OUT_RUNS);\n", "\n"), "lint"),
    # the PE array's lanes under a bound the lint cannot count (a finding, not the lint's internal error)
    (("lane: for (int l = 0; l < ", "lane: for (int l = 0; l == "), "lint"),
    # the depthwise engine's 3 taps of a window row from its box's 3 banks by column: a tap taken from the wrong
    # bank, a bank's column not carried into the next group, the pixel's column carried late: wrong outputs
    (("a[0] = xm == 0 ? b0 :", "a[0] = xm == 0 ? b1 :"), "csim"),
    (("in0[row + (xm > 0)]", "in0[row]"), "csim"),
    (("if (xm >= 3) {", "if (xm > 3) {"), "csim"),
    # one bank read twice an iteration (its RAM's one read port: no II 1), another never; the taps in one memory
    (("const dw_irow_t b2 = in2[row];", "const dw_irow_t b2 = in1[row];"), "lint"),
    (("#pragma HLS ARRAY_PARTITION variable=a type=complete\n", "\n"), "lint"),
    # the taps' products summed in a chain (the same sums for 3, deeper than the model's tree past them)
    (("tree_level: for (int h = 1; h < 3; h *= 2)", "tree_level: for (int h = 1; h < 3; h += 1)"), "lint"),
    # a tap fewer a cycle than the model charges
    (("mul: for (int q = 0; q < 3; ++q)", "mul: for (int q = 0; q < 2; ++q)"), "lint"),
])
def test_each_check_fails_when_the_code_is_broken_on_purpose(tmp_path, mutant, check):
    # one weight port, the arena's word over one port and the depthwise engine a window row's taps a cycle: the code
    # the mutants name
    project = _small_run(tmp_path, weight_ports=(1,), word=4, tap_rows=1)[4]
    _mutate(project, *mutant)
    _expect_caught(project, check)


@pytest.mark.parametrize("mutant, check", [
    # the depthwise engine's whole 3×3 window a cycle from its box's 9 banks, 3 by row × 3 by column: a tap taken
    # from the wrong bank, a bank's row not carried into the next row group, the pixel's row carried late, a pixel
    # stored in another's bank: wrong outputs
    (("a[0] = ym == 0 ? (xm == 0 ? b0 :", "a[0] = ym == 0 ? (xm == 0 ? b3 :"), "csim"),
    (("in0[(ym > 0 ? row_on : row) + (xm > 0)]", "in0[row + (xm > 0)]"), "csim"),
    (("if (ym >= 3) {", "if (ym > 3) {"), "csim"),
    (("if (rb == 0 && bb == 1) {", "if (rb == 1 && bb == 1) {"), "csim"),
    # the weight process's rows a step counted as a window row's passes (three times the rows the PE array takes)
    (("rows = (d.tc / 8) * (d.R / 3) * (d.S / 3);", "rows = (d.tc / 8) * d.R * (d.S / 3);"), "csim"),
    # one bank read twice an iteration, another never; the taps in one memory; a row of taps fewer a cycle than the
    # model charges; the nine products summed in a chain
    (("const dw_irow_t b8 = in8[row];", "const dw_irow_t b8 = in7[row];"), "lint"),
    (("#pragma HLS ARRAY_PARTITION variable=a type=complete\n", "\n"), "lint"),
    (("mul: for (int q = 0; q < 9; ++q)", "mul: for (int q = 0; q < 6; ++q)"), "lint"),
    (("tree_level: for (int h = 1; h < 9; h *= 2)", "tree_level: for (int h = 1; h < 9; h += 1)"), "lint"),
    # a bank read at latency 1, where the model charges 2 (and a loop a stage deeper)
    (("variable=in_s4 type=ram_2p impl=bram latency=2", "variable=in_s4 type=ram_2p impl=bram latency=1"), "lint"),
])
def test_each_check_fails_where_the_depthwise_engine_takes_its_window_a_cycle(tmp_path, mutant, check):
    """The small network's float32 design, its depthwise engine of 8 lanes taking a 3×3 window's 9 taps a cycle
    (``EngineShape.tap_rows``): each defect put into the 9-bank box or its PE loop is caught by the check named."""
    project = _small_run(tmp_path, weight_ports=(1,), word=4)[4]
    assert "dw_irow_t b8 = in8[row];" in (project / "src" / "kernel.cpp").read_text()
    _mutate(project, *mutant)
    _expect_caught(project, check)


@pytest.mark.parametrize("mutant, check", [
    # a box run's second half requested a word on: each word joins its first half with the next word's second
    (("act_hi.read_request(d.in_off + ((y0 + ny)", "act_hi.read_request(d.in_off + 1 + ((y0 + ny)"), "lint"),
    (("act_hi.read_request(d.in_off + ((y0 + ny)", "act_hi.read_request(d.in_off + 1 + ((y0 + ny)"), "csim"),
    # the two halves joined the other way round, or the residual's second half read from the first port
    (("join(act.read(), act_hi.read())", "join(act_hi.read(), act.read())"), "lint"),
    (("join(act.read(), act_hi.read())", "join(act_hi.read(), act.read())"), "csim"),
    (("join(act_res.read(), act_res_hi.read())", "join(act_res.read(), act_res.read())"), "lint"),
    # the output's first half written to both buffers
    (("act_out_hi.write(half(o, 1));", "act_out_hi.write(half(o, 0));"), "csim"),
    # the second port's write responses taken as its words go out, or its tile's last never taken
    (("          if (r + 1 >= RUNS_AHEAD) act_out_hi.write_response();\n", ""), "lint"),
    (("          if (r + 1 >= RUNS_AHEAD) act_out_hi.write_response();\n", ""), "csim"),
    (("      act_out_hi.write_response();\n    }", "    }"), "lint"),
    (("      act_out_hi.write_response();\n    }", "    }"), "csim"),
    # the second buffer's three ports not said to be one buffer (co-simulation would give each its own)
    (("#pragma HLS ALIAS ports=act_in_hi,act_res_hi,act_out_hi distance=0\n", ""), "lint"),
    # its ports outside the outstanding transactions the model charges
    (("num_read_outstanding=8", "num_read_outstanding=4", "src/kernel.cpp", "port=act_in_hi offset"), "lint"),
])
def test_each_check_fails_where_a_word_spreads_over_two_ports(tmp_path, mutant, check):
    """The small network's float32 design on ZCU102: a word of 8 activations, twice the 128-bit HP port's 4, over
    two ports a half each (``arena_ports``), each of the arena's streams moving both halves a cycle."""
    *_, design, project, _ = _small_run(tmp_path, weight_ports=(1,))
    assert design.word == 8 and design.arena_ports == 2
    _mutate(project, *mutant)
    _expect_caught(project, check)


def _expect_caught(project, check):
    """The check ``check`` (lint, csim or trips) fails on the broken ``project``."""
    if check == "lint":
        assert not lint_network(project).ok
        return
    if check == "csim":
        try:
            assert not csim(project).passed
        except HeteroDSEError as stopped:  # a test double (burst_maxi's, a stream's) stopped the kernel: say where
            assert "hls::burst_maxi" in str(stopped) or "hls::stream" in str(stopped)
        return
    result = csim(project)
    assert result.passed and check_trips(project, result.output)


def test_a_box_rows_first_bank_not_reset_fails_where_its_rows_are_no_whole_passes(tmp_path):
    """The depthwise engine's read process puts a box row's first column in bank 0 again. The explorer's tile of the
    small network's depthwise layer makes its box rows 10 columns, the last in bank 0, where the next row's first
    belongs: a run of the explorer's design cannot see the reset dropped; retiled, a box row's last is in bank 2."""
    *_, design, _, run = _small_run(tmp_path)
    design, run = retiled(design, run)
    dw = next(p for p in design.layers if p.layer.engine == "depthwise")
    assert ((dw.tiles.tw - 1) * dw.layer.stride + dw.layer.S - 1) % 3
    project = write_network_project(tmp_path / "retiled", design, run)
    _mutate(project, "            bx = bb = 0;\n", "            bx = 0;\n")
    assert not csim(project).passed


def test_a_project_whose_c_simulation_counts_no_runs_is_refused_in_one_sentence(tmp_path):
    """A project written before the C-simulation counted the arena's runs is not linted into a list of findings
    about counters it never had: one sentence says to write it again."""
    from hetero_dse.hls.cparse import LintError

    project = _small_run(tmp_path)[4]
    header = project / "src" / "kernel.h"
    header.write_text(header.read_text().replace("HDSE_IN_RUNS = 7, HDSE_OUT_RUNS = 8, HDSE_RES_RUNS = 9, ", ""))
    with pytest.raises(LintError, match="older hetero_dse .* write the project again"):
        lint_network(project)


def test_a_table_whose_tiles_overflow_the_buffers_fails_the_lint(tmp_path):
    project = _small_run(tmp_path)[4]
    record = json.loads((project / "design.json").read_text())
    table = np.fromfile(project / "data" / "table.bin", dtype=np.int32).reshape(len(record["table"]), -1)
    table[3, 13] *= 8  # layer 3's row tile eight times taller: its boxes pass the input buffer
    table.tofile(project / "data" / "table.bin")
    findings = [str(f) for f in lint_network(project).findings]
    assert any("layer 3" in f and "the buffer has" in f for f in findings), findings


@pytest.mark.parametrize("field, change, words", [
    # a 3x3 layer written over its own input: the C-simulation (processes one after the other) cannot see it
    ("out_off", lambda row: row["in_off"], "overlaps its input"),
    ("OH", lambda row: row["OH"] + 2, "its input, kernel, stride and padding give"),
    ("out_off", lambda row: 10**9, "leaves the arena"),
    # an output-channel tile of 3 groups of 8 lanes on 32 channels: its last tile would write the next pixel's
    ("tk", lambda row: 24, "does not divide its channels"),
    ("w_off", lambda row: 10**8, "leave that buffer"),
])
def test_a_table_that_misplaces_a_tensor_fails_the_lint(tmp_path, field, change, words):
    from hetero_dse.hls.network_run import FIELDS

    project = _small_run(tmp_path)[4]
    rows = json.loads((project / "design.json").read_text())["table"]
    table = np.fromfile(project / "data" / "table.bin", dtype=np.int32).reshape(len(rows), -1)
    table[3, FIELDS.index(field)] = change(rows[3])
    table.tofile(project / "data" / "table.bin")
    findings = [str(f) for f in lint_network(project).findings]
    assert any("layer 3" in f and words in f for f in findings), findings


def test_the_lint_counts_a_padded_weight_row_to_its_buffers_end(tmp_path):
    """Over three ports the grid's rows of 8 words are 9 (padded at the front): the last layer's weights end at
    the buffer's end, so one word further passes it, which the lint says (it counted the rows unpadded, 8/3 words
    a port, before: 1/9 short)."""
    from hetero_dse.hls.network_run import FIELDS

    project = _small_run(tmp_path, "int8", weight_ports=(3,))[4]
    rows = json.loads((project / "design.json").read_text())["table"]
    table = np.fromfile(project / "data" / "table.bin", dtype=np.int32).reshape(len(rows), -1)
    last = int(np.argmax(table[:, FIELDS.index("w_off")]))
    assert lint_network(project).ok and rows[last]["engine"] == 0  # the grid's
    table[last, FIELDS.index("w_off")] += 1
    table.tofile(project / "data" / "table.bin")
    findings = [str(f) for f in lint_network(project).findings]
    assert any(f"layer {last}" in f and "leave that buffer" in f for f in findings), findings


def test_resnet18s_layers_each_run_through_the_shared_kernel(tmp_path):
    from hetero_dse.model.capture import capture
    from hetero_dse.model.layer_shape import shape_of
    from hetero_dse.model.zoo import build

    model, example = build("resnet18", (1, 3, 64, 64))  # reduced image: every layer kind, 1/12 of the work
    graph = capture(model, example, "resnet18", profile=False)
    ops = graph.operators()
    shapes = [(shape_of(op, from_host=i == 0), layer.count)
              for i, (op, layer) in enumerate(zip(ops, graph.layers, strict=True))]
    design = explore_network(shapes, load_board("vu9p"))
    project = write_network_project(tmp_path / "resnet18", design, random_run(design, ops))
    result = csim(project)
    assert result.passed, result.output[-2000:]
    assert check_trips(project, result.output) == [] and lint_network(project).ok
    assert len(json.loads((project / "design.json").read_text())["table"]) == 16


class _Twice(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        y = self.c(x)
        return y + y


class _Reshaped(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.c = nn.Linear(3 * 8 * 8, 32), nn.Conv2d(8, 8, 1)

    def forward(self, x):
        return self.c(self.fc(torch.flatten(x, 1)).view(1, 8, 2, 2))


def test_a_functional_hardtanh_takes_its_keyword_bounds():
    class Clipped(nn.Module):
        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(3, 8, 3)

        def forward(self, x):
            return nn.functional.hardtanh(self.c(x), min_val=0.0, max_val=6.0)

    (layer,), _ = trace_chain(Clipped().eval(), torch.randn(1, 3, 8, 8))
    assert layer.activation == (0.0, 6.0, 1.0)


@pytest.mark.parametrize("module, words", [
    (nn.Sequential(nn.Conv2d(4, 8, 3, groups=2)), "grouped convolution"),
    (_Twice(), "to itself"),
    (_Reshaped(), "keeps every tensor in one layout"),
    (nn.Sequential(nn.Conv2d(3, 8, 3), nn.AvgPool2d(2)), "not something the network kernel runs"),
    (nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.BatchNorm2d(8)), "cannot be folded"),
])
def test_what_the_kernel_cannot_run_is_one_sentence(module, words):
    with pytest.raises(HeteroDSEError, match=words):
        trace_chain(module.eval(), torch.randn(1, 4 if "grouped" in words else 3, 8, 8))


def test_the_throughput_design_looks_past_a_dip_in_the_units(monkeypatch):
    """Compute units: a count whose share of the device halves the lanes can dip, and the next rise past it
    (ResNet-18 int8 on u280: 2 units 854 fps, 3 units 817, 4 units 1,090). The search keeps going until the
    throughput has not risen for three counts, and keeps the best."""
    from types import SimpleNamespace

    from cost_models import fpga_network_units as nd

    fps = {1: 100.0, 2: 200.0, 3: 190.0, 4: 180.0, 5: 260.0, 6: 250.0, 7: 240.0, 8: 230.0, 9: 999.0}
    tried = []

    def fake(layers, board, dtype, clock_mhz, lanes, **options):
        n = round(load_board("u280").usable["dsp"] / board.usable["dsp"])
        tried.append(n)
        if fps[n] is None:
            raise HeteroDSEError("no network kernel fits")
        return SimpleNamespace(latency_s=n / fps[n], resources={"dsp": 1.0}, board=board, compute_units=1)

    monkeypatch.setattr(nd, "explore_network", fake)
    best = nd.explore_throughput([], load_board("u280"), "int8")
    assert best.compute_units == 5 and tried == [1, 2, 3, 4, 5, 6, 7, 8]  # 6 to 8 below 5's: no ninth
    # the report says why it took no more: the three counts past the best, each its images a second
    assert best.units_stop == "6 to 8 compute units run no more images a second (250, 240, 230 fps)"
    # where the counts end at the most tried, or at one that does not fit, it says so too
    fps.update({6: 270.0, 7: 280.0, 8: 270.0})
    assert nd.explore_throughput([], load_board("u280"), "int8").units_stop == (
        "8 compute units run no more images a second (270 fps); at most 8 compute units are tried")
    fps[7] = None  # a count the device cannot take
    assert nd.explore_throughput([], load_board("u280"), "int8").units_stop == (
        "7 compute units do not fit: no network kernel fits")


def test_compute_units_that_each_fit_an_slr_are_each_kept_to_one(monkeypatch):
    """The model clocks a unit that fits one SLR as crossing none, so the units are dealt round the SLRs in turn,
    each SLR while its room has space (``slr_placement``; connectivity.cfg's ``slr=`` lines). u200's shell leaves
    its SLRs 2,265, 1,317 and 2,265 DSPs (UG1393's platforminfo): a unit fits one SLR up to 90 % of the largest
    (2,038.5; the rest is the infrastructure's), and the units' room is the board's usable 70 % of each (1,585.5,
    921.9 and 1,585.5). Where units of an even share of the part cannot each keep to one, or span SLRs, each is
    explored again for its SLR's room (``slr_share``); where even that cannot, the count is passed over."""
    from types import SimpleNamespace

    from cost_models import fpga_network_units as nd
    from cost_models.fpga_slrs import slr_room, slr_windows

    u200 = load_board("u200")
    dsp = nd.RESOURCE_KINDS.index("dsp")
    assert [round(c, 1) for c in slr_room(u200)[:, dsp]] == [1585.5, 921.9, 1585.5]
    # runs of adjacent SLRs: one, two (each with the shell's SLR1 in it), all three
    assert [(int(w[0]), round(w[1 + dsp], 1)) for w in slr_windows(u200)] == [
        (1, 2038.5), (1, 1185.3), (1, 2038.5), (2, 3223.8), (2, 3223.8), (3, 5262.3)]

    def unit(dsp):
        return np.array([dsp if k == "dsp" else 0.0 for k in nd.RESOURCE_KINDS])

    assert nd.slr_placement(u200, unit(500), 7) == (0, 1, 2, 0, 2, 0, 2)  # SLR1's room holds one, the others three
    assert nd.slr_placement(u200, unit(500), 8) is None
    assert nd.slr_placement(u200, unit(900), 3) == (0, 1, 2)
    assert nd.slr_placement(u200, unit(1000), 3) is None and nd.slr_placement(u200, unit(1000), 2) == (0, 2)
    assert nd.slr_placement(u200, unit(2100), 2) == ()  # past 2,038.5: it spans SLRs (v++ places it, derated)
    assert nd.slr_placement(u200, unit(700), 1) == () and nd.slr_placement(load_board("zcu102"), unit(700), 2) == ()
    # a board file without the shell's figures: an even share of the part each (3,072 DSPs, 2,150.4 of room)
    u250 = load_board("u250")
    assert u250.slr_resources is None
    assert nd.slr_placement(u250, unit(1000), 9) is None and len(nd.slr_placement(u250, unit(1000), 8)) == 8
    # each unit sized to its SLR's room: the dealing whose units are largest, each the least room over its units
    assert nd.slr_share(u200, 2, unit(1)) == nd.slr_share(u200, 2, unit(2))  # (1, 0, 1): proportions, not sizes
    for units, each in ((2, 1585.5), (3, 921.9), (5, 1585.5 / 2), (8, 921.9 / 2)):  # (1,0,1) (1,1,1) (2,1,2) (3,2,3)
        assert nd.slr_share(u200, units, unit(1))["dsp"] * u200.kernel_resources("dsp") == pytest.approx(each)
    assert nd.slr_share(load_board("zcu102"), 2, unit(1)) is None
    # a unit's budget on the board its share makes is the least room of the SLRs dealt it: 3 units, one an SLR
    share = replace(u200, usable=nd.slr_share(u200, 3, unit(1)))
    assert share.cap("dsp") == int(min(slr_room(u200)[:, dsp])) == 921
    tried, left = [], u200.kernel_resources("dsp")  # the 5,847 DSPs u200's shell leaves kernels (test_board)

    def fake(layers, board, dtype, clock_mhz, lanes, units, **options):  # a unit takes all it is given
        tried.append((units, round(board.usable["dsp"] * left, 2)))
        return SimpleNamespace(latency_s=1e-3, resources={"dsp": board.usable["dsp"] * left}, board=board,
                               compute_units=1)

    monkeypatch.setattr(nd, "explore_network", fake)
    best = nd.explore_throughput([], u200, "int8")
    # an even share of 4,092.9 DSPs (70 % of the 5,847 the shell leaves): 2 units of 2,046.45 span SLRs, and each
    # within one (1,585.5) runs no faster here, so the even share stays; 3 of 1,364.3 to 8 of 511.61 cannot each
    # keep to one, and are explored again at their room
    assert tried == [(1, 4092.9), (2, 2046.45), (2, 1585.5), (3, 1364.3), (3, 921.9), (4, 1023.22), (4, 792.75),
                     (5, 818.58), (5, 792.75), (6, 682.15), (6, 528.5), (7, 584.7), (7, 528.5), (8, 511.61),
                     (8, 460.95)]
    assert best.compute_units == 8 and best.unit_slrs == (0, 1, 2, 0, 1, 2, 0, 2) and "cannot" not in best.units_stop
    # where even their SLRs' room cannot take them, the count is passed over and the report says why
    monkeypatch.setattr(nd, "slr_share", lambda board, units, unit: None)
    assert "3, 4, 5, 6, 7 and 8 compute units cannot each keep within one of u200's 3 SLRs" in nd.explore_throughput(
        [], u200, "int8").units_stop


def test_compute_units_share_the_boards_memory_channels_as_their_ports_take_them():
    """Each unit takes a channel for its arena and one for each weight port (two at most: ``connectivity.cfg``);
    where the board has fewer, each port gets its share. One channel: each unit 1/n of it (the model then shares
    that among the unit's own streams)."""
    from cost_models.fpga_network_ports import unit_share

    assert unit_share(4, 1, 2) == 1.0 and unit_share(4, 2, 1) == 1.0  # vu9p: 2 units of 2 channels each fit
    # 2 units of 3 channels on 4: one channel carries both units' ports, each half of it (not 4/6: a port cannot
    # take part of one channel and part of another); 3 units, 9 on 4: one channel has 3 of them
    assert unit_share(4, 2, 2) == pytest.approx(1 / 2)
    assert unit_share(4, 3, 2) == pytest.approx(1 / 3)
    assert unit_share(4, 6, 4) == pytest.approx(1 / 6)  # 6 units of 4 channels: every channel 6 units' ports
    assert unit_share(32, 8, 2) == 1.0  # u280's HBM: 24 channels for 8 units
    assert unit_share(2, 2, 2) == pytest.approx(2 / 4)  # two weight ports share one channel of 2: a unit takes 2
    assert unit_share(1, 3, 2) == pytest.approx(1 / 3)  # zcu102


def test_compute_units_are_instances_of_the_kernel_on_banks_as_the_model_shares_them(tmp_path):
    """Three compute units of the small int8 network on vu9p, two weight ports each: each unit takes three of the
    four DDR channels (its arena's and one a weight port: ``unit_channels``), the units' sets one after the other
    around them (``unit_bank``). DDR[0] then carries the first unit's arena, the second's first weight port and the
    third's second: the most crowded channel holds three units' ports, as ``unit_share`` charges (a third each).
    The host program gives each unit its buffers, runs the three at once and checks each, here against the XRT
    test double. Says nothing about a card (there is none here)."""
    from collections import Counter

    from cost_models.fpga_network_ports import unit_share

    _, design, run, _, _ = small_design("int8", board="vu9p", weight_ports=(2,))
    assert design.w_ports == 2
    design.compute_units = 3
    project = write_network_project(tmp_path / "units", design, run)
    cfg = (project / "connectivity.cfg").read_text()
    assert "nk=network_kernel:3:network_kernel_1.network_kernel_2.network_kernel_3" in cfg
    banks = {tuple(port.split(".")): int(bank[4:-1]) for port, bank in
             (line[3:].split(":") for line in cfg.splitlines() if line.startswith("sp="))}
    # each unit's arena (its table and three activation ports with it), weight ports and parameters
    for u, (arena, wgt, wgt1, params) in {1: (0, 1, 2, 1), 2: (3, 0, 1, 0), 3: (3, 0, 2, 0)}.items():
        unit = f"network_kernel_{u}"
        assert {banks[unit, p] for p in ("table", "act_in", "act_res", "act_out")} == {arena}
        assert (banks[unit, "wgt"], banks[unit, "wgt1"], banks[unit, "params"]) == (wgt, wgt1, params)
    load = Counter(bank for (unit, port), bank in banks.items() if port in ("act_in", "wgt", "wgt1"))
    assert sorted(load.values()) == [2, 2, 2, 3] and 1 / max(load.values()) == unit_share(4, 3, 2)
    readme = (project / "README.md").read_text()
    assert "3 compute units for batch > 1" in readme and "`nk`" in readme
    # the host opens each unit as XRT names one (KERNEL:{INSTANCE}); the test double, given the units' banks
    # (sim/include/xrt/xrt_banks.h), refuses any other name and any buffer not in its argument's bank
    host = project / "host" / "host.cpp"
    assert '"network_kernel:{network_kernel_1}", "network_kernel:{network_kernel_2}"' in host.read_text()
    ran = _run_host(tmp_path, project)
    assert ran.returncode == 0 and "on 3 units" in ran.stdout and "mismatches=0" in ran.stdout, ran.stdout + ran.stderr
    assert all(f"network_kernel:{{network_kernel_{u}}}: mismatches=0" in ran.stdout for u in (1, 2, 3))
    good = host.read_text()
    for old, new, says in (('"network_kernel:{network_kernel_2}"', '"network_kernel:network_kernel_2"',
                            "No compute units matching 'network_kernel:network_kernel_2'"),
                           ("weights(device, sizeof(wword_t) * WEIGHT_WORDS, kernel.group_id(6))",
                            "weights(device, sizeof(wword_t) * WEIGHT_WORDS, kernel.group_id(3))",
                            "argument 6: a buffer in bank 0, connected to bank 1")):
        assert old in good
        host.write_text(good.replace(old, new))
        ran = _run_host(tmp_path, project)
        assert ran.returncode != 0 and says in ran.stderr, ran.stdout + ran.stderr
    host.write_text(good)


def test_the_makefile_builds_each_target_from_its_own_kernel_object(tmp_path):
    """v++ links an xclbin only from a kernel object compiled for the same target: ``make xclbin`` builds the hw
    pair, ``make emu`` the hw_emu pair, emconfig.json for the platform, the host, and runs it in XRT's emulation
    (``make -n``: the commands make would run, in order; no Vitis here)."""
    import shutil
    import subprocess

    if not shutil.which("make"):
        pytest.skip("no make on this machine")
    _, design, run, _, _ = small_design("int8", board="u200", weight_ports=(1,))
    project = write_network_project(tmp_path / "u200", design, run)
    def dry(target):  # each command on one line (make prints a continued line as it is written)
        ran = subprocess.run(["make", "-n", "-C", str(project), target], capture_output=True, text=True, check=True)
        return [" ".join(c.split()) for c in ran.stdout.replace("\\\n", " ").splitlines() if not c.startswith("make")]

    compile_, link = [line for line in dry("xclbin") if line.startswith("v++")]
    assert "-c -t hw " in compile_ and "-o network_kernel.hw.xo" in compile_
    assert "-l -t hw " in link and "-o network_kernel.hw.xclbin network_kernel.hw.xo" in link
    emu = dry("emu")
    assert [line.split()[0] for line in emu] == ["v++", "v++", "emconfigutil", "g++", "XCL_EMULATION_MODE=hw_emu"], emu
    assert "-c -t hw_emu " in emu[0] and "-o network_kernel.hw_emu.xo" in emu[0]
    assert "-l -t hw_emu " in emu[1] and "-o network_kernel.hw_emu.xclbin network_kernel.hw_emu.xo" in emu[1]
    assert emu[2] == f"emconfigutil --platform {design.board.platform} --nd 1"
    assert emu[4] == "XCL_EMULATION_MODE=hw_emu ./host.exe network_kernel.hw_emu.xclbin data"


def _run_host(tmp_path, project, **environment):
    """host/host.cpp compiled against the project's XRT test double and run on its data (with ``environment``
    added to this process's)."""
    import os
    import subprocess

    binary = tmp_path / "host.exe"
    subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-Wno-unknown-pragmas",
                    "-Wno-unused-label", f"-I{project / 'sim' / 'include'}", f"-I{project / 'src'}",
                    "-DHDSE_XRT_KERNEL=network_kernel", str(project / "host" / "host.cpp"),
                    str(project / "src" / "kernel.cpp"), "-o", str(binary)], check=True, capture_output=True)
    return subprocess.run([str(binary), "test_double.xclbin", str(project / "data")], capture_output=True, text=True,
                          env={**os.environ, **environment})


def test_the_pe_array_waits_for_each_steps_weight_burst_by_hand():
    """The weight process starts a step's burst only once the last step's final row is in its FIFO of two rows: a
    compute-bound step whose rows are used for fewer cycles than a round trip waits the difference. 16 -> 32
    channels, 8x8 image, 8 x 8 lanes, 4-element words, tiles 32 x 16 x 4 x 8 (2 steps of 72 weight rows of 16
    words, each row used for 32 pixels), a round trip of 100 cycles."""
    engine = EngineShape("grid", 8, 8, 4, 1000, 1000, 1000, 6)
    layer = NetLayer("grid", 16, 32, 8, 8, 3, 3, 1, 1)
    t = {k: np.array([v]) for k, v in Tiles(32, 16, 4, 8).__dict__.items()}
    cycles = layer_cycles(engine, layer, t, clock_hz=100e6, elem_bytes=4, read_floor_ns=0.0, write_floor_ns=0.0,
                          port_gbps=1e3, depth=10, latency_ns=1000.0)
    # a step: the PE's 72 x 32 + 10, and the burst's 100 cycles and a row's 16 words past two rows' 64 (the weights'
    # 1,152 words + 100 and the box's 6 runs of 40 words are shorter); then the first box (a round trip, then its
    # runs' words: each longer than a third of a round trip; and its loop's 12), the last tile's 4 runs of 64 words
    # (likewise), one burst of 8 parameter words and the descriptor (a round trip each, 32 words)
    step = 72 * 32 + 10 + (100 + 16 - 2 * 32)
    assert cycles[0] == pytest.approx(2 * step + (12 + 100 + 6 * 40) + (12 + 100 + 4 * 64) + (8 + 100) + (100 + 32))


def test_a_zynqs_hp_ports_bound_the_read_streams_the_explorer_builds():
    """ZCU102's PS reaches its DDR through six AXI ports (HP0-HP3, HPC0, HPC1), each one read channel of a word a
    cycle, as the model counts every stream: the box's and the residual's reads (two each where a word spreads over
    two ports) and the weight ports' must each have one. A word of two ports leaves two for the weights; forced to
    four, no design is built, in one sentence."""
    from cost_models.fpga_network_ports import read_streams

    assert read_streams(1, 4) == 6 and read_streams(2, 2) == 6 and read_streams(2, 3) == 7
    board = load_board("zcu102")
    assert board.memory.axi_ports == 6 and load_board("vu9p").memory.axi_ports is None
    layers = [(LayerShape("grid", 256, 256, 14, 14, 3, 3, 1, 1, name="c"), 1)]
    split = explore_network(layers, board, "int8", lanes=(32,), word=32)
    assert split.arena_ports == 2 and split.w_ports <= 2
    one = explore_network(layers, board, "int8", lanes=(32,), word=16)
    assert one.arena_ports == 1 and one.w_ports <= 4
    with pytest.raises(HeteroDSEError, match=r"\(its read streams on 6 AXI ports at most\) fits zcu102"):
        explore_network(layers, board, "int8", lanes=(32,), word=32, weight_ports=(3, 4))
    # a board of two such ports takes no kernel at all (the box's and the residual's reads and a weight port are
    # three): the sentence names the ports, not the lanes
    two = replace(board, memories=(replace(board.memory, axi_ports=2),))
    with pytest.raises(HeteroDSEError, match=r"lanes a side \(its read streams on 2 AXI ports at most\) fits"):
        explore_network(layers, two, "int8")


def test_compute_units_on_a_zynq_each_take_hp_ports_of_their_own(tmp_path):
    """Compute units on ZCU102 share its one DDR channel (a share each), but each unit's read streams are on HP ports
    of their own, as the model counts every stream a word a cycle: two units of three streams (the box's, the
    residual's, one weight port's) fill the six ports, and three units are no design, in one sentence. The
    project's README maps each unit's streams to its ports."""
    from cost_models.fpga_network_ports import read_streams

    board = load_board("zcu102")
    layers = [(LayerShape("grid", 64, 64, 14, 14, 3, 3, 1, 1, name="c"), 1)]
    pair = explore_network(layers, board, "int8", lanes=(16,), units=2)
    assert 2 * read_streams(pair.arena_ports, pair.w_ports) <= 6 and (pair.arena_ports, pair.w_ports) == (1, 1)
    with pytest.raises(HeteroDSEError, match=r"\(the read streams of 3 compute units, 3 or more each, on 6 AXI ports "
                                             r"at most\) fits zcu102"):
        explore_network(layers, board, "int8", lanes=(16,), units=3)
    _, design, run, _, _ = small_design("int8", board="zcu102", weight_ports=(1,), word=8)
    design.compute_units = 2
    readme = (write_network_project(tmp_path / "units", design, run) / "README.md").read_text()
    hp = [line.strip() for line in readme.splitlines() if line.startswith("  - HP")]
    assert hp == ["- HP0: `network_kernel_1.act_in`, `network_kernel_1.act_out`",
                  "- HP3: `network_kernel_1.act_res`, `network_kernel_1.table`, `network_kernel_1.params`",
                  "- HP1: `network_kernel_1.wgt`", "- HPC0: `network_kernel_2.act_in`, `network_kernel_2.act_out`",
                  "- HPC1: `network_kernel_2.act_res`, `network_kernel_2.table`, `network_kernel_2.params`",
                  "- HP2: `network_kernel_2.wgt`"]
    assert "2 IPs in the block design, each unit's read streams on HP ports of their own" in readme


def test_each_m_axi_port_is_charged_its_burst_buffer_by_hand():
    """The project's hls_config.tcl lets each port keep 4 bursts of 4 KB in flight; the adapter buffers them
    (UG1399). vu9p's 512-bit words: 64 beats a burst, 256 words deep, one BRAM18K of 512 × 36 deep and 15 wide
    (15; sixteen bursts, the one-operator kernel's, 30); ZCU102's 128-bit: 256 beats, 1,024 deep, 2 × 4 (8). The
    network kernel with three weight ports on vu9p: the table's ints (1), the activations in and the residual,
    three weight ports and the parameters' (15 each), and the activations out, whose write buffers a strobe bit a
    byte beside its data (576 bits: 16). The arena's three ports keep 8 bursts in flight (twice the runs of a box or
    a tile the code keeps): on vu9p still 512 deep, one BRAM18K; on ZCU102 2,048 deep, 4 × 4 (16) each, where the
    table takes 2, four 128-bit weight ports 8 each and the parameters' 8."""
    from cost_models.fpga_costs import axi_buffer_bram18, axi_max_beats
    from cost_models.fpga_network_ports import kernel_buffers
    from cost_models.fpga_network_resources import engine_resources, kernel_base
    from hetero_dse.hardware.board import RESOURCE_KINDS
    from hetero_dse.model.layer_shape import LayerShape

    assert (axi_max_beats(64), axi_max_beats(16), axi_max_beats(4)) == (64, 256, 256)
    assert axi_buffer_bram18(64, 512) == 30 and axi_buffer_bram18(64, 512, 4) == 15
    assert axi_buffer_bram18(256, 128, 4) == 8
    base = kernel_base(kernel_buffers(512, 512, 512, 3, axi_max_beats(64)))
    assert base[RESOURCE_KINDS.index("bram18k")] == 1 + 6 * 15 + 16
    zcu102 = kernel_base(kernel_buffers(128, 128, 128, 4, axi_max_beats(16)))
    assert zcu102[RESOURCE_KINDS.index("bram18k")] == 2 + 3 * 16 + 4 * 8 + 8
    # a 256-bit word over two of ZCU102's ports: each of the arena's streams two 128-bit ports (the write's 144
    # bits), six buffers of 8 bursts, 16 BRAM18K each
    assert kernel_buffers(256, 128, 128, 4, 256, 2) == [(32, 256, 4), *[(128, 256, 8)] * 4, *[(144, 256, 8)] * 2,
                                                         *[(128, 256, 4)] * 5]
    split = kernel_base(kernel_buffers(256, 128, 128, 4, axi_max_beats(16), 2))
    assert split[RESOURCE_KINDS.index("bram18k")] == 2 + 6 * 16 + 4 * 8 + 8
    # an explored design carries them: its BRAM is its engines' and these
    board = load_board("vu9p")
    design = explore_network([(LayerShape("grid", 64, 64, 14, 14, 3, 3, 1, 1, name="c"), 1)], board, "int8")
    ports = (8 * design.word, 8 * design.wword, 32 * design.pword, design.w_ports)
    engines = sum(engine_resources(e, "int8", True) for e in design.engines.values())
    b = RESOURCE_KINDS.index("bram18k")
    assert design.resources["bram18k"] == engines[b] + kernel_base(kernel_buffers(*ports, axi_max_beats(64)))[b]
    # and a design whose word spreads over two ports carries their six: ZCU102's 128-bit ports, a word of 32 int8
    design = explore_network([(LayerShape("grid", 64, 64, 14, 14, 3, 3, 1, 1, name="c"), 1)], load_board("zcu102"),
                             "int8", lanes=(32,), word=32)
    assert design.arena_ports == 2 and design.to_json()["arena_ports"] == 2
    engines = sum(engine_resources(e, "int8", False) for e in design.engines.values())
    ports = (256, 8 * design.wword, 32 * design.pword, design.w_ports, axi_max_beats(16), 2)
    assert design.resources["bram18k"] == engines[b] + kernel_base(kernel_buffers(*ports))[b]


def test_several_input_channel_steps_fill_the_pipeline_once_by_hand():
    """64 -> 8 channels, 2x2 image, 3x3 taps, pad 1, on 8 x 8 lanes and 4-element float words, tiles of 16 input
    channels: one output tile of 4 steps. Per step a box of 4 x 4 pixels (16 channels: 4 words each), the weights'
    9 taps x 2 channel groups of 16-word rows (288 words) and the PE array's 18 x max(4 pixels, distance 6) + 10."""
    engine = EngineShape("grid", 8, 8, 4, 1000, 1000, 1000, 6)
    layer = NetLayer("grid", 64, 8, 2, 2, 3, 3, 1, 1)
    t = {k: np.array([v]) for k, v in Tiles(8, 16, 2, 2).__dict__.items()}
    fast = dict(clock_hz=100e6, elem_bytes=4, read_floor_ns=0.0, write_floor_ns=0.0, port_gbps=1e3, depth=10)
    # a round trip of 100 cycles: the box is a run a pixel (the tile takes 16 of 64 channels), four in flight, each
    # requested three runs before it starts: the loop's 12 cycles and a round trip, then a run a third of a round
    # trip (its 4 words are fewer), 112 + 16 x 100 / 3 = 645 a step, longer than its weights (100 + 288) or its PE
    # array (118, and 104 waiting out the weights' burst); the boxes one after the other, then the last step's
    # weights (no box read beside it); the tile's write (2 rows of 4 words, likewise), the parameters (2 words) and
    # the descriptor
    slow = layer_cycles(engine, layer, t, latency_ns=1000.0, **fast)
    assert slow[0] == pytest.approx(4 * (112 + 16 * 100 / 3) + 388 + (112 + 2 * 100 / 3) + (100 + 2) + (100 + 32))
    # with no round trip, each step is its weights' 288 words: the box (64 words and its loop's 12), then 4 such
    # steps
    quick = layer_cycles(engine, layer, t, latency_ns=0.0, **fast)
    assert quick[0] == pytest.approx(64 + 12 + 4 * 288 + 2 * 4 + 12 + 2 + 32)
    # on a board of one channel at a word a cycle, the steps' boxes and weights (4 x (64 + 288) = 1,408 words)
    # share it: the tile's steps end no sooner than its reads have passed it, 1,408 cycles after the tile began
    one = layer_cycles(engine, layer, t, latency_ns=0.0, **{**fast, "port_gbps": 1.6}, channels=1)
    assert one[0] == pytest.approx(1408 + 2 * 4 + 12 + 2 + 32)


def test_the_projects_bursts_are_the_ones_whose_buffers_the_model_charges(tmp_path):
    """hls_config.tcl sets every port's bursts and those in flight: the beats and the 4 ``kernel_base`` charges
    each port's buffer (``_explore`` takes its beats from the board's port as the project does)."""
    import re

    from cost_models.fpga_costs import ARENA_OUTSTANDING, NETWORK_OUTSTANDING, axi_max_beats

    *_, design, project, _ = _small_run(tmp_path)
    config = (project / "hls_config.tcl").read_text()
    beats = axi_max_beats(design.board.memory.port_bits // 8)
    for key, want in (("max_read_burst_length", beats), ("max_write_burst_length", beats),
                      ("num_read_outstanding", NETWORK_OUTSTANDING),
                      ("num_write_outstanding", NETWORK_OUTSTANDING)):
        assert re.search(rf"-m_axi_{key} (\d+)", config).group(1) == str(want), key
    # but the arena's three ports: twice the runs of a box or a tile the code keeps in flight, as kernel_buffers
    kernel = (project / "src" / "kernel.cpp").read_text()
    for port, key in (("act_in", "read"), ("act_res", "read"), ("act_out", "write")):
        assert f"port={port} " in kernel and re.search(rf"port={port} .* num_{key}_outstanding={ARENA_OUTSTANDING}\n",
                                                       kernel), port
