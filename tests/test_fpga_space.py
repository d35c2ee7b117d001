"""The FPGA design space: generated for any analysable operator, pruned as documented, points as values."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hetero_dse.analysis import analyze
from hetero_dse.hardware.board import load_board
from hetero_dse.loader import load_operators
from hetero_dse.ops import BUILTIN, get_builtin
from hetero_dse.space.fpga import FpgaSpace, SpaceError, SpaceOptions, tile_candidates
from hetero_dse.space.point import Point

VU9P = load_board("vu9p")


def space_of(name: str, shape: str = "small:s2", **options) -> FpgaSpace:
    op = get_builtin(name).instantiate(shape=shape)
    return FpgaSpace(analyze(op), VU9P, ["float32"], [250.0], SpaceOptions(**options))


def test_tile_candidates_divisors_plus_padded_powers_of_two():
    assert tile_candidates(7, 0.25) == [1, 2, 4, 7]        # 4 -> 8 wastes 1/7; 2 -> 8 likewise
    assert tile_candidates(13, 0.25) == [1, 2, 4, 8, 13]   # 8 -> 16 wastes 3/13 (23 %)
    assert tile_candidates(12, 0.25) == [1, 2, 3, 4, 6, 12]  # 8 -> 16 would waste a third
    assert tile_candidates(3, 0.25) == [1, 3]              # 2 -> 4 would waste a third
    assert tile_candidates(1, 0.25) == [1]


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_every_builtin_gets_a_space_whose_points_round_trip(name):
    space = space_of(name)
    rows = space.sample(200, np.random.default_rng(1))
    assert space.valid(rows).all()
    for row in rows[:20]:
        point = space.decode(row)
        assert np.array_equal(space.encode(Point.from_json(json.loads(point.dumps()))), row)
        t = [point[f"tile.{n}"] for n in space.loop_names]
        u = [point[f"unroll.{n}"] for n in space.loop_names]
        assert all(ti % ui == 0 for ti, ui in zip(t, u, strict=True))
        assert sum(ui > 1 for ui in u) <= 3
    moved = space.neighbours(rows, np.random.default_rng(2))
    assert space.valid(moved).all()


def test_custom_operator_gets_a_space(write):
    path = write("op.py", """
        import hetero_dse
        from tvm import te

        @hetero_dse.operator(N=12, M=10)
        def row_scale(N, M):
            A = te.placeholder((N, M), name="A")
            s = te.placeholder((N,), name="s")
            k = te.reduce_axis((0, M), name="k")
            return [A, s, te.compute((N,), lambda i: te.sum(A[i, k] * s[i] * A[i, k], axis=k), name="O")]
        """)
    op = load_operators(path)[0].instantiate()
    space = FpgaSpace(analyze(op), VU9P, ["float32"], [250.0])
    assert space.loop_names == ("i", "k") and space.tile_values[0].tolist() == [1, 2, 3, 4, 6, 12]
    assert sum(len(r) for r in space.enumerate()) > 0


def test_window_loops_are_not_split_and_buffers_get_one_unrolled_loop_per_dimension():
    space = space_of("conv2d", "yolo:C8")
    for name in ("rx", "ry"):
        assert space.tile_values[space.loop_names.index(name)].tolist() == [3]
    # unrolling both i and rx would make two PEs read one bank of pad[.., 2i + rx, ..]: rejected.
    row = space.sample(1, np.random.default_rng(0))[0]
    point = space.decode(row)
    knobs = {k: (1 if k.startswith("unroll.") else v) for k, v in point.items()}
    knobs.update({"tile.i": 2, "unroll.i": 2, "unroll.rx": 3})
    with pytest.raises(SpaceError, match="one per buffer dimension"):
        space.encode(Point(knobs))


def test_bad_points_are_rejected_with_the_knob_named():
    space = space_of("gemm")
    point = space.decode(space.sample(1, np.random.default_rng(0))[0])
    with pytest.raises(SpaceError, match=r"tile.i=5 is not one of its values"):
        space.encode(point.replace(**{"tile.i": 5}))
    with pytest.raises(SpaceError, match="no knob 'order'"):
        space.encode(Point({k: v for k, v in point.items() if k != "order"}))


def test_io_optimal_pruning_keeps_only_tiles_near_xy_equal_rz():
    full = space_of("conv2d", "yolo:C8")
    pruned = space_of("conv2d", "yolo:C8", io_optimal=True)
    rows = full.sample(20000, np.random.default_rng(0))
    kept = rows[pruned.valid(rows)]
    assert 0 < len(kept) < len(rows)
    t = full.tiles(kept)
    i, j, k = (full.loop_names.index(n) for n in ("i", "j", "k"))
    ratio = t[:, i] * t[:, j] / (9.0 * t[:, k])  # R = 3*3 / 1^2 for C8
    assert ((ratio >= 0.25) & (ratio <= 4.0)).all()


def test_enumeration_is_complete_and_valid():
    space = space_of("gemv")
    rows = np.concatenate(list(space.enumerate(chunk=97)))
    assert space.valid(rows).all()
    assert len(np.unique(space.keys(rows))) == len(rows)
    # brute force over the cartesian product agrees
    grid = np.stack(np.meshgrid(*[np.arange(c) for c in space.cardinalities], indexing="ij"), -1).reshape(
        -1, space.num_knobs)
    assert len(rows) == int(space.valid(grid).sum())


def test_a_sliding_input_may_window_its_only_unrolled_dimension():
    """j unrolled with ry walked: allowed for the input (a register window) when it is the input's only
    unrolled dimension; not when the input is unrolled along a second dimension too."""
    op = get_builtin("conv2d").instantiate({"C": 4, "H": 14, "W": 14, "K": 64, "kernel": 3, "padding": 1})
    space = FpgaSpace(analyze(op), load_board("vu9p"), ["float32"], [250.0])
    knobs = {"tile.b": 1, "tile.k": 64, "tile.i": 2, "tile.j": 14, "tile.rc": 4, "tile.rx": 3, "tile.ry": 3,
             "unroll.b": 1, "unroll.k": 16, "unroll.i": 1, "unroll.j": 14, "unroll.rc": 1, "unroll.rx": 1,
             "unroll.ry": 1, "order": ("b", "k", "i", "j"), "dtype": "float32", "clock_mhz": 250.0}
    space.encode(Point(knobs))
    with pytest.raises(SpaceError, match="compile time"):
        space.encode(Point({**knobs, "unroll.k": 1, "unroll.rc": 2}))
