"""One run of ``explore``, whole: every operator on every target searched, what was found written (an HLS project
and its C-simulation, a TVM module), a network's back-to-back pairs fused, the best designs synthesized, and the
reports — in an output directory that is never two runs mixed nor an incomplete output that looks complete
(:mod:`hetero_dse.run.outdir`).

The CLI parses its options into operators, targets and :class:`RunSettings`, calls :func:`execute` and prints
the :class:`RunResult`; what happens meanwhile reaches it through :class:`~hetero_dse.run.events.RunEvents`.
Ctrl-C (KeyboardInterrupt; the CLI turns SIGTERM into one too) stops the run where it is and keeps what it
found: the searches done are written, the report says it is incomplete.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore.settings import ExplorerSettings
from hetero_dse.report import write_reports
from hetero_dse.run import outdir
from hetero_dse.run.events import Quiet, RunEvents
from hetero_dse.run.synth import SynthSettings, synthesize_best
from hetero_dse.targets.base import Outcome, Row, Search, Target, Written, alternatives_of
from hetero_dse.targets.flow import explore

__all__ = ["RunResult", "RunSettings", "check_run", "execute", "layer_search"]


@dataclass(frozen=True)
class RunSettings:
    """How a run searches and where it writes."""

    out: Path
    search: Search = field(default_factory=Search)
    explorer: ExplorerSettings = field(default_factory=ExplorerSettings)
    #: replace what an earlier run left in ``out`` (without it a non-empty ``out`` is refused, unless it holds
    #: an interrupted run of the same command, which this run goes on from)
    force: bool = False
    #: the run's options as JSON values, recorded in ``out``: the same command goes on from an interrupted run
    command: Mapping[str, Any] = field(default_factory=dict)
    synth: SynthSettings | None = None


@dataclass
class RunResult:
    """What a run found and wrote: each outcome with what its target wrote for it (None: not written, the run
    was stopped first), the network's fused pairs, the searches that failed (one sentence each)."""

    out: Path
    results: list[tuple[Outcome, Written | None]]
    fusions: list[dict[str, Any]]
    errors: list[str]
    interrupted: bool
    graph: Any = None
    resumed: bool = False
    #: a network's one design per device that builds one for it (the FPGA's shared accelerator)
    networks: list[dict[str, Any]] = field(default_factory=list)
    #: by device, the network run with its plan (``CpuTarget.execute_plan``)
    executed: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def rows(self) -> list[Row]:
        return [o.target.row(o, w) for o, w in self.results]

    @property
    def unwritten(self) -> list[str]:
        """A sentence for every search that found something and has no output."""
        return [f"no {o.target.artefact} for {o.op.title} on {o.target.device}: {w.why}" for o, w in self.results
                if w is not None and o.found and w.directory is None]

    @property
    def failed_checks(self) -> list[str]:
        """The outputs whose check (C-simulation, the schedule against the reference) failed."""
        return [str(w.directory) for _, w in self.results if w is not None and w.passed is False]


def layer_search(search: Search, graph: Any, op: Any, n_targets: int) -> Search:
    """A network's search for one of its layers on one target: a whole-model time budget split by the layer's
    share of the network's FLOPs (its count included) and evenly over the targets."""
    if graph is None or search.time_budget_s is None:
        return search
    layer = graph.layer_of(op.shape_name)
    share = layer.flops * layer.count / graph.mapped_flops
    return replace(search, time_budget_s=search.time_budget_s * share / n_targets)


def execute(operators: Sequence[Any], targets: Sequence[Target], settings: RunSettings, store: Any = None,
            events: RunEvents | None = None, graph: Any = None,
            open_store: Callable[[], Any] | None = None) -> RunResult:
    """Search every operator on every target, write, fuse, synthesize and report; ``store``: the history
    database (None: none), or ``open_store`` what opens it once every bad input has been said and the output
    directory accepted (a refused run makes no database); ``graph``: the network whose layers the operators
    are (``--model``)."""
    events = events or Quiet()
    out = settings.out
    if not operators or not targets:
        raise HeteroDSEError("a run needs at least one operator and one target")
    directories = check_run(operators, targets, out)
    for target in targets:  # work done once, said before it is done rather than stalling a search
        if (preparation := target.preparation(operators)) is not None:
            say, work = preparation
            events.say(say)
            work()
    # what makes two runs the same command: the options given, or for a script the operators and devices
    command = settings.command or {"operators": [op.title for op in operators],
                                   "targets": [t.device for t in targets]}
    resumed = outdir.prepare(out, settings.force, command, sorted(directories))
    if open_store is not None:
        try:
            store = open_store()
        except BaseException:
            if not resumed:  # an interrupted run's record stays: it is what the next try goes on from
                outdir.abandon(out)
            raise
    if resumed:
        events.say(f"Going on from the interrupted run in {out} (what it measured comes from the history)")
    outcomes, errors, stopped = _search_all(operators, targets, settings, store, events, graph)
    if not outcomes and not stopped:
        outdir.abandon(out)
        raise HeteroDSEError("; ".join(errors))
    result = _write_outputs(out, outcomes, settings.search.seed, errors, stopped, graph, events)
    result.resumed = resumed
    result.interrupted = stopped or any(w is None for _, w in result.results)
    if settings.synth is not None and not result.interrupted:
        synthesis = synthesize_best(out, result.results, settings.synth, store, settings.search.seed, events)
        write_reports(out, result.results, result.interrupted, synthesis, errors, graph, result.fusions,
                      result.networks, result.executed)
    outdir.finish(out, complete=not result.interrupted)
    return result


