"""The Winograd engine's activation word wider than its lanes (issue 40): a word brings several channel groups of a
pixel, stored in one cycle into the box's banks (one for each group of a word), and the write reads a word's rows,
one from each of the output tile's banks, in one cycle. The model by hand, the small network through it in C-simulation
(int8 bit for bit, float32 against torch) with its trips the model's and the lint clean, each part broken on
purpose, and the explorer's choice of the word."""

from __future__ import annotations

import shutil
from dataclasses import replace

import numpy as np
import pytest

from cost_models.fpga_costs import ARITHMETIC
from cost_models.fpga_network import EngineShape, NetLayer, Tiles, layer_cycles, network_trips
from cost_models.fpga_network_design import explore_network
from cost_models.fpga_network_resources import engine_resources
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import RESOURCE_KINDS, load_board
from hetero_dse.hls.cparse import LintError
from hetero_dse.hls.csim import csim
from hetero_dse.hls.network_lint import lint_network
from hetero_dse.hls.network_project import check_trips
from hetero_dse.model.layer_shape import LayerShape
from test_network_kernel import _mutate, _small_run

pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++")

#: the small network's grid and depthwise engine on 8 lanes (the word may be as wide), the Winograd engine on 2
WIDE = {"grid": (8,), "depthwise": (8,), "winograd": (2,)}


def test_a_word_of_several_channel_groups_by_hand():
    # 8 -> 16 channels, 8x8 image, pad 1, F(2x2) on 2 output x 2 input lanes, words of 8 elements: 4 input
    # channel groups a word (the box in 4 banks), 4 output rows a word (the output tile in 4 banks, the write a word
    # a cycle)
    engine = EngineShape("winograd", 2, 2, 8, 1000, 1000, 1000, 6, tile=2, tile_rows=1024)
    narrow = EngineShape("winograd", 2, 2, 2, 1000, 1000, 1000, 6, tile=2, tile_rows=1024)
    assert (engine.in_banks, engine.out_banks) == (4, 4) and (narrow.in_banks, narrow.out_banks) == (1, 1)
    layer = NetLayer("winograd", 8, 16, 8, 8, 3, 3, 1, 1)
    tiles = Tiles(16, 8, 4, 8)
    trips = network_trips(engine, layer, tiles)
    # 2 row tiles a step each; the box 6 x 10 pixels of 8 channels: one word a pixel (4 where a word is 2 lanes)
    assert trips["steps"] == 2 and trips["read_in"] == 2 * 60 and network_trips(narrow, layer, tiles)["read_in"] == \
        2 * 60 * 4
    # the write's iterations are words, 2 a pixel (8 where a word is 2 lanes): 64 pixels
    assert trips["write"] == 64 * 2 and network_trips(narrow, layer, tiles)["write"] == 64 * 8
    # the PE array and the transforms are the lanes': as for a narrow word
    for key in ("compute", "transform_in", "transform_out", "in_rows", "out_rows", "tile_rows"):
        assert trips[key] == network_trips(narrow, layer, tiles)[key], key
    # cycles with no latency: a step is its read (6 box rows of 10 words and the loop's 12 cycles, then 8 patches x
    # 4 channel groups and the transform's 5 stages: 109) against the weights (8 x 4 groups of 16 elements x 4
    # lanes, 8-element words: 256) and the PE's 8 x 4 x 8 + 10 = 266; the output tile's write (4 rows of 8 pixels
    # x 2 words, a word a
    # cycle: 64, and 12) against its output transform (8 groups x 8 patches x 2 rows of 2 pixels, a row a cycle,
    # + 5 = 133); then the first step's box (109: its weights stream beside its PE array), the last tile's write and
    # transform, 2 parameter words and the 32-word descriptor
    t = {k: np.array([v]) for k, v in tiles.__dict__.items()}
    timing = dict(clock_hz=100e6, elem_bytes=4, read_floor_ns=0.0, write_floor_ns=0.0, latency_ns=0.0,
                  port_gbps=1e3, depth=10, transform_depth=5)
    cycles = layer_cycles(engine, layer, t, **timing)
    assert cycles[0] == pytest.approx(2 * 266 + 109 + 64 + 12 + 133 + 2 + 32)
    # the box: 16 lanes x ... banks: a bank a word's group, each a quarter of the rows; the gather and scatter a
    # word's lanes in registers (8 x 32 bits where a row of 2 lanes is 2 x 32)
    ff = RESOURCE_KINDS.index("ff")
    grown = engine_resources(engine, "float32", False)[ff] - engine_resources(narrow, "float32", False)[ff]
    # and the epilogue's lanes: float32's adds and multiplies take DSPs, not flip-flops: the registers only
    assert grown == pytest.approx((8 - 2) * 32 + (8 - 2) * 32)
    # LUTs: the transform's 4:1 multiplexer of a patch's banks (16 elements x 2 lanes x 32 bits, three 2:1 muxes
    # a bit, two a LUT6), the gathered input's 2:1 muxes (6 lanes more), and 6 more lanes of the epilogue (built
    # twice); in both of the write's loops a word's rows each picked from their 2 banks by pixel (8 lanes of 2:1
    # muxes, two a LUT6), where the narrow word's row of 2 lanes is picked so and shifted out (2 lanes, once)
    a, lut = ARITHMETIC["float32"], RESOURCE_KINDS.index("lut")
    grown = engine_resources(engine, "float32", False)[lut] - engine_resources(narrow, "float32", False)[lut]
    epilogue = 2 * (a.lut_add + a.lut_mul + 2 * 32) + a.lut_add
    assert grown == pytest.approx(16 * 2 * 32 * 3 / 2 + 6 * 32 / 2 + 2 * (8 - 2) * 32 / 2 - 2 * 32 / 2 + 6 * epilogue)
    # BRAM18K (512 x 36, two wide for a row of 2 x 32 bits): the box's 16 patch banks, each in 4 of 250 rows (64
    # of 2, where they were 16 of 1,000 rows: 4 each); the output tile's 2 copies, each in 4 banks of 2 by pixel of
    # 128 rows (16 of 2, where 2 copies of 2 banks by pixel of 512 rows took 2 each)
    bram = RESOURCE_KINDS.index("bram18k")
    grown = engine_resources(engine, "float32", False)[bram] - engine_resources(narrow, "float32", False)[bram]
    assert grown == (64 * 2 - 16 * 4) + (2 * 8 * 2 - 2 * 2 * 2)


