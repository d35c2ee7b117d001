"""The layer pipeline over a multi-die part's SLRs (``cost_models/fpga_pipeline_slrs.py``): where its chain of
stages may be cut, the fewest kernels of one SLR each that hold it (against a search of every cut), and the
clock and resources of a pipeline so cut, by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cost_models import fpga_pipeline_slrs
from cost_models.fpga_network_clock import design_clock_mhz
from cost_models.fpga_pipeline import explore_pipeline
from cost_models.fpga_network_resources import kernel_base
from cost_models.fpga_pipeline_slrs import (
    CROSSING_BITS,
    Kernel,
    crossing,
    cut_points,
    kernel_resources,
    over_slrs,
    place_kernels,
)
from cost_models.fpga_pipeline_streams import pipeline_buffers
from cost_models.fpga_slrs import slr_room
from hetero_dse.hardware.board import RESOURCE_KINDS, load_board
from small_net import three_slr_board

_FF, _LUT = RESOURCE_KINDS.index("ff"), RESOURCE_KINDS.index("lut")


def test_a_cut_falls_only_where_no_residual_crosses_and_the_word_fits():
    # stage 3 adds tensor 1 (stage 0's output): no cut after stages 1 and 2, whose outputs its block spans; a cut
    # after stage 0 crosses tensor 1 itself, forked on the far side; stage 4's word is too wide; never after the last
    sources = [None, None, None, 1, None, None]
    bits = [64, 64, 64, 64, CROSSING_BITS + 8, 64]
    assert cut_points(sources, bits) == [True, False, False, True, False, False]
    assert cut_points([None, 0], [8, 8]) == [False, False]  # the image added at the end: no cut at all


def _brute(board, costs, base, can_cut, bits, span=1):
    """The fewest kernels by trying every set of cuts on every run of adjacent SLRs, each kernel on every group of
    at most ``span`` of the run's SLRs in turn."""
    rooms, n = slr_room(board), len(costs)
    held = np.array([board.cap(k) > 0 for k in RESOURCE_KINDS])
    runs = [list(r) for s in range(board.slrs) for r in (range(s, board.slrs), range(s, -1, -1))]
    groupings = []
    for run in runs:  # every run split into groups of adjacent SLRs, each of at most ``span``
        for count in range(len(run)):
            for ends in itertools.combinations(range(1, len(run)), count):
                groups = [run[a:b] for a, b in zip((0, *ends), (*ends, len(run)), strict=True)]
                if max(map(len, groups)) <= span:
                    groupings.append(groups)
    best = None
    allowed = [i for i in range(n - 1) if can_cut[i]]
    for count in range(len(allowed) + 1):
        for cuts in itertools.combinations(allowed, count):
            bounds = list(zip((0, *(c + 1 for c in cuts)), (*cuts, n - 1), strict=True))
            for groups in groupings:
                if len(bounds) > len(groups):
                    continue
                ks = [(Kernel(a, b, g[0], int(bits[a - 1]) if a else 0), g) for (a, b), g in zip(bounds, groups,
                                                                                                strict=False)]
                if all(np.all(kernel_resources(k, costs, base, bits)[held] <= rooms[g].sum(axis=0)[held])
                       for k, g in ks):
                    best = len(ks) if best is None else min(best, len(ks))
    return best


@pytest.mark.parametrize("span", [1, 2])
def test_the_greedy_cut_is_the_fewest_kernels_every_cut_gives(span):
    """On random chains (words of one width, so that where a cut falls does not change its registers), the greedy
    fill of each run of SLRs finds as few kernels as a search of every set of cuts, and none where none fit; with
    ``span`` 2, a kernel may take two adjacent SLRs' rooms together."""
    board = three_slr_board()
    room = slr_room(board)[0]
    rng = np.random.default_rng(3)
    found = spanned = 0
    for _ in range(150):
        n = int(rng.integers(2, 8))
        costs = [room * rng.uniform(0.02, 0.45 * span, len(room)) for _ in range(n)]
        can_cut = [bool(rng.random() < 0.7) for _ in range(n - 1)] + [False]
        bits = [64] * n
        base = lambda a, b: np.full(len(RESOURCE_KINDS), 10.0)  # noqa: E731
        got = place_kernels(board, costs, base, can_cut, bits, span=span)
        want = _brute(board, costs, base, can_cut, bits, span)
        assert (len(got) if got else None) == want
        if got:
            found += 1
            spanned += any(k.also for k in got)
            # each kernel within its SLRs' room, the stages whole and in order, cut only where allowed, its SLRs
            # adjacent and the next kernel's next to them
            assert [k.first for k in got] == [0, *(k.last + 1 for k in got[:-1])] and got[-1].last == n - 1
            assert all(can_cut[k.last] for k in got[:-1])
            groups = [sorted(k.slrs) for k in got]
            taken = sorted(n for g in groups for n in g)
            assert taken == list(range(taken[0], taken[0] + len(taken))) and all(len(g) <= span for g in groups)
            assert all(g == list(range(g[0], g[-1] + 1)) for g in groups)
            assert all(min(abs(a - b) for a in g for b in h) == 1 for g, h in zip(groups, groups[1:], strict=False))
            # each kernel's guide (``slr``) is next to the kernel it streams from, the first's to the one it feeds
            assert all(min(abs(k.slr - b) for b in got[i - 1].slrs) == 1 for i, k in enumerate(got) if i)
            assert len(got) == 1 or min(abs(got[0].slr - b) for b in got[1].slrs) == 1
    assert 20 < found < 150  # both outcomes were tried
    assert (spanned > 10) == (span == 2)


