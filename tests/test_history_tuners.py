"""Seed 002's history-based tuners: equations 1–3 by hand, shape adaptation, the guided GA's operators,
transfer learning's filter, and auto's choice between them."""

from __future__ import annotations

import numpy as np
import pytest

from cost_models.fpga import FpgaModel
from hetero_dse.space.cpu import CpuSpace
from hetero_dse.analysis import analyze
from hetero_dse.hardware.board import load_board
from hetero_dse.targets.fpga_search import search
from hetero_dse.explore.gga import GuidedGA
from hetero_dse.explore.settings import make_explorer, resolve_auto
from hetero_dse.explore.transfer import TransferLearning
from hetero_dse.history import Record, Workload
from hetero_dse.history.match import Prior, factors, filter_metric, match_score, utilisation
from hetero_dse.ops import get_builtin
from hetero_dse.space.fpga import FpgaSpace
from hetero_dse.space.point import Point


def conv(**params):
    return get_builtin("conv2d").instantiate({"batch": 1, "H": 14, "W": 14, "kernel": 3, "stride": 1, "padding": 1,
                                              **params})


@pytest.fixture(scope="module")
def board():
    return load_board("vu9p")


def fpga(board, **params):
    space = FpgaSpace(analyze(conv(**params)), board, ["float32"], [250.0])
    return space, FpgaModel(space.tables)


# --------------------------------------------------------------------------------- equations 1–3
def test_factors_are_the_divisors():
    assert factors(12) == {1, 2, 3, 4, 6, 12}
    assert factors(13) == {1, 13} and factors(1) == {1}


def test_match_score_equation_1_by_hand():
    # loop i: factors(12) ∩ factors(8) = {1, 2, 4}, 3 of the history's 6; loop j: the same extent, 2 of 2
    assert match_score({"i": 12, "j": 7}, {"i": 8, "j": 7}) == pytest.approx((3 / 6 + 2 / 2) / 2)
    # the denominator is the history's factor count, so the score is not symmetric
    assert match_score({"i": 8, "j": 7}, {"i": 12, "j": 7}) == pytest.approx((3 / 4 + 1) / 2)
    assert match_score({"i": 12}, {"i": 12, "j": 5}) == pytest.approx(1 / 2)  # a loop the history lacks adds 0
    assert match_score({"i": 5}, {"i": 5}) == 1.0


def test_utilisation_equation_3_by_hand():
    # i: 20 iterations over tiles of 8 run 3 tiles = 24 slots; j: 3 iterations in a tile of 4
    assert utilisation({"i": 8, "j": 4}, {"i": 20, "j": 3}) == pytest.approx(20 / 24 * 3 / 4)
    assert utilisation({"i": 4}, {"i": 16, "j": 9}) == 1.0  # tiles that divide, loops the schedule keeps whole
    assert filter_metric(100.0, 0.625, 0.75) == pytest.approx(100 * 0.625 * 0.75**2)
    assert filter_metric(100.0, 0.625, 0.75, omega=1) == pytest.approx(100 * 0.625 * 0.75)


def test_parallelism_is_the_tile_of_each_loop():
    assert FpgaSpace.parallelism(Point({"tile.k": 16, "unroll.k": 4, "tile.c": 3, "order": ("k",)})) == \
        {"k": 16, "c": 3}
    assert CpuSpace.parallelism(Point({"split.k": (2, 4, 2, 1), "split.rc": (3, 1, 2), "unroll": 16})) == \
        {"k": 8, "rc": 2}