def test_the_explorer_takes_a_word_wider_than_the_winograd_lanes_where_it_is_faster():
    """One 28x28 128-channel int8 layer on ZCU102: the F(4x4) engine that fits has 4 input lanes; a word of the
    port's 16 activations reads its box 4 times as fast as a word of its lanes, so the explorer takes it. A word of
    two ports' 32 (``arena_ports``) would leave two of the PS's six AXI ports to the weights, where this layer reads
    four: slower. A word the board's ports cannot carry is one sentence."""
    board = load_board("zcu102")
    layers = [(LayerShape("grid", 128, 128, 28, 28, 3, 3, 1, 1, name="c"), 1)]
    wide = explore_network(layers, board, "int8", algorithm="winograd")
    narrow = explore_network(layers, board, "int8", algorithm="winograd", word=4)
    e = wide.engines["winograd"]
    assert wide.word == 16 and wide.arena_ports == 1 and wide.w_ports == 4 and e.in_lanes < wide.word
    assert e.in_banks == wide.word // e.in_lanes
    split = explore_network(layers, board, "int8", algorithm="winograd", word=32)
    assert split.arena_ports == 2 and split.w_ports == 2 and wide.latency_s < split.latency_s
    assert narrow.word == 4 and wide.latency_s < narrow.latency_s
    tiles = wide.layers[0].tiles
    assert tiles.tc % wide.word == 0 and tiles.tk % wide.word == 0 and wide.block % wide.word == 0
    with pytest.raises(HeteroDSEError, match="a word of 64 activations: 2 of zcu102's 128-bit ports carry a power "
                                             "of two of them up to 32 in int8"):
        explore_network(layers, board, "int8", word=64)


@pytest.fixture(scope="module")
def vgg16_layers():
    """VGG-16's distinct layers (the built-in, HybridDNN's network): 9 distinct convolutions of the 13, 3 linear."""
    from hetero_dse.model.capture import capture
    from hetero_dse.model.layer_shape import shape_of
    from hetero_dse.model.zoo import build

    model, example = build("vgg16")
    graph = capture(model, example, "vgg16", profile=False)
    ops = graph.operators()
    assert [op.name for op in ops].count("conv2d") == 9 and [op.name for op in ops].count("gemm") == 3
    assert sum(layer.count for layer in graph.layers) == 16  # 13 convolutions, 3 linear layers
    return [(shape_of(op, from_host=i == 0), layer.count)
            for i, (op, layer) in enumerate(zip(ops, graph.layers, strict=True))]


