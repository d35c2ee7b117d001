"""The one flow of every target: a space for the operator, an explorer chosen with what the history holds,
the one search loop over the target's evaluator, and the target's outcome (no I/O, no CLI)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from hetero_dse.explore.exhaustive import Exhaustive
from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore.base import Explorer
from hetero_dse.explore.loop import Evaluator, LoopResult, Observer, run_search
from hetero_dse.explore.registry import explorer_entry
from hetero_dse.explore.settings import ExplorerSettings
from hetero_dse.history import HistoryDB
from hetero_dse.history.match import Prior
from hetero_dse.history.store import WorkloadHistory
from hetero_dse.operator import Operator
from hetero_dse.space.base import Space
from hetero_dse.targets.base import Outcome, Search, Searched, Target, alternatives_of

__all__ = ["explore"]

#: a progress callback: points evaluated so far, and the best time so far (None: nothing feasible yet)
Progress = Callable[[int, float | None], None]


def explore(op: Operator, target: Target, settings: ExplorerSettings | str = "auto", search: Search | None = None,
            *, history: HistoryDB | None = None, progress: Progress | None = None) -> Outcome:
    """Search ``op``'s space on ``target`` and return what was found.

    With a ``history``, related workloads (the same operator at other shapes) seed the guided GA and transfer
    learning (and ``auto`` picks between them where the target allows it), and the target's evaluator
    answers from it and writes to it as the target decides. The target's other algorithms for ``op``
    (``target.alternatives``: Winograd for a 3×3 convolution on the CPU) are searched after it, each with the
    same explorer and budget (a time budget split evenly), and the target chooses among them. Ctrl-C ends the
    search; the outcome holds what was evaluated before it (``outcome.interrupted``).
    """
    search = search or Search()
    settings = ExplorerSettings.of(settings)
    target.check(op)
    alternatives = list(alternatives_of(target, op))
    if search.time_budget_s is not None and alternatives:
        search = replace(search, time_budget_s=search.time_budget_s / (1 + len(alternatives)))
    space = target.space(op)
    observers = target.observers(space, search)
    explorer, loop, evaluator, memo = _search(op, target, space, settings, search, history, progress, observers)
    settings.keep(explorer)
    searched: list[Searched] = []
    done = loop.evaluations
    # the learned state (--q-state) is the operator's space's: the alternatives' spaces learn afresh
    others = replace(settings, q_state=None)
    for alternative in alternatives if not loop.interrupted else ():
        shifted = None
        if progress is not None:  # one bar over every search; the best shown stays the operator's own
            def shifted(used: int, best: float | None, done: int = done) -> None:
                progress(done + used, evaluator.best_seconds)
        try:
            alternative.target.check(alternative.op)
            other = alternative.target.space(alternative.op)
            found = _search(alternative.op, alternative.target, other, others, search, history, shifted, ())
        except HeteroDSEError as exc:  # this algorithm cannot be searched: the operator's own result stands
            searched.append(Searched(alternative, None, "", LoopResult(), None, why=str(exc)))
            continue
        searched.append(Searched(alternative, other, found[0].name, found[1], found[2]))
        done += found[1].evaluations
        if found[1].interrupted:
            break
    more = {"alternatives": searched} if searched else {}  # a target without alternatives takes no such argument
    return target.finish(op, space, explorer.name, loop, evaluator, observers, memo, search, **more)


def _search(op: Operator, target: Target, space: Space, settings: ExplorerSettings, search: Search,
            history: HistoryDB | None, progress: Progress | None,
            observers: Sequence[Observer]) -> tuple[Explorer, LoopResult, Evaluator, WorkloadHistory | None]:
    """One space searched: the explorer made (with what the history holds), the loop run over the target's
    evaluator; the explorer, the loop, the evaluator and the history's record of this workload."""
    workload = target.workload(op, space) if history is not None else None
    prior = None
    if workload is not None and (target.defaults.auto_from_history
                                 or settings.name != "auto" and explorer_entry(settings.name).uses_history):
        prior = Prior.load(history, workload)
    explorer = settings.make(space, search.seed, default_starts=target.defaults.starts, auto=target.defaults.auto,
                             prior=prior)
    budget, patience = search.budget, settings.patience
    if budget is None and not isinstance(explorer, Exhaustive):  # an enumeration runs to its end
        budget = target.defaults.budget
        # the target's patience for this explorer, measured where it was set: a budget the user gives is spent
        patience = target.defaults.patience.get(explorer.name) if patience is None else patience
    memo = None if workload is None else WorkloadHistory(history, workload, explorer.name)
    with target.evaluator(op, space, memo, progress) as evaluator:
        on_round = None
        if progress is not None:
            def on_round(used: int) -> None:
                progress(used, evaluator.best_seconds)

        loop = run_search(space, explorer, evaluator, budget=budget, time_budget_s=search.time_budget_s,
                          patience=patience, dedupe=not isinstance(explorer, Exhaustive),
                          observers=observers, on_round=on_round)
    return explorer, loop, evaluator, memo
