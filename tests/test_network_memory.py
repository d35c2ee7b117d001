"""The network kernel's buffers against the board's memory (issue 38): each compute unit's weights, arena and
parameters, counted by hand, on the banks its ports are connected to; a design whose banks cannot hold them is
never offered, and where none can be the explorer says so in one sentence."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cost_models.fpga_network_design import explore_network
from cost_models.fpga_network_memory import (Footprint, bank_bytes, bank_loads, design_footprint, fitting_weight_ports,
                                             footprint, memory_problem, weight_span)
from cost_models.fpga_network_ports import port_banks
from cost_models.fpga_network_units import explore_throughput
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import load_board
from hetero_dse.model.layer_shape import LayerShape

#: the image's 3×3 convolution (stride 2), a depthwise 3×3, a 1×1 run twice, a linear layer on 8×8 pixels
LAYERS = [(LayerShape("grid", 3, 16, 32, 32, 3, 3, 2, 1, from_host=True, name="stem"), 1),
          (LayerShape("depthwise", 16, 16, 16, 16, 3, 3, 1, 1, name="dw"), 1),
          (LayerShape("grid", 16, 16, 16, 16, name="pw"), 2),
          (LayerShape("grid", 16, 10, 1, 16 * 16, name="fc"), 1)]
WEIGHTS = 16 * 3 * 9 + 16 * 9 + 2 * 16 * 16 + 10 * 16   # elements
ARENA = 3 * 32 * 32 + 16 * 16 * 16 + 16 * 16 * 16 + 2 * 16 * 16 * 16 + 10 * 16 * 16  # the input, then each output
CHANNELS = 16 + 16 + 2 * 16 + 10


def with_capacity(board: str, gib: float):
    b = load_board(board)
    return replace(b, memories=(replace(b.memory, capacity_gib=gib), *b.memories[1:]))


def test_a_units_buffers_are_the_networks_tensors_counted_by_hand():
    f32, i8 = footprint(LAYERS, "float32"), footprint(LAYERS, "int8")
    assert (f32.weights, f32.arena, f32.params) == (4 * WEIGHTS, 4 * ARENA, 4 * CHANNELS)
    # int8: a byte an element; each channel's 32-bit bias and requantising multiplier
    assert (i8.weights, i8.arena, i8.params) == (WEIGHTS, ARENA, 2 * 4 * CHANNELS)


def test_the_buffers_lie_on_the_banks_the_ports_are_connected_to():
    """On vu9p's four channels with two weight ports: a lone kernel's arena on DDR[0], its weights' halves on
    DDR[1] and DDR[2], its parameters on DDR[1]; a second unit's set begins where the first's ends."""
    f = footprint(LAYERS, "int8")
    assert port_banks(0, 4, 2) == {"arena": 0, "params": 1, "weights": [1, 2]}
    half = -(-f.weights // 2)
    assert bank_loads(f, 4, 2, 1) == {0: f.arena, 1: f.params + half, 2: half}
    two = bank_loads(f, 4, 2, 2)
    second = port_banks(1, 4, 2)
    assert second["arena"] == 3 and two[3] == f.arena + (half if 3 in second["weights"] else 0)
    assert sum(two.values()) == 2 * (f.arena + f.params + 2 * half)
    # one channel (a Zynq): everything of every unit on it
    assert bank_loads(f, 1, 3, 2) == {0: 2 * (f.arena + f.params + 3 * -(-f.weights // 3))}


def test_where_no_bank_holds_a_units_arena_one_sentence_says_so():
    """A weight port's part past a bank spans banks in a row (below); an arena past one cannot, and the explorer
    says which bank would hold how much of what it holds, and that int8 would fit."""
    big = [*LAYERS, (LayerShape("grid", 512, 512, 1, 1, name="classifier"), 1)]  # weights far past the arena
    f = footprint(big, "float32")
    assert f.weights > 10 * f.arena
    # each of u280's 32 banks holding a little more than the parameters and half the weights: one port spans two
    u280 = with_capacity("u280", 32 * (f.params + f.weights // 2 + 64) / 2**30)
    assert fitting_weight_ports(big, u280, "float32", (1, 2, 3, 4), 1) == (1, 2, 3, 4)
    assert weight_span(f, u280.memory, 1) == 2 and weight_span(f, u280.memory, 2) == 1
    explore_network(big, u280, "float32")
    with pytest.raises(HeteroDSEError, match=r"do not fit u280's memory in float32 \(4 weight ports\): HBM\[0\] "
                                             r"would hold .* of the .* it holds \(each unit: weights .*, activations "
                                             r".*\); in int8 they fit \(--dtype int8\)$"):
        explore_network(big, with_capacity("u280", 32 * 0.5 * f.arena / 2**30), "float32")


def test_compute_units_stop_where_their_copies_no_longer_fit_one_memory():
    """On a Zynq every unit keeps its own weights and arena in the one DDR: with room for one unit's buffers and
    not two, the throughput design has one unit, though the device would take more. (Channels of 64 and no image
    layer: the kernel pads them little, so one unit's padded buffers are less than two units' tensors.)"""
    layers = [(LayerShape("grid", 64, 64, 16, 16, 3, 3, 1, 1, name="a"), 1),
              (LayerShape("grid", 64, 128, 16, 16, name="b"), 2), (LayerShape("grid", 128, 10, 1, 256, name="fc"), 1)]
    roomy = explore_throughput(layers, load_board("zcu102"), "int8")
    assert roomy.compute_units > 1
    one = explore_network(layers, load_board("zcu102"), "int8")
    f = design_footprint(one)  # as its layout deals them: one weight port's buffer, the arena, the parameters
    room = 1.01 * (f.port_bytes(one.w_ports) * one.w_ports + f.arena + f.params)
    one_unit = explore_throughput(layers, with_capacity("zcu102", room / 2**30), "int8")
    assert one_unit.compute_units == 1
    # and says so: the second unit's buffers are what does not fit
    assert one_unit.units_stop.startswith("2 compute units do not fit: the network's buffers do not fit zcu102's "
                                          "memory in int8")
    assert one_unit.to_json()["units_stop"] == one_unit.units_stop


def test_a_project_whose_test_data_the_boards_memory_cannot_hold_is_not_written(tmp_path):
    """The project ``explore --model`` writes runs each distinct layer on random data of its own (its input and
    residual besides its output), and its host allocates those buffers on the banks its ports are connected to:
    where they do not fit, no project is written and the reason is one sentence (the design's figures stand),
    though the design's own buffers, the network's, were counted to fit."""
    from small_net import traced

    from hetero_dse.hls.network_layout import lay_out
    from hetero_dse.hls.network_project import write_network_project
    from hetero_dse.hls.network_run import random_run
    from hetero_dse.hls.project import TestBenchTooLarge
    from hetero_dse.model.capture import capture
    from hetero_dse.model.layer_shape import shape_of

    _, _, model, x = traced()
    graph = capture(model, x, "small", profile=False)
    ops = graph.operators()
    shapes = [(shape_of(op, from_host=i == 0), layer.count)
              for i, (op, layer) in enumerate(zip(ops, graph.layers, strict=True))]
    design = explore_network(shapes, load_board("zcu102"), "int8", weight_ports=(1,))
    run = random_run(design, ops)
    f, data = design_footprint(design), lay_out(run, design)
    arena = data["arena_words"] * design.word
    assert arena > f.arena  # each layer's input and residual besides the network's tensors
    # room for the design's buffers and not for the project's test data
    room = f.port_bytes(1) + f.params + (f.arena + arena) // 2
    design.board = with_capacity("zcu102", room / 2**30)
    assert memory_problem(design) is None
    with pytest.raises(TestBenchTooLarge, match=r"^its test data, as the host would allocate it: the network's "
                                                r"buffers do not fit zcu102's memory in int8 \(1 weight port\)"):
        write_network_project(tmp_path / "p", design, run)
    assert not (tmp_path / "p").exists()
    design.board = with_capacity("zcu102", 2 * room / 2**30)
    assert (write_network_project(tmp_path / "p", design, run) / "design.json").exists()


def test_a_network_whose_test_data_is_past_the_limit_gets_a_project_of_as_many_layers_as_it_holds(tmp_path,
                                                                                                 monkeypatch):
    """Where every distinct layer's random data would be past the test bench's limit (YOLO-v1 in float32 on u280:
    1.13 GB), the project is written for each engine's smallest layer and then the others in order while they fit,
    says so (its README, the report), and C-simulates them: the hardware is the design's, the table shorter."""
    from small_net import traced

    from hetero_dse.network_report import _project
    from hetero_dse.hls import network_project
    from hetero_dse.hls.csim import csim
    from hetero_dse.hls.network_project import check_trips, write_network_random
    from hetero_dse.hls.network_run import random_run, run_bytes, test_bench_layers
    from hetero_dse.model.capture import capture
    from hetero_dse.model.layer_shape import shape_of

    _, _, model, x = traced()
    graph = capture(model, x, "small", profile=False)
    ops = graph.operators()
    shapes = [(shape_of(op, from_host=i == 0), layer.count)
              for i, (op, layer) in enumerate(zip(ops, graph.layers, strict=True))]
    design = explore_network(shapes, load_board("zcu102"), "float32")
    sizes = [run_bytes(p) for p in design.layers]
    # the bound is never below what the project counts of each layer's run (its weights, input, residual, twice its
    # reference)
    whole = random_run(design, ops)
    for i, r in enumerate(whole.layers):
        inputs = [whole.inputs[f"x{i}"], *([whole.inputs[f"r{i}"]] if r.residual else [])]
        assert r.weight.nbytes + 2 * r.reference.nbytes + sum(a.nbytes for a in inputs) <= sizes[i]
    assert test_bench_layers(design, sum(sizes)) == list(range(len(sizes)))
    # each engine's smallest first (the grid's and the depthwise engine's), then the others in order while they fit
    kinds = {p.layer.engine for p in design.layers}
    smallest = {min((i for i, p in enumerate(design.layers) if p.layer.engine == k), key=sizes.__getitem__)
                for k in kinds}
    first_other = next(i for i in range(len(sizes)) if i not in smallest)
    limit = sum(sizes[i] for i in smallest) + sizes[first_other]
    chosen = test_bench_layers(design, limit)
    assert smallest | {first_other} <= set(chosen) and sum(sizes[i] for i in chosen) <= limit < sum(sizes)
    assert test_bench_layers(design, min(sizes) - 1) == []
    monkeypatch.setattr(network_project, "MAX_DATA_BYTES", limit)
    project, ran = write_network_random(tmp_path / "p", design, ops)
    assert ran == len(chosen) < len(design.layers)
    assert f"{ran} of the design's {len(design.layers)} distinct layers" in (project / "README.md").read_text()
    result = csim(project)
    assert result.passed and result.mismatches == 0 and check_trips(project, result.output) == []
    assert "(its test data for 2 of its 6" in _project({"directory": "p", "test_data": "for 2 of its 6 distinct"})
    monkeypatch.setattr(network_project, "MAX_DATA_BYTES", min(sizes) - 1)
    with pytest.raises(HeteroDSEError, match="smallest layer alone has more test data than the limit"):
        write_network_random(tmp_path / "q", design, ops)


def test_every_board_file_gives_its_whole_memory():
    """``capacity_gib`` is the memory's, all its channels together (an AWS F1 card's four DDR4 channels of 16 GiB:
    64 GiB; a U280's 32 HBM pseudo-channels of 256 MiB: 8 GiB)."""
    assert load_board("vu9p").memory.capacity_gib == 64
    assert load_board("u280").memory.capacity_gib == 8 and load_board("u280").memory.channels == 32


def test_a_weight_part_one_hbm_bank_cannot_hold_spans_banks_in_a_row():
    """u280's pseudo-channels hold 256 MiB each: a weight port's part past that spans as many in a row as hold it,
    the spans one after the other past the arena's bank, and each unit's set after the last one's; the load of each
    bank of a span is its share of the part."""
    u280 = load_board("u280").memory
    bank = 2**28
    assert bank_bytes(u280) == bank
    f = Footprint(weights=int(1.5 * bank), arena=2**20, params=2**10)
    assert [weight_span(f, u280, q) for q in (1, 2, 3)] == [2, 1, 1]
    assert weight_span(Footprint(int(4.1 * bank), 2**20, 0), u280, 4) == 2  # YOLO-v1 in float32: 1.09 GB
    # each unit's set: its arena and parameters on the first bank, each port's span at a multiple of its length
    assert port_banks(0, 32, 2, span=2) == {"arena": 0, "params": 0, "weights": [2, 4]}
    assert port_banks(1, 32, 2, span=2) == {"arena": 6, "params": 6, "weights": [8, 10]}
    part = int(1.5 * bank)  # filled from the range's first bank, as XRT places a buffer
    assert bank_loads(f, 32, 1, 2, span=2) == {0: f.arena + f.params, 2: part // 2, 3: part - part // 2,
                                                 4: f.arena + f.params, 6: part // 2, 7: part - part // 2}
    assert weight_span(f, load_board("vu9p").memory, 1) == 1  # ranges are HBM's: a DDR bank holds its part or not
    # too many units for the spans: said, not wrapped onto one another
    layers = [(LayerShape("grid", 8192, 8192, 1, 1, name="fc"), 1)]  # 256 MiB of float32 weights, and more
    spanned = with_capacity("u280", 32 * 0.2)  # banks of 205 MiB
    assert fitting_weight_ports(layers, spanned, "float32", (1,), 1) == (1,)
    with pytest.raises(HeteroDSEError, match=r"each weight port's 268.44 MB spans 2 of its 32 banks, and each unit's "
                                             r"arena and spans take 4: at most 8 compute units; in int8 they fit"):
        fitting_weight_ports(layers, spanned, "float32", (1,), 11)


def test_a_spanning_weight_port_is_connected_to_its_range_and_the_host_runs_on_it(tmp_path, monkeypatch):
    """The project connects a spanning weight port to its range of banks (``HBM[1:2]``) and the XRT test double
    takes the range's first bank for it: the host program runs the small network on it, every output checked."""
    from small_net import small_design
    from test_network_kernel import _run_host

    import cost_models.fpga_network_memory as memory
    from hetero_dse.hls.network_project import write_network_project

    _, design, run, _, _ = small_design("int8", board="u280", weight_ports=(1,))
    monkeypatch.setattr(memory, "design_span", lambda d: 2)  # the small network's weights fit one bank
    project = write_network_project(tmp_path / "spans", design, run)
    cfg = (project / "connectivity.cfg").read_text()
    assert "sp=network_kernel_1.wgt:HBM[2:3]" in cfg and "sp=network_kernel_1.act_in:HBM[0]" in cfg
    assert "sp=network_kernel_1.params:HBM[0]" in cfg
    assert "Each weight port's buffer spans 2 banks in a row" in cfg
    ran = _run_host(tmp_path, project)
    assert ran.returncode == 0 and "mismatches=0" in ran.stdout, ran.stdout + ran.stderr


@pytest.mark.parametrize("dtype, algorithm, board, ports", [("float32", "direct", "zcu102", (1, 2)),
                                                            ("int8", "winograd", "vu9p", (1,)),
                                                            ("float32", "winograd", "vu9p", (2,)),
                                                            ("int8", "direct", "vu9p", (4,))])
def test_a_designs_buffers_are_what_its_layout_gives_the_host(dtype, algorithm, board, ports):
    """``design_footprint`` against the small network's layout (``lay_out``, every layer once, as the host
    allocates each buffer): each weight port's buffer exact (each row padded at its front to whole iterations of
    its engine's reads, or a step's rows end to end; a float32 Winograd engine's weights counted as their α²
    transformed values; a 4 × 4 Winograd engine's 1×1 rows, one word each over two ports, padded to two), the
    parameters exact, the arena never below (its regions' halos and guards counted), above
    by a region whose shape another layer's input shares taking that layer's halo: here, of 8×8 maps whose
    padding is a quarter of them again, at most a quarter."""
    from small_net import small_design

    from hetero_dse.hls.network_layout import lay_out

    _, design, run, _, _ = small_design(dtype, algorithm=algorithm, board=board, weight_ports=ports)
    data, element, f = lay_out(run, design), 1 if dtype == "int8" else 4, design_footprint(design)
    weights = data["weight_words"] * design.wword * element
    assert f.port_bytes(design.w_ports) == weights
    assert f.params == data["param_words"] * design.pword * 4
    arena = data["arena_words"] * design.word * element
    assert arena <= f.arena <= 1.25 * arena