def test_the_explorer_tries_every_word_between_the_lanes_and_the_widest(vgg16_layers):
    """VGG-16 in float32 on vu9p, every layer on one Winograd engine: F(2x2) of 8 x 4 lanes. A word of four lane
    groups (16 activations) is faster than one group (4), than two (8) and than the ports' widest, 32; the explorer
    had tried only one group and the widest (it missed 18.1 ms for 18.6 ms on an int8 design before the budget was
    the shell's). It now tries each power of two between, and its design is no slower than any word forced."""
    board = load_board("vu9p")
    chosen = explore_network(vgg16_layers, board, "float32", algorithm="winograd")
    forced = {w: explore_network(vgg16_layers, board, "float32", algorithm="winograd", word=w).latency_s
              for w in (4, 8, 16, 32)}
    e = chosen.engines["winograd"]
    assert list(chosen.engines) == ["winograd"] and (e.out_lanes, e.in_lanes, e.tile) == (8, 4, 2)
    assert chosen.word == 16 and e.in_banks == 4 and chosen.latency_s == forced[16]
    assert forced[16] < min(forced[4], forced[8], forced[32])


def test_a_network_all_of_whose_layers_winograd_takes_gets_a_grid_for_its_linear_layers(vgg16_layers):
    """On the Winograd engine alone VGG-16's linear layers run in its pointwise mode: one pixel, so one of the
    engine's alpha² grids busy, and each weight row held for the accumulation distance. With a grid beside it for
    its 1x1 layers (the image's, im2col) and its linear layers, each weight-bound at the ports, the network runs
    faster: the explorer tries that design where the Winograd engine would take every layer (the lanes here the
    ones it takes, to keep the test short)."""
    board = load_board("vu9p")
    lanes = {"grid": (32,), "depthwise": (32,), "winograd": (4, 16)}
    both = explore_network(vgg16_layers, board, "int8", lanes=lanes)
    alone = explore_network(vgg16_layers, board, "int8", lanes=lanes, algorithm="winograd")
    assert set(both.engines) == {"grid", "winograd"} and list(alone.engines) == ["winograd"]
    on = {p.shape.name: p.layer.engine for p in both.layers}
    assert all(on[s.name] == ("grid" if s.R == 1 or s.from_host else "winograd") for s, _ in vgg16_layers)
    assert both.latency_s < 0.8 * alone.latency_s
    # the linear layers stream their weights at the ports' rate: 4 ports of 64 int8 weights a cycle
    fc = next(p for p in both.layers if p.shape.name == "vgg16:L10")
    assert both.w_ports == 4 and both.wword == 64
    assert fc.cycles == pytest.approx(512 * 7 * 7 * 4096 / (4 * 64), rel=0.02)


@pytest.mark.parametrize("dtype, tile, word, board", [("int8", 4, 8, "vu9p"), ("float32", 2, 4, "vu9p"),
                                                     ("float32", 2, 8, "zcu102")])
def test_the_small_network_runs_through_a_wide_word(tmp_path, dtype, tile, word, board):
    """int8 F(4x4) with words of 4 channel groups, float32 F(2x2) with words of 2, and of 4 on ZCU102 (a word over
    two of its 128-bit ports): the 3x3 layer with its residual and the pointwise layers through the banked box and
    the gathering write, the direct integer reference bit for bit (float32 torch's within tolerance), the trips the
    model's, the lint clean."""
    lanes = {k: (word,) if k != "winograd" else (2,) for k in WIDE}
    *_, design, project, _ = _small_run(tmp_path, dtype, algorithm="winograd", board=board, lanes=lanes, tile=tile,
                                        word=word)
    e = design.engines["winograd"]
    assert design.word == word and e.in_banks == e.out_banks == word // 2 and e.tile == tile
    assert design.arena_ports == (2 if board == "zcu102" else 1)
    assert any(p.layer.engine == "winograd" and p.layer.R == 3 and p.shape.residual for p in design.layers)
    result = csim(project)
    assert result.passed and result.mismatches == 0, result.output[-2000:]
    if dtype == "int8":
        assert result.max_abs_error == 0.0
    assert check_trips(project, result.output) == []
    report = lint_network(project)
    assert report.ok, [str(f) for f in report.findings]


