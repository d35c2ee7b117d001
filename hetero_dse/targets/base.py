"""What a kind of device provides to the engine (:class:`Target`), what exploring for it returns
(:class:`Outcome`), and the one report row every target fills (:class:`Row`).

The flow (``hetero_dse.targets.flow``), the CLI and the report only talk to these: adding a kind of device
is one new module implementing :class:`Target`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hetero_dse.explore.loop import Evaluator, LoopResult, Observer
from hetero_dse.history import Workload
from hetero_dse.history.store import WorkloadHistory
from hetero_dse.operator import Operator
from hetero_dse.space.base import Space
from hetero_dse.space.point import Point

__all__ = ["Alternative", "Defaults", "Outcome", "Row", "Searched", "Target", "Written", "alternatives_of"]


@dataclass(frozen=True)
class Defaults:
    """A target's search defaults: start points per round for each explorer (when the user gives none), what
    ``auto`` becomes beyond exhaustive without a history, the points searched when the user gives no budget
    (None: the explorer's own end), what one point is called on the progress bar, whether ``auto`` may
    switch to a history-based tuner when the history holds related workloads, and, per explorer, the rounds
    without a better point that end its search when the user gives neither ``--patience`` nor a budget."""

    starts: Mapping[str, int]
    auto: str
    budget: int | None
    unit: str
    auto_from_history: bool
    patience: Mapping[str, int] = field(default_factory=dict)


@dataclass
class Outcome:
    """What exploring one operator for one target found. ``best_seconds`` is the time of ``best`` (measured,
    or predicted by a model: ``estimate``); ``library_seconds`` the library call's time on the same device
    taken in the same run (None: no library for the operator, or no device to run it on)."""

    op: Operator
    target: Target
    space: Space
    explorer: str
    loop: LoopResult
    best: Point | None = None
    best_seconds: float | None = None
    library_seconds: float | None = None
    estimate: bool = False
    #: the target's other algorithms' searches (``Target.alternatives``)
    searched: list[Searched] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.op.slug

    @property
    def interrupted(self) -> bool:
        return self.loop.interrupted or any(s.loop.interrupted for s in self.searched)

    @property
    def evaluations(self) -> int:
        """Points evaluated, the other algorithms' included."""
        return self.loop.evaluations + sum(s.loop.evaluations for s in self.searched)

    @property
    def wall_s(self) -> float:
        """The searches' time, the other algorithms' included."""
        return self.loop.wall_s + sum(s.loop.wall_s for s in self.searched)

    @property
    def found(self) -> bool:
        return self.best is not None

    def why_nothing(self) -> str:
        """Why there is no best point, in a few words."""
        return "interrupted before a result" if self.interrupted else "nothing found"


@dataclass
class Written:
    """What the target wrote for an outcome: its directory relative to the output (None: nothing written,
    ``why`` says why), and the check of what was written (``passed``: None when there was none)."""

    directory: str | None = None
    why: str | None = None
    passed: bool | None = None
    check: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)  # for the person running it (the HLS lint's findings)


@dataclass
class Row:
    """One row of the report per (operator, device), whatever the device."""

    kind: str
    operator: str
    shape: str | None
    device: str
    basis: str  # "measured", "model" (the FPGA model) or "estimate" (a roofline where no device is present)
    seconds: float | None
    gflops: float | None
    peak_fraction: float | None  # of the device's peak for this data type
    bound: str | None
    library_seconds: float | None
    explorer: str
    evaluations: int
    answered: int  # points answered from the history database
    failures: int
    wall_s: float
    interrupted: bool
    directory: str | None
    why_unwritten: str | None
    check: str  # "pass", "FAIL" or "—"
    detail: str = ""  # the target's own summary of the best point (FPGA: PE, II, resources)
    #: our timing or the library's was taken while other work loaded the machine: the speedup is not to be
    #: trusted, and every place that prints it says so
    loaded: bool = False
    #: our timing's repeats or the library's still disagreed after timing them again (``gpu_cpu.stability``):
    #: likewise never printed bare
    unstable: bool = False
    #: the algorithm of the best point where the target searched more than one (``Target.alternatives``)
    algorithm: str | None = None

    @property
    def speedup(self) -> float | None:
        if self.seconds and self.library_seconds:
            return self.library_seconds / self.seconds
        return None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "speedup_over_library": self.speedup}


@dataclass
class Search:
    """How long and how wide a search runs, whatever the target (None: the target's default)."""

    seed: int = 0
    budget: int | None = None
    time_budget_s: float | None = None
    top_k: int = 10


