"""FlexTensor's Q-method (§5.1): the direction from each start point chosen by a Q-network.

A point is a state, a direction of the rearranged space an action. The network ``X`` (four fully connected
layers with ReLU) maps a point's features to one Q-value per direction; from each start point the explorer
takes the direction of highest Q-value among those that lead to a new valid point, and records the tuple
``(p, d, e, r)`` with the reward ``r = (E_e − E_p) / E_p`` (``E = 1 / objective``; a failed point has E = 0,
so r = −1). After every ``train_every`` new tuples ("every five trials"; at most once a round) ``X`` is
trained on the tuples: ``X(p)[d]`` towards ``α · max_d' Y(e)[d'] + r``, mean squared error, AdaDelta; then
``X`` is copied into the target network ``Y`` (which keeps the targets still while ``X`` learns, as in DQN).

Rewards are clipped to [−1, 1]: a first lucky move can be 10× faster, and one such target would swamp the
rest of the training (the clipping DQN uses for the same reason).

The network and the tuples can be saved and loaded, so that a later run on a similar operator (same
knobs and directions, other shapes) starts warm.
"""

from __future__ import annotations

import pickle
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from hetero_dse.atomic import atomic_open
from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore.directional import DirectionalExplorer

FORMAT = 2


def q_network(features: int, directions: int, hidden: int = 64):
    """Four fully connected layers with ReLU: features → hidden → hidden → hidden → one Q-value per direction."""
    from torch import nn

    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, directions))