def check_run(operators: Sequence[Any], targets: Sequence[Target], out: Path) -> dict[str, str]:
    """Every bad input said before any search starts; the directory each (operator, target) writes, and whose."""
    owners: dict[str, str] = {}
    for op in operators:
        for target in targets:
            target.check(op)
            directory, who = target.directory(op), f"{op.title} on {target.device}"
            if directory in owners:
                raise HeteroDSEError(f"{owners[directory]} and {who} would both be written to {out / directory}; "
                                     "give each board once and operators names that differ in letters or digits")
            owners[directory] = who
    return owners


def _search_all(operators: Sequence[Any], targets: Sequence[Target], settings: RunSettings, store: Any,
                events: RunEvents, graph: Any) -> tuple[list[Outcome], list[str], bool]:
    """The outcomes in order, the searches that failed, and whether the run was stopped."""
    outcomes: list[Outcome] = []
    errors: list[str] = []
    with events.searching():
        for number, op in enumerate(operators, 1):
            layer = f" ({number}/{len(operators)})" if graph is not None else ""
            for target in targets:
                budget = settings.search.budget or target.defaults.budget
                searches = _searches(target, op)
                progress = events.search(f"{op.title}{layer} on {target.device}",
                                         budget * searches if budget else None, target.defaults.unit)
                try:
                    outcome = explore(op, target, settings.explorer,
                                      layer_search(settings.search, graph, op, len(targets)), history=store,
                                      progress=progress.update)
                except KeyboardInterrupt:  # outside a search loop (building a space, timing the library):
                    return outcomes, errors, True  # this search is lost, the ones before it are written
                except HeteroDSEError as exc:  # this search's problem: the others' results are still written
                    if len(operators) * len(targets) == 1:
                        outdir.abandon(settings.out)
                        raise
                    errors.append(f"{op.title} on {target.device}: {exc}")
                    progress.failed()
                    continue
                progress.update(outcome.evaluations, outcome.best_seconds)  # the chosen algorithm's best
                progress.finished(outcome.evaluations)
                outcomes.append(outcome)
                if outcome.interrupted:
                    return outcomes, errors, True
    return outcomes, errors, False


def _searches(target: Target, op: Any) -> int:
    """How many searches ``explore`` runs for ``op`` on ``target``: its own and each other algorithm's, each with
    the same budget (1 where asking fails: ``explore`` then says why)."""
    try:
        return 1 + len(alternatives_of(target, op))
    except HeteroDSEError:
        return 1


