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
from hetero_dse.targets.fpga_shared import (MEMORY_SHARES, with_memory_share, channel_lanes, explore_shared,
                                            grid_lanes, weight_tensors)

CONV = dict(batch=1, C=16, H=14, W=14, K=32, kernel=3, padding=1)
STEM = dict(batch=1, C=3, H=16, W=16, K=16, kernel=3, padding=1)
POINTWISE = dict(batch=1, C=32, H=14, W=14, K=16, kernel=1)
DEPTHWISE = dict(batch=1, C=32, H=14, W=14, kernel=3, padding=1)


def test_each_layer_maps_its_channels_to_the_grids_two_sides():
    assert grid_lanes(analyze(get_builtin("conv2d").instantiate(CONV))) == ("k", "rc")
    assert grid_lanes(analyze(get_builtin("gemm").instantiate({"M": 1, "N": 10, "K": 64}))) == ("j", "k")
    # a batch larger than the output channels stays off the grid's output side: the image, not the weights,
    # is indexed by it
    assert grid_lanes(analyze(get_builtin("conv2d").instantiate({**CONV, "batch": 64}))) == ("k", "rc")
    # each channel its own: no reduction two operands index alone, so the second engine's: channels × rows
    depthwise = analyze(get_builtin("depthwise_conv2d").instantiate(DEPTHWISE))
    assert grid_lanes(depthwise) is None and channel_lanes(depthwise) == ("c", "j")
    assert weight_tensors(depthwise, "c") == {"W"} and weight_tensors(analyze(get_builtin("conv2d").instantiate(CONV)),
                                                                      "k") == {"W"}


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


def test_the_network_design_is_its_layers_on_its_engines_counted_once():
    board = load_board("zcu104")
    layers = [(get_builtin("conv2d").instantiate(STEM), 1), (get_builtin("conv2d").instantiate(CONV), 2),
              (get_builtin("conv2d").instantiate(POINTWISE), 1),
              (get_builtin("depthwise_conv2d").instantiate(DEPTHWISE), 1)]
    design = explore_shared(layers, board, lanes=(4, 8, 16))
    grid, depthwise = design.engines
    assert (grid.kind.name, depthwise.kind.name) == ("grid", "depthwise")
    assert [layer.op for layer in grid.layers] == [op for op, _ in layers[:3]]
    assert [layer.op for layer in depthwise.layers] == [layers[3][0]]
    # by hand: each layer's best schedule on its engine's arrays, exhaustively, times its count
    by_hand = 0.0
    for engine, lanes_of in ((grid, grid_lanes), (depthwise, channel_lanes)):
        own = []
        for placed in engine.layers:
            a, b = lanes_of(analyze(placed.op))
            pe = ((a, engine.lanes[0]), (b, engine.lanes[1])) if engine.lanes[1] > 1 else ((a, engine.lanes[0]),)
            held = with_memory_share(board, engine.memory_share)  # each layer's schedule held to its share
            space = FpgaSpace(analyze(placed.op), held, ["float32"], [board.default_clock_mhz], SpaceOptions(pe=pe))
            model = FpgaModel(space.tables)
            d = describe(model, search(space, model, Exhaustive(space), top_k=1).top_rows[0])
            assert placed.latency_s == d["latency_s"] and d["pe"] == engine.lanes[0] * engine.lanes[1]
            by_hand += placed.count * d["latency_s"]
            own.append(d["resources"])
        # one array, its buffers sized for the largest tile: at least what any of its layers' designs needs
        for resources in own:
            assert all(engine.resources[k] >= resources[k] - 1e-9 for k in ("dsp", "bram18k", "lut", "ff"))
    # one clock for the whole design, no faster than any layer's own: each layer's time at it
    assert 0 < design.achieved_mhz <= min(layer.clock_mhz for layer in design.layers)
    at_one_clock = sum(layer.count * layer.latency_s * layer.clock_mhz / design.achieved_mhz for layer in design.layers)
    assert design.latency_s == pytest.approx(at_one_clock) and design.latency_s >= by_hand * (1 - 1e-12)
    # the two arrays share the device: their resources add up, and fit
    assert all(design.resources[k] == pytest.approx(grid.resources[k] + depthwise.resources[k]) for k in RESOURCE_KINDS)
    assert all(design.utilisation[k] <= 1.0 for k in RESOURCE_KINDS)
    # the fastest pair of arrays among those that fit together
    fitting = [c for c in design.candidates if "why" not in c]
    grids = [c for c in fitting if c["engine"] == "grid"]
    dws = [c for c in fitting if c["engine"] == "depthwise"]
    sums = [g["latency_s"] + d["latency_s"] for g in grids for d in dws
            if all(g["utilisation"][k] + d["utilisation"][k] <= 1.0 for k in RESOURCE_KINDS)]
    assert design.latency_s == pytest.approx(min(sums))
    assert {(*c["lanes"], c["memory_share"]) for c in design.candidates if c["engine"] == "grid"} == {
        (a, b, share) for a in (4, 8, 16) for b in (4, 8, 16) for share in MEMORY_SHARES}


def test_a_layer_no_engine_takes_is_one_sentence(monkeypatch):
    import hetero_dse.targets.fpga_shared as shared

    monkeypatch.setattr(shared, "ENGINES", shared.ENGINES[1:])  # the depthwise engine alone
    with pytest.raises(HeteroDSEError, match=r"conv2d\) fits no engine of a shared accelerator"):
        explore_shared([(get_builtin("conv2d").instantiate(CONV), 1)], load_board("zcu104"))
