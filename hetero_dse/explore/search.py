"""The search loop: explorer proposals → one gate (dedup, budget, time) → the model → results kept.

Keeps the top-k distinct feasible designs and the Pareto front of latency vs DSP vs BRAM18K, so a user
who cannot afford the fastest design sees the cheapest one for each latency.
"""

from __future__ import annotations

import time
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


class _Gate:
    """Deduplicates proposals (a point is never scored twice) and enforces the evaluation budget."""

    def __init__(self, space: FpgaSpace, budget: int | None, dedupe: bool) -> None:
        self.space = space
        self.budget = budget
        self.used = 0
        self.dedupe = dedupe
        self.seen = np.empty(0, dtype=np.int64)
        self.seen_objective = np.empty(0)

    def admit(self, rows: np.ndarray) -> np.ndarray:
        """The rows of ``rows`` not seen before, cut to what is left of the budget."""
        if self.dedupe and len(rows):
            keys, first = np.unique(self.space.keys(rows), return_index=True)
            if len(self.seen):
                pos = np.minimum(np.searchsorted(self.seen, keys), len(self.seen) - 1)
                new = self.seen[pos] != keys
            else:
                new = np.ones(len(keys), dtype=bool)
            rows = rows[np.sort(first[new])]
        if self.budget is not None:
            rows = rows[: max(self.budget - self.used, 0)]
        self.used += len(rows)
        return rows

    def record(self, rows: np.ndarray, objective: np.ndarray) -> None:
        """Remember the objective of newly scored rows, so that repeated proposals are answered from here."""
        if not self.dedupe or not len(rows):
            return
        keys = self.space.keys(rows)
        merged = np.concatenate([self.seen, keys])
        values = np.concatenate([self.seen_objective, objective])
        order = np.argsort(merged, kind="stable")
        self.seen, self.seen_objective = merged[order], values[order]

    def recall(self, rows: np.ndarray) -> np.ndarray:
        """Objectives of rows scored before (every row must have been)."""
        pos = np.searchsorted(self.seen, self.space.keys(rows))
        return self.seen_objective[np.minimum(pos, len(self.seen) - 1)]

    @property
    def exhausted(self) -> bool:
        return self.budget is not None and self.used >= self.budget


#: Proposals in a row that bring nothing new before a search is declared converged.
STALE_ROUNDS = 64


def search(space: FpgaSpace, model: FpgaModel, explorer: Explorer, *, budget: int | None = None,
           time_budget_s: float | None = None, top_k: int = 10, patience: int | None = None,
           progress: Callable[[int, float], None] | None = None) -> SearchResult:
    """Run ``explorer`` until it stops, the budget of evaluations or seconds is spent, ``patience`` rounds
    bring no better design, or Ctrl-C.

    ``progress(evaluations, fastest feasible latency so far)`` is called after every batch. Ctrl-C ends the
    search and returns what it found so far with ``interrupted`` set.
    """
    result = SearchResult(space=space, explorer=explorer.name)
    gate = _Gate(space, budget, dedupe=not isinstance(explorer, Exhaustive))
    start = time.perf_counter()
    best_rows = np.empty((0, space.num_knobs), dtype=np.int64)
    best_objective = np.empty(0)
    fastest = float("inf")
    front = np.empty((0, space.num_knobs), dtype=np.int64)
    front_obj = np.empty((0, 3))
    closest: tuple[float, np.ndarray, np.ndarray] | None = None
    stale = 0
    since_better, best_seen = 0, float("inf")
    try:
        while not gate.exhausted:
            if time_budget_s is not None and time.perf_counter() - start >= time_budget_s:
                break
            proposal = explorer.propose()
            if proposal is None:
                break
            rows = gate.admit(np.asarray(proposal, dtype=np.int64))
            stale = stale + 1 if len(rows) == 0 else 0
            if stale >= STALE_ROUNDS:
                break
            scores = model.evaluate(rows) if len(rows) else None
            if scores is not None:
                latency = scores["latency_s"]
                feasible = np.isfinite(latency)
                if feasible.any():
                    # ranked by the objective: latency, charged for DDR traffic and for being near a cap
                    best_rows, best_objective = _merge_top(best_rows, best_objective, rows[feasible],
                                                           scores["objective"][feasible], top_k)
                    fastest = min(fastest, float(latency[feasible].min()))
                    objs = np.stack([latency, scores["dsp"], scores["bram18k"]], axis=1)[feasible]
                    front, front_obj = _pareto(np.concatenate([front, rows[feasible]]),
                                               np.concatenate([front_obj, objs]))
                elif not len(best_rows):
                    worst = scores["usage"].max(axis=1)
                    i = int(np.argmin(worst))
                    if closest is None or worst[i] < closest[0]:
                        closest = (float(worst[i]), rows[i].copy(), scores["usage"][i].copy())
                gate.record(rows, scores["objective"])
                round_best = float(scores["objective"].min()) if len(rows) else float("inf")
                since_better = 0 if round_best < best_seen else since_better + 1
                best_seen = min(best_seen, round_best)
            result.evaluations = gate.used
            if progress is not None:
                progress(gate.used, fastest)
            if gate.exhausted or (patience is not None and since_better >= patience):
                break  # rows past the budget were never scored: nothing more to tell the explorer
            # The explorer hears about every row it proposed; rows scored before are answered from memory.
            proposal = np.asarray(proposal, dtype=np.int64)
            if scores is not None and len(rows) == len(proposal):
                explorer.observe(proposal, scores["objective"])
            elif gate.dedupe:
                explorer.observe(proposal, gate.recall(proposal))
            else:
                explorer.observe(proposal, model.evaluate(proposal)["objective"])
    except KeyboardInterrupt:
        result.interrupted = True
    result.wall_s = time.perf_counter() - start
    result.top_rows, result.top_objective = best_rows, best_objective
    order = np.argsort(front_obj[:, 0], kind="stable") if len(front_obj) else np.empty(0, dtype=np.int64)
    result.pareto_rows = front[order]
    if closest is not None:
        result.closest_row, result.closest_usage = closest[1], closest[2]
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
