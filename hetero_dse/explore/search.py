"""The model search of the FPGA target, and choosing an explorer for any target.

The loop is the one of every target (``hetero_dse.explore.loop``); here the FPGA model is its evaluator,
and what is kept is the top-k distinct feasible designs and the Pareto front of latency vs DSP vs BRAM18K,
so a user who cannot afford the fastest design sees the cheapest one for each latency.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cost_models.fpga import FpgaModel
from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore.annealing import SimulatedAnnealing
from hetero_dse.explore.base import Explorer
from hetero_dse.explore.directional import PMethod, RandomSearch
from hetero_dse.explore.exhaustive import Exhaustive
from hetero_dse.explore.loop import Evaluation, run_search
from hetero_dse.history.match import MATCH_THRESHOLD, Prior
from hetero_dse.space.base import Enumerable
from hetero_dse.space.fpga import FpgaSpace

#: Spaces with at most this many valid points (upper bound) are searched exhaustively by ``auto``.
EXHAUSTIVE_LIMIT = 2_000_000
EXPLORERS = ("auto", "exhaustive", "q", "p", "sa", "random", "gga", "tl")
#: what ``auto`` runs on a space too large to enumerate, by how candidates are scored (BENCHMARKS.md, issue 5):
#: on measured CPU/GPU trials without a history, transfer learning from scratch (XGBoost over the knobs) ended
#: 1.29x above the Q-method over YOLO-v1 C2-C15 at 32 trials (4 of 5 layers) and ahead on all 6 pruned-layer
#: runs (BENCHMARKS.md); on the FPGA model simulated annealing came within 1 % of the exhaustive optimum in
#: fewer evaluations than the Q-method (which beats its P-method control there)
AUTO_MEASURED, AUTO_MODELLED = "tl", "sa"
#: start points per round (chains for sa) when a model scores candidates (the FPGA model, the GPU roofline):
#: a candidate costs microseconds, so rounds are wide
MODEL_STARTS = {"q": 64, "p": 64, "sa": 512, "random": 512}
#: the history-based tuners' rounds: the guided GA's population (seed 002: "P=16 is sufficient"), transfer
#: learning's measurements per fit
GGA_POPULATION, TL_BATCH = 16, 8


@dataclass
class SearchResult:
    """What a search found; rows are encoded points of ``space``."""

    space: FpgaSpace
    explorer: str
    evaluations: int = 0
    wall_s: float = 0.0
    interrupted: bool = False
    top_rows: np.ndarray = field(default_factory=lambda: np.empty((0, 0), dtype=np.int64))
    top_objective: np.ndarray = field(default_factory=lambda: np.empty(0))  # the model's objective, best first
    pareto_rows: np.ndarray = field(default_factory=lambda: np.empty((0, 0), dtype=np.int64))
    # the design nearest to fitting, for the "nothing fits" message
    closest_row: np.ndarray | None = None
    closest_usage: np.ndarray | None = None

    @property
    def found(self) -> bool:
        return len(self.top_rows) > 0


@dataclass(frozen=True)
class ExplorerSettings:
    """How to explore, whatever the target: the explorer, its start points per round (FlexTensor's user-set
    count; None: the explorer's default for the target), the start-point rule's γ, the early stop, and where
    the Q-network is loaded from and saved to between runs."""

    name: str = "auto"
    starts: int | None = None
    gamma: float = 2.0
    patience: int | None = None  # rounds without a better point before the search stops
    q_state: Path | None = None
    match_threshold: float = MATCH_THRESHOLD  # auto with a history: gga from this match score, tl below

    @classmethod
    def of(cls, explorer: ExplorerSettings | str) -> ExplorerSettings:
        """Settings as given, or the defaults for the explorer named."""
        return cls(explorer) if isinstance(explorer, str) else explorer

    def make(self, space, seed: int, *, default_starts: Mapping[str, int] | None = None,
             exhaustive_limit: int | None = EXHAUSTIVE_LIMIT, auto: str = AUTO_MODELLED,
             prior: Prior | None = None) -> Explorer:
        """The explorer on ``space``; ``default_starts``: the target's start points per explorer name, used
        when the user set none; ``auto``: what ``auto`` means beyond exhaustive without a history;
        ``prior``: what the history holds for this workload (for gga, tl and auto)."""
        name = resolve_auto(self.name, space, exhaustive_limit, auto, prior, self.match_threshold)
        starts = self.starts or (default_starts or {}).get(name)
        explorer = make_explorer(name, space, seed, starts=starts, gamma=self.gamma, prior=prior)
        if self.q_state is not None and hasattr(explorer, "load") and self.q_state.is_file():
            explorer.load(self.q_state)
        return explorer

    def keep(self, explorer: Explorer) -> None:
        """Save what the explorer learned, if asked to (after the search, interrupted or not)."""
        if self.q_state is not None and hasattr(explorer, "save"):
            explorer.save(self.q_state)


def resolve_auto(name: str, space, exhaustive_limit: int | None = EXHAUSTIVE_LIMIT, auto: str = AUTO_MODELLED,
                 prior: Prior | None = None, match_threshold: float = MATCH_THRESHOLD) -> str:
    """``auto`` is exhaustive on an FPGA space small enough to enumerate (``exhaustive_limit`` valid points at
    most); else, when the history holds related workloads (``prior``), the guided GA if their best match
    score reaches ``match_threshold`` and transfer learning below it (seed 002's flow); else ``auto``. Other
    names are themselves."""
    if name not in EXPLORERS:
        raise HeteroDSEError(f"unknown explorer {name!r}; choose one of {', '.join(EXPLORERS)}")
    if name != "auto":
        return name
    small = exhaustive_limit is not None and isinstance(space, Enumerable) and space.pruned_size() <= exhaustive_limit
    if small:
        return "exhaustive"
    if prior is not None and len(prior):
        return "gga" if prior.match() >= match_threshold else "tl"
    return auto


def make_explorer(name: str, space, seed: int, *, starts: int | None = None, gamma: float = 2.0,
                  exhaustive_limit: int | None = EXHAUSTIVE_LIMIT, auto: str = AUTO_MODELLED,
                  prior: Prior | None = None) -> Explorer:
    """The explorer called ``name`` on ``space`` (``auto``: see :func:`resolve_auto`). ``starts``: start points
    per round for q and p, chains for sa, points per round for random, the population for gga, measurements
    per fit for tl (None: the explorer's default);
    ``prior``: the history the guided GA starts from and transfer learning learns from (None: none)."""
    name = resolve_auto(name, space, exhaustive_limit, auto, prior)
    if name == "exhaustive":
        if not isinstance(space, Enumerable):
            raise HeteroDSEError("the exhaustive explorer needs a space that can be enumerated (FPGA); "
                                 "choose q, p, sa or random")
        return Exhaustive(space)
    if name == "sa":
        return SimulatedAnnealing(space, seed=seed, chains=starts or 512, gamma=gamma)
    if name == "random":
        return RandomSearch(space, seed=seed, batch=starts or 64)
    if name == "p":
        return PMethod(space, seed=seed, starts=starts or 8, gamma=gamma)
    if name == "gga":
        from hetero_dse.explore.gga import GuidedGA

        population = starts or GGA_POPULATION
        candidates = prior.candidates(space, population) if prior is not None else None
        return GuidedGA(space, seed=seed, candidates=candidates, population=population)
    if name == "tl":
        from hetero_dse.explore.transfer import TransferLearning  # imports xgboost

        return TransferLearning(space, seed=seed, prior=prior, batch=starts or TL_BATCH)
    from hetero_dse.explore.qlearning import QMethod  # imports torch

    return QMethod(space, seed=seed, starts=starts or 8, gamma=gamma)


class ModelEvaluator:
    """The FPGA model as an evaluator: its objective, and every score as figures."""

    def __init__(self, model: FpgaModel) -> None:
        self.model = model

    def evaluate(self, rows: np.ndarray, best: float | None, deadline: float | None) -> Evaluation:
        scores = self.model.evaluate(rows)
        return Evaluation(scores["objective"], scores)


class _Designs:
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


def search(space: FpgaSpace, model: FpgaModel, explorer: Explorer, *, budget: int | None = None,
           time_budget_s: float | None = None, top_k: int = 10, patience: int | None = None,
           progress: Callable[[int, float], None] | None = None) -> SearchResult:
    """Run ``explorer`` over the FPGA model through the one search loop (``hetero_dse.explore.loop``).

    ``progress(evaluations, fastest feasible latency so far)`` is called after every batch. Ctrl-C ends the
    search and returns what it found so far with ``interrupted`` set.
    """
    designs = _Designs(space, top_k)
    run = run_search(space, explorer, ModelEvaluator(model), budget=budget, time_budget_s=time_budget_s,
                     patience=patience, dedupe=not isinstance(explorer, Exhaustive), observers=[designs],
                     on_round=None if progress is None else lambda used: progress(used, designs.fastest))
    result = SearchResult(space=space, explorer=explorer.name, evaluations=run.evaluations, wall_s=run.wall_s,
                          interrupted=run.interrupted)
    result.top_rows, result.top_objective = designs.best_rows, designs.best_objective
    order = (np.argsort(designs.front_obj[:, 0], kind="stable") if len(designs.front_obj)
             else np.empty(0, dtype=np.int64))
    result.pareto_rows = designs.front[order]
    if designs.closest is not None:
        result.closest_row, result.closest_usage = designs.closest[1], designs.closest[2]
    return result


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
