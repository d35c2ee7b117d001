"""The CPU space's default point (``CpuSpace.default_point``): the schedule a performance engineer writes first,
by hand on the shapes it was measured on, on every layer of the built-in networks, and numerically."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_cpu.main_block import weight_blocks
from gpu_cpu.schedule import apply_cpu, build_cpu, run_cpu
from hetero_dse.analysis import analyze
from hetero_dse.ops import get_builtin
from hetero_dse.space.cpu import CpuSpace
from hetero_dse.space.point import Point


def test_the_default_point_by_hand():
    op = get_builtin("conv2d").instantiate(shape="yolo:C2")  # k 192, i = j = 112, rc 64, 3×3
    space = CpuSpace(analyze(op), vector_bits=512)
    space.cores = 2
    point = space.default_point()
    # k fills 16 lanes two vectors wide (192 = 6 · 32). The image does not vary in k: a register tile of
    # 28 / 2 / 2 = 7 output pixels (7 | 112), 14 accumulators, along j, the innermost loop, so the tile's image
    # values are contiguous; each core's share of k is the tile's 32, 6 parallel iterations, enough for 2 cores
    # (no outer split). The tile reuses its operands, so the reduction runs inside the tile's spatial loops
    # (order 0) and nothing is unrolled: measured on 1×1 layers, 256 -> 256 at 56², 2.16 against 3.06 ms. The
    # rest of i and j is at the second level, outside the cache tile order 0 accumulates (S2·S3): the tile is
    # the register tile, its epilogue and write-back done from the registers (MobileNet-V2 L3 0.61× torch with
    # the rest at the third level, a core's share in the tile, 1.46× so; bench/data/cpu_points_cache_tile.txt)
    assert point["vector"] == "k" and point["order"] == 0 and point["unroll"] == 0 and point["inline"] == 0
    assert (point["split.k"], point["split.i"], point["split.j"]) == ((6, 1, 1, 32), (1, 112, 1, 1), (1, 16, 1, 7))
    assert (point["split.rc"], point["split.rx"], point["split.ry"]) == ((1, 8, 8), (1, 1, 3), (1, 1, 3))
    assert space.violations(point) == []


def test_the_default_point_fills_the_fma_pipelines_where_half_the_registers_hold_no_divisor():
    # an AVX2 host (12 accumulators), stride 2: k (7) vectorised in one vector (j ties with it, but its image
    # reads are strided: a gather a vector); half the registers (6) hold no divisor of j or i (7), so the
    # register tile takes the fewest pixels that give 4 accumulators: all 7 of j, the innermost the weights are
    # reused across
    op = get_builtin("conv2d").instantiate(shape="small:s2")  # K 7, 7×7 output
    space = CpuSpace(analyze(op), vector_bits=256)
    point = space.default_point()
    assert point["vector"] == "k" and point["split.k"][-1] == 7 and point["split.j"][-1] == 7
    assert point["split.i"][-1] == 1 and space.violations(point) == []


def test_the_default_point_of_a_depthwise_convolution_by_hand():
    # MobileNet-V2's stride-2 depthwise layer (its L10), AVX-512. Along its channels c (144 = 9 · 16, every lane
    # busy) each tile would pack the image, a pass its 9 taps do not repay (821 µs against 149 µs measured):
    # the output row j is vectorised instead, 14 of 16 lanes (28 = 2 · 14). Every operand the row's vectors
    # read varies in c and i, so the tile only fills the FMA pipelines: 8 / 1 vector = 8 rows, the largest
    # divisor of 28 up to 8 is 7, over i, where the weights stay the same. c, which nothing is reused across,
    # is the parallel loop: j gives 28 / 14 / 2 = 1 outer iteration, c's smallest divisor ≥ 2 · 2 / 1 = 4.
    op = get_builtin("depthwise_conv2d").instantiate(dict(C=144, H=56, W=56, stride=2))
    space = CpuSpace(analyze(op), vector_bits=512)
    space.cores = 2
    point = space.default_point()
    assert point["vector"] == "j" and point["order"] == 1 and point["unroll"] == 64  # nothing reused: unrolled
    assert (point["split.c"], point["split.i"], point["split.j"]) == ((4, 1, 36, 1), (1, 1, 4, 7), (1, 1, 2, 14))
    # read with a stride of 2 along j, the padding is inlined: its test costs little beside the gathered lanes,
    # and computing it first costs a pass over the image (93 against 155 µs measured)
    assert point["inline"] == 1 and space.violations(point) == []
    # at stride 1 the row is read a lane an element: the padding is computed first, and inlining it is pruned
    unit = CpuSpace(analyze(get_builtin("depthwise_conv2d").instantiate(dict(C=144, H=56, W=56))), vector_bits=512)
    unit.cores = 2
    first = unit.default_point()
    assert first["vector"] == "j" and first["inline"] == 0 and unit.violations(first) == []
    assert unit.violations(first.replace(inline=1)) == ["inlined padding would be tested in every lane of j"]
    assert space.violations(point.replace(inline=0)) == []


def test_the_default_point_of_a_linear_layer_streams_its_weights_blocked():
    """A batch-1 linear layer (YOLO-v1's 50,176 -> 4,096) feeds each weight to one multiply-add: its FMAs wait
    on memory, so the register-tile floor is waived (it had left the space no default, and a 16-trial search
    of the layer to chance, 0.75-1.83x torch), and the default blocks the weights so each core reads one run
    (measured on it: 29 ms blocked, 65 ms not; torch 41 ms)."""
    op = get_builtin("gemm").instantiate({"M": 1, "N": 4096, "K": 50176})
    space = CpuSpace(analyze(op), vector_bits=512)
    space.cores = 2
    point = space.default_point()
    # j fills 16 lanes two vectors wide; each core's share 64 = 2 · 32 (64 parallel iterations); k 8 deep inside
    assert space.streams_weights and point["vector"] == "j" and point["block"] == 1
    assert (point["split.j"], point["split.k"]) == ((64, 1, 2, 32), (1, 6272, 8))
    assert space.violations(point) == []
    assert weight_blocks(op, point) == {1: 64}  # B, the second input
    # the floor still holds where a weight is reused (a matrix product of 64 rows, a convolution)
    for other in (get_builtin("gemm").instantiate({"M": 64, "N": 4096, "K": 512}),
                  get_builtin("conv2d").instantiate(shape="yolo:C2")):
        unblocked = CpuSpace(analyze(other), vector_bits=512)
        assert not unblocked.streams_weights and "block" not in unblocked.default_point()
    thin = Point({**point.to_json(), "split.j": (4096 // 16, 1, 1, 16)})  # one vector: allowed only when streamed
    assert space.violations(thin) == []
    dense = CpuSpace(analyze(get_builtin("gemm").instantiate({"M": 64, "N": 4096, "K": 512})), vector_bits=512)
    one_row = Point({**thin.to_json(), "split.i": (64, 1, 1, 1), "split.k": (1, 64, 8)})
    assert any("FMA latency" in v for v in dense.violations(one_row))


def test_the_default_point_of_a_small_linear_layer_computes_the_reference():
    op = get_builtin("gemm").instantiate({"M": 1, "N": 96, "K": 80})
    space = CpuSpace(analyze(op), vector_bits=256)
    point = space.default_point()
    assert point["block"] == 1 and weight_blocks(op, point)
    inputs = op.random_inputs(0)
    got = run_cpu(build_cpu(apply_cpu(op, point)), op, inputs, point)
    np.testing.assert_allclose(got, op.reference(inputs), rtol=1e-5, atol=1e-5)


def test_the_default_point_of_a_pointwise_convolution_tiles_where_its_row_vector_is_reused():
    # MobileNet-V2's 144 -> 24 1×1 at 56×56, AVX-512: j (56: 14 lanes of 16) fills more lanes than k (24: 12),
    # and the image's row vector does not vary in k: the register tile is 12 output channels (the largest divisor
    # of 24 up to 28 / 2), each vector loaded once for all 12, where tiling the rows loaded one a row (254 against
    # 502 µs measured)
    op = get_builtin("conv2d").instantiate(dict(C=144, K=24, H=56, W=56, kernel=1, stride=1, padding=0))
    space = CpuSpace(analyze(op), vector_bits=512)
    space.cores = 2
    point = space.default_point()
    assert point["vector"] == "j" and point["split.k"][-1] == 12 and point["split.i"][-1] == 1
    # reused across the tile: the reduction inside it, nothing unrolled, each core's share of j one vector
    # (14 of 56: 4 parallel iterations, 2 a core)
    assert point["order"] == 0 and point["unroll"] == 0 and point["split.j"] == (4, 1, 1, 14)
    assert space.violations(point) == []


@pytest.mark.parametrize("vector_bits", [256, 512])  # AVX2 and AVX-512 hosts
@pytest.mark.parametrize("name", ["conv2d", "conv3d", "depthwise_conv2d", "conv_transpose2d"])
def test_every_default_point_computes_the_reference(name, vector_bits):
    op = get_builtin(name).instantiate(shape="small:s2")
    points = CpuSpace(analyze(op), vector_bits=vector_bits).default_points()  # the default, the tiles tried next
    assert points
    inputs = op.random_inputs(0)
    for point in points:
        np.testing.assert_allclose(run_cpu(build_cpu(apply_cpu(op, point)), op, inputs, point), op.reference(inputs),
                                   rtol=1e-4, atol=1e-5, err_msg=str(point))


@pytest.mark.parametrize("name", ["q", "p", "sa", "random", "tl", "gga"])
def test_every_explorer_measures_the_default_point_in_its_first_round(name):
    from hetero_dse.explore.settings import make_explorer

    space = CpuSpace(analyze(get_builtin("conv2d").instantiate(shape="yolo:C2")), vector_bits=512)
    first = make_explorer(name, space, 0, starts=6).propose()
    assert np.array_equal(first[0], space.encode(space.default_point()))
    # then the same unrolled whole and the register tiles tried next (CpuSpace.default_points): here 7 rows
    # instead of 7 pixels of a row
    anchors = [space.encode(p) for p in space.default_points()]
    assert len(anchors) == 4 and np.array_equal(first[:4], np.array(anchors))
    # the rest of the round is drawn (the default's neighbours, random points): another seed, another round
    assert not np.array_equal(first[4:], make_explorer(name, space, 1, starts=6).propose()[4:])


def test_the_register_tiles_tried_next_by_hand():
    # YOLO-v1's 7×7 stride-2 first layer, AVX-512, 2 cores. The default tiles 7 pixels of a row (j) × 2 vectors
    # of k. Next, the tile over the rows (i), which the weights are reused across too: 28 / 2 / 2 = 7 rows × 2
    # vectors, and 28 / 2 = 14 rows × 1 vector (with the rows split over the cores instead of k, 5.94 ms against
    # the default's 6.10, torch 5.89); not 14 pixels of a row × 1 vector, the default's loop (8.77 ms, BENCHMARKS)
    op = get_builtin("conv2d").instantiate(dict(C=3, K=64, H=448, W=448, kernel=7, stride=2, padding=3))
    space = CpuSpace(analyze(op), vector_bits=512)
    space.cores = 2
    points = space.default_points()
    assert points[0] == space.default_point()
    # the default unrolled whole next (MobileNet-V2's 1×1 L4 at 112², 16 input channels: 0.29 against 0.39 ms)
    assert points[1] == points[0].replace(unroll=512)
    assert [(p["split.k"], p["split.i"], p["split.j"]) for p in points[1:]] == [
        ((2, 1, 1, 32), (2, 112, 1, 1), (1, 32, 1, 7)),
        ((2, 1, 1, 32), (1, 32, 1, 7), (2, 112, 1, 1)),  # the parallel split moves to the loop left untiled
        ((4, 1, 1, 16), (1, 16, 1, 14), (1, 224, 1, 1))]  # k's 4 vectors keep both cores busy
    assert [p["unroll"] for p in points] == [0, 512, 0, 0]
    assert all(p["order"] == 0 and not space.violations(p) for p in points)
    # AVX2 (12 accumulators), YOLO-v1's 3×3 L14 on its 7 × 7 output: the default narrows to 1 vector × 7 pixels
    # of a row; over the rows half the registers (6) hold no divisor of 7, so the tile tried next takes the
    # fewest rows that fill the FMA pipelines, all 7, as the default's own rule does (7 rows 8.24 ms against
    # the row's 9.14 on AVX-512)
    l14 = CpuSpace(analyze(get_builtin("conv2d").instantiate(dict(C=1024, K=1024, H=14, W=14, kernel=3, stride=2,
                                                                  padding=1))), vector_bits=256)
    l14.cores = 2
    assert [(p["split.k"], p["split.i"], p["split.j"], p["unroll"]) for p in l14.default_points()] == [
        ((128, 1, 1, 8), (1, 7, 1, 1), (1, 1, 1, 7), 0), ((128, 1, 1, 8), (1, 7, 1, 1), (1, 1, 1, 7), 512),
        ((128, 1, 1, 8), (1, 1, 1, 7), (1, 7, 1, 1), 0)]
    # a depthwise convolution's tile reuses nothing (its image varies in every loop): its default in order 1,
    # then the same in order 0, unrolled whole, the channels' rest (c, the parallel loop) outermost and the rows'
    # at the second level, so the cache tile is the register tile (MobileNet-V2 L10: 0.185 -> 0.165 ms; L2, 32
    # channels at 112²: 0.54 -> 0.13 ms)
    depthwise = CpuSpace(analyze(get_builtin("depthwise_conv2d").instantiate(dict(C=144, H=56, W=56, stride=2))),
                         vector_bits=512)
    first, flat = depthwise.default_points()
    assert first == depthwise.default_point() and first["order"] == 1 and first["split.c"] == (4, 1, 36, 1)
    assert (flat["order"], flat["unroll"], flat["split.c"], flat["split.i"], flat["split.j"]) == (
        0, 512, (144, 1, 1, 1), (1, 4, 1, 7), first["split.j"])
    assert first["split.i"] == (1, 1, 4, 7) and not depthwise.violations(flat)
    # not where a weight is streamed (a batch-1 linear layer): there it ran 0.46-0.91× the default
    linear = CpuSpace(analyze(get_builtin("gemm").instantiate(dict(M=1, N=1000, K=1280))), vector_bits=512)
    assert linear.streams_weights and linear.default_point()["order"] == 1
    assert linear.default_points() == [linear.default_point()]


def test_the_first_round_measures_every_default_point_then_the_first_ones_neighbours():
    from hetero_dse.explore.base import first_round

    space = CpuSpace(analyze(get_builtin("conv2d").instantiate(dict(C=3, K=64, H=448, W=448, kernel=7, stride=2,
                                                                    padding=3))), vector_bits=512)
    space.cores = 2
    default = space.default_point()
    anchors = np.array([space.encode(p) for p in space.default_points()])
    rows = first_round(space, 10, np.random.default_rng(0))
    assert len(anchors) == 4 and np.array_equal(rows[:4], anchors) and len(set(space.keys(rows).tolist())) == 10
    # then 0.5 · 6 = 3 of the first one's neighbours, each one knob away from it, in turn with random points
    moved = [[k for k in space.knob_names if space.decode(row).get(k) != default.get(k)] for row in rows[4::2]]
    assert [len(knobs) for knobs in moved] == [1, 1, 1], moved
    # a budget smaller than the default points measures the first ones
    assert np.array_equal(first_round(space, 2, np.random.default_rng(0)), anchors[:2])


def test_the_first_round_draws_half_its_rest_among_the_default_points_neighbours():
    from hetero_dse.explore.base import first_round

    space = CpuSpace(analyze(get_builtin("depthwise_conv2d").instantiate(dict(C=144, H=56, W=56, stride=2))),
                     vector_bits=512)
    default = space.default_point()
    anchors = np.array([space.encode(p) for p in space.default_points()])  # the default in order 1, then 0
    rows = first_round(space, 9, np.random.default_rng(0))
    assert len(anchors) == 2 and np.array_equal(rows[:2], anchors) and space.valid(rows).all()
    assert len(set(space.keys(rows).tolist())) == 9
    # 0.5 · 7 = 3.5 -> 4 neighbours of the first, each one knob away from it, in turn with 3 random points: a
    # budget that cuts the round keeps the share
    def knob(point, k):  # a knob a point leaves out (block) has its optional value
        return point.get(k, space.optional.get(k))

    changed = [[k for k in space.knob_names if knob(space.decode(row), k) != knob(default, k)] for row in rows[2:]]
    assert [len(knobs) == 1 for knobs in changed[0::2]] == [True] * 4, changed
    # the neighbours are drawn, not fixed: another seed, others
    assert not np.array_equal(first_round(space, 9, np.random.default_rng(1))[2::2], rows[2::2])
    # where the space asks for none (an FPGA space's share is 0), the round is the default points and random ones
    space.near_default = 0.0
    rows = first_round(space, 9, np.random.default_rng(0))
    assert np.array_equal(rows[:2], anchors) and np.array_equal(rows[2:], space.sample(7, np.random.default_rng(0)))


def test_a_gpu_space_has_no_default_point():
    from hetero_dse.hardware.gpus import get_device
    from hetero_dse.space.gpu import GpuSpace

    space = GpuSpace(analyze(get_builtin("conv2d").instantiate(shape="yolo:C2")), get_device("h100"))
    assert space.default_point() is None


def test_the_default_point_of_a_winograd_product_reuses_its_weights_across_the_tiles():
    # 256 -> 512 at 28², F(4×4): the product M[e, p, k] = Σ_c V[e, p, c] · U[e, c, k], AVX-512, 2 cores. k is
    # vectorised two vectors wide; U does not vary in p (49 tiles): a register tile of 7 of them, 14
    # accumulators, the reduction inside it, one tile a core's share of k (16 parallel iterations). Measured:
    # 4.70 ms against 5.89 with order 1 and unrolled (bench/data/cpu_points_order.txt)
    from gpu_cpu.winograd_shape import product_operator, winograd_shape

    op = get_builtin("conv2d").instantiate(dict(C=256, K=512, H=28, W=28, kernel=3, stride=1, padding=1))
    space = CpuSpace(analyze(product_operator(winograd_shape(op, 4))), vector_bits=512)
    space.cores = 2
    point = space.default_point()
    assert point["vector"] == "k" and point["order"] == 0 and point["unroll"] == 0
    assert (point["split.e"], point["split.p"], point["split.k"]) == ((1, 36, 1, 1), (1, 7, 1, 7), (16, 1, 1, 32))


def test_a_tile_moved_off_the_reused_loops_is_scheduled_as_one_that_reuses_nothing():
    # a depthwise convolution of multiplier 2 (output (1, C, 2, H, W)), AVX-512: the row j (10) in one vector;
    # the image does not vary in m, but m's 2 accumulators leave the FMA pipelines idle, so the tile moves to
    # the channels c (4 of 8), which the image varies in: nothing is reused across it, and the point is not
    # scheduled as if it were (order 1, unrolled, each core's share up to 64 elements)
    op = get_builtin("depthwise_conv2d").instantiate(dict(C=8, H=10, W=10, kernel=3, stride=1, padding=1,
                                                          multiplier=2))
    space = CpuSpace(analyze(op), vector_bits=512)
    point = space.default_point()
    assert point["vector"] == "j" and point["split.c"][-1] == 4 and point["split.m"][-1] == 1
    assert point["order"] == 1 and point["unroll"] == 64 and space.violations(point) == []


def test_a_register_tile_on_a_tie_runs_along_the_innermost_loop():
    # 64 -> 64 3×3 at 13 × 13, AVX-512: k two vectors wide; half the registers (7 accumulators a vector) hold
    # no divisor of 13, so the fewest that fill the FMA pipelines: 13 pixels. i and j tie; the tile takes j,
    # the row, along which the image values it broadcasts lie contiguous
    op = get_builtin("conv2d").instantiate(dict(C=64, K=64, H=13, W=13, kernel=3, stride=1, padding=1))
    space = CpuSpace(analyze(op), vector_bits=512)
    point = space.default_point()
    assert point["vector"] == "k" and point["split.j"][-1] == 13 and point["split.i"][-1] == 1
    assert point["order"] == 0 and space.violations(point) == []


def test_two_vectors_that_leave_no_register_tile_give_way_to_one():
    # AVX2 (12 accumulators), 512 -> 512 3×3 at 7 × 7: k two vectors wide would need 2 · 7 accumulators for a
    # tile that fills the FMA pipelines; one vector takes 7 rows, and the layer has a default point
    op = get_builtin("conv2d").instantiate(dict(C=512, K=512, H=7, W=7, kernel=3, stride=1, padding=1))
    space = CpuSpace(analyze(op), vector_bits=256)
    point = space.default_point()
    assert point["vector"] == "k" and point["split.k"][-1] == 8 and point["split.j"][-1] == 7
    assert space.violations(point) == []


#: the distinct layers of ResNet-18 and MobileNet-V2 (YOLO-v1's are the built-in shape set): (C, K, H = W,
#: kernel, stride) convolutions, (C, H = W, stride) 3×3 depthwise ones, (N, K) linear layers at batch 1
RESNET18 = [(3, 64, 224, 7, 2), (64, 64, 56, 3, 1), (64, 128, 56, 3, 2), (64, 128, 56, 1, 2), (128, 128, 28, 3, 1),
            (128, 256, 28, 3, 2), (128, 256, 28, 1, 2), (256, 256, 14, 3, 1), (256, 512, 14, 3, 2),
            (256, 512, 14, 1, 2), (512, 512, 7, 3, 1)]
MOBILENET_V2 = [(3, 32, 224, 3, 2)] + [(c, k, hw, 1, 1) for c, k, hw in (
    (32, 16, 112), (16, 96, 112), (96, 24, 56), (24, 144, 56), (144, 24, 56), (144, 32, 28), (32, 192, 28),
    (192, 32, 28), (192, 64, 14), (64, 384, 14), (384, 64, 14), (384, 96, 14), (96, 576, 14), (576, 96, 14),
    (576, 160, 7), (160, 960, 7), (960, 160, 7), (960, 320, 7), (320, 1280, 7))]
DEPTHWISE = [(32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1), (192, 28, 2), (384, 14, 1),
             (576, 14, 1), (576, 14, 2), (960, 7, 1)]
LINEAR = [(512, 1000), (1280, 1000), (50176, 4096), (4096, 1470)]


def _network_layers():
    yield from (get_builtin("conv2d").instantiate(shape=f"yolo:C{i}") for i in range(1, 16))
    for c, k, hw, kernel, stride in RESNET18 + MOBILENET_V2:
        yield get_builtin("conv2d").instantiate(dict(C=c, K=k, H=hw, W=hw, kernel=kernel, stride=stride,
                                                     padding=kernel // 2))
    for c, hw, stride in DEPTHWISE:
        yield get_builtin("depthwise_conv2d").instantiate(dict(C=c, H=hw, W=hw, stride=stride))
    for n, k in LINEAR:
        yield get_builtin("gemm").instantiate({"M": 1, "N": k, "K": n})


@pytest.mark.parametrize("cores", [2, 16])
@pytest.mark.parametrize("vector_bits", [256, 512])  # AVX2 and AVX-512 hosts
def test_every_layer_of_the_built_in_networks_has_a_default_point_its_space_keeps(vector_bits, cores):
    """A layer without a default point leaves a user's 16 trials to random draws (YOLO-v1's linear layer:
    0.75-1.83x torch run to run): none may lose it silently, on either ISA, on a small or a large host."""
    missing = []
    for op in _network_layers():
        space = CpuSpace(analyze(op), vector_bits=vector_bits)
        space.cores = cores
        point = space.default_point()
        if point is None or space.violations(point):
            missing.append(f"{op.name} {dict(op.params)}: {None if point is None else space.violations(point)}")
    assert missing == []
