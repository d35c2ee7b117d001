"""Reinforcement learning of the moves by proximal policy optimisation (Woodpecker-DL, seed 004; Schulman et al.
2017), as an ask/tell explorer over the rearranged space of any target.

``walkers`` agents each stand on a point; the state is the point's features (``Neighbourhood.features``, what
the Q-method's network sees: log2 of each split factor) each divided by log2 of its loop's extent, beside log2 of
every loop's extent — the operator's shape, so that a policy learned on one layer can tell another apart — and
the actions the space's directions, masked to those that reach a valid point not
evaluated yet. Every round each agent samples a move from the policy, all moves are proposed as one batch (so a
measured target builds them in parallel), and the reward is the normalised improvement of the objective,
``(E_new − E_old) / E_old`` with ``E = 1 / objective`` clipped to [−1, 1] (a failed point is −1), as the
Q-method's. An agent moves to its new point where it is no worse (its state is the best point of its walk, as a
tuner keeps it: walking on from a worse point found the toy optimum 4–6× later), and after ``horizon`` moves, a
failed point, or with nowhere left to go, it starts again from a point of the history chosen by FlexTensor's
start-point rule.

After every ``horizon`` rounds the policy and value networks (one trunk, two heads) are trained on the rollout:
advantages by generalised advantage estimation (``gae_gamma``, ``gae_lambda``), then ``epochs`` passes of
minibatches on the clipped surrogate (``clip``), the value's squared error (``value_coef``) and an entropy bonus
(``entropy``), Adam. The networks are saved and loaded like the Q-network (``--q-state``); a loaded policy keeps
its trunk and value and starts its policy head again (loaded whole, it walked an unseen layer the way of the
layers it learned on and was 2–7× slower than a fresh one; BENCHMARKS.md). Saved beside the networks are the
``carry`` best designs the run found, as points (knob values, not rows); a run that loads them proposes each
adapted to its own operator's extents (``space.adapt``, as the history tuners do) in its first round, with the
default points, then random points up to the walkers: what a learned search knows of where good designs lie,
carried to a new layer (BENCHMARKS.md: that, not the networks, is what makes a warm start pay).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hetero_dse.atomic import atomic_open
from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore.base import default_points, fresh_points
from hetero_dse.explore.history import History
from hetero_dse.explore.qlearning import load_learned_state, one_thread
from hetero_dse.space.base import adapt_points
from hetero_dse.space.point import Point

__all__ = ["PPO", "PPOSettings"]

FORMAT = 2  # 2: the best designs carried beside the networks (a format-1 file loads without them)


@dataclass(frozen=True)
class PPOSettings:
    """PPO's hyper-parameters, in one place (``--starts`` sets the walkers)."""

    walkers: int = 16  # agents moving at once: a round's batch of proposals
    horizon: int = 8  # moves per agent between trainings (and per trajectory)
    epochs: int = 4  # passes over a rollout
    minibatch: int = 64
    clip: float = 0.2  # the surrogate's ratio clip
    gae_gamma: float = 0.9  # discount of later rewards
    gae_lambda: float = 0.95
    entropy: float = 0.01  # bonus that keeps the policy exploring
    value_coef: float = 0.5
    learning_rate: float = 3e-3
    hidden: int = 64
    start_gamma: float = 2.0  # the start-point rule's γ (--gamma)
    carry: int = 16  # best designs saved with the policy, proposed in a loading run's first round