@pytest.mark.parametrize("where, old, new, check", [
    # a word's groups all stored into the first bank: the other banks hold nothing
    ("static void wino_read_in", "box[a][b][u][(g * ph + py) * pw + px] = rows[u];",
     "box[a][b][0][(g * ph + py) * pw + px] = rows[u];", "csim"),
    # the transform reads every group from the first bank
    ("static void wino_read_in", "box[a][b][tu][tg * patches + tp]", "box[a][b][0][tg * patches + tp]", "csim"),
    # the word's lanes dealt to the groups in the wrong order
    ("static void wino_read_in", "rows[j / 2][j % 2] = v[j];", "rows[j % 4][j / 4] = v[j];", "csim"),
    # the write gathers a word's second row from the first bank, or the output transform stores the second group
    # in the first bank
    ("write_res: for", "obuf1_2[f / 4]", "obuf0_2[f / 4]", "csim"),
    ("static void wino_out", "obuf1_2[f / 4] =", "obuf0_2[f / 4] =", "csim"),
    # a patch row's third pixel stored as its second, or the write taking a pixel's row from the wrong bank by
    # pixel
    ("static void wino_out", "obuf1_2[f / 4] = point ? pix[e] : row[2];", "obuf1_2[f / 4] = point ? pix[e] : row[1];",
     "csim"),
    ("write_res: for", "f % 4 == 1 ? obuf1_1[", "f % 4 == 1 ? obuf1_2[", "csim"),
    # the box's banks of a word in one memory: four writes a cycle on two ports, II 1 lost
    ("static void wino_read_in", "  #pragma HLS ARRAY_PARTITION variable=box type=complete dim=3\n", "", "lint"),
    # the write reads two of a word's rows from one bank (two reads of one RAM's two ports with the writes: no II
    # 1), or is pipelined at the II of a word's four rows from one memory
    ("static void write_out_4x4", "obuf1_2[f / 4]", "obuf0_2[f / 4]", "lint"),
    # or a pixel's row read at the bank's row f (its pixel in one memory, not in four banks), or the write
    # pipelined at the II of a word's four rows from one memory
    ("static void write_out_4x4", "obuf1_2[f / 4]", "obuf1_2[f]", "lint"),
    ("static void write_out_4x4", "#pragma HLS PIPELINE II=1\n        hdse_count(3)",
     "#pragma HLS PIPELINE II=4\n        hdse_count(3)", "lint"),
    # a bank of the output tile not bound to the memory the model charges
    ("static void wino_layer", "  #pragma HLS BIND_STORAGE variable=out_s3_1 ", "  // ", "lint"),
    # a bank chosen by a multiplexer of banks (the same values: only the lint sees it)
    ("static void wino_out", "obuf1_2[f / 4] =", "(o % 4 == 1 ? obuf1_2 : obuf0_2)[f / 4] =", "lint"),
    # a pixel stored at the bank's row f (the lint's, as C-simulation may pass where the rows do not overlap), or
    # a patch row's pixels left to Vitis to partition (past its threshold: a RAM, four writes a cycle)
    ("static void wino_out", "obuf1_2[f / 4] =", "obuf1_2[f] =", "lint"),
    # the pointwise mode's pixel stored into a bank by pixel not its own (C-simulation sees it too), or the row
    # leaving taken at an index the code does not bound (the same values: a select of every pixel, only the lint)
    ("static void wino_out", "(inside && f % 4 == 2)) obuf1_2", "(inside && f % 4 == 1)) obuf1_2", "lint"),
    ("static void wino_out", "wino_divide(pix[(e % 4) * 4 + l / 2]", "wino_divide(pix[ey * 4 + l / 2]", "lint"),
    ("static void wino_out", "      #pragma HLS ARRAY_PARTITION variable=row type=complete\n", "", "lint"),
    # the epilogue's biases in fewer banks than a word's lanes, read 8 a cycle
    ("static void write_out_4x4", "variable=tile_bias type=cyclic factor=8", "variable=tile_bias type=cyclic factor=2",
     "lint"),
    # a word's rows, gathered or scattered in one iteration, left to Vitis to partition (past its threshold: a RAM)
    ("static void wino_read_in", "      #pragma HLS ARRAY_PARTITION variable=rows type=complete\n", "", "lint"),
    ("static void write_out_4x4", "    #pragma HLS ARRAY_PARTITION variable=cur type=complete\n", "", "lint"),
    # the Winograd layer's output written by the process of one bank, which the model does not charge (its four
    # banks do not pass to it: the code no longer compiles, and the lint says so)
    ("static void wino_layer", "write_out_4x4<", "write_out<", "parse"),
])
def test_each_part_of_the_wide_word_fails_when_broken(tmp_path, where, old, new, check):
    *_, design, project, _ = _small_run(tmp_path, "int8", algorithm="winograd", board="vu9p",
                                        lanes={k: (8,) if k != "winograd" else (2,) for k in WIDE}, tile=4, word=8)
    assert design.engines["winograd"].out_banks == 4
    _mutate(project, old, new, after=where)
    if check == "lint":
        findings = [str(f) for f in lint_network(project).findings]
        assert any(where.split()[-1] in f for f in findings), findings
    elif check == "parse":
        with pytest.raises(LintError, match="does not parse: no matching function for call to 'write_out'"):
            lint_network(project)
    else:
        result = csim(project)
        assert not result.passed or check_trips(project, result.output)


