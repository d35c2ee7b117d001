"""The Q-method's learning, its warm starts, and the explorer contract on the CPU space (a synthetic, exact
evaluator stands in for measurements: the contract is about the explorer, not the timer)."""

from __future__ import annotations

import numpy as np
import pytest

from cost_models.fpga import FpgaModel
from gpu_cpu.measure import MeasureResult
from hetero_dse.space.cpu import CpuSpace
from hetero_dse.evaluate.measured import tune
from hetero_dse.analysis import analyze
from hetero_dse.hardware.board import load_board
from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore import make_explorer
from hetero_dse.targets.fpga_search import search
from hetero_dse.explore.qlearning import QMethod
from hetero_dse.ops import get_builtin
from hetero_dse.space.fpga import FpgaSpace


@pytest.fixture(scope="module")
def fpga_small():
    op = get_builtin("gemm").instantiate(shape="small:s2")
    space = FpgaSpace(analyze(op), load_board("vu9p"), ["float32"], [250.0])
    return space, FpgaModel(space.tables)


def test_network_learns_the_rewarding_direction(fpga_small):
    space, _ = fpga_small
    q = QMethod(space, seed=0, train_steps=120)
    rows = space.sample(24, np.random.default_rng(0))
    hood = q.hood
    good = 3
    features = hood.features(rows)
    q.p_features = np.repeat(features, hood.num_directions, axis=0)
    q.e_features = q.p_features.copy()
    q.e_exists = np.zeros((len(q.p_features), hood.num_directions), dtype=bool)  # terminal: target = reward
    q.taken = np.tile(np.arange(hood.num_directions), len(rows))
    q.reward = np.where(q.taken == good, 1.0, -1.0).astype(np.float32)
    q.train()
    values = q.q_values(rows)
    assert (values.argmax(axis=1) == good).all()
    assert (values[:, good] > 0.5).all() and np.median(np.delete(values, good, axis=1)) < 0


def test_reward_is_the_relative_gain(fpga_small):
    space, model = fpga_small
    q = QMethod(space, seed=1, starts=4)
    first = q.propose()
    q.observe(first, model.evaluate(first)["objective"])
    moves = q.propose()
    objective = model.evaluate(moves)["objective"]
    starts = list(q._moves)
    q.observe(moves, objective)
    for i, (_, start_obj, _) in enumerate(starts):
        expected = np.clip((1 / objective[i] - 1 / start_obj) * start_obj, -1, 1)
        assert q.reward[i] == pytest.approx(expected, rel=1e-5)


def test_save_and_load_round_trip(fpga_small, tmp_path):
    space, model = fpga_small
    q = QMethod(space, seed=2)
    search(space, model, q, budget=200)
    q.save(tmp_path / "q.pt")
    warm = QMethod(space, seed=9)
    warm.load(tmp_path / "q.pt")
    rows = space.sample(5, np.random.default_rng(3))
    assert np.allclose(warm.q_values(rows), q.q_values(rows))
    assert np.array_equal(warm.reward, q.reward) and len(warm.reward) > 0
    other = CpuSpace(analyze(get_builtin("gemm").instantiate(shape="small:s2")), vector_bits=512)
    with pytest.raises(HeteroDSEError, match="directions"):
        QMethod(other, seed=0).load(tmp_path / "q.pt")
    (tmp_path / "bad.pt").write_text("not a network")
    with pytest.raises(HeteroDSEError, match="not a Q-network"):
        QMethod(space).load(tmp_path / "bad.pt")


class _Payload:
    """What a forged network file holds: unpickled, it runs a command (here: creates a file)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


def test_a_network_file_that_would_run_code_is_refused(fpga_small, tmp_path):
    import torch

    space, _ = fpga_small
    marker = tmp_path / "ran"
    torch.save({"format": 2, "directions": [], "features": 0, "network": _Payload(marker)}, tmp_path / "evil.pt")
    with pytest.raises(HeteroDSEError, match="could run code"):
        QMethod(space).load(tmp_path / "evil.pt")
    assert not marker.exists()


def test_patience_stops_a_search_that_finds_nothing_better(fpga_small):
    space, model = fpga_small

    class Flat:
        def evaluate(self, rows, detail=False):
            scores = model.evaluate(rows, detail)
            return {**scores, "objective": np.ones(len(rows))}

    result = search(space, Flat(), make_explorer("p", space, 0), budget=1000, patience=3)
    assert 0 < result.evaluations < 1000


# ---------------------------------------------------------------------------------- CPU contract
@pytest.fixture(scope="module")
def cpu_space():
    return CpuSpace(analyze(get_builtin("conv2d").instantiate(shape="small:s1")), vector_bits=512)


def synthetic(space):
    """Seconds that are exact and deterministic: a bowl in the log-factor features, failing on one knob value."""
    centre = np.linspace(0, 2, space.neighbourhood.num_features)
    scored = []

    def evaluate(points, best):
        for p in points:
            row = space.encode(p)
            scored.append(row)
            f = space.neighbourhood.features(row[None])[0]
            yield MeasureResult(1e-3 * (1 + float(((f - centre) ** 2).sum())))

    return evaluate, scored


@pytest.mark.parametrize("name", ["q", "p", "sa", "random", "gga", "tl"])
def test_cpu_contract(cpu_space, name):
    runs = []
    for seed in (5, 5, 6):
        evaluate, scored = synthetic(cpu_space)
        result = tune(cpu_space, make_explorer(name, cpu_space, seed, starts=4), evaluate, trials=24)
        assert len(result.trials) == len(scored) <= 24
        assert cpu_space.valid(np.array(scored)).all()
        assert len({tuple(r) for r in scored}) == len(scored)  # a point is measured once
        runs.append(np.array(scored))
    assert np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[0], runs[2])


def test_a_network_trained_on_one_layer_loads_into_another(tmp_path):
    """Layers of one operator differ in which loops can be split, not in their knobs: same directions."""
    board = load_board("vu9p")
    spaces = [FpgaSpace(analyze(get_builtin("conv2d").instantiate(shape=f"yolo:{layer}")), board, ["float32"],
                        [250.0]) for layer in ("C9", "C10")]
    q = QMethod(spaces[0], seed=0)
    q.save(tmp_path / "q.pt")
    warm = QMethod(spaces[1], seed=1)
    warm.load(tmp_path / "q.pt")
    rows = spaces[1].sample(3, np.random.default_rng(0))
    assert np.allclose(warm.q_values(rows), QMethod(spaces[1], seed=0).q_values(rows))
