"""The learned cost model of the history-based tuners (seed 002): gradient-boosted trees (XGBoost) from a
point's features to its relative performance, refitted every round on at most a few hundred rows."""

from __future__ import annotations

import numpy as np

__all__ = ["LearnedCostModel", "XGB_PARAMS", "XGB_ROUNDS"]

#: XGBoost settings: small trees, quickly fitted every round on at most a few hundred rows
XGB_PARAMS = {"max_depth": 6, "eta": 0.15, "subsample": 0.9, "min_child_weight": 1.0, "tree_method": "hist",
              "nthread": 1, "objective": "reg:squarederror"}
XGB_ROUNDS = 120


class LearnedCostModel:
    """One fit: ``predict`` scores feature rows (higher is faster), ``importance`` is how often each feature
    is split on (XGBoost's "weight"), normalised to sum to 1 (all zeros where no tree split at all)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, seed: int = 0) -> None:
        import xgboost

        self._xgboost = xgboost
        self.features = x.shape[1]
        self.booster = xgboost.train({**XGB_PARAMS, "seed": seed}, xgboost.DMatrix(x, label=y),
                                     num_boost_round=XGB_ROUNDS)

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.booster.predict(self._xgboost.DMatrix(x))

    def importance(self) -> np.ndarray:
        counts = np.zeros(self.features)
        for name, value in self.booster.get_score(importance_type="weight").items():
            counts[int(name.removeprefix("f"))] = value
        return counts / counts.sum() if counts.sum() else counts