def test_output_tile_banks_one_block_deep_fail_the_lint(tmp_path):
    """The output tile's banks and the write's ports of them one block deep: the transform of the next tile would
    wait for the write of the last, which the model overlaps (and charges two blocks for)."""
    *_, project, _ = _small_run(tmp_path, "int8", algorithm="winograd", board="vu9p",
                                lanes={k: (8,) if k != "winograd" else (2,) for k in WIDE}, tile=4, word=8)
    path = project / "src" / "kernel.cpp"
    source = path.read_text()
    at = source.index("static void write_out_4x4(")
    end = source.index("\n}\n", at)
    source = source[:at] + source[at:end].replace("stream_of_blocks<OUT, 2>", "stream_of_blocks<OUT, 1>") + \
        source[end:]
    path.write_text(source.replace("stream_of_blocks<wino_out_t, 2>", "stream_of_blocks<wino_out_t, 1>"))
    findings = [str(f) for f in lint_network(project).findings]
    assert any("a stream of blocks 1 deep" in f for f in findings), findings


def test_a_float_engines_transforms_on_dsps_by_hand_and_where_the_fabric_is_short():
    """float32 F(2×2) on 4 × 4 lanes: its transforms' 32 adds an input lane and 24 an output lane (no multiply) on
    DSP cores (fadd fulldsp: 2 DSPs, 219 LUTs, 205 FFs each) instead of the fabric's (430 LUTs, 300 FFs each, an
    estimate); on ZCU102 only those fit beside its PE array, so the explorer takes them there."""
    fabric = EngineShape("winograd", 4, 4, 4, 512, 1 << 30, 256, 7, tile=2, tile_rows=256)
    dsp = replace(fabric, transform_dsp=True)
    kinds = {k: RESOURCE_KINDS.index(k) for k in ("dsp", "lut", "ff")}
    diff = engine_resources(dsp, "float32", False) - engine_resources(fabric, "float32", False)
    adds = 32 * 4 + 24 * 4
    assert diff[kinds["dsp"]] == 2 * adds
    assert diff[kinds["lut"]] == pytest.approx(adds * (219 - 430))
    assert diff[kinds["ff"]] == pytest.approx(adds * (205 - 300))
    board = load_board("zcu102")
    layers = [(LayerShape("grid", 128, 128, 28, 28, 3, 3, 1, 1, name="c"), 1)]
    design = explore_network(layers, board, "float32", algorithm="winograd")
    direct = explore_network(layers, board, "float32", algorithm="direct")
    assert design.engines["winograd"].transform_dsp and design.latency_s < direct.latency_s
    assert design.to_json()["engines"][0]["transform_cores"] == "dsp"
    from hetero_dse.network_report import _engine_words  # what the cross-device report says of the engine

    assert "engine of 4 output-channel × 4 input-channel lanes, its transforms on DSPs for the 3×3" in \
        _engine_words(design.to_json()["engines"][0])
    with pytest.raises(HeteroDSEError, match="no network kernel with a Winograd engine fits zcu102 in float32"):
        explore_network(layers, board, "float32", algorithm="winograd", transform_cores="fabric")
    with pytest.raises(HeteroDSEError, match="unknown transform cores .lut.: the fabric.s or dsp"):
        explore_network(layers, board, "float32", transform_cores="lut")


