"""Each layer's tiles as the network explorer takes them (``cost_models/fpga_network_choices.py``): the fastest that
fits each buffer size, kept while one search runs and never past it."""

from __future__ import annotations

import contextlib
from dataclasses import replace

import numpy as np
import pytest

from cost_models import fpga_network_choices as choices
from cost_models.fpga_network_choices import SIZES, keeping_choices, layer_choices, tile_table
from cost_models.fpga_network_design import _timing, explore_network
from cost_models.fpga_network_units import explore_throughput
from hetero_dse.hardware.board import load_board
from small_net import small_design, traced


@pytest.fixture(scope="module")
def small():
    """The small network's float32 design on ZCU102 (a grid and a depthwise engine), and its layers' shapes."""
    layers, design, *_ = small_design("float32")
    return design, [(layer.shape, 1) for layer in traced()[0]]


def _timing_of(design):
    return {"dtype": design.dtype, **_timing(design.board, design.dtype, design.clock_mhz * 1e6, design.word)}


def test_each_choice_is_the_layers_fastest_tile_that_fits_the_buffers(small):
    """For every buffer size, the tile ``layer_choices`` keeps is the one a search of the whole table finds: the
    least cycles among the tiles whose rows each buffer holds (the first of them where several tie); where none
    fits, the size is marked so."""
    design, _ = small
    timing = _timing_of(design)
    checked = 0
    for p in design.layers:
        engine = design.engines[p.layer.engine]
        tab = tile_table(engine, p.layer, timing, p.shape.residual)
        found = layer_choices(engine, p.layer, timing, p.shape.residual)
        for s, (in_rows, w_rows, out_rows) in enumerate(SIZES):
            fitting = [j for j in range(len(tab["cycles"])) if tab["in_rows"][j] <= in_rows
                       and tab["w_rows"][j] <= w_rows and tab["out_rows"][j] <= out_rows]
            assert found.fits[s] == bool(fitting)
            if not fitting:
                continue
            best = min(fitting, key=lambda j: (tab["cycles"][j], j))
            assert found.cycles[s] == tab["cycles"][best]
            assert list(found.tiles[s]) == [tab[k][best] for k in ("tk", "tc", "th", "tw")]
            assert list(found.rows[s]) == [tab[k][best] for k in ("in_rows", "w_rows", "out_rows", "tile_rows")]
            checked += 1
    assert checked >= len(design.layers)  # every layer fits some size (its design was built from them)


def test_a_search_keeps_the_choices_while_it_runs_and_drops_them_after(small):
    """Inside a search the same layer on the same engine and timing is scored once; outside one, and after one
    ends (returning or raising), nothing is kept: a model changed between two searches is the one the next sees."""
    design, _ = small
    timing = _timing_of(design)
    p = design.layers[0]
    engine = design.engines[p.layer.engine]
    assert layer_choices(engine, p.layer, timing) is not layer_choices(engine, p.layer, timing)

    @keeping_choices
    def search(fail=False):
        first = layer_choices(engine, p.layer, timing)
        again = layer_choices(engine, p.layer, dict(reversed(timing.items())))  # the same timing, in another order
        other = layer_choices(engine, p.layer, {**timing, "port_gbps": timing["port_gbps"] / 2})
        residual = layer_choices(engine, p.layer, timing, residual=True)  # a residual read beside each word written
        if fail:
            raise ValueError("a search that fails")
        return first, again, other, residual

    first, again, other, residual = search()
    assert again is first and other is not first and residual is not first
    assert np.all(residual.cycles >= first.cycles) and np.any(residual.cycles > first.cycles)
    assert choices._CHOICES is None
    with pytest.raises(ValueError):
        search(fail=True)
    assert choices._CHOICES is None


def test_the_designs_are_the_same_with_the_choices_kept_and_without(small, monkeypatch):
    """Keeping the choices only saves work: the batch-1 design and the compute units' are the same to the last
    tile and cycle with every table scored afresh."""
    _, shapes = small
    board = load_board("zcu102")

    def designs():
        one = explore_network(shapes, board, "float32", lanes=(4, 8))
        units = explore_throughput(shapes, board, "float32", lanes=(4, 8))
        return [(d.to_json(), d.candidates, [(p.tiles, p.cycles) for p in d.layers]) for d in (one, units)]

    scored = []
    table = choices.tile_table
    monkeypatch.setattr(choices, "tile_table", lambda *args: scored.append(args) or table(*args))
    kept, tables_kept = designs(), len(scored)
    monkeypatch.setattr(choices, "_choices_kept", contextlib.nullcontext)
    scored.clear()
    assert designs() == kept
    assert np.isfinite(kept[0][2][0][1])
    assert tables_kept < 0.8 * len(scored)  # and it saves work here: a layer's table recurs in these searches