def test_a_kernel_one_slr_cannot_hold_takes_two_and_is_clocked_as_two():
    """A stage of 1.7 SLRs' rooms: no cut gives every kernel one SLR; a kernel over SLR1 and SLR2 holds it, the
    first stage in SLR0. The single kernel (2.65 rooms, more than two SLRs' windows) spans three and closes at half
    the clock; cut so, the slowest kernel spans two and closes at 3/4, each SLR's clock by hand."""
    board = three_slr_board()
    room = slr_room(board)[0]
    dsp = RESOURCE_KINDS.index("dsp")
    costs = [np.where(np.arange(len(room)) == dsp, f * room[dsp], 0.0) for f in (0.95, 1.7)]
    zero = lambda a, b: np.zeros(len(RESOURCE_KINDS))  # noqa: E731
    assert place_kernels(board, costs, zero, [True, False], [64, 64]) is None
    assert place_kernels(board, costs, zero, [True, False], [64, 64], span=2) == [
        Kernel(0, 0, 0), Kernel(1, 1, 1, 64, (), (2,))]
    assert Kernel(1, 1, 1, 64, (), (2,)).to_json()["slrs"] == [1, 2]
    # the other way round: the first kernel takes two SLRs, its guide the one next to the kernel it streams to
    assert place_kernels(board, costs[::-1], zero, [True, False], [64, 64], span=2) == [
        Kernel(0, 0, 1, 0, (), (0,)), Kernel(1, 1, 2, 64)]
    buffers = [(8, 64), (9, 64), (512, 64)]
    mhz, kernels, _ = over_slrs(board, 250.0, costs, [], buffers, [None, None], [1, 1], 8)
    assert [k.slrs for k in kernels] == [(0,), (1, 2)]
    assert design_clock_mhz(board, 250.0, kernel_base(buffers) + sum(costs), 1) == pytest.approx(125.0)
    assert mhz == pytest.approx(0.75 * 250.0)  # the fan-out free (one lane): the two SLRs' derating alone
    assert design_clock_mhz(board, 250.0, sum(costs), 1, span=1) == pytest.approx(250.0)  # placed, not by size


def test_a_kernel_short_of_one_memory_keeps_weights_in_another():
    """SLRs of 100 BRAM18K and 10 UltraRAMs (70 and 7 kernels'): three stages of 50 BRAM18K each take a kernel an
    SLR; where each may keep its weights in 3 UltraRAMs instead of 45 BRAM18K, one kernel holds all three (two
    moved: 60 BRAM18K and 6 UltraRAMs), and says which. A move that helps no resource over its room is not made."""
    from dataclasses import replace
    from types import MappingProxyType

    board = three_slr_board()
    per = {**board.slr_resources[0], "uram": 10}
    board = replace(board, resources=MappingProxyType({k: 3 * v for k, v in per.items()}),
                    slr_resources=tuple(MappingProxyType(per) for _ in range(3)))
    bram, uram = RESOURCE_KINDS.index("bram18k"), RESOURCE_KINDS.index("uram")
    stage = np.zeros(len(RESOURCE_KINDS))
    stage[bram] = 50
    move = np.zeros(len(RESOURCE_KINDS))
    move[[bram, uram]] = -45, 3
    base = lambda a, b: np.zeros(len(RESOURCE_KINDS))  # noqa: E731
    costs, cuts, bits = [stage] * 3, [True, True, False], [64] * 3
    assert [(k.first, k.last) for k in place_kernels(board, costs, base, cuts, bits)] == [(0, 0), (1, 1), (2, 2)]
    moves = [[("uram", move)]] * 3
    (kernel,) = place_kernels(board, costs, base, cuts, bits, moves)
    assert (kernel.first, kernel.last) == (0, 2) and kernel.moved == ((0, "uram"), (1, "uram"))
    got = kernel_resources(kernel, costs, base, bits, moves)
    assert (got[bram], got[uram]) == (60, 6)
    small = [stage / 5] * 3  # fits as it is: nothing moves
    assert [k.moved for k in place_kernels(board, small, base, cuts, bits, moves)] == [()]
    # over_slrs names the memory each moved stage's weights go to
    _, kernels, _ = over_slrs(board, 250.0, costs, [], [(8, 64), (9, 64), (512, 64)], [None] * 3, [64] * 3, 8,
                              moves)
    assert [name for k in kernels for _, name in k.moved] == ["uram", "uram"]