@contextmanager
def one_thread(torch):
    """Run the network on one thread: it is tiny, and more threads only add synchronisation (tens of times
    slower on a busy 2-core machine); the caller's setting is restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def load_learned_state(torch, path: str | Path, what: str, older: str = "") -> dict:
    """A learned state saved by ``torch.save`` (a Q-network, a PPO policy), read as tensors and plain values only: a
    pickle may run any code it holds, and such a file is something a colleague sends. Whatever is wrong with the
    file is one sentence naming ``what`` was expected (``older``: a note on files this format refuses)."""
    try:
        state = torch.load(Path(path), weights_only=True)
        state["directions"], state["features"]  # noqa: B018 - a file without them is not a learned state
        return state
    except FileNotFoundError:
        raise HeteroDSEError(f"no {what} at {path}") from None
    except pickle.UnpicklingError as exc:
        if "GLOBAL" not in str(exc):  # torch names the global it refused; anything else is not a pickle
            raise HeteroDSEError(f"{path} is not a {what} saved by hetero_dse (UnpicklingError)") from None
        raise HeteroDSEError(f"{path} holds more than a {what}'s tensors{older}: not loaded, as loading it could "
                             "run code; train it again") from None
    except Exception as exc:  # a truncated or foreign file: say which, not how torch fails on it
        raise HeteroDSEError(f"{path} is not a {what} saved by hetero_dse ({type(exc).__name__})") from None


class QMethod(DirectionalExplorer):
    """Start points by the heuristic rule, one direction per start point by Q-learning."""

    name = "q"

    def __init__(self, space, seed: int = 0, starts: int = 8, gamma: float = 2.0, alpha: float = 0.5,
                 train_every: int = 5, train_steps: int = 8, batch: int = 64, epsilon: float = 0.0,
                 pool: int = 4096) -> None:
        import torch

        super().__init__(space, seed=seed, starts=starts, gamma=gamma, pool=pool)
        self.alpha, self.train_every, self.train_steps, self.batch, self.epsilon = (alpha, train_every, train_steps,
                                                                                     batch, epsilon)
        self._torch = torch
        with torch.random.fork_rng():  # the same seed gives the same network, whatever else uses torch
            torch.manual_seed(seed)
            self.x = q_network(self.hood.num_features, self.hood.num_directions)
            self.y = q_network(self.hood.num_features, self.hood.num_directions)
        self.y.load_state_dict(self.x.state_dict())
        self.optimizer = torch.optim.Adadelta(self.x.parameters(), foreach=True)
        # the collected tuples (p, d, e, r), and which directions exist from e (for max Y(e))
        self.p_features = np.empty((0, self.hood.num_features), dtype=np.float32)
        self.e_features = np.empty((0, self.hood.num_features), dtype=np.float32)
        self.e_exists = np.empty((0, self.hood.num_directions), dtype=bool)
        self.taken = np.empty(0, dtype=np.int64)
        self.reward = np.empty(0, dtype=np.float32)
        self._untrained = 0  # tuples collected since the last training

    # ------------------------------------------------------------------------------------------ ask
    def prepare(self, starts: np.ndarray) -> None:
        self._q = self.q_values(starts)  # one pass of the network for the whole round

    def choose(self, start: int, directions: np.ndarray) -> list[int]:
        if self.epsilon and self.rng.random() < self.epsilon:
            return [int(directions[self.rng.integers(len(directions))])]
        q = self._q[start]
        return [int(directions[np.argmax(q[directions])])]

    def q_values(self, rows: np.ndarray) -> np.ndarray:
        torch = self._torch
        with one_thread(torch), torch.no_grad():
            return self.x(torch.from_numpy(self.hood.features(rows))).numpy()

    # ----------------------------------------------------------------------------------------- tell
    def learn(self, rows: np.ndarray, objective: np.ndarray) -> None:
        moved = [(i, m) for i, m in enumerate(self._moves) if m is not None and i < len(rows)]
        if moved:
            idx = np.array([i for i, _ in moved])
            starts = np.array([m[0] for _, m in moved])
            start_obj = np.array([m[1] for _, m in moved])
            perf_e = np.where(np.isfinite(objective[idx]), 1.0 / objective[idx], 0.0)
            reward = np.clip((perf_e - 1.0 / start_obj) * start_obj, -1.0, 1.0)
            self.p_features = np.concatenate([self.p_features, self.hood.features(starts)])
            self.e_features = np.concatenate([self.e_features, self.hood.features(rows[idx])])
            self.e_exists = np.concatenate([self.e_exists, self.hood.moves(rows[idx])[1]])
            self.taken = np.concatenate([self.taken, [m[2] for _, m in moved]])
            self.reward = np.concatenate([self.reward, reward.astype(np.float32)])
            self._untrained += len(idx)
        if self._untrained >= self.train_every:
            self._untrained = 0
            with one_thread(self._torch):
                self.train()

    def train(self) -> float:
        """Train X on the tuples towards α · max Y(e) + r (MSE, AdaDelta), then copy X into Y; the last loss."""
        torch = self._torch
        n = len(self.reward)
        loss_value = 0.0
        with torch.no_grad():
            q_e = self.y(torch.from_numpy(self.e_features))
            q_e = q_e.masked_fill(~torch.from_numpy(self.e_exists), float("-inf")).max(dim=1).values
            q_e = torch.where(torch.isfinite(q_e), q_e, torch.zeros_like(q_e))  # e with nowhere to go
            target = self.alpha * q_e + torch.from_numpy(self.reward)
        p = torch.from_numpy(self.p_features)
        taken = torch.from_numpy(self.taken)
        for _ in range(self.train_steps):
            pick = torch.from_numpy(self.rng.integers(0, n, size=min(self.batch, n)))
            q = self.x(p[pick]).gather(1, taken[pick, None])[:, 0]
            loss = torch.nn.functional.mse_loss(q, target[pick])
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            loss_value = float(loss.detach())
        self.y.load_state_dict(self.x.state_dict())
        return loss_value

    # --------------------------------------------------------------------------------- warm starts
    def save(self, path: str | Path) -> None:
        """The network and the tuples, for a later run on a similar operator (written whole or not at all)."""
        torch = self._torch
        path = Path(path)
        state = {"format": FORMAT, "directions": [d.label for d in self.hood.directions],
                 "features": self.hood.num_features, "network": self.x.state_dict(),
                 "tuples": {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in (
                     ("p", self.p_features), ("e", self.e_features), ("e_exists", self.e_exists),
                     ("taken", self.taken), ("reward", self.reward))}}
        with atomic_open(path, "wb", encoding=None) as f:
            torch.save(state, f)

    def load(self, path: str | Path) -> None:
        """Start from a saved network and its tuples; the space must have the same directions."""
        state = load_learned_state(self._torch, path, "Q-network", " (or was saved by a hetero_dse before format 2)")
        directions, features = state["directions"], state["features"]
        if state.get("format") != FORMAT:
            raise HeteroDSEError(f"{path} is a Q-network of format {state.get('format')!r}; this hetero_dse reads "
                                 f"format {FORMAT}: train it again")
        if list(directions) != [d.label for d in self.hood.directions] or features != self.hood.num_features:
            raise HeteroDSEError(f"the Q-network in {path} was trained on a space with {len(directions)} directions "
                                 f"and {features} features; this one has {self.hood.num_directions} and "
                                 f"{self.hood.num_features} (a different operator or target)")
        self.x.load_state_dict(state["network"])
        self.y.load_state_dict(state["network"])
        t = {k: v.numpy() for k, v in state["tuples"].items()}
        self.p_features, self.e_features, self.e_exists = t["p"], t["e"], t["e_exists"]
        self.taken, self.reward = t["taken"], t["reward"]
