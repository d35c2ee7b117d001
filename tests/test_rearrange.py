"""FlexTensor's rearranged space (§4.2): split directions grow one factor and shrink another, choices move ±1,
and the same tables serve the FPGA and CPU spaces."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hetero_dse.space.cpu import CpuSpace
from hetero_dse.space.splits import factorizations
from hetero_dse.analysis import analyze
from hetero_dse.hardware.board import load_board
from hetero_dse.ops import get_builtin
from hetero_dse.space.fpga import FpgaSpace
from hetero_dse.space.rearrange import Knob, Neighbourhood, split_steps


def test_split_steps_by_hand():
    two = np.array(factorizations(12, 2))  # (1,12) (2,6) (3,4) (4,3) (6,2) (12,1)
    grow_first = split_steps(two, 0, 1)
    assert [tuple(two[i]) if i >= 0 else None for i in grow_first] == [(2, 6), (3, 4), (4, 3), (6, 2), (12, 1), None]
    grow_second = split_steps(two, 1, 0)
    assert grow_second[list(map(tuple, two)).index((3, 4))] == list(map(tuple, two)).index((2, 6))
    three = [tuple(f) for f in factorizations(12, 3)]
    steps = split_steps(np.array(three), 0, 2)  # grow f0, shrink f2, f1 unchanged
    assert three[steps[three.index((2, 3, 2))]] == (4, 3, 1)
    assert steps[three.index((1, 12, 1))] == -1  # f2 = 1 cannot shrink


def test_directions_count_and_moves_keep_the_rest():
    factors = np.array(factorizations(24, 3))
    hood = Neighbourhood([Knob.split("split.i", 0, factors), Knob.choice("unroll", 1, 4),
                          Knob.choice("fixed", 2, 1)], np.array([len(factors), 4, 1]))
    # N(N-1) for the split, ±1 for each choice; a knob with one value keeps its directions, which never exist
    assert hood.num_directions == 3 * 2 + 2 + 2
    assert [hood.directions[d].knob for d in hood.movable] == [0] * 6 + [1] * 2
    rows = np.array([[i, u, 0] for i in range(len(factors)) for u in range(4)])
    moved, exists = hood.moves(rows)
    for r, row in enumerate(rows):
        for d, direction in enumerate(hood.directions):
            if not exists[r, d]:
                continue
            new = moved[r, d]
            if direction.label.startswith("split"):
                f, g = factors[row[0]], factors[new[0]]
                i, j = direction.grow, direction.shrink
                assert g[i] > f[i] and g[j] < f[j] and math.prod(g) == 24
                assert all(g[k] == f[k] for k in range(3) if k not in (i, j)) and new[1] == row[1]
            else:
                assert direction.knob == 1 and new[1] == row[1] + direction.grow and new[0] == row[0]
    # features: log2 of each factor, the choice's position in [0, 1]
    f = hood.features(np.array([[list(map(tuple, factors)).index((2, 3, 4)), 3, 0]]))
    assert f.tolist() == [[1.0, pytest.approx(math.log2(3)), 2.0, 1.0, 0.0]]


@pytest.fixture(scope="module")
def c8():
    return analyze(get_builtin("conv2d").instantiate(shape="yolo:C8"))


def test_fpga_pair_moves(c8):
    space = FpgaSpace(c8, load_board("vu9p"), ["float32"], [250.0])
    hood = space.neighbourhood
    rows = space.sample(64, np.random.default_rng(0))
    moved, exists = hood.moves(rows)
    label = {d.label: i for i, d in enumerate(hood.directions)}
    n = len(space.loops)
    k = space.loop_names.index("k")
    grow_pe = label["tile.k[2↑1↓]"]  # more PEs along k, same buffer
    for r in np.flatnonzero(exists[:, grow_pe]):
        t, u = space.tiles(rows[r:r + 1])[0], space.unrolls(rows[r:r + 1])[0]
        t2, u2 = space.tiles(moved[r, grow_pe][None])[0], space.unrolls(moved[r, grow_pe][None])[0]
        assert t2[k] == t[k] and u2[k] > u[k] and t2[k] % u2[k] == 0
        assert np.array_equal(np.delete(moved[r, grow_pe], [k, n + k]), np.delete(rows[r], [k, n + k]))
    assert space.valid(space.neighbours(rows, np.random.default_rng(1))).all()


def test_cpu_moves_stay_in_the_pruned_space(c8):
    space = CpuSpace(c8, vector_bits=512)
    hood = space.neighbourhood
    splits = sum(len(s[0]) * (len(s[0]) - 1) for s in space.splits)
    choices = 2 * len(space.choices)
    assert hood.num_directions == splits + choices
    rows = space.sample(6, np.random.default_rng(0))
    moved = space.neighbours(rows, np.random.default_rng(1))
    assert space.valid(moved).all() and (moved != rows).any(axis=1).all()