def test_candidates_are_ranked_by_equation_2(board):
    space, _ = fpga(board, C=8, K=24)  # extents: k 24, c 8, y 14, x 14
    loops = space.loop_extents
    same = Workload("conv2d", "a", "fpga vu9p", {}, {"loops": loops, "flops": 1000})
    halved = Workload("conv2d", "b", "fpga vu9p", {}, {"loops": {**loops, "k": 12}, "flops": 500})
    whole = {f"tile.{n}": e for n, e in loops.items()}
    slow = Record(Point({**whole, "tile.k": 16}), 1.0)   # 24 over tiles of 16: γ = 24/32
    fast = Record(Point({**whole, "tile.k": 12}), 1.0)   # 12 divides 24: γ = 1
    prior = Prior(loops, ((same, (slow,)), (halved, (fast,))))
    ranked = prior.ranked(space)
    assert match_score(halved.extents, loops) == 1.0  # every factor of 12 divides 24
    # m = Th · γ · s²: 1000 FLOP/s · 24/32 · 1 against 500 FLOP/s · 1 · 1
    assert [m for m, _ in ranked] == pytest.approx([1000 * 0.75, 500 * 1.0])
    assert ranked[0][1] == slow.point
    assert prior.match() == 1.0 and len(prior) == 2


# ----------------------------------------------------------------------------------- adaptation
def test_adapting_a_point_of_the_same_space_gives_it_back(board):
    space, _ = fpga(board, C=16, K=32)
    cpu = CpuSpace(analyze(conv(C=16, K=32)), vector_bits=512)
    rng = np.random.default_rng(0)
    for s in (space, cpu):
        for row in s.sample(20, rng):
            assert np.array_equal(s.adapt(s.decode(row)), row)


def test_an_adapted_design_is_valid_with_tiles_clipped_to_the_new_loops(board):
    big, _ = fpga(board, C=64, K=96)
    small, _ = fpga(board, C=30, K=13)
    rows = big.sample(50, np.random.default_rng(1))
    for row in rows:
        point = big.decode(row)
        adapted = small.adapt(point)
        assert adapted is not None and small.valid(adapted[None])[0]
        got = small.decode(adapted)
        for loop, extent in small.loop_extents.items():
            assert got[f"tile.{loop}"] <= extent
    # a tile longer than the new loop is clipped to it (with the unroll nearest its old one)
    assert small.decode(small.adapt(Point({"tile.k": 64, "unroll.k": 16})))["tile.k"] == 13


def test_an_adapted_cpu_schedule_refactors_the_splits():
    big = CpuSpace(analyze(conv(C=64, K=96)), vector_bits=512)
    small = CpuSpace(analyze(conv(C=30, K=13)), vector_bits=512)
    for row in big.sample(20, np.random.default_rng(2)):
        adapted = small.adapt(big.decode(row))
        assert adapted is not None and small.valid(adapted[None])[0]
        for loop, extent in small.loop_extents.items():
            assert np.prod(small.decode(adapted)[f"split.{loop}"]) == extent


# -------------------------------------------------------------------------------- GGA operators
@pytest.fixture
def gga(board):
    space, model = fpga(board, C=16, K=32)
    ga = GuidedGA(space, seed=0, candidates=space.sample(16, np.random.default_rng(3)))
    rows = ga.propose()
    ga.observe(rows, model.evaluate(rows)["objective"])
    return ga, space, model


def test_the_first_population_is_the_candidates_in_order(board):
    space, _ = fpga(board, C=16, K=32)
    candidates = space.sample(10, np.random.default_rng(4))
    rows = GuidedGA(space, seed=0, candidates=candidates).propose()
    assert np.array_equal(rows[:10], candidates) and len(rows) == 16  # topped up by expertise mutations
    assert space.valid(rows).all() and len(np.unique(space.keys(rows))) == 16


def test_guided_crossover_switches_one_gene_and_records_it(gga):
    ga, space, _ = gga
    hood = space.neighbourhood
    for _ in range(20):
        child, (k, v) = ga._crossover()
        if child is None:
            continue
        parents = hood.value_ids(ga.population)
        ids = hood.value_ids(child[None])[0]
        assert ids[k] == v
        # the child is one parent with gene k of another
        assert any((np.delete(ids, k) == np.delete(p, k)).all() and p[k] != v for p in parents)


