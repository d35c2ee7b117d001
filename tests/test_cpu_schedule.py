"""CPU schedule space (issue 4, first part): points from the generated space build with TVM and compute
exactly what the operator's reference computes."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from gpu_cpu.main_block import weight_blocks
from gpu_cpu.schedule import apply_cpu, build_cpu, pack_weights, run_cpu, weight_layouts
from hetero_dse.space.cpu import CpuSpace
from hetero_dse.space.splits import factorizations
from hetero_dse.analysis import analyze
from hetero_dse.ops import BUILTIN, get_builtin
from hetero_dse.space.fpga import SpaceError
from hetero_dse.space.point import Point


def test_factorizations_are_every_ordered_divisible_split():
    assert factorizations(12, 2) == ((1, 12), (2, 6), (3, 4), (4, 3), (6, 2), (12, 1))
    assert len(factorizations(224, 4)) == 224  # 2^5 * 7: C(8,3) * C(4,3)
    assert all(np.prod(f) == 13 for f in factorizations(13, 3)) and len(factorizations(13, 3)) == 3


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_sampled_schedules_build_and_match_the_reference(name, dtype):
    op = get_builtin(name).instantiate({"dtype": dtype}, shape="small:s2")
    space = CpuSpace(analyze(op))
    inputs = op.random_inputs(0)
    want = op.reference(inputs).astype(np.float64)
    rows = space.sample(2, np.random.default_rng(zlib.crc32(name.encode())))  # stable across runs
    for i, row in enumerate(rows):
        # both loop orders; producers inlined in one, computed first in the other; vectorised along the
        # innermost output dimension in one, along the outermost (inputs packed, tile transposed) in the other
        for j, knob in enumerate(space.choices):
            column = len(space.loops) + j
            if knob == "vector":
                row[column] = i * (space.cardinalities[column] - 1)
            elif knob in ("order", "inline", "block"):  # the second point's weights blocked, where it has some
                row[column] = i % space.cardinalities[column]
        point = space.decode(row)
        assert np.array_equal(space.encode(point), row)
        if point.get("block") and not space.violations(point):  # a point of the space that blocks, blocks
            assert weight_blocks(op, point), point
        got = run_cpu(build_cpu(apply_cpu(op, point)), op, inputs, point).astype(np.float64)
        if dtype == "int8":
            assert np.array_equal(got, want), point
        else:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=str(point))


def test_points_outside_the_space_are_refused():
    space = CpuSpace(analyze(get_builtin("gemm").instantiate(shape="small:s1")))
    point = space.decode(np.zeros(space.num_knobs, dtype=int))
    with pytest.raises(SpaceError, match="not a factorisation of 16"):
        space.encode(point.replace(**{"split.i": (3, 1, 1, 1)}))
    with pytest.raises(SpaceError, match="not a point of the CPU space"):
        space.decode([99] * space.num_knobs)


def test_vectorising_over_output_channels_takes_the_weights_packed_and_transposes_the_tile():
    op = get_builtin("conv2d").instantiate(shape="small:s1")
    space = CpuSpace(analyze(op))
    assert space.choices["vector"] == ("j", "i", "k")  # b has extent 1
    point = space.decode(np.zeros(space.num_knobs, dtype=int)).replace(
        **{"split.k": (2, 1, 1, 4), "vector": "k", "order": 0, "inline": 0})
    # W[k, c, r, s] is a weight: the kernel takes it as [c, r, s, k], packed once ahead, not per tile
    assert weight_layouts(op, point) == {1: (1, 2, 3, 0)}
    script = apply_cpu(op, point).script()
    assert 'W: T.Buffer((4, 3, 3, 8), "float32")' in script and "W_global" not in script
    assert '"hetero_dse.packed_weights": {"W": [1, 2, 3, 0]}' in script  # the module says so itself
    assert "O_global[v_b, v_i, v_j, v_k]" in script  # the accumulated tile with k innermost
    assert "T.vectorized(4)" in script
    inputs = op.random_inputs(0)
    packed = pack_weights(op, point, inputs)
    assert packed[0] is inputs[0] and packed[1].shape == (4, 3, 3, 8) and packed[1].flags.c_contiguous
    np.testing.assert_allclose(run_cpu(build_cpu(apply_cpu(op, point)), op, inputs, point), op.reference(inputs),
                               rtol=1e-4, atol=1e-5)
    # vectorised along j, W's dimensions are read as they are: nothing to pack
    assert weight_layouts(op, point.replace(vector="j", **{"split.k": (2, 1, 4, 1), "split.j": (1, 2, 1, 4)})) == {}


def test_an_input_that_is_not_a_weight_is_packed_per_tile_at_run_time():
    op = get_builtin("gemm").instantiate(shape="small:s1")  # A[i, k] · B[k, j]: A is no weight (B is)
    assert op.weights == ("B",)
    space = CpuSpace(analyze(op))
    point = space.decode(np.zeros(space.num_knobs, dtype=int)).replace(
        **{"split.i": (2, 1, 1, 8), "vector": "i", "order": 0})
    assert weight_layouts(op, point) == {}
    script = apply_cpu(op, point).script()
    assert "A_global = T.sblock_alloc_buffer((16, 16))" in script  # A's tile packed with i innermost
    inputs = op.random_inputs(0)
    np.testing.assert_allclose(run_cpu(build_cpu(apply_cpu(op, point)), op, inputs, point), op.reference(inputs),
                               rtol=1e-4, atol=1e-5)


def test_the_cpu_space_is_pruned_of_points_known_to_be_slow():
    op = get_builtin("conv2d").instantiate(shape="yolo:C15")  # k 1024, i = j = 7; 3×3 window, padded
    space = CpuSpace(analyze(op), vector_bits=512)
    assert space.lanes == 16 and space.max_accumulators == 28
    good = space.decode(np.zeros(space.num_knobs, dtype=int)).replace(
        **{"split.k": (64, 1, 1, 16), "split.i": (1, 7, 1, 1), "split.j": (1, 1, 1, 7), "vector": "k", "inline": 0})
    assert space.violations(good) == []  # 16 lanes × 7 rows of accumulators, 64 parallel tiles
    assert space.violations(good.replace(**{"split.k": (256, 1, 1, 4), "split.j": (1, 1, 1, 7)})) == \
        ["vectorised loop k fills 4 of 16 lanes"]
    assert space.violations(good.replace(**{"split.k": (16, 1, 1, 64)})) == []  # 4 vectors × 7 = 28: just fits
    assert space.violations(good.replace(**{"split.k": (8, 1, 1, 128)})) == ["register tile of 56 vectors > 28"]
    assert space.violations(good.replace(**{"split.j": (7, 1, 1, 1)})) == \
        ["register tile of 1 vectors < 4: FMA latency exposed"]
    assert space.violations(good.replace(**{"split.k": (1, 64, 1, 16), "split.i": (1, 1, 1, 7)})) == \
        ["register tile of 49 vectors > 28"] + ([f"1 parallel outer iterations for {space.cores} cores"]
                                               if space.cores > 1 else [])
    assert space.violations(good.replace(vector="j", inline=1, **{"split.k": (64, 1, 16, 1)})) == \
        ["register tile of 1 vectors < 4: FMA latency exposed", "inlined padding would be tested in every lane of j"]
    rows = space.sample(32, np.random.default_rng(0))
    assert space.valid(rows).all() and space.valid(space.neighbours(rows, np.random.default_rng(1))).all()


def test_a_point_read_back_with_its_knobs_in_another_order_schedules_the_same_loops():
    # a JSON tool may sort an object's keys (jq -S, PostgreSQL's jsonb); each split belongs to its loop by
    # name, so C2's k=(4,3,2,8) must not land on i or j
    from gpu_cpu.schedule import apply_gpu
    from hetero_dse.hardware.gpus import get_device
    from hetero_dse.space.gpu import GpuSpace

    op = get_builtin("conv2d").instantiate(shape="yolo:C2")
    for space, apply in ((CpuSpace(analyze(op)), apply_cpu),
                         (GpuSpace(analyze(op), get_device("h100")), lambda o, p: apply_gpu(o, p))):
        point = space.decode(space.sample(1, np.random.default_rng(3))[0])
        shuffled = Point(dict(sorted(point.to_json().items(), reverse=True)))
        assert list(shuffled) != list(point)
        assert apply(op, shuffled).script() == apply(op, point).script()


def test_the_soft_rules_are_decided_once_when_the_space_is_made():
    """A space is a value: whether it keeps its soft rules (wishes a small operator may not meet) is decided
    from seeded draws when it is made, the same for the same operator, and sampling never changes it."""
    analysis = analyze(get_builtin("gemm").instantiate({"M": 2, "N": 2, "K": 2}))
    space = CpuSpace(analysis, vector_bits=512)
    assert space.soft_rules is False  # 2x2 has too little work for the cores and the FMA pipelines
    assert CpuSpace(analysis, vector_bits=512).soft_rules is space.soft_rules
    big = CpuSpace(analyze(get_builtin("conv2d").instantiate(shape="yolo:C2")), vector_bits=512)
    assert big.soft_rules is True
    big.sample(32, np.random.default_rng(0))
    assert big.soft_rules is True and CpuSpace(analysis, vector_bits=512, soft_rules=True).soft_rules is True


def test_blocked_weights_are_read_as_one_run_a_parallel_iteration_and_packed_as_schedule_json_says():
    """``block``: the packed weight's vectorised dimension n split as [n / block, ..., block], the block one
    parallel iteration's share (YOLO-v1's 50,176 → 4,096 linear layer: 0.33× torch with the rows of B read 64
    at a time, 1.17-1.83× blocked, BENCHMARKS.md). Computes the reference; the numbers laid out as
    ``schedule.json``'s own recipe lays them; torch's tensors (a network's) packed the same."""
    import torch

    from hetero_dse.targets.cpu import packed_weights

    op = get_builtin("gemm").instantiate({"M": 1, "N": 256, "K": 64})
    space = CpuSpace(analyze(op))
    point = Point({"split.i": (1, 1, 1, 1), "split.j": (4, 1, 1, 64), "split.k": (2, 1, 32), "unroll": 16,
                   "order": 0, "inline": 1, "vector": "j", "block": 1})
    assert np.array_equal(space.decode(space.encode(point)), point)
    inputs = op.random_inputs(0)
    a, b = inputs
    packed = pack_weights(op, point, inputs)[1]
    assert packed.shape == (4, 64, 64) and np.array_equal(packed[2, 5], b[5, 128:192])  # block 2, row 5
    script = apply_cpu(op, point).script()
    assert "B: T.Buffer((4, 64, 64)" in script and '"hetero_dse.blocked_weights": {"B": 64}' in script
    np.testing.assert_allclose(run_cpu(build_cpu(apply_cpu(op, point)), op, inputs, point), op.reference(inputs),
                               rtol=1e-4, atol=1e-5)
    recipe = packed_weights(op, point)["B"]
    assert recipe["block"] == 64 and recipe["shape"] == [4, 64, 64]
    names = {"numpy": np, "B": b}
    exec(recipe["how"].replace("; ", "\nresult = ", 1), names)  # noqa: S102 -- the recipe schedule.json gives
    assert np.array_equal(names["result"], packed)
    assert np.array_equal(pack_weights(op, point, [None, torch.from_numpy(b)])[1].numpy(), packed)

    conv = get_builtin("conv2d").instantiate({"batch": 1, "C": 8, "K": 32, "H": 10, "W": 10, "kernel": 3,
                                              "padding": 1, "stride": 1})
    point = Point({"split.b": (1, 1, 1, 1), "split.k": (2, 2, 1, 8), "split.i": (1, 2, 1, 5),
                   "split.j": (5, 1, 2, 1), "split.rc": (1, 4, 2), "split.rx": (1, 3, 1), "split.ry": (1, 3, 1),
                   "unroll": 64, "order": 0, "inline": 1, "vector": "k", "block": 1})
    inputs = conv.random_inputs(0)
    w = pack_weights(conv, point, inputs)[1]  # W[k, c, r, s] as [k / 16, c, r, s, 16]
    assert w.shape == (2, 8, 3, 3, 16) and np.array_equal(w[1, 3, 2, 0], inputs[1][16:32, 3, 2, 0])
    np.testing.assert_allclose(run_cpu(build_cpu(apply_cpu(conv, point)), conv, inputs, point),
                               conv.reference(inputs), rtol=1e-4, atol=1e-4)


def test_a_group_convolution_and_winograd_product_block_their_weights_and_compute_the_reference():
    """A group convolution vectorised along its output channels within a group (W[g·Kg + k, ...]: k a step an
    element, blocks whole within a group) and Winograd's product (U[e, c, k]) taken blocked; vectorised along the
    groups (g·Kg: Kg elements a step) nothing is blocked and the space says so."""
    from gpu_cpu.winograd import WinogradKernel, product_operator, winograd_shape

    group = get_builtin("group_conv2d").instantiate({"batch": 1, "C": 32, "K": 64, "H": 8, "W": 8, "kernel": 3,
                                                     "padding": 1, "stride": 1, "groups": 2})
    space = CpuSpace(analyze(group))
    inputs = group.random_inputs(0)
    tried = 0
    for row in space.sample(200, np.random.default_rng(7)):
        point = space.decode(row)
        if not point.get("block") or tried >= 3:
            continue
        blocks = weight_blocks(group, point)
        assert blocks and point["vector"] != "g"
        np.testing.assert_allclose(run_cpu(build_cpu(apply_cpu(group, point)), group, inputs, point),
                                   group.reference(inputs), rtol=1e-4, atol=1e-4, err_msg=str(point))
        tried += 1
    assert tried >= 2
    by_groups = Point({**space.decode(space.sample(1, np.random.default_rng(1))[0]), "vector": "g", "block": 1,
                       "split.g": (2, 1, 1, 1)})
    assert "no weight to block along g (the kernel of block 0)" in space.violations(by_groups)

    conv = get_builtin("conv2d").instantiate({"batch": 1, "C": 16, "K": 32, "H": 8, "W": 8, "kernel": 3,
                                              "padding": 1, "stride": 1})
    product = product_operator(winograd_shape(conv, 2))
    pspace = CpuSpace(analyze(product))
    point = next(p for p in (pspace.decode(r) for r in pspace.sample(80, np.random.default_rng(3)))
                 if p.get("block"))
    assert weight_blocks(product, point)
    kernel = WinogradKernel(conv, 2, point)
    inputs = conv.random_inputs(1)
    assert kernel.weights(inputs[1]).ndim == 4  # U[e, c, k] as [k / block, e, c, block]
    np.testing.assert_allclose(kernel.run(inputs), conv.reference(inputs), rtol=1e-3, atol=1e-3)


def test_a_point_that_does_not_block_keeps_the_keys_it_had_before_the_knob():
    """Points made before ``block`` existed (a history's, a schedule.json's) are still points of the space, and
    a point that does not block is decoded without the knob: its history record is the same one."""
    space = CpuSpace(analyze(get_builtin("conv2d").instantiate(shape="small:s1")))
    assert space.choices["block"] == (0, 1)
    row = np.zeros(space.num_knobs, dtype=int)
    point = space.decode(row)
    assert "block" not in point and np.array_equal(space.encode(point), row)
    row[space.knob_names.index("block")] = 1
    assert space.decode(row)["block"] == 1
    # the history keys a point that says block 0 as one that leaves it out: the same kernel, the same record
    from hetero_dse.history.records import point_key

    assert point_key(point.replace(block=0)) == point_key(point) != point_key(point.replace(block=1))
    assert "block" not in CpuSpace(analyze(get_builtin("gemv").instantiate(shape="small:s1"))).choices  # no weight
