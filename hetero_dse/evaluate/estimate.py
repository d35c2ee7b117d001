"""The roofline of a named GPU as an evaluator, for a machine with no GPU to time on. Its figures are a model's
(``cost_models/gpu_roofline.py``), never a measurement's: no spread, no load, nothing in the history."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from cost_models.gpu_roofline import GpuEstimate
from gpu_cpu.cuda_usage import staged_shared_bytes
from hetero_dse.explore.loop import Evaluation, OnRow
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point

__all__ = ["Roofline", "RooflineEvaluator"]

#: a point's estimate on a GPU space (``registers``: ptxas's count, where the kernel was compiled)
Roofline = Callable[[Any, Point, "int | None"], GpuEstimate]


class RooflineEvaluator:
    """``roofline`` over the points of ``space`` (a GPU space of ``op`` on ``device``): each row's estimated
    seconds, or why it has none (beyond the device's limits; for a new best, shared memory TVM's code would
    declare beyond a block's), and each row's estimate as figures."""

    def __init__(self, op: Operator, space: Any, device: Any, roofline: Roofline) -> None:
        self.op, self.space, self.device, self.roofline = op, space, device, roofline
        self.incumbent = float("inf")

    def estimate(self, point: Point) -> tuple[GpuEstimate | None, str | None]:
        """``point``'s estimate, or why it has none."""
        problem = self.space.beyond_limits(point)  # enforced before building, as on a real device
        if problem:
            return None, problem
        estimate = self.roofline(self.space, point, None)
        if estimate.seconds < self.incumbent:
            # a new best is generated (not compiled) first: for a custom operator the shared memory TVM's code
            # declares can exceed the tiles' footprint the model counts, and a best that cannot run is no
            # answer (for the built-ins they agree since the padding moved into the shared stage)
            staged = staged_shared_bytes(self.op, point, self.device)
            if staged > self.device.shared_memory_per_block:
                return None, (f"TVM's code stages {staged} B of shared memory > "
                              f"{self.device.shared_memory_per_block} (the model counted "
                              f"{self.space.limits(point)['shared_bytes']} B)")
            self.incumbent = estimate.seconds
        return estimate, None

    def evaluate(self, rows: np.ndarray, best: float | None, deadline: float | None,
                 on_row: OnRow | None = None) -> Evaluation:
        objective: list[float] = []
        errors: list[str | None] = []
        figures: list[GpuEstimate | None] = []
        for i, row in enumerate(rows):
            estimate, error = self.estimate(self.space.decode(row))
            objective.append(estimate.seconds if estimate is not None else float("inf"))
            errors.append(error)
            figures.append(estimate)
            if on_row is not None:
                on_row(i, None if estimate is None else estimate.seconds, error, None)
            if deadline is not None and time.perf_counter() >= deadline:
                break
        return Evaluation(np.array(objective, dtype=np.float64), figures,
                          errors if any(e is not None for e in errors) else None)