def test_a_layers_compute_floor_is_counted_by_hand_and_never_above_its_tiles():
    """``compute_floor``: the PE loop's iterations over every step, each weight row a slot a pixel (a Winograd
    patch), at least the accumulation distance; never above the cycles of any tile the model scores."""
    from cost_models.fpga_network import EngineShape, NetLayer, compute_floor

    grid = EngineShape("grid", 4, 8, 8, 512, 1 << 30, 256, 5, 1)
    # 16 output and 24 input channels of a 3×3 layer on a 10×12 map: ⌈16/4⌉·⌈24/8⌉ rows a tap, 9 taps, 120 pixels
    assert compute_floor(grid, NetLayer("grid", 24, 16, 10, 12, 3, 3, 1, 1)) == 4 * 3 * 9 * 120
    # a linear layer: one pixel, but a row takes the accumulation distance's slots
    assert compute_floor(grid, NetLayer("grid", 64, 10, 1, 1, 1, 1)) == 3 * 8 * 5
    depthwise = replace(grid, kind="depthwise", in_lanes=1, taps=3, tap_rows=3)
    # 36 channels on 4 lanes, the 3×3 window a cycle, 8×8 outputs at stride 2 from 16×16
    assert compute_floor(depthwise, NetLayer("depthwise", 36, 36, 16, 16, 3, 3, 2, 1)) == 9 * 1 * 64
    winograd = replace(grid, kind="winograd", tile=2)  # F(2×2, 3×3): 2×2 outputs a patch
    assert compute_floor(winograd, NetLayer("winograd", 24, 16, 7, 7, 3, 3, 1, 1)) == 4 * 3 * 4 * 4

    # and never above any tile's cycles: the small network's engines (a grid, a depthwise engine and Winograd
    # F(2×2)'s, float32 and int8) at other lanes too, on every layer they take (its Winograd layers on the grid too)
    checked = 0
    for dtype, algorithm in (("float32", "direct"), ("int8", "winograd"), ("float32", "winograd")):
        _, design, *_ = small_design(dtype, algorithm, board="vu9p")
        timing = _timing_of(design)
        for p in design.layers:
            for lanes in ((1, 1), (4, 2), (2, 4)):
                engine = design.engines[p.layer.engine]
                engine = replace(engine, out_lanes=engine.out_lanes * lanes[0],
                                 in_lanes=engine.in_lanes * (lanes[1] if engine.kind != "depthwise" else 1))
                cycles = tile_table(engine, p.layer, timing, p.shape.residual)["cycles"]
                if cycles.size:  # (no tile where the lanes pass the layer's channels: the explorer pads them)
                    assert 0 < compute_floor(engine, p.layer) <= cycles.min()
                    checked += 1
    assert checked >= 3 * 5 * 2


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_the_compute_floor_is_never_above_any_tile_of_random_layers_and_engines(dtype):
    """The floor against the least cycles of every tile, on 90 engines and layers drawn at random: each kind of
    engine (the depthwise one taking one tap, a row's or the window a cycle; Winograd F(2×2) and F(4×4), its 1×1
    layers in its pointwise mode), strides 1 and 2, maps from one pixel to 15 a side, clocks either side of the
    one where float cores deepen."""
    from cost_models.fpga_network import EngineShape, NetLayer, compute_floor
    from cost_models.fpga_network_depths import accumulation_distance

    rng = np.random.default_rng(7)
    board, checked = load_board("zcu102"), 0
    for clock in (150.0, 250.0):
        timing = {"dtype": dtype, **_timing(board, dtype, clock * 1e6, 4)}
        for _ in range(45):
            kind = str(rng.choice(["grid", "depthwise", "winograd"]))
            r = int(rng.choice([1, 3] if kind != "grid" else [1, 3, 5]))
            taps, rows = (1, 1)
            if kind == "depthwise" and r > 1:
                taps, rows = [(1, 1), (r, 1), (r, r)][rng.integers(3)]
            engine = EngineShape(kind, int(rng.choice([4, 8, 16])), 1 if kind == "depthwise" else
                                 int(rng.choice([4, 8, 16])), 4, 512, 1 << 30, 256,
                                 accumulation_distance(dtype, clock), 1, False, 4, 4,
                                 int(rng.choice([2, 4])) if kind == "winograd" else 0,
                                 kind == "winograd" and dtype == "int8", kind == "winograd", taps=taps, tap_rows=rows)
            c = int(rng.choice([16, 32, 48, 64]))
            side = max(r, int(rng.choice([1, 3, 7, 14, 15])))
            layer = NetLayer(kind, c, c if kind == "depthwise" else int(rng.choice([16, 32, 64])), side, side, r, r,
                             1 if kind == "winograd" else int(rng.choice([1, 2])), r // 2)
            cycles = tile_table(engine, layer, timing)["cycles"]
            if cycles.size:
                assert 0 < compute_floor(engine, layer) <= cycles.min(), (engine, layer)
                checked += 1
    assert checked >= 60


def test_lanes_passed_over_by_their_floor_leave_the_design_as_it_was(monkeypatch):
    """The search passes over lanes whose layers' compute floors alone are slower than a design it has; with no
    design to bound them by (``SEED_LANES`` 0) it scores every one, and finds the same design."""
    from cost_models import fpga_network_design as nd

    shapes = [(layer.shape, 1) for layer in traced()[0]]
    board = load_board("zcu102")

    def search():
        d = explore_network(shapes, board, "int8", lanes=(4, 8, 16, 32))
        return d, (d.to_json() | {"candidates": 0, "passed_over": 0}, [(p.tiles, p.cycles) for p in d.layers])

    bounded, found = search()
    monkeypatch.setattr(nd, "SEED_LANES", 0)
    every, found_every = search()
    assert found == found_every
    assert bounded.passed_over > 0 and every.passed_over == 0 and bounded.candidates < every.candidates


def test_candidates_passed_over_by_their_floor_at_their_clock_leave_the_design_as_it_was(monkeypatch):
    """A candidate whose PE loops alone, at the clock it closes at, are slower than a design the search has is not
    designed: ResNet-18 on u280 in float32, where a design over two SLRs closes at 3/4 of the target clock,
    designs fewer candidates for the same design than with no floor (lanes' bound off in both: ``SEED_LANES`` 0)."""
    from cost_models import fpga_network_design as nd
    from hetero_dse.model.capture import capture
    from hetero_dse.model.layer_shape import shape_of
    from hetero_dse.model.zoo import build

    model, example = build("resnet18")
    graph = capture(model, example, "resnet18", profile=False)
    shapes = [(shape_of(op, from_host=i == 0), layer.count)
              for i, (op, layer) in enumerate(zip(graph.operators(), graph.layers, strict=True))]
    designed, design = [], nd._design
    monkeypatch.setattr(nd, "SEED_LANES", 0)
    monkeypatch.setattr(nd, "_design", lambda *args: designed.append(args) or design(*args))

    def search():
        designed.clear()
        d = explore_network(shapes, load_board("u280"), "float32", lanes=(16, 64), algorithm="direct")
        return (d.to_json() | {"candidates": 0}, [(p.tiles, p.cycles) for p in d.layers]), len(designed)

    found, floored = search()
    assert found[0]["achieved_mhz"] < found[0]["clock_mhz"]  # (derated: the case the floor is for)
    monkeypatch.setattr(nd, "compute_floor", lambda engine, layer: 0)
    again, every = search()
    assert again == found and floored < every


def test_a_placed_layers_cycles_are_the_model_at_the_clock_the_design_closes_at(small):
    """``placed_cycles``: a layer in its tiles at the design's achieved clock, the model's ``layer_cycles`` there
    (its pipeline's depths at that clock), as the design reports it; kept within a search, fresh outside one."""
    from cost_models.fpga_network import layer_cycles
    from cost_models.fpga_network_choices import pipeline_depths, placed_cycles

    design, _ = small
    timing = {"dtype": design.dtype, **_timing(design.board, design.dtype, design.achieved_mhz * 1e6, design.word)}

    @keeping_choices
    def twice(p):
        engine = design.engines[p.layer.engine]
        return [placed_cycles(engine, p.layer, p.tiles, p.shape.residual, timing, design.achieved_mhz)
                for _ in range(2)]

    for p in design.layers:
        engine = design.engines[p.layer.engine]
        t = {k: np.array([v]) for k, v in p.tiles.__dict__.items()}
        by_hand = float(layer_cycles(engine, p.layer, t, residual=p.shape.residual,
                                     **pipeline_depths(engine, design.dtype, design.achieved_mhz),
                                     **{k: v for k, v in timing.items() if k != "dtype"})[0])
        assert twice(p) == [by_hand, by_hand] == [p.cycles, p.cycles]
        assert placed_cycles(engine, p.layer, p.tiles, p.shape.residual, timing, design.achieved_mhz) == by_hand