@dataclass(frozen=True)
class Alternative:
    """Another algorithm for an operator, searched beside it with the same explorer and budget: an operator of
    its own (``op``: Winograd's batched product for a convolution), searched on ``target`` (the same device,
    its workers rebuilding ``op`` from where it comes from), whose points ``point_of`` turns into points of the
    operator (the product's knobs with the tile size: a Winograd point of the convolution)."""

    label: str
    op: Operator
    target: Target
    point_of: Callable[[Point], Point]


@dataclass
class Searched:
    """One alternative's search: the explorer that ran it, its loop and its evaluator (every trial); ``why``:
    why it could not be searched (its evaluator then None), which costs the operator's own result nothing."""

    alternative: Alternative
    space: Space | None
    explorer: str
    loop: LoopResult
    evaluator: Evaluator | None
    why: str | None = None

    @property
    def trials(self) -> list[Any]:
        """The evaluator's trials, where it keeps them (the measured targets' ``TrialLog``)."""
        return list(getattr(self.evaluator, "trials", ()))


class Target(Protocol):
    """One kind of device: ``kind`` names it in reports and outputs (fpga, cpu, gpu); ``device`` is the
    device itself as a person reads it (a board, this CPU, a GPU); ``report_key`` the list of report.json
    its records go to (kept from before there was one list of rows: ``explorations``, ``cpu``, ``gpu``)."""

    kind: str
    device: str
    report_key: str
    artefact: str  # what ``write`` writes, as a person names it ("HLS project")
    defaults: Defaults

    def check(self, op: Operator) -> None:
        """Raise a one-sentence error if ``op`` cannot be explored here (before any search starts)."""

    def preparation(self, operators: Sequence[Operator]) -> tuple[str, Callable[[], None]] | None:
        """One-time work before the searches of ``operators`` that would otherwise stall the first of them
        without a word: (the line that says what it is, the work), or None."""

    def space(self, op: Operator) -> Space: ...

    def alternatives(self, op: Operator) -> Sequence[Alternative]:
        """The other algorithms for ``op`` searched here beside its own space (none: the operator's only).
        Optional: a target without it (one written before there were any) has none, and its ``finish`` is
        called without ``alternatives``."""
        return ()

    def workload(self, op: Operator, space: Space) -> Workload | None:
        """The history's key for ``op``'s points here (None: the history is neither read nor written)."""

    def evaluator(self, op: Operator, space: Space, history: WorkloadHistory | None,
                  progress: Callable[[int, float | None], None] | None = None) -> AbstractContextManager[Evaluator]:
        """The evaluator of ``space``'s points, open for the search (with ``history``: answered from it and
        written to it where the target's points are worth keeping; ``progress(points, best seconds)``: told
        after each point where points take long). It has ``best_seconds``: the fastest time so far (None
        while nothing feasible was evaluated)."""

    def observers(self, space: Space, search: Search) -> Sequence[Observer]:
        """What the target keeps of a search beyond the evaluator's own record."""

    def finish(self, op: Operator, space: Space, explorer: str, loop: LoopResult, evaluator: Evaluator,
               observers: Sequence[Observer], history: WorkloadHistory | None, search: Search,
               alternatives: Sequence[Searched] = ()) -> Outcome:
        """The outcome of the search and of the alternatives' (the fastest algorithm chosen, the library
        baseline timed here when it was not interrupted)."""

    def directory(self, op: Operator) -> str:
        """Where ``write`` puts ``op``'s artefacts, relative to the output directory (one per operator and
        device: two results never share one)."""

    def write(self, outcome: Outcome, out: Path, seed: int) -> Written:
        """The best point's artefacts under ``out`` (assembled aside and renamed when whole), checked."""

    def row(self, outcome: Outcome, written: Written | None) -> Row: ...

    def record(self, outcome: Outcome, written: Written | None) -> dict[str, Any]:
        """Everything about the outcome for report.json."""

    def markdown(self, outcome: Outcome, written: Written | None) -> list[str]:
        """The outcome's own section of report.md, after the table of rows (may be empty)."""

    def csv_rows(self, outcome: Outcome) -> list[dict[str, Any]]:
        """The outcome's rows of designs.csv (one per design kept; may be empty)."""

    def footnote(self) -> str:
        """What report.md says once under the table about how this target's figures were obtained."""


def alternatives_of(target: Target, op: Operator) -> Sequence[Alternative]:
    """``target.alternatives(op)``; none where the target does not define it (``Target.alternatives``)."""
    alternatives = getattr(target, "alternatives", None)
    return () if alternatives is None else alternatives(op)
