"""Contract tests every explorer passes (STYLE.md): in the space, within budget, seeded, finds a known optimum."""

from __future__ import annotations

import numpy as np
import pytest

from cost_models.fpga import FpgaModel
from hetero_dse.analysis import analyze
from hetero_dse.hardware.board import load_board
from hetero_dse.explore import Exhaustive, PMethod, RandomSearch, SimulatedAnnealing
from hetero_dse.targets.fpga_search import search
from hetero_dse.explore.gga import GuidedGA
from hetero_dse.explore.qlearning import QMethod
from hetero_dse.explore.transfer import TransferLearning
from hetero_dse.ops import get_builtin
from hetero_dse.space.fpga import FpgaSpace

EXPLORERS = {"exhaustive": lambda space, seed: Exhaustive(space),
             "sa": lambda space, seed: SimulatedAnnealing(space, seed=seed, chains=64, steps=12),
             "q": lambda space, seed: QMethod(space, seed=seed, starts=8),
             "p": lambda space, seed: PMethod(space, seed=seed, starts=8),
             "random": lambda space, seed: RandomSearch(space, seed=seed, batch=64),
             # the history-based tuners with no history: a GA of expertise moves, a model-based search
             "gga": lambda space, seed: GuidedGA(space, seed=seed),
             "tl": lambda space, seed: TransferLearning(space, seed=seed, batch=32)}
SEEDED = sorted(set(EXPLORERS) - {"exhaustive"})


@pytest.fixture(scope="module")
def small():
    op = get_builtin("gemm").instantiate(shape="small:s2")
    space = FpgaSpace(analyze(op), load_board("vu9p"), ["float32"], [250.0])
    return space, FpgaModel(space.tables)


def optimum(space, model):
    """The best objective among feasible designs (a design just over a cap scores low but is not a result)."""
    rows = np.concatenate(list(space.enumerate()))
    scores = model.evaluate(rows)
    return float(scores["objective"][scores["feasible"]].min())


class Recording:
    """Wraps the model to see every row the search scores."""

    def __init__(self, model):
        self.model, self.rows = model, []

    def evaluate(self, rows, detail=False):
        self.rows.append(np.array(rows))
        return self.model.evaluate(rows, detail)

    def __getattr__(self, name):
        return getattr(self.model, name)


@pytest.mark.parametrize("name", sorted(EXPLORERS))
def test_proposals_stay_in_the_space_and_budget_holds(small, name):
    space, model = small
    rec = Recording(model)
    result = search(space, rec, EXPLORERS[name](space, 0), budget=500)
    assert result.evaluations <= 500
    scored = np.concatenate(rec.rows)
    assert space.valid(scored).all()


@pytest.mark.parametrize("name", sorted(EXPLORERS))
def test_finds_the_known_optimum(small, name):
    space, model = small
    best = optimum(space, model)
    result = search(space, model, EXPLORERS[name](space, 3), budget=None if name == "exhaustive" else 3000)
    found = float(model.evaluate(result.top_rows[:1])["objective"][0])
    assert found == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("name", SEEDED)
def test_same_seed_same_sequence(small, name):
    space, model = small
    runs = []
    for _ in range(2):
        rec = Recording(model)
        search(space, rec, EXPLORERS[name](space, 7), budget=400)
        runs.append(np.concatenate(rec.rows))
    assert np.array_equal(runs[0], runs[1])
    rec = Recording(model)
    search(space, rec, EXPLORERS[name](space, 8), budget=400)
    assert not np.array_equal(runs[0], np.concatenate(rec.rows))


def test_top_k_and_pareto_front(small):
    space, model = small
    result = search(space, model, Exhaustive(space), top_k=5)
    scores = model.evaluate(result.top_rows)
    assert len(result.top_rows) == 5 and np.all(np.diff(scores["objective"]) >= 0)
    assert len(np.unique(space.keys(result.top_rows))) == 5
    front = model.evaluate(result.pareto_rows)
    objs = np.stack([front["latency_s"], front["dsp"], front["bram18k"]], axis=1)
    for i in range(len(objs)):
        dominated = (objs <= objs[i]).all(axis=1) & (objs < objs[i]).any(axis=1)
        assert not dominated.any()
    # the fastest design is on the front
    assert objs[:, 0].min() == pytest.approx(scores["latency_s"][0])


def test_time_budget_stops_the_search(small):
    space, model = small
    result = search(space, model, SimulatedAnnealing(space, seed=0), time_budget_s=0.0)
    assert result.evaluations == 0 and not result.found
