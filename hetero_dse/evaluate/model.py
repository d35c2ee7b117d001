"""The FPGA model as an evaluator: thousands of encoded designs scored in one compiled call, each infeasible
one with the reason it does not fit."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cost_models.fpga import FpgaModel
from hetero_dse.explore.loop import Evaluation, OnRow
from hetero_dse.hardware.board import RESOURCE_KINDS

__all__ = ["InfeasibleReasons", "ModelEvaluator"]

#: what a design whose resources fit is refused for (the model's ``bad_transfer``)
UNEMITTED_TRANSFER = "a transfer the generator does not emit (a bank or a port word chosen at run time)"


class InfeasibleReasons(Sequence):
    """Per design: None where it has a latency, else the resource it exceeds most (its share of the board's
    usable amount), or the transfer the generated code cannot make. Worded when asked: an exhaustive batch
    holds a hundred thousand infeasible designs nobody reads."""

    def __init__(self, latency: np.ndarray, usage: np.ndarray) -> None:
        self.latency, self.usage = latency, usage

    def __len__(self) -> int:
        return len(self.latency)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if np.isfinite(self.latency[i]):
            return None
        worst = int(np.argmax(self.usage[i]))
        if np.isinf(self.usage[i, worst]):
            return f"needs {RESOURCE_KINDS[worst]}, which the board does not have"
        if self.usage[i, worst] > 1.0:
            return f"needs {self.usage[i, worst]:.0%} of the board's usable {RESOURCE_KINDS[worst]}"
        return UNEMITTED_TRANSFER


class ModelEvaluator:
    """The FPGA model as an evaluator: its objective, why each infeasible design is, and every score as figures.
    ``best_seconds``: the fastest feasible latency it has scored."""

    def __init__(self, model: FpgaModel) -> None:
        self.model = model
        self.best_seconds: float | None = None

    def evaluate(self, rows: np.ndarray, best: float | None, deadline: float | None,
                 on_row: OnRow | None = None) -> Evaluation:
        scores = self.model.evaluate(rows)
        latency = scores["latency_s"]
        feasible = np.isfinite(latency)
        if feasible.any():
            fastest = float(latency[feasible].min())
            self.best_seconds = fastest if self.best_seconds is None else min(self.best_seconds, fastest)
        errors = None if feasible.all() else InfeasibleReasons(latency, scores["usage"])
        if on_row is not None:  # a Python call a row: only when someone listens
            for i, seconds in enumerate(latency.tolist()):
                on_row(i, seconds if feasible[i] else None, None if errors is None else errors[i], None)
        return Evaluation(scores["objective"], scores, errors)
