"""What a search of the FPGA model keeps: the top-k distinct feasible designs and the Pareto front of latency
vs DSP vs BRAM18K, so a user who cannot afford the fastest design sees the cheapest one for each latency; and
the outcome of an FPGA exploration (``Exploration``), which the target and its report both read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cost_models.fpga import FpgaModel
from hetero_dse.analysis import Analysis, analyze
from hetero_dse.explore.base import Explorer
from hetero_dse.evaluate.model import ModelEvaluator
from hetero_dse.explore.exhaustive import Exhaustive
from hetero_dse.explore.loop import Evaluation, LoopResult, run_search
from hetero_dse.hardware.board import Board
from hetero_dse.operator import Operator
from hetero_dse.space.fpga import FpgaSpace
from hetero_dse.space.point import Point
from hetero_dse.targets.base import Outcome

__all__ = ["Designs", "Exploration", "SearchResult", "search"]


@dataclass
class SearchResult:
    """What a search found; rows are encoded points of ``space``."""

    space: FpgaSpace
    explorer: str
    evaluations: int = 0
    wall_s: float = 0.0
    interrupted: bool = False
    ended: str = ""  # why the search ended (``explore.loop.ENDS``)
    top_rows: np.ndarray = field(default_factory=lambda: np.empty((0, 0), dtype=np.int64))
    top_objective: np.ndarray = field(default_factory=lambda: np.empty(0))  # the model's objective, best first
    pareto_rows: np.ndarray = field(default_factory=lambda: np.empty((0, 0), dtype=np.int64))
    # the design nearest to fitting, for the "nothing fits" message
    closest_row: np.ndarray | None = None
    closest_usage: np.ndarray | None = None

    @property
    def found(self) -> bool:
        return len(self.top_rows) > 0


class Designs:
    """What a model search keeps: the top-k distinct feasible designs, the Pareto front of latency vs DSP vs
    BRAM18K, and, while nothing fits, the design nearest to fitting."""

    def __init__(self, space: FpgaSpace, top_k: int) -> None:
        self.top_k = top_k
        self.best_rows = np.empty((0, space.num_knobs), dtype=np.int64)
        self.best_objective = np.empty(0)
        self.fastest = float("inf")
        self.front = np.empty((0, space.num_knobs), dtype=np.int64)
        self.front_obj = np.empty((0, 3))
        self.closest: tuple[float, np.ndarray, np.ndarray] | None = None

    def update(self, rows: np.ndarray, evaluation: Evaluation) -> None:
        scores = evaluation.figures
        latency = scores["latency_s"]
        feasible = np.isfinite(latency)
        if feasible.any():
            # ranked by the objective: latency, charged for DDR traffic and for being near a cap
            self.best_rows, self.best_objective = _merge_top(self.best_rows, self.best_objective, rows[feasible],
                                                             scores["objective"][feasible], self.top_k)
            self.fastest = min(self.fastest, float(latency[feasible].min()))
            objs = np.stack([latency, scores["dsp"], scores["bram18k"]], axis=1)[feasible]
            self.front, self.front_obj = _pareto(np.concatenate([self.front, rows[feasible]]),
                                                 np.concatenate([self.front_obj, objs]))
        elif not len(self.best_rows):
            worst = scores["usage"].max(axis=1)
            i = int(np.argmin(worst))
            if self.closest is None or worst[i] < self.closest[0]:
                self.closest = (float(worst[i]), rows[i].copy(), scores["usage"][i].copy())

    def result(self, space: FpgaSpace, explorer: str, run: LoopResult) -> SearchResult:
        """What the search found, Pareto front sorted by latency."""
        result = SearchResult(space=space, explorer=explorer, evaluations=run.evaluations, wall_s=run.wall_s,
                              interrupted=run.interrupted, ended=run.ended)
        result.top_rows, result.top_objective = self.best_rows, self.best_objective
        order = (np.argsort(self.front_obj[:, 0], kind="stable") if len(self.front_obj)
                 else np.empty(0, dtype=np.int64))
        result.pareto_rows = self.front[order]
        if self.closest is not None:
            result.closest_row, result.closest_usage = self.closest[1], self.closest[2]
        return result


def search(space: FpgaSpace, model: FpgaModel, explorer: Explorer, *, budget: int | None = None,
           time_budget_s: float | None = None, top_k: int = 10, patience: int | None = None,
           progress: Callable[[int, float], None] | None = None) -> SearchResult:
    """Run ``explorer`` over the FPGA model through the one search loop (``hetero_dse.explore.loop``).

    ``progress(evaluations, fastest feasible latency so far)`` is called after every batch. Ctrl-C ends the
    search and returns what it found so far with ``interrupted`` set.
    """
    designs = Designs(space, top_k)
    run = run_search(space, explorer, ModelEvaluator(model), budget=budget, time_budget_s=time_budget_s,
                     patience=patience, dedupe=not isinstance(explorer, Exhaustive), observers=[designs],
                     on_round=None if progress is None else lambda used: progress(used, designs.fastest))
    return designs.result(space, explorer.name, run)


def _merge_top(rows: np.ndarray, score: np.ndarray, new_rows: np.ndarray, new_score: np.ndarray,
               k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best rows of both sets, one per distinct score."""
    if len(new_score) > 4 * k:
        part = np.argpartition(new_score, 4 * k)[: 4 * k]
        new_rows, new_score = new_rows[part], new_score[part]
    all_rows = np.concatenate([rows, new_rows])
    all_score = np.concatenate([score, new_score])
    # Designs with the very same score are the same design for every purpose here (typically tile loops
    # of one trip listed in another order): keep the first of each; np.unique returns them best first.
    _, first = np.unique(all_score, return_index=True)
    return all_rows[first[:k]], all_score[first[:k]]