def _write_outputs(out: Path, outcomes: list[Outcome], seed: int, errors: list[str], stopped: bool, graph: Any,
                   events: RunEvents) -> RunResult:
    """What each target writes for its outcome, a network's back-to-back pairs fused, then the reports. Ctrl-C
    keeps what is done: the outcomes not written yet have no output (None) and the report says it is
    incomplete."""
    results: list[tuple[Outcome, Written | None]] = [(o, None) for o in outcomes]
    fusions: list[dict[str, Any]] = []
    networks: list[dict[str, Any]] = []
    executed: dict[str, dict[str, Any]] = {}
    try:
        for i, o in enumerate(outcomes):
            if not o.found:
                written = Written(why=o.why_nothing())
            else:
                try:
                    with events.status(f"writing {o.op.title} for {o.target.device}"):
                        written = o.target.write(o, out, seed)
                except HeteroDSEError as exc:  # one output that cannot be written costs none of the others
                    errors.append(f"{o.op.title} on {o.target.device}: not written: {exc}")
                    written = Written(why=f"not written: {exc}")
            for warning in written.warnings:
                events.warn(warning)
            results[i] = (o, written)
        if graph is not None and graph.pairs and not stopped:
            fusions = _fuse_pairs(out, graph, results, errors, events)
        if graph is not None and not stopped:
            networks = _network_designs(out, graph, results, errors, events)
            if any(hasattr(o.target, "execute_plan") for o in outcomes):
                # the reports with the summed plan first: running the network runs native code in this process,
                # and a crash there must not cost the searches' reports
                with _uninterrupted():
                    write_reports(out, results, True, errors=errors, graph=graph, fusions=fusions,
                                  networks=networks)
            executed = _execute_plans(out, graph, results, fusions, networks, errors, events)
    except KeyboardInterrupt:
        pass
    incomplete = stopped or any(w is None for _, w in results)
    with _uninterrupted():  # a second Ctrl-C must not cost the report of what was found
        write_reports(out, results, incomplete, errors=errors, graph=graph, fusions=fusions, networks=networks,
                      executed=executed)
    return RunResult(out, results, fusions, errors, incomplete, graph, networks=networks, executed=executed)


def _network_designs(out: Path, graph: Any, results: list, errors: list[str], events: RunEvents
                     ) -> list[dict[str, Any]]:
    """Each target's one design for the whole network (the targets that make one: ``network``), its project
    written under ``out``."""
    return _after_searches(results, errors, events, "network", "one design for the network",
                           f"designing one accelerator for the network's {len(graph.layers)} layers",
                           lambda design, target, written: [design(graph, [o for o in written if o.target is target],
                                                                   out)])


def _execute_plans(out: Path, graph: Any, results: list, fusions: list[dict[str, Any]],
                   networks: list[dict[str, Any]], errors: list[str], events: RunEvents) -> dict[str, dict[str, Any]]:
    """Per device whose target runs a network (``execute_plan``: this machine's CPU), its complete plan run as
    one network against torch eager: the figure the report gives, where the summed kernels only bound it."""
    from hetero_dse.report import network_plan

    targets = {o.target.row(o, w).device: o.target for o, w in results}  # by the plan's (the rows') names
    executed = {}
    for device in network_plan(results, graph, fusions, networks)["devices"]:
        step = getattr(targets.get(device["device"]), "execute_plan", None)
        if step is None or not device["complete"] or not device["layers"]:
            continue
        try:
            with events.status(f"running the plan as one network on {device['device']}, against torch eager"):
                found = step(graph, device, out)
        except HeteroDSEError as exc:
            errors.append(f"the plan run as one network on {device['device']}: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 -- the layers' results and the summed plan still stand
            errors.append(f"the plan run as one network on {device['device']} failed ({type(exc).__name__}: "
                          f"{exc}); the summed plan stands (please report this)")
            continue
        if found is not None:
            executed[device["device"]] = found
    return executed


def _fuse_pairs(out: Path, graph: Any, results: list, errors: list[str], events: RunEvents) -> list[dict[str, Any]]:
    """Each target's fused back-to-back pairs of the network (the targets that fuse: ``back_to_back``)."""
    return _after_searches(results, errors, events, "back_to_back", "back-to-back fusion",
                           f"fusing {len(graph.pairs)} back-to-back layer pairs",
                           lambda fuse, _target, written: fuse(graph, written, out))


def _after_searches(results: list, errors: list[str], events: RunEvents, hook: str, name: str, doing: str,
                    call: Callable[[Callable, Target, list[Outcome]], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """A network step after every search, on each target that has it (its method ``hook``), given the outcomes
    written: ``call(step, target, written)``. Its failure, whatever it is, is a line of the report (``name``) and
    never costs the layers' own results or their report."""
    found: list[dict[str, Any]] = []
    written = [o for o, w in results if w is not None]
    for target in dict.fromkeys(o.target for o, _ in results):
        step = getattr(target, hook, None)
        if step is None:
            continue
        try:
            with events.status(f"{doing} on {target.device}"):
                found += call(step, target, written)
        except HeteroDSEError as exc:
            errors.append(f"{name} on {target.device}: {exc}")
        except Exception as exc:  # noqa: BLE001 -- a step after the searches must not cost their report
            errors.append(f"{name} on {target.device} failed ({type(exc).__name__}: {exc}); the layers' own "
                          "results stand (please report this)")
    return found


@contextmanager
def _uninterrupted() -> Iterator[None]:
    """Ctrl-C and SIGTERM held off for a moment (writing the reports takes well under a second); only Python's
    main thread can hold signals, and a run started from another thread of a script writes as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)
