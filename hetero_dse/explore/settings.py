"""Choosing an explorer for any target: the names, what ``auto`` becomes, each explorer's start points, and
the settings a user gives (``ExplorerSettings``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hetero_dse.errors import HeteroDSEError, storage_error
from hetero_dse.explore.base import Explorer, Learner
from hetero_dse.explore.registry import GGA_POPULATION, TL_BATCH, explorer_entry, explorer_names
from hetero_dse.history.match import MATCH_THRESHOLD, Prior
from hetero_dse.space.base import Enumerable

#: Spaces with at most this many valid points (upper bound) are searched exhaustively by ``auto``.
EXHAUSTIVE_LIMIT = 2_000_000
#: what ``auto`` runs on a space too large to enumerate, by how candidates are scored (BENCHMARKS.md, issue 5):
#: on measured CPU/GPU trials without a history, transfer learning from scratch (XGBoost over the knobs) ended
#: 1.29x above the Q-method over YOLO-v1 C2-C15 at 32 trials (4 of 5 layers) and ahead on all 6 pruned-layer
#: runs (BENCHMARKS.md); on the FPGA model simulated annealing came within 1 % of the exhaustive optimum in
#: fewer evaluations than the Q-method (which beats its P-method control there)
AUTO_MEASURED, AUTO_MODELLED = "tl", "sa"
#: start points per round (chains for sa) when a model scores candidates (the FPGA model, the GPU roofline):
#: a candidate costs microseconds, so rounds are wide (tl: designs scored per XGBoost fit; at its measured
#: default of 8 a 30,000-design search refits 3,750 times and runs for hours, at 256 some 40 s)
MODEL_STARTS = {"q": 64, "p": 64, "sa": 512, "random": 512, "ga": 256, "ppo": 64, "tl": 256}
__all__ = ["AUTO_MEASURED", "AUTO_MODELLED", "EXHAUSTIVE_LIMIT", "GGA_POPULATION", "MODEL_STARTS", "TL_BATCH",
           "ExplorerSettings", "explorer_names", "make_explorer", "resolve_auto"]


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
        if self.q_state is not None and self.q_state.exists() and not self.q_state.is_file():
            raise HeteroDSEError(f"--q-state {self.q_state} is not a regular file (a folder, a pipe or a device); "
                                 "give a file to load the learned state (Q-network or policy) from and save it to")
        name = resolve_auto(self.name, space, exhaustive_limit, auto, prior, self.match_threshold)
        starts = self.starts or (default_starts or {}).get(name)
        explorer = make_explorer(name, space, seed, starts=starts, gamma=self.gamma, prior=prior)
        if self.q_state is not None and isinstance(explorer, Learner) and self.q_state.is_file():
            explorer.load(self.q_state)
        return explorer

    def keep(self, explorer: Explorer) -> None:
        """Save what the explorer learned, if asked to (after the search, interrupted or not)."""
        if self.q_state is not None and isinstance(explorer, Learner):
            try:
                explorer.save(self.q_state)
            except OSError as exc:  # a full disk, a folder made meanwhile: one sentence, the search's own error
                raise storage_error(exc, f"the learned state to {self.q_state}") or HeteroDSEError(
                    f"cannot save the learned state to {self.q_state}: {exc.strerror or exc}") from None


def resolve_auto(name: str, space, exhaustive_limit: int | None = EXHAUSTIVE_LIMIT, auto: str = AUTO_MODELLED,
                 prior: Prior | None = None, match_threshold: float = MATCH_THRESHOLD) -> str:
    """``auto`` is exhaustive on an FPGA space small enough to enumerate (``exhaustive_limit`` valid points at
    most); else, when the history holds related workloads (``prior``), the guided GA if their best match
    score reaches ``match_threshold`` and transfer learning below it (seed 002's flow); else ``auto``. Other
    names are themselves."""
    if name != "auto":
        return explorer_entry(name).name
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
    return explorer_entry(name).make(space, seed, starts, gamma, prior)