def test_elite_genes_come_from_the_best_individuals_and_mutate_into_parents(gga):
    ga, space, model = gga
    parents, parents_objective = ga.population.copy(), ga.fitness.copy()
    rows = ga.propose()
    objective = model.evaluate(rows)["objective"]
    ga.observe(rows, objective)
    # the 8 best of the children and the population that bred them: those made by a gene bring it in
    pool = np.concatenate([parents, rows])
    scores = np.concatenate([parents_objective, objective])
    elite = [ga.genes.get(int(space.keys(pool[i][None])[0])) for i in np.argsort(scores, kind="stable")[:8]]
    elite = [g for g in elite if g is not None]
    assert elite, "no child among the 8 best: the test learns nothing"
    for k, v in elite:
        assert v in ga.elite_genes[k]
    assert sum(len(v) for v in ga.elite_genes.values()) <= 8
    parent = ga.population[0]
    child, (k, v) = ga._elite_mutation(parent)
    assert v in ga.elite_genes[k]
    assert space.neighbourhood.value_ids(child[None])[0, k] == v
    assert (np.delete(space.neighbourhood.value_ids(child[None])[0], k)
            == np.delete(space.neighbourhood.value_ids(parent[None])[0], k)).all()


def test_expertise_mutation_uses_divisors_or_small_factors(gga):
    ga, space, _ = gga
    ga.balance = 0.0  # the move alone, without the rebalance that may follow it
    hood = space.neighbourhood
    divides = small = 0
    for _ in range(300):
        parent = ga._parent()
        child, (k, v) = ga._expertise(parent)
        if child is None:
            continue
        before, after = hood.value_ids(np.stack([parent, child]))
        assert (np.delete(before, k) == np.delete(after, k)).all() and after[k] == v != before[k]
        knob = hood.knobs[k]
        if knob.factors is not None and space.valid(child[None])[0]:
            loop = knob.name.removeprefix("tile.")
            design = space.decode(child)
            divides += space.loop_extents[loop] % design[f"tile.{loop}"] == 0
            small += bool(set(knob.factors[v, 1:]) & {2, 4})
    assert divides > 50 and small > 50


def test_the_best_child_always_survives_selection(gga):
    ga, space, model = gga
    for _ in range(3):
        rows = ga.propose()
        objective = model.evaluate(rows)["objective"]
        ga.observe(rows, objective)
        best = rows[np.argmin(objective)]
        assert (ga.population == best).all(axis=1).any()
        assert len(ga.population) == 16


def test_the_best_so_far_survives_a_generation_of_worse_children(gga):
    ga, space, model = gga
    best = ga.population[np.argmin(ga.fitness)].copy()
    rows = ga.propose()
    ga.observe(rows, np.full(len(rows), 1e9))  # every child far slower than any parent
    assert (ga.population == best).all(axis=1).any()


def unrolls(space, row):
    design = space.decode(row)
    return {loop: design[f"unroll.{loop}"] for loop in space.loop_names}


def test_rebalance_gives_a_new_unroll_back_on_other_loops(board):
    """Unrolling k 8 times more is paid back by the other loops' unrolls: the PE array never grows, and it
    shrinks by no more than the one loop that overshoots. (The parent unrolls rc, not a spatial loop beside
    a sliding window, whose banks would be chosen at run time.)"""
    space, _ = fpga(board, C=16, K=32)
    parent = space.encode(Point({**space.decode(space.sample(1, np.random.default_rng(0))[0]),
                                 "tile.k": 32, "unroll.k": 1, "tile.j": 14, "unroll.j": 1, "tile.i": 14,
                                 "unroll.i": 1, "tile.rc": 16, "unroll.rc": 16, "unroll.rx": 1, "unroll.ry": 1}))
    assert space.valid(parent[None])[0]
    ga = GuidedGA(space, seed=0)
    k = next(i for i, knob in enumerate(space.neighbourhood.knobs) if knob.name == "tile.k")
    raised = space.encode(Point({**space.decode(parent), "unroll.k": 8}))
    pe_before = np.prod(list(unrolls(space, parent).values()))
    for seed in range(10):
        ga.rng = np.random.default_rng(seed)
        child = ga._rebalance(raised, k, 8.0)
        after = unrolls(space, child)
        assert after["k"] == 8  # the move itself is kept
        pe = np.prod(list(after.values()))
        assert pe_before / 16 <= pe <= pe_before
    # a smaller unroll is taken up by one other loop (the child may break a rule: the GA never admits those)
    lowered = space.encode(Point({**space.decode(parent), "unroll.rc": 2}))
    rc = next(i for i, knob in enumerate(space.neighbourhood.knobs) if knob.name == "tile.rc")
    children = np.array([ga._rebalance(lowered, rc, 2 / 16) for _ in range(20)])
    children = children[space.valid(children)]
    grown = [np.prod(list(unrolls(space, c).values())) for c in children]
    assert len(grown) and max(grown) > pe_before * 2 / 16


