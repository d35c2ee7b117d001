"""The plain genetic algorithm (seed 004, ``--explorer ga``): elitism, crossover per knob, the space's rules, its
settings. The contract kits (tests/test_contracts.py) run it over every space and on the toy optimum."""

from __future__ import annotations

import numpy as np
import pytest

from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore.genetic import GASettings, GeneticAlgorithm
from hetero_dse.explore.settings import make_explorer
from hetero_dse.testing.contracts import toy_space


def _objective(space):
    target = np.array([len(s) // 2 for s in space.splits])
    return lambda rows: 1.0 + np.abs(rows - target).sum(axis=1).astype(float)


def test_elitism_never_loses_the_best_and_every_proposal_is_new_and_valid():
    space = toy_space()
    f = _objective(space)
    ga = GeneticAlgorithm(space, seed=1, settings=GASettings(population=8, elite=2))
    best, seen = np.inf, set()
    for _ in range(12):
        rows = ga.propose()
        assert rows is not None and space.valid(rows).all()
        keys = set(space.keys(rows).tolist())
        assert not keys & seen and len(keys) == len(rows)  # never the same point twice
        seen |= keys
        obj = f(rows)
        ga.observe(rows, obj)
        best = min(best, obj.min())
        assert ga.fitness.min() == best  # the best so far is in the population
        assert len(ga.population) == 8


def test_a_child_by_crossover_takes_each_knob_from_one_of_its_parents():
    space = toy_space()
    ga = GeneticAlgorithm(space, seed=3, settings=GASettings(population=16, crossover=1.0, mutation=0.0))
    a, b = space.sample(2, np.random.default_rng(0))
    while (a == b).all():
        b = space.sample(1, np.random.default_rng(1))[0]
    ga.population, ga.fitness, ga.generation = np.stack([a, b]), np.array([1.0, 2.0]), 1
    children = ga._children()
    # children whose every knob is one of the parents', equal to neither: crossover per knob (the rest, once the
    # two parents' few mixes are used up or break a rule, are neighbours and fresh points)
    mixed = [c for c in children if ((c == a) | (c == b)).all() and (c != a).any() and (c != b).any()]
    differ = int((a != b).sum())
    assert 1 <= len(mixed) <= 2 ** differ - 2


def test_the_population_comes_from_starts_and_a_population_of_one_is_one_sentence():
    space = toy_space()
    assert len(make_explorer("ga", space, 0, starts=12).propose()) == 12
    assert make_explorer("ga", space, 0).settings.population == GASettings.population
    with pytest.raises(HeteroDSEError, match="the GA needs a population of at least 2"):
        make_explorer("ga", space, 0, starts=1)


def test_the_same_seed_proposes_the_same_generations():
    space = toy_space()
    f = _objective(space)
    runs = []
    for _ in range(2):
        ga, rows_seen = GeneticAlgorithm(space, seed=7, settings=GASettings(population=6)), []
        for _ in range(4):
            rows = ga.propose()
            ga.observe(rows, f(rows))
            rows_seen.append(rows)
        runs.append(np.concatenate(rows_seen))
    assert np.array_equal(*runs)
