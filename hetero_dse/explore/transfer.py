"""Transfer learning with a filtered history (seed 002, §III-A): an XGBoost cost model that starts from
what related workloads taught it.

Features are the point's knob features (``Neighbourhood.features``: log2 of each split factor, each choice's
position) concatenated with the workload's specification (log2 of every loop's extent), so records of other
shapes say something about this one instead of contradicting it. History points are adapted to this space
first (:meth:`Prior.training_set`).

The history is **filtered** before each fit: only the ``keep`` records nearest the query — this workload's
spec and its best point so far — enter the training set, nearness measured with every feature weighted by
its importance. Importance is how often the cost model splits on the feature (XGBoost's "weight"),
smoothed by an exponential moving average over the fits, so that one noisy fit does not throw the filter
around. Each round: fit on filtered history + this workload's measurements, predict a pool of candidates
(random points, the neighbours of the best measured, the adapted history), measure the most promising.
"""

from __future__ import annotations

import numpy as np

from cost_models.learned import LearnedCostModel
from hetero_dse.explore.base import default_points, first_round
from hetero_dse.history.match import Prior


class TransferLearning:
    """Seed 002's TL flow as an ask/tell explorer; without a ``prior`` it is a plain model-based search
    (the "TL without history" control)."""

    name = "tl"

    def __init__(self, space, seed: int = 0, prior: Prior | None = None, batch: int = 8, pool: int = 512,
                 keep: int = 256, smoothing: float = 0.7, explore: float = 0.125) -> None:
        self.space = space
        self.hood = space.neighbourhood
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.batch, self.pool, self.keep = batch, pool, keep
        self.smoothing, self.explore = smoothing, explore
        self.spec = np.log2(np.array(list(space.loop_extents.values()), dtype=np.float64))
        rows, extents, perf = (prior.training_set(space) if prior is not None
                               else (np.empty((0, space.num_knobs), dtype=np.int64), np.empty((0, len(self.spec))),
                                     np.empty(0)))
        self.history_rows = rows
        self.history_x = np.concatenate([self.hood.features(rows), np.log2(extents)], axis=1) if len(rows) else \
            np.empty((0, self.hood.num_features + len(self.spec)), dtype=np.float32)
        self.history_y = perf
        self.rows = np.empty((0, space.num_knobs), dtype=np.int64)
        self.objective = np.empty(0)
        self.visited: set[int] = set()
        #: the moving average of each feature's split counts, normalised (None before the first fit)
        self.importance: np.ndarray | None = None
        self.model = None

    # ------------------------------------------------------------------------------------ features
    def features(self, rows: np.ndarray) -> np.ndarray:
        """Knob features of this space's ``rows`` with this workload's spec."""
        knobs = self.hood.features(rows)
        return np.concatenate([knobs, np.broadcast_to(self.spec, (len(knobs), len(self.spec)))], axis=1)

    # ------------------------------------------------------------------------------------------ ask
    def propose(self) -> np.ndarray | None:
        if self.model is None and not len(self.history_x) and len(self.rows) < self.batch:
            rows = first_round(self.space, self.batch, self.rng) if not len(self.rows) else \
                self.space.sample(self.batch, self.rng)
            return self._take(rows, self.batch)
        if self.model is None:
            self._fit()
        pool = self._pool()
        if not len(pool):
            return None
        predicted = self.model.predict(self.features(pool))
        explore = int(round(self.explore * self.batch))
        order = np.argsort(-predicted, kind="stable")
        chosen = order[: self.batch - explore]
        rest = order[self.batch - explore:]
        if explore and len(rest):  # a few random picks keep the model honest where it has no data
            chosen = np.concatenate([chosen, self.rng.choice(rest, size=min(explore, len(rest)), replace=False)])
        rows = pool[chosen]
        if not len(self.rows) and (points := default_points(self.space)):
            # a warm start measures the engineer's default points first too, as a cold start does: the history's
            # model ranks points of other shapes, and a layer whose best is that point (YOLO-v1 C8: 433 of the 476
            # GFLOPS 64 trials find) must not depend on the model ranking it first
            rows = np.concatenate([*(self.space.encode(p)[None, :] for p in points), rows])
        return self._take(rows, self.batch)

    def _pool(self) -> np.ndarray:
        """Candidates not measured yet: random points, every neighbour of the best measured points (before any,
        of the default point), and the adapted history."""
        parts = [self.space.sample(self.pool, self.rng)]
        best = self.rows[np.argsort(self.objective, kind="stable")[:8]] if len(self.rows) else None
        if best is None and getattr(self.space, "near_default", 0.0) and (point := self.space.default_point()):
            best = self.space.encode(point)[None, :]  # a warm start's first round: the default's neighbours too
        if best is not None:
            moved, exists = self.hood.moves(best)
            near = moved[exists]
            if len(near):
                parts.append(near[self.space.valid(near)])
        if len(self.history_rows):
            parts.append(self.history_rows)
        pool = np.concatenate(parts)
        keys = self.space.keys(pool)
        _, first = np.unique(keys, return_index=True)
        first = np.sort(first)
        fresh = np.array([int(keys[i]) not in self.visited for i in first], dtype=bool)
        return pool[first[fresh]] if len(first) else pool[:0]

    def _take(self, rows: np.ndarray, count: int) -> np.ndarray | None:
        out = []
        for row in rows:
            key = int(self.space.keys(row[None, :])[0])
            if key not in self.visited:
                self.visited.add(key)
                out.append(row)
                if len(out) == count:
                    break
        return np.array(out, dtype=np.int64) if out else None

    # ---------------------------------------------------------------------------------------- tell
    def observe(self, rows: np.ndarray, objective: np.ndarray) -> None:
        self.rows = np.concatenate([self.rows, np.atleast_2d(rows)])
        self.objective = np.concatenate([self.objective, np.asarray(objective, dtype=np.float64)])
        self._fit()

    # ---------------------------------------------------------------------------------- the model
    def history_filter(self) -> np.ndarray:
        """Indices of the ``keep`` history rows nearest the query (this spec, this workload's best point),
        each feature weighted by its smoothed importance; before any fit, by the spec alone."""
        n_hist = len(self.history_x)
        if n_hist <= self.keep:
            return np.arange(n_hist)
        knobs = self.hood.num_features
        if self.importance is None:
            weight = np.concatenate([np.zeros(knobs), np.ones(len(self.spec))])
        else:
            weight = self.importance.copy()
        query = np.concatenate([np.zeros(knobs), self.spec])
        ok = np.isfinite(self.objective)
        if ok.any():
            query[:knobs] = self.hood.features(self.rows[ok][np.argmin(self.objective[ok])][None, :])[0]
        else:
            weight[:knobs] = 0.0  # no point of our own to be near yet
        distance = np.sqrt(((self.history_x - query) ** 2) @ weight)
        return np.argsort(distance, kind="stable")[: self.keep]

    def _fit(self) -> None:
        chosen = self.history_filter()
        x = [self.history_x[chosen]]
        y = [self.history_y[chosen]]
        if len(self.rows):
            ok = np.isfinite(self.objective)
            best = self.objective[ok].min() if ok.any() else 1.0
            x.append(self.features(self.rows))
            y.append(np.where(ok, best / np.where(ok, self.objective, 1.0), 0.0))
        x_all, y_all = np.concatenate(x), np.concatenate(y)
        if not len(x_all):
            return
        model = LearnedCostModel(x_all, y_all, seed=self.seed)
        self.model = model
        self._smooth(model)

    def _smooth(self, model: LearnedCostModel) -> None:
        """Fold the fit's split counts into the moving average of feature importance."""
        counts = model.importance()
        if counts.sum() == 0:
            return
        if self.importance is None:
            self.importance = counts
        else:
            self.importance = self.smoothing * self.importance + (1 - self.smoothing) * counts
