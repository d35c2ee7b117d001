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


def test_a_loaded_state_proposes_the_best_designs_it_carries_first_adapted_to_the_new_extents(tmp_path, monkeypatch):
    from hetero_dse.analysis import analyze
    from hetero_dse.ops import get_builtin
    from hetero_dse.space.splits import SplitSpace

    space, objective = _toy()
    ppo = make_explorer("ppo", space, 0, starts=8)
    for _ in range(12):
        rows = ppo.propose()
        ppo.observe(rows, objective(rows))
    ppo.save(tmp_path / "policy.pt")
    best = ppo.history.rows[np.argsort(ppo.history.objective, kind="stable")[:PPOSettings().carry]]
    # another layer: the same operator at other extents, so every design is adapted to it
    other = SplitSpace(analyze(get_builtin("gemm").instantiate({"M": 32, "N": 24, "K": 64})), 3, 3, {})
    adapted = np.array([other.adapt(space.decode(row)) for row in best])
    _, first_seen = np.unique(other.keys(adapted), return_index=True)
    wanted = adapted[np.sort(first_seen)]  # in order, duplicates left out
    default = other.sample(1, np.random.default_rng(9))[0]  # the space's default point, as a CPU space has one
    monkeypatch.setattr(other, "default_point", lambda: other.decode(default))

    # fewer walkers than designs: every design is proposed, then the default point
    warm = make_explorer("ppo", other, 1, starts=4)
    warm.load(tmp_path / "policy.pt")
    first = warm.propose()
    assert len(wanted) >= 4
    np.testing.assert_array_equal(first[:len(wanted)], wanted)
    np.testing.assert_array_equal(first[len(wanted):], default[None, :])
    # more walkers: the designs, the default point, then random ones up to the walkers, none repeated
    wide = make_explorer("ppo", other, 1, starts=len(wanted) + 6)
    wide.load(tmp_path / "policy.pt")
    first = wide.propose()
    assert len(first) == len(wanted) + 6 and len(set(other.keys(first).tolist())) == len(first)
    np.testing.assert_array_equal(first[:len(wanted) + 1], np.concatenate([wanted, default[None, :]]))

    # a run that finds nothing keeps the designs it was given when it saves
    failed = make_explorer("ppo", other, 2, starts=4)
    failed.load(tmp_path / "policy.pt")
    rows = failed.propose()
    failed.observe(rows, np.full(len(rows), np.inf))
    failed.save(tmp_path / "again.pt")
    again = make_explorer("ppo", other, 3, starts=4)
    again.load(tmp_path / "again.pt")
    np.testing.assert_array_equal(again.carried, warm.carried)

    state = torch.load(tmp_path / "policy.pt", weights_only=True)
    # a damaged designs field is one sentence, before anything is loaded
    torch.save({**state, "designs": "[{\"split.i\": "}, tmp_path / "damaged.pt")
    with pytest.raises(HeteroDSEError, match="its designs are unreadable"):
        make_explorer("ppo", other, 1, starts=4).load(tmp_path / "damaged.pt")
    # a format-1 state (networks only) still loads, and carries nothing
    del state["designs"]
    torch.save({**state, "format": 1}, tmp_path / "old.pt")
    old = make_explorer("ppo", other, 1, starts=4)
    old.load(tmp_path / "old.pt")
    assert len(old.carried) == 0
