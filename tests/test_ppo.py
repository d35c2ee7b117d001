"""PPO over the rearranged space (seed 004, ``--explorer ppo``): its update learns what pays, it finds the toy
optimum in fewer evaluations than random sampling over seeds, and its policy is saved and loaded like the
Q-network. The contract kits (tests/test_contracts.py) run it over every space and on the toy optimum."""

from __future__ import annotations

import numpy as np
import pytest

from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore.ppo import PPO, PPOSettings
from hetero_dse.explore.settings import make_explorer
from hetero_dse.testing.contracts import toy_space

torch = pytest.importorskip("torch")


def _toy():
    space = toy_space()
    tables = [np.log2(np.array(s, dtype=float)) for s in space.splits]
    target = np.array([len(s) // 2 for s in space.splits])

    def objective(rows):
        return 1.0 + sum(np.abs(tables[i][rows[:, i]] - tables[i][target[i]]).sum(axis=1) for i in range(3))

    return space, objective


def _evaluations_to_optimum(name, space, objective, seed, budget=3000):
    explorer, used = make_explorer(name, space, seed, starts=8), 0
    while used < budget:
        rows = explorer.propose()
        if rows is None:
            break
        obj = objective(rows)
        explorer.observe(rows, obj)
        hit = np.flatnonzero(obj == 1.0)
        if len(hit):
            return used + int(hit[0]) + 1
        used += len(rows)
    return budget


def test_the_update_raises_the_probability_of_the_move_that_pays():
    space, _ = _toy()
    ppo = PPO(space, seed=0, settings=PPOSettings(epochs=8))
    rows = space.sample(32, np.random.default_rng(0))
    features = ppo.features(rows)
    mask = np.ones((len(rows), ppo.hood.num_directions), dtype=bool)
    logits, value = ppo._forward(features)
    prob = np.exp(logits - logits.max(axis=1, keepdims=True))
    prob /= prob.sum(axis=1, keepdims=True)
    rng = np.random.default_rng(1)
    actions = np.array([rng.choice(len(p), p=p) for p in prob])
    actions[::2] = 0  # half the moves along direction 0, which alone pays
    before = prob[:, 0].mean()
    for _ in range(5):
        step = {"walkers": np.arange(len(rows)), "features": features, "mask": mask, "actions": actions,
                "logp": np.log(prob[np.arange(len(rows)), actions]), "value": value,
                "reward": np.where(actions == 0, 1.0, -1.0).astype(np.float32), "done": np.ones(len(rows), bool),
                "next_features": features}
        ppo.update([step])
        logits, value = ppo._forward(features)
        prob = np.exp(logits - logits.max(axis=1, keepdims=True))
        prob /= prob.sum(axis=1, keepdims=True)
    assert prob[:, 0].mean() > 2 * before and ppo.updates == 5


def test_ppo_finds_the_toy_optimum_in_fewer_evaluations_than_random_over_seeds():
    space, objective = _toy()
    ppo = [_evaluations_to_optimum("ppo", space, objective, seed) for seed in range(5)]
    rnd = [_evaluations_to_optimum("random", space, objective, seed) for seed in range(5)]
    assert np.median(ppo) < np.median(rnd) / 2, (ppo, rnd)


def test_the_policy_is_saved_and_loaded_and_a_foreign_file_is_one_sentence(tmp_path):
    space, objective = _toy()
    ppo = make_explorer("ppo", space, 0, starts=8)
    for _ in range(20):
        rows = ppo.propose()
        ppo.observe(rows, objective(rows))
    assert ppo.updates >= 1
    ppo.save(tmp_path / "policy.pt")
    again = make_explorer("ppo", space, 1, starts=8)
    again.load(tmp_path / "policy.pt")
    features = ppo.features(space.sample(4, np.random.default_rng(2)))
    # the trunk and the value carry over; the policy head starts again, every direction alike
    assert np.allclose(ppo._forward(features)[1], again._forward(features)[1])
    assert not np.allclose(ppo._forward(features)[0], 0.0) and np.allclose(again._forward(features)[0], 0.0)
    q = make_explorer("q", space, 0, starts=8)
    q.save(tmp_path / "q.pt")
    with pytest.raises(HeteroDSEError, match="not a PPO policy"):
        again.load(tmp_path / "q.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a policy")
    with pytest.raises(HeteroDSEError, match="is not a policy saved by hetero_dse"):
        again.load(tmp_path / "junk.pt")
    with pytest.raises(HeteroDSEError, match="PPO needs at least one walker"):
        PPO(space, settings=PPOSettings(walkers=0))


def test_a_loaded_state_proposes_the_best_designs_it_carries_first_adapted_to_the_new_extents(tmp_path):
    from hetero_dse.analysis import analyze
    from hetero_dse.ops import get_builtin
    from hetero_dse.space.splits import SplitSpace

    space, objective = _toy()
    ppo = make_explorer("ppo", space, 0, starts=8)
    for _ in range(12):
        rows = ppo.propose()
        ppo.observe(rows, objective(rows))
    ppo.save(tmp_path / "policy.pt")
    order = np.argsort(ppo.history.objective, kind="stable")[:PPOSettings().carry]
    best = ppo.history.rows[order]
    # another layer: the same operator at other extents, so every design is adapted to it
    other = SplitSpace(analyze(get_builtin("gemm").instantiate({"M": 32, "N": 24, "K": 64})), 3, 3, {})
    warm = make_explorer("ppo", other, 1, starts=20)
    warm.load(tmp_path / "policy.pt")
    wanted, keys = [], set()
    for row in best:
        adapted = other.adapt(space.decode(row))
        key = int(other.keys(adapted[None, :])[0])
        if key not in keys:
            keys.add(key)
            wanted.append(adapted)
    first = warm.propose()
    assert len(wanted) >= 4 and len(first) == 20
    np.testing.assert_array_equal(first[:len(wanted)], np.array(wanted))
    assert len(set(other.keys(first).tolist())) == 20  # the rest of the round: new points, none repeated
    # a format-1 state (networks only) still loads, and carries nothing
    state = torch.load(tmp_path / "policy.pt", weights_only=True)
    del state["designs"]
    torch.save({**state, "format": 1}, tmp_path / "old.pt")
    old = make_explorer("ppo", other, 1, starts=20)
    old.load(tmp_path / "old.pt")
    assert len(old.carried) == 0