def test_a_regroup_is_kept_in_the_kernel_of_the_stage_it_feeds():
    from cost_models.fpga_pipeline_streams import Regroup

    assert [Regroup(name, 1, 1, 8, 1, 8).stage for name in ("t3_to_s4", "t1_skip_s3", "t6_result")] == [4, 3, 5]


def test_one_die_is_one_kernel():
    board = load_board("zcu102")
    costs = [np.ones(len(RESOURCE_KINDS))] * 3
    assert place_kernels(board, costs, lambda a, b: np.zeros(len(RESOURCE_KINDS)), [True] * 3, [8] * 3) is None
    buffers = [(8, 64), (9, 64), (512, 64)]
    single = design_clock_mhz(board, 200.0, kernel_base(buffers) + sum(costs), 1)
    assert over_slrs(board, 200.0, costs, [], buffers, [None] * 3, [1] * 3, 8) == (single, [], pytest.approx(0.0))


def test_a_pipeline_too_wide_for_one_slr_is_cut_into_kernels_each_at_one_slrs_clock(monkeypatch):
    """The small network on SLRs of 900 DSPs: as one kernel its widest design spans two SLRs and closes at 3/4 of
    the clock; cut into three kernels each closes as one SLR does, and the design is as fast as on the whole
    vu9p. Its resources are the kernels' own: each its stages, its ports, the crossing it reads."""
    from small_net import traced

    layers, _, _, _ = traced()
    shapes = [(c.shape, 1) for c in layers]
    residuals = [None if c.residual is None else c.residual + 1 for c in layers]
    board = three_slr_board()
    design = explore_pipeline(shapes, board, "int8", residuals=residuals)
    whole = explore_pipeline(shapes, load_board("vu9p"), "int8", residuals=residuals)
    assert len(design.kernels) == 3 and not whole.kernels
    assert design.achieved_mhz == pytest.approx(whole.achieved_mhz) and design.fps == pytest.approx(whole.fps)
    # the clock by hand: the fan-out's derating alone (the vu9p design's, which fits one of its SLRs)
    assert design.achieved_mhz == pytest.approx(design_clock_mhz(load_board("vu9p"), design.clock_mhz,
                                                                 np.zeros(len(RESOURCE_KINDS)),
                                                                 max(s.out_lanes for s in design.stages)))
    # without the cut: the same stages (the same lanes) span two SLRs as one kernel, derated by 3/4
    monkeypatch.setattr(fpga_pipeline_slrs, "place_kernels", lambda *a: None)
    single = explore_pipeline(shapes, board, "int8", residuals=residuals)
    assert not single.kernels and [s.out_lanes for s in single.stages] == [s.out_lanes for s in design.stages]
    assert single.achieved_mhz == pytest.approx(0.75 * design.achieved_mhz)
    assert design.fps == pytest.approx(single.fps / 0.75)
    # the kernels' resources by hand: the single kernel's, and each kernel's own control and ports (the image's on
    # the first, the result's on the last, the weights' on each) where the single kernel had one of each, and each
    # crossing's registers, five a bit of the word that crosses (the cut stage's int8 output lanes)
    image, result, weights = pipeline_buffers(board.memory.port_bits, 8)
    ports = [[image, weights], [weights], [result, weights]]
    extra = sum(kernel_base(p) for p in ports) - kernel_base([image, result, weights])
    extra += sum(crossing(8 * design.stages[k.first - 1].out_lanes) + crossing(8 * design.stages[k.first - 1].out_lanes,
                                                                              "out") for k in design.kernels[1:])
    assert [k.crossing_bits for k in design.kernels] == [0, 8 * design.stages[2].out_lanes,
                                                         8 * design.stages[3].out_lanes]
    # five registers a bit in all (two at the sending end, three at the receiving), a LUT a bit at each end
    assert (crossing(64) + crossing(64, "out"))[[_FF, _LUT]].tolist() == [5 * 64, 2 * 64 + 64]
    got = np.array([design.resources[k] for k in RESOURCE_KINDS]) - [single.resources[k] for k in RESOURCE_KINDS]
    assert got == pytest.approx(extra)