def _pareto(rows: np.ndarray, objs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows not dominated in (latency, DSP, BRAM18K), one per distinct objective triple."""
    if len(rows) == 0:
        return rows, objs
    # The fastest design for each (DSP, BRAM) pair is the only candidate of that pair.
    order = np.lexsort((objs[:, 0], objs[:, 2], objs[:, 1]))
    rows, objs = rows[order], objs[order]
    pair_first = np.ones(len(objs), dtype=bool)
    pair_first[1:] = (objs[1:, 1] != objs[:-1, 1]) | (objs[1:, 2] != objs[:-1, 2])
    rows, objs = rows[pair_first], objs[pair_first]
    order = np.argsort(objs[:, 0], kind="stable")
    rows, objs = rows[order], objs[order]
    keep = np.ones(len(objs), dtype=bool)
    for i in range(len(objs)):
        if not keep[i]:
            continue
        # Points after i are no faster; i dominates those that need no fewer DSPs and BRAMs.
        later = slice(i + 1, None)
        dominated = (objs[later, 1] >= objs[i, 1]) & (objs[later, 2] >= objs[i, 2])
        keep[later] &= ~dominated
    return rows[keep], objs[keep]


@dataclass
class Exploration(Outcome):
    """The outcome of exploring one operator on one board: the top-k designs (best first) and the Pareto
    front, each a point with the model's description of it."""

    board: Board | None = None
    model: FpgaModel | None = None
    result: SearchResult | None = None
    designs: list[tuple[Point, dict[str, Any]]] = field(default_factory=list)
    pareto: list[tuple[Point, dict[str, Any]]] = field(default_factory=list)
    #: the Winograd engine set against the best design (``targets/fpga_winograd``; None: not asked or no
    #: convolution), and whether it is the one kept
    winograd: Any = None

    @property
    def best_design(self) -> tuple[Point, dict[str, Any]]:
        return self.designs[0]

    @property
    def kept_seconds(self) -> float:
        """The latency of the design kept: the Winograd engine's where it was, else the best direct design's."""
        if self.winograd is not None and self.winograd.chosen:
            return self.winograd.seconds
        return self.best_design[1]["latency_s"]

    def best_operator(self) -> tuple[Operator, Analysis]:
        """The operator instantiated at the best design's data type, with its analysis."""
        op = self.op.with_dtype(self.best_design[0]["dtype"])
        return op, analyze(op)