def test_the_small_network_runs_with_its_transforms_on_dsps_and_the_lint_checks_their_cores(tmp_path):
    *_, design, project, _ = _small_run(tmp_path, "float32", algorithm="winograd", board="vu9p", transform_cores="dsp")
    assert design.engines["winograd"].transform_dsp
    source = (project / "src" / "kernel.cpp").read_text()
    assert "op=fadd impl=fulldsp" in source[source.index("static void wino_in_transform"):]
    result = csim(project)
    assert result.passed and result.mismatches == 0, result.output[-2000:]
    assert check_trips(project, result.output) == [] and lint_network(project).ok
    # an add of the input transform bound to the fabric where the model charges a DSP core
    at = source.index("static void wino_in_transform")
    (project / "src" / "kernel.cpp").write_text(source[:at] + source[at:].replace("impl=fulldsp", "impl=fabric", 1))
    findings = [str(f) for f in lint_network(project).findings]
    assert any("wino_in_transform" in f and "fulldsp" in f for f in findings), findings


def test_a_network_no_layer_of_which_is_faster_on_winograd_gets_no_winograd_engine():
    """ResNet-18 in int8 on ZCU102: the design with a Winograd engine beside its grid runs every layer on the grid
    (none is faster on it there); an engine no layer runs on is not built: the direct design is taken."""
    from hetero_dse.model.capture import capture
    from hetero_dse.model.layer_shape import shape_of
    from hetero_dse.model.zoo import build

    model, example = build("resnet18")
    graph = capture(model, example, "resnet18", profile=False)
    shapes = [(shape_of(op, from_host=i == 0 and op.name == "conv2d"), layer.count)
              for i, (op, layer) in enumerate(zip(graph.operators(), graph.layers, strict=True))]
    board = load_board("zcu102")
    auto = explore_network(shapes, board, "int8")
    assert list(auto.engines) == ["grid"]
    assert auto.latency_s == explore_network(shapes, board, "int8", algorithm="direct").latency_s


def test_weight_rows_end_to_end_by_hand():
    # int8 F(4x4) on 2 x 2 lanes, its weights over 4 ports of 2-weight words: 8 weights an iteration, a 3x3 row
    # of 9 taps x 4 lane pairs = 36 (4.5 iterations). Rows end to end: a row starts at weight 0 or 4 of an
    # iteration (row_picks 2); a step of 3 rows is 108 weights, 14 iterations, where rows padded to 5 took 15
    engine = EngineShape("winograd", 2, 2, 2, 64, 64, 64, 3, tile=4, w_transform=True, tile_rows=64, w_ports=4,
                         wword=2)
    padded = replace(engine, w_ports=3)  # 6 weights an iteration: a row is 6, whole
    assert engine.row_picks == 2 and padded.row_picks == 1
    conv, point = NetLayer("winograd", 6, 4, 8, 8, 3, 3, 1, 1), NetLayer("winograd", 6, 4, 8, 8, 1, 1)
    assert engine.step_reads(conv, 3) == 14 and engine.row_reads(conv) == 5 and padded.step_reads(conv, 3) == 18
    # a 1x1 layer's row is one lane grid (4 weights, 2 words): padded to an iteration each
    assert engine.step_reads(point, 3) == 3
    # the layer in 3 steps (input-channel tiles of 2): each step's 2 rows end to end, 72 weights in 9 iterations
    trips = network_trips(engine, conv, Tiles(4, 2, 8, 8))
    assert trips["steps"] == 3 and trips["w_rows"] == 2 and trips["read_w"] == 3 * 9
    # the register holds an iteration's but one place's weights more (4 x 8 bits), the row picked at 2 places
    # (36 x 8 bits of 2:1 muxes, two a LUT6); the count of the next row's weights (32 bits: its register, and an
    # add, a compare and a subtract)
    ff, lut = RESOURCE_KINDS.index("ff"), RESOURCE_KINDS.index("lut")
    wide = replace(engine, w_ports=2)  # 4 weights an iteration: 9 a row, whole
    grown = engine_resources(engine, "int8", False) - engine_resources(wide, "int8", False)
    assert wide.row_picks == 1 and grown[ff] == 4 * 8 + 32 and grown[lut] == 36 * 8 / 2 + 3 * 32
    # 4 places (rows of 36 over 16-weight iterations): a chain of 3 selects a bit, 4 places and 3 compares, two
    # LUT6s a bit
    four = replace(engine, wword=4)
    grown = engine_resources(four, "int8", False) - engine_resources(wide, "int8", False)
    assert four.row_picks == 4 and grown[ff] == 12 * 8 + 32 and grown[lut] == 36 * 8 * 2 + 3 * 32