@pytest.mark.parametrize("C,K,within", [
    # new channel counts, the output channels still a whole number of port words: the old best designs
    # (64 k lanes x 14 j lanes, k banks spanning whole words) carry over
    (29, 48, 1.1),
    # prime output channels: no k unroll fills whole port words, the old best designs have no counterpart
    # and the first generation only beats starting from scratch
    (29, 61, None),
])
def test_gga_from_history_starts_near_the_optimum(board, C, K, within):
    """History of one shape, tuned again at new channel counts: the GA's first generation, built from the
    adapted history, is within 10 % of what 3,000 designs of simulated annealing find where the old designs
    carry over, and better than the GA's first generation without history in any case."""
    old, old_model = fpga(board, C=32, K=64)
    best = search(old, old_model, make_explorer("sa", old, 0), budget=3000, top_k=32)
    latency = old_model.evaluate(best.top_rows)["latency_s"]
    workload = Workload("conv2d", "old", "fpga vu9p", {}, {"loops": old.loop_extents, "flops": 1})
    records = tuple(Record(old.decode(r), float(s)) for r, s in zip(best.top_rows, latency, strict=True))
    history = ((workload, records),)
    new, model = fpga(board, C=C, K=K)
    reference = search(new, model, make_explorer("sa", new, 0), budget=3000, top_k=1).top_objective[0]
    prior = Prior(new.loop_extents, history)
    first = search(new, model, make_explorer("gga", new, 0, prior=prior), budget=16, top_k=1).top_objective[0]
    scratch = search(new, model, make_explorer("gga", new, 0), budget=16, top_k=1).top_objective[0]
    if within is not None:
        assert first <= within * reference
    assert first < scratch


# --------------------------------------------------------------------------------- TL and its filter
def _prior_two_shapes(board):
    near, _ = fpga(board, C=16, K=32)
    far, _ = fpga(board, C=64, K=128)
    target, model = fpga(board, C=16, K=30)
    rng = np.random.default_rng(5)
    related = []
    for name, space in (("near", near), ("far", far)):
        rows = space.sample(40, rng)
        seconds = FpgaModel(space.tables).evaluate(rows)["latency_s"]
        ok = np.isfinite(seconds)
        workload = Workload("conv2d", name, "fpga vu9p", {}, {"loops": space.loop_extents, "flops": 1})
        records = tuple(Record(space.decode(r), float(s)) for r, s in zip(rows[ok], seconds[ok], strict=True))
        related.append((workload, records))
    return target, model, Prior(target.loop_extents, tuple(related)), related


def test_the_filter_keeps_the_history_nearest_the_input(board):
    target, _, prior, related = _prior_two_shapes(board)
    tl = TransferLearning(target, seed=0, prior=prior, keep=len(related[0][1]))
    assert len(tl.history_x) == len(prior)
    chosen = tl.history_filter()
    # before any fit only the spec counts: every record kept is from the shape with the nearer extents
    assert len(chosen) == len(related[0][1]) and (chosen < len(related[0][1])).all()