def policy_network(features: int, directions: int, hidden: int):
    """A trunk of two fully connected layers (tanh), then a policy head (one logit per direction) and a value
    head."""
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(features, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
            self.policy, self.value = nn.Linear(hidden, directions), nn.Linear(hidden, 1)

        def forward(self, x):
            h = self.trunk(x)
            return self.policy(h), self.value(h)[:, 0]

    return Net()


def _shape_features(hood) -> tuple[np.ndarray, np.ndarray]:
    """Per column of ``Neighbourhood.features``, log2 of its loop's extent (1 for a choice), and log2 of each
    split loop's extent (the largest product of its factors: a padded FPGA tile may pass the extent)."""
    scale, extents = [], []
    for knob in hood.knobs:
        if knob.factors is None:
            scale.append(1.0)
            continue
        extent = float(np.log2(np.prod(np.asarray(knob.factors, dtype=np.float64), axis=1).max()))
        scale += [max(extent, 1.0)] * knob.factors.shape[1]
        extents.append(extent)
    return np.array(scale, dtype=np.float32), np.array(extents, dtype=np.float32)


class PPO:
    name = "ppo"

    def __init__(self, space, seed: int = 0, settings: PPOSettings = PPOSettings()) -> None:
        import torch

        if settings.walkers < 1:
            raise HeteroDSEError(f"PPO needs at least one walker, got {settings.walkers} (--starts)")
        self.space, self.settings, self._torch = space, settings, torch
        self.hood = space.neighbourhood
        self.rng = np.random.default_rng(seed)
        with torch.random.fork_rng():  # the same seed gives the same network, whatever else uses torch
            torch.manual_seed(seed)
            self._scale, self._extents = _shape_features(self.hood)
            self.num_features = self.hood.num_features + len(self._extents)
            self.net = policy_network(self.num_features, self.hood.num_directions, settings.hidden)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=settings.learning_rate)
        self.history = History(space)
        self.seen: set[int] = set()
        self.current = np.empty((0, space.num_knobs), dtype=np.int64)  # each walker's point
        self.current_obj = np.empty(0)
        self.age = np.empty(0, dtype=np.int64)  # moves each walker has made since its start
        self._pending: dict | None = None
        self._rollout: list[dict] = []
        self.updates = 0
        self.carried = np.empty((0, space.num_knobs), dtype=np.int64)  # a loaded state's designs, adapted
        self._loaded_designs: list[dict] = []  # as loaded: saved again where this run finds fewer

    # ------------------------------------------------------------------------------------------ ask
    def propose(self) -> np.ndarray | None:
        for _ in range(2):
            if not len(self.current):
                if not self._can_restart():
                    break
                self._restart_all()
            rows = self._moves()
            if rows is not None:
                return rows
            self.current = self.current[:0]  # nowhere new from any walker: start them again, then fresh points
        return self._fresh()

    def _can_restart(self) -> bool:
        return bool(len(self.history) and np.isfinite(self.history.objective).any())

    def _restart_all(self) -> None:
        s = self.settings
        self._restart(self.history.rows[self.history.start_points(s.walkers, s.start_gamma, self.rng)])

    def _moves(self) -> np.ndarray | None:
        """Each walker's sampled move among those to a valid point not evaluated yet (None: none has one)."""
        moved, usable = self.hood.moves(self.current)
        keys = self.space.keys(moved.reshape(-1, moved.shape[-1])).reshape(usable.shape)
        usable &= np.isin(keys, np.fromiter(self.seen, dtype=np.int64, count=len(self.seen)), invert=True)
        if usable.any():
            usable[usable] = self.space.valid(moved[usable])
        alive = usable.any(axis=1)
        if not alive.any():
            return None
        features = self.features(self.current[alive])
        mask = usable[alive]
        logits, value = self._forward(features)
        logits = np.where(mask, logits, -np.inf)
        prob = np.exp(logits - logits.max(axis=1, keepdims=True))
        prob /= prob.sum(axis=1, keepdims=True)
        actions = np.array([self.rng.choice(len(p), p=p) for p in prob])
        rows = moved[alive][np.arange(len(actions)), actions]
        # two walkers may reach the same point: one of them proposes it
        keys_out = keys[alive][np.arange(len(actions)), actions]
        _, first = np.unique(keys_out, return_index=True)
        keep = np.zeros(len(rows), dtype=bool)
        keep[first] = True
        self._pending = {"walkers": np.flatnonzero(alive)[keep], "features": features[keep], "mask": mask[keep],
                         "actions": actions[keep], "logp": np.log(prob[keep, actions[keep]]), "value": value[keep]}
        self.seen.update(keys_out[keep].tolist())
        return rows[keep]

    def _fresh(self) -> np.ndarray | None:
        """Points not evaluated yet: the first round's (a loaded state's carried designs, then the default point
        and random ones up to the walkers), or random ones where the walkers have nowhere new to go; None where
        none can be found."""
        first = not self.seen
        carried = self.carried if first else self.carried[:0]
        self.seen.update(self.space.keys(carried).tolist())
        # the default points (first_round's first) are proposed whatever is carried: those rows more at least
        wanted = max(self.settings.walkers - len(carried), len(default_points(self.space)) if first else 0)
        rows = fresh_points(self.space, wanted, self.rng, self.seen, first=first) if wanted else None
        rows = carried if rows is None else np.concatenate([carried, rows])
        if not len(rows):
            return None
        self._pending = {"fresh": True}
        return rows

    def _restart(self, starts: np.ndarray) -> None:
        """Walkers set on ``starts`` (rows of the history)."""
        self.current, self.current_obj = starts.copy(), self._objective_of(starts)
        self.age = np.zeros(len(starts), dtype=np.int64)

    def _objective_of(self, rows: np.ndarray) -> np.ndarray:
        """The history's objective of ``rows``, which it holds."""
        where = {int(k): i for i, k in enumerate(self.space.keys(self.history.rows).tolist())}
        return np.array([self.history.objective[where[int(k)]] for k in self.space.keys(rows).tolist()])

    # ----------------------------------------------------------------------------------------- tell
    def observe(self, rows: np.ndarray, objective: np.ndarray) -> None:
        objective = np.where(np.isfinite(objective), np.asarray(objective, dtype=np.float64), np.inf)
        self.history.add(rows, objective)
        pending, self._pending = self._pending, None
        if pending is None or pending.get("fresh"):
            if self._can_restart():
                self._restart_all()
            return
        w = pending["walkers"]
        old = self.current_obj[w]
        perf_new = np.where(np.isfinite(objective), 1.0 / objective, 0.0)
        reward = np.clip((perf_new - 1.0 / old) * old, -1.0, 1.0)
        # a walker moves where the move is no worse (a failed point ends its trajectory): the state is the best
        # point of its walk, as a tuner keeps it
        better = objective <= old
        self.current[w[better]], self.current_obj[w[better]] = rows[better], objective[better]
        self.age[w] += 1
        done = ~np.isfinite(objective) | (self.age[w] >= self.settings.horizon)
        self._rollout.append({**pending, "reward": reward.astype(np.float32), "done": done,
                              "next_features": self.features(self.current[w])})  # where each walker now is
        if len(self._rollout) >= self.settings.horizon:
            self.update()
            self._rollout = []
        ended = np.zeros(len(self.current), dtype=bool)
        ended[w[done]] = True
        if ended.any():  # those walkers start again from the history, in their own places (the rollout's
            s = self.settings  # transitions name walkers by place)
            fresh = self.history.rows[self.history.start_points(int(ended.sum()), s.start_gamma, self.rng)]
            if len(fresh) == ended.sum():
                self.current[ended], self.current_obj[ended] = fresh, self._objective_of(fresh)
                self.age[ended] = 0

    def features(self, rows: np.ndarray) -> np.ndarray:
        """The state: each split factor's log2 relative to its loop's, each choice's position, then the loops'
        extents (log2, over 16)."""
        point = self.hood.features(rows) / self._scale
        return np.concatenate([point, np.broadcast_to(self._extents / 16.0, (len(point), len(self._extents)))],
                              axis=1).astype(np.float32)

    # ------------------------------------------------------------------------------------------ learn
    def _forward(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        torch = self._torch
        with one_thread(torch), torch.no_grad():
            logits, value = self.net(torch.from_numpy(features))
        return logits.numpy().astype(np.float64), value.numpy().astype(np.float64)

    def update(self, rollout: list[dict] | None = None) -> float:
        """PPO on the rollout's transitions: GAE advantages, then epochs of clipped-surrogate minibatch steps.
        Returns the last minibatch's loss."""
        torch, s = self._torch, self.settings
        steps = rollout if rollout is not None else self._rollout
        if not steps:
            return 0.0
        features = np.concatenate([t["features"] for t in steps])
        mask = np.concatenate([t["mask"] for t in steps])
        actions = np.concatenate([t["actions"] for t in steps])
        logp_old = np.concatenate([t["logp"] for t in steps]).astype(np.float32)
        values = np.concatenate([t["value"] for t in steps]).astype(np.float32)
        rewards = np.concatenate([t["reward"] for t in steps]).astype(np.float32)
        done = np.concatenate([t["done"] for t in steps])
        next_value = self._forward(np.concatenate([t["next_features"] for t in steps]))[1].astype(np.float32)
        # one-step GAE per transition (walkers' trajectories interleave across rounds): δ = r + γ V(s') − V(s),
        # then λ-weighted along each walker's later steps where they are in this rollout
        delta = rewards + s.gae_gamma * np.where(done, 0.0, next_value) - values
        advantage = self._gae(steps, delta, done)
        returns = advantage + values
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in (
            ("f", features), ("m", mask), ("a", actions), ("lp", logp_old), ("adv", advantage.astype(np.float32)),
            ("ret", returns.astype(np.float32)))}
        loss_value = 0.0
        n = len(actions)
        with one_thread(torch):
            for _ in range(s.epochs):
                order = self.rng.permutation(n)
                for start in range(0, n, s.minibatch):
                    pick = torch.from_numpy(order[start:start + s.minibatch])
                    logits, value = self.net(t["f"][pick])
                    logits = logits.masked_fill(~t["m"][pick], -1e9)
                    dist = torch.distributions.Categorical(logits=logits)
                    ratio = torch.exp(dist.log_prob(t["a"][pick]) - t["lp"][pick])
                    adv = t["adv"][pick]
                    surrogate = torch.min(ratio * adv, torch.clamp(ratio, 1 - s.clip, 1 + s.clip) * adv)
                    loss = (-surrogate.mean() + s.value_coef * torch.nn.functional.mse_loss(value, t["ret"][pick])
                            - s.entropy * dist.entropy().mean())
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                    loss_value = float(loss.detach())
        self.updates += 1
        return loss_value

    def _gae(self, steps: list[dict], delta: np.ndarray, done: np.ndarray) -> np.ndarray:
        """Generalised advantages: each transition's δ plus γλ times its walker's next transition's advantage in
        the rollout (none past the end of a trajectory)."""
        s = self.settings
        offsets = np.cumsum([0] + [len(t["actions"]) for t in steps])
        advantage = delta.copy()
        following: dict[int, int] = {}  # walker -> index of its later transition
        for k in range(len(steps) - 1, -1, -1):
            for j, walker in enumerate(steps[k]["walkers"].tolist()):
                i = offsets[k] + j
                later = following.get(walker)
                if later is not None and not done[i]:
                    advantage[i] += s.gae_gamma * s.gae_lambda * advantage[later]
                following[walker] = i
        return advantage

    # --------------------------------------------------------------------------------- warm starts
    def save(self, path: str | Path) -> None:
        """The policy and value networks and the best designs, for a later run on a similar operator (written
        whole or not at all)."""
        state = {"format": FORMAT, "kind": "ppo", "directions": [d.label for d in self.hood.directions],
                 "features": self.num_features, "network": self.net.state_dict(), "designs": self._best_designs()}
        with atomic_open(Path(path), "wb", encoding=None) as f:
            self._torch.save(state, f)

    def load(self, path: str | Path) -> None:
        """Start from a saved policy; the space must have the same directions and features."""
        state = load_learned_state(self._torch, path, "policy")
        directions, features = state["directions"], state["features"]
        if state.get("kind") != "ppo" or state.get("format") not in (1, FORMAT):
            raise HeteroDSEError(f"{path} is not a PPO policy of format 1 or {FORMAT} (a Q-network is --explorer q's)")
        if list(directions) != [d.label for d in self.hood.directions] or features != self.num_features:
            raise HeteroDSEError(f"the policy in {path} was trained on a space with {len(directions)} directions and "
                                 f"{features} features; this one has {self.hood.num_directions} and "
                                 f"{self.num_features} (a different operator or target)")
        try:  # a file a colleague sends: its designs read before anything is loaded
            designs = json.loads(state.get("designs", "[]"))
            carried = adapt_points(self.space, (Point.from_json(d) for d in designs))
        except (ValueError, TypeError, KeyError, AttributeError):
            raise HeteroDSEError(f"{path} is not a PPO policy saved by hetero_dse (its designs are unreadable)") \
                from None
        self.net.load_state_dict(state["network"])
        # the trunk and the value carry over; the policy head starts again near uniform, so that a policy sure of
        # where another layer's best designs lie explores this one afresh on what the trunk learned to see
        torch = self._torch
        with torch.no_grad():
            self.net.policy.weight.mul_(0.0)
            self.net.policy.bias.zero_()
        self.carried, self._loaded_designs = carried, list(designs)

    def _best_designs(self) -> str:
        """The ``carry`` best designs evaluated, best first, then those loaded where this run found fewer (a run
        that measured nothing keeps what it was given), as JSON points in a string."""
        finite = np.flatnonzero(np.isfinite(self.history.objective))
        best = finite[np.argsort(self.history.objective[finite], kind="stable")[:self.settings.carry]]
        designs = [self.space.decode(row).to_json() for row in self.history.rows[best]]
        designs += [d for d in self._loaded_designs if d not in designs][:self.settings.carry - len(designs)]
        return json.dumps(designs)