@pytest.mark.parametrize("where, old, new, check", [
    (None, None, None, None),
    # the row picked one place off, or at one place only: wrong weights
    ("static void wino_read_w", "whole[j] = row[4 - x * 4 + j];", "whole[j] = row[4 - x * 2 + j];", "csim"),
    ("static void wino_read_w", "if (extra == x * 4) {", "if (extra == 0) {", "csim"),
    # the select of fewer places than the model charges, or its lanes left rolled (a row over 36 cycles)
    ("static void wino_read_w", "pick: for (int x = 0; x < 2; ++x)", "pick: for (int x = 0; x < 1; ++x)", "lint"),
    ("static void wino_read_w", "              #pragma HLS UNROLL\n              whole[j]", "              whole[j]",
     "lint"),
    # the row register wider than the model's (C-simulation passes: the same weights picked)
    ("typedef hls::vector<data_t, 40> wino_wwin_t;", "typedef hls::vector<data_t, 40> wino_wwin_t;",
     "typedef hls::vector<data_t, 44> wino_wwin_t;", "lint"),
])
def test_weight_rows_end_to_end_run_bit_exact_and_each_check_fails_when_broken(tmp_path, where, old, new, check):
    """int8 F(4x4) on 2 x 2 lanes reading 4 weight ports: its 3x3 rows end to end in the stream, picked out of
    the row register at 2 places; the small network bit for bit, the trips the model's, the lint clean; then each
    defect put in on purpose caught."""
    *_, design, project, _ = _small_run(tmp_path, "int8", algorithm="winograd", board="vu9p", lanes=(2,), tile=4,
                                        weight_ports=(4,), taps=1)
    assert design.engines["winograd"].row_picks == 2
    if where is None:
        result = csim(project)
        assert result.passed and result.max_abs_error == 0.0, result.output[-2000:]
        assert check_trips(project, result.output) == [] and lint_network(project).ok
        return
    _mutate(project, old, new, after=where)
    if check == "lint":
        assert any("wino_read_w" in str(f) for f in lint_network(project).findings)
    else:
        assert not csim(project).passed


def test_weight_rows_end_to_end_over_many_steps_run_bit_exact(tmp_path, monkeypatch):
    """The same engine with every channel tile its fewest lanes: the 3x3 layer's steps are one row each (36
    weights, 4.5 iterations: each step's last padded, the row picked at the second place), over many output- and
    input-channel tiles (each step's burst at its own offset); the small network bit for bit, the trips the
    model's, the lint clean."""
    import cost_models.fpga_network_choices as explorer

    options = explorer.tile_options

    def fewest(extent, lanes=None, cap=24, multiple=1):
        found = options(extent, lanes, cap, multiple)
        return found[:1] if lanes is not None else found

    monkeypatch.setattr(explorer, "tile_options", fewest)
    *_, design, project, _ = _small_run(tmp_path, "int8", algorithm="winograd", board="vu9p", lanes=(2,), tile=4,
                                        weight_ports=(4,), taps=1)
    conv = next(p for p in design.layers if p.layer.engine == "winograd" and p.layer.R == 3)
    engine = design.engines["winograd"]
    assert engine.row_picks == 2 and conv.tiles.tk == conv.tiles.tc == 2
    assert conv.layer.K // 2 > 1 and conv.layer.C // 2 > 1 and engine.step_reads(conv.layer, 1) == 5
    result = csim(project)
    assert result.passed and result.max_abs_error == 0.0, result.output[-2000:]
    assert check_trips(project, result.output) == [] and lint_network(project).ok