def test_feature_importance_is_a_moving_average_of_split_counts(board):
    target, _, prior, _ = _prior_two_shapes(board)
    tl = TransferLearning(target, seed=0, prior=prior, smoothing=0.7)
    width = tl.history_x.shape[1]

    class Fake:  # a fit whose trees split on feature i counts[i] times (LearnedCostModel.importance)
        def __init__(self, counts):
            self.counts = counts

        def importance(self):
            out = np.zeros(width)
            for i, c in self.counts.items():
                out[i] = c
            return out / out.sum()

    tl.importance = None
    tl._smooth(Fake({0: 3, 2: 1}))
    first = np.zeros(width)
    first[[0, 2]] = [0.75, 0.25]
    assert tl.importance == pytest.approx(first)
    tl._smooth(Fake({1: 2}))
    second = np.zeros(width)
    second[1] = 1.0
    assert tl.importance == pytest.approx(0.7 * first + 0.3 * second)


def test_transfer_learning_proposes_what_the_history_says_is_fast(board):
    target, model, prior, _ = _prior_two_shapes(board)
    with_history = search(target, model, make_explorer("tl", target, 0, prior=prior), budget=8, top_k=1)
    random_pick = model.evaluate(target.sample(200, np.random.default_rng(9)))["objective"]
    # the first 8 picks of a model trained on the history beat the median random design by far
    assert with_history.top_objective[0] < np.median(random_pick[np.isfinite(random_pick)]) / 2


def test_a_warm_transfer_learning_measures_the_default_point_first_as_a_cold_one_does():
    def space_of(**params):
        op = get_builtin("conv2d").instantiate({"C": 16, "K": 32, "H": 14, "W": 14, **params})
        return CpuSpace(analyze(op), vector_bits=256)

    related, target = space_of(K=64), space_of()
    rows = related.sample(24, np.random.default_rng(1))
    workload = Workload("conv2d", "related", "llvm", {}, {"loops": related.loop_extents, "flops": 1})
    prior = Prior(target.loop_extents, ((workload, tuple(Record(related.decode(r), 1e-3 * (1 + i))
                                                          for i, r in enumerate(rows))),))
    defaults = np.array([target.encode(p) for p in target.default_points()])  # the default, the tiles tried next
    assert len(defaults) > 1
    for warm in (TransferLearning(target, seed=0, prior=prior), TransferLearning(target, seed=0)):
        first = warm.propose()
        assert len(first) == warm.batch and np.array_equal(first[:len(defaults)], defaults)
        assert len({tuple(r) for r in first}) == len(first)  # and never twice


# ------------------------------------------------------------------------------------------- auto
def test_auto_picks_gga_or_tl_by_the_match_score(board):
    space, _ = fpga(board, C=16, K=30)
    loops = space.loop_extents
    record = (Record(Point({"tile.k": 2}), 1.0),)
    close = Prior(loops, ((Workload("conv2d", "a", "t", {}, {"loops": {**loops, "k": 60}}), record),))
    far = {**loops, "k": 61, "rc": 17, "i": 13, "j": 13}
    distant = Prior(loops, ((Workload("conv2d", "b", "t", {}, {"loops": far}), record),))
    assert close.match() >= 0.8 > distant.match()
    assert resolve_auto("auto", space, None, "q", close) == "gga"
    assert resolve_auto("auto", space, None, "q", distant) == "tl"
    assert resolve_auto("auto", space, None, "q", distant, match_threshold=0.5) == "gga"
    assert resolve_auto("auto", space, None, "q", Prior(loops)) == "q"
    assert resolve_auto("auto", space, None, "q", None) == "q"


def test_the_learned_cost_model_splits_on_the_feature_that_matters():
    from cost_models.learned import LearnedCostModel

    rng = np.random.default_rng(0)
    x = rng.random((200, 4))
    y = 3 * x[:, 2] + 0.01 * rng.random(200)
    model = LearnedCostModel(x, y, seed=0)
    importance = model.importance()
    assert importance.sum() == pytest.approx(1.0) and int(np.argmax(importance)) == 2
    assert np.corrcoef(model.predict(x), y)[0, 1] > 0.95
