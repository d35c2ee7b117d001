"""One FPGA accelerator for a whole network (hetero_dse/targets/fpga_shared.py): the grid's lanes a layer maps
to, the space of a layer on a fixed PE array, and the network's design against a computation by hand."""

from __future__ import annotations

import pytest

from cost_models.fpga import FpgaModel
from cost_models.fpga_describe import describe
from hetero_dse.analysis import analyze
from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore.exhaustive import Exhaustive
from hetero_dse.hardware.board import RESOURCE_KINDS, load_board
from hetero_dse.ops import get_builtin
from hetero_dse.space.fpga import FpgaSpace, SpaceError, SpaceOptions
from hetero_dse.targets.fpga_search import search
from hetero_dse.targets.fpga_shared import explore_shared, grid_lanes

CONV = dict(batch=1, C=16, H=14, W=14, K=32, kernel=3, padding=1)
STEM = dict(batch=1, C=3, H=16, W=16, K=16, kernel=3, padding=1)
POINTWISE = dict(batch=1, C=32, H=14, W=14, K=16, kernel=1)
DEPTHWISE = dict(batch=1, C=32, H=14, W=14, kernel=3, padding=1)


def test_each_layer_maps_its_channels_to_the_grids_two_sides():
    assert grid_lanes(analyze(get_builtin("conv2d").instantiate(CONV))) == ("k", "rc")
    assert grid_lanes(analyze(get_builtin("gemm").instantiate({"M": 1, "N": 10, "K": 64}))) == ("j", "k")
    # each channel its own: no reduction two operands index alone, so a second engine's work
    assert grid_lanes(analyze(get_builtin("depthwise_conv2d").instantiate(DEPTHWISE))) is None


def test_a_fixed_pe_array_fixes_the_unroll_and_pads_a_short_loop():
    board = load_board("zcu104")
    op = get_builtin("conv2d").instantiate(STEM)
    space = FpgaSpace(analyze(op), board, ["float32"], [board.default_clock_mhz],
                      SpaceOptions(pe=(("k", 8), ("rc", 16))))
    values = dict(zip(space.loop_names, space.unroll_values, strict=True))
    tiles = dict(zip(space.loop_names, space.tile_values, strict=True))
    assert list(values["k"]) == [8] and list(values["rc"]) == [16]
    assert all(list(v) == [1] for name, v in values.items() if name not in ("k", "rc"))
    assert all(t % 8 == 0 for t in tiles["k"]) and list(tiles["rc"]) == [16]  # 3 channels padded to one tile of 16
    found = search(space, FpgaModel(space.tables), Exhaustive(space), top_k=1)
    design = describe(FpgaModel(space.tables), found.top_rows[0])
    assert design["pe"] == 8 * 16 and design["latency_s"] > 0
    with pytest.raises(SpaceError, match="does not have"):
        FpgaSpace(analyze(op), board, ["float32"], [200.0], SpaceOptions(pe=(("co", 8),)))


def test_the_network_design_is_its_layers_on_one_grid_counted_once():
    board = load_board("zcu104")
    layers = [(get_builtin("conv2d").instantiate(STEM), 1), (get_builtin("conv2d").instantiate(CONV), 2),
              (get_builtin("conv2d").instantiate(POINTWISE), 1),
              (get_builtin("depthwise_conv2d").instantiate(DEPTHWISE), 1)]
    design = explore_shared(layers, board, lanes=(4, 8, 16))
    assert design.second_engine == [layers[3][0].shape_name or layers[3][0].name]
    # by hand: each layer's best schedule on the chosen grid, exhaustively, times its count
    by_hand, own = 0.0, []
    for (op, count), placed in zip(layers[:3], design.layers, strict=True):
        out, red = grid_lanes(analyze(op))
        space = FpgaSpace(analyze(op), board, ["float32"], [board.default_clock_mhz],
                          SpaceOptions(pe=((out, design.out_lanes), (red, design.red_lanes))))
        model = FpgaModel(space.tables)
        found = search(space, model, Exhaustive(space), top_k=1)
        d = describe(model, found.top_rows[0])
        assert placed.latency_s == d["latency_s"] and d["pe"] == design.out_lanes * design.red_lanes
        by_hand += count * d["latency_s"]
        own.append(d["resources"])
    assert design.latency_s == pytest.approx(by_hand)
    # one PE array, its buffers sized for the largest tile: at least what any layer's own design needs
    for resources in own:
        assert all(design.resources[k] >= resources[k] - 1e-9 for k in ("dsp", "bram18k", "lut", "ff"))
    assert all(design.utilisation[k] <= 1.0 for k in RESOURCE_KINDS)
    # the fastest grid among those that fit
    fitting = [c for c in design.candidates if "why" not in c]
    assert design.latency_s == min(c["latency_s"] for c in fitting)
    assert {(c["out_lanes"], c["red_lanes"]) for c in design.candidates} == {(a, b) for a in (4, 8, 16)
                                                                             for b in (4, 8, 16)}


def test_a_network_the_grid_cannot_take_is_one_sentence():
    with pytest.raises(HeteroDSEError, match="no layer of the network has a channel reduction"):
        explore_shared([(get_builtin("depthwise_conv2d").instantiate(DEPTHWISE), 1)], load_board("zcu104"))
