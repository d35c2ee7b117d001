"""What the TVM targets (CPU, GPU) share: their outcome (every trial, the library's time), the history key of
a TVM target, the one ``schedule.json`` both write, their report row and record, and replaying a schedule."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from hetero_dse import __version__
from hetero_dse.analysis import Analysis, analyze
from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore.loop import ENDS, LoopResult
from hetero_dse.hardware.host import host_cores
from hetero_dse.history import Workload, workload_spec
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point
from hetero_dse.targets.base import Outcome, Row, Searched, Written
from gpu_cpu.measure import MeasureResult
from gpu_cpu.schedule import CPU_CODEGEN
from hetero_dse.evaluate.measured import Trial, TrialLog, TuneResult, fastest

__all__ = ["FINALISTS", "TVM_STARTS", "Candidate", "Tuned", "algorithm_candidates", "compare_algorithms",
           "fastest_index", "finalists", "read_schedule", "same_schedule", "schedule_json", "tvm_workload"]

#: the direct search's fastest distinct points timed again, one right after the other, before one is kept
#: (``CpuTarget.finish``): the search times each point once, at its own moment, and a 16-trial search's fastest
#: can be a slower point's quiet moment (ResNet-18 L4: a search kept 1.12 ms; its default point runs 0.60)
FINALISTS = 3

#: start points per round on CPU and GPU: a round's candidates are built and measured one by one, so a
#: round is short and the explorer learns from each before the next (8 start points would spend a quarter
#: of a 32-trial budget on the random first round)
TVM_STARTS = dict.fromkeys(("q", "p", "sa", "random"), 4)


@dataclass
class Tuned(Outcome):
    """One operator's search on one CPU or GPU: every trial in order, and how many the history answered."""

    source: str = "builtin"
    trials: list[Trial] = field(default_factory=list)
    answered: int = 0
    #: the best schedule timed again right before the library, under the same conditions (the speedup is
    #: theirs: the search's figure may come from the history or from a busier moment)
    retimed: MeasureResult | None = None
    library: MeasureResult | None = None
    #: the best point where another algorithm's search was compared (``CpuTarget._choose``): timed as the
    #: operator's function in that comparison (None: the fastest of ``trials``)
    chosen: Trial | None = None
    #: each algorithm's best, timed one right after the other: label, the search's time, this time, chosen
    algorithms: list[dict[str, Any]] = field(default_factory=list)
    #: the direct search's best as its finalists (``finalists``) were timed again (None: the fastest of
    #: ``trials``), and each finalist's knobs, the search's time, this time, chosen, whether it is the default
    #: point; none where nothing was timed again (one point ran, the search was interrupted, a GPU)
    final: Trial | None = None
    finalists: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, op: Operator, target: Any, space: Any, explorer: str, loop: LoopResult, log: TrialLog,
           source: str, library: MeasureResult | float | None, estimate: bool,
           retimed: MeasureResult | None = None, chosen: Trial | None = None,
           algorithms: list[dict[str, Any]] | None = None, searched: Sequence[Searched] = (),
           final: tuple[Trial | None, list[dict[str, Any]]] = (None, [])) -> Tuned:
        if isinstance(library, int | float):
            library = MeasureResult(float(library))
        t = cls(op, target, space, explorer, loop, library_seconds=library.seconds if library else None,
                estimate=estimate, source=source, trials=log.trials, answered=log.answered,
                retimed=retimed if retimed is not None and retimed.ok else None, library=library,
                chosen=chosen, algorithms=list(algorithms or ()), searched=list(searched), final=final[0],
                finalists=list(final[1]))
        if t.best_trial is not None:
            t.best, t.best_seconds = t.best_trial.point, t.best_trial.result.seconds
        return t

    @property
    def best_trial(self) -> Trial | None:
        return self.chosen or self.direct_best

    @property
    def direct_best(self) -> Trial | None:
        """The operator's own search's best: its finalists' fastest timed again, else its fastest trial."""
        return self.final or fastest(self.trials)

    @property
    def other_trials(self) -> list[Trial]:
        """The other algorithms' trials (points of their own spaces: Winograd's product)."""
        return [t for s in self.searched for t in s.trials]

    @property
    def algorithm(self) -> str | None:
        """The best point's algorithm where others were searched (None: only the operator's own)."""
        return next((a["algorithm"] for a in self.algorithms if a["chosen"]), None)

    @property
    def compared_seconds(self) -> float | None:
        """Our time set beside the library's: the re-timed best where there is one, else the search's."""
        return self.retimed.seconds if self.retimed is not None else self.best_seconds

    @property
    def speedup(self) -> float | None:
        seconds = self.compared_seconds
        return self.library_seconds / seconds if seconds and self.library_seconds else None

    @property
    def loaded(self) -> bool:
        """Whether the timing set beside the library's, or the library's, was taken under load."""
        ours = self.retimed or (self.best_trial.result if self.best_trial is not None else None)
        return any(r is not None and r.loaded for r in (ours, self.library)) and not self.estimate

    @property
    def unstable(self) -> bool:
        """Whether the timing set beside the library's, or the library's, still had repeats that disagree
        (``gpu_cpu.stability``) after it was timed again: the speedup is then not one to act on."""
        ours = self.retimed or (self.best_trial.result if self.best_trial is not None else None)
        return any(r is not None and r.unstable for r in (ours, self.library)) and not self.estimate

    @property
    def trial_count(self) -> int:
        """Trials of every algorithm."""
        return len(self.trials) + len(self.other_trials)

    @property
    def answered_all(self) -> int:
        """Trials the history answered, the other algorithms' included."""
        return self.answered + sum(getattr(s.evaluator, "answered", 0) for s in self.searched)

    @property
    def fewer_flops(self) -> bool:
        """Whether the best point's algorithm does fewer multiplies than the operator counts (Winograd)."""
        return self.algorithm not in (None, "direct")

    @property
    def tune(self) -> TuneResult:
        """The operator's own search: direct convolution's, where other algorithms were searched beside it."""
        return TuneResult(self.trials, self.explorer, self.answered, self.loop.wall_s, self.loop.interrupted)

    @cached_property
    def flops(self) -> int:
        return analyze(self.op).flops

    def gflops(self, seconds: float | None) -> float | None:
        return None if not seconds else self.flops / seconds / 1e9

    @property
    def failures(self) -> list[str]:
        return [t.result.error for t in [*self.trials, *self.other_trials] if not t.result.ok]

    def record(self, written: Written | None) -> dict[str, Any]:
        return {
            "operator": self.op.name, "shape": self.op.shape_name, "signature": self.op.signature(),
            "explorer": self.explorer, "trials": self.trial_count, "answered_from_history": self.answered_all,
            "algorithm": self.algorithm or "direct", "algorithms": self.algorithms, "finalists": self.finalists,
            # each algorithm's search (the fields above the operator's own, trials and wall time excepted)
            "searches": {"direct": {"trials": len(self.trials), "explorer": self.explorer, "ended": self.loop.ended},
                         **{s.alternative.label: {"trials": len(s.trials), "explorer": s.explorer,
                                                  "ended": s.loop.ended, "why_not": s.why} for s in self.searched}},
            "failures": len(self.failures), "failure_messages": sorted(set(self.failures))[:5],
            "wall_s": self.wall_s, "interrupted": self.interrupted,
            "ended": self.loop.ended, "ended_reason": ENDS.get(self.loop.ended),
            "best": None if self.best is None else {
                "knobs": self.best.to_json(), "seconds": self.best_seconds, "gflops": self.gflops(self.best_seconds),
                # Winograd's: the convolution's FLOPs over its time, not the arithmetic it did
                "gflops_counted": "direct convolution's FLOPs" if self.fewer_flops else "the operator's FLOPs",
                "timing": self.best_trial.result.timing() if not self.estimate else None,
                "retimed": None if self.retimed is None else self.retimed.timing()},
            "torch": None if self.library is None else {"seconds": self.library_seconds,
                                                        "gflops": self.gflops(self.library_seconds),
                                                        "timing": self.library.timing()},
            "speedup_over_torch": self.speedup, "loaded": self.loaded, "unstable": self.unstable,
            "directory": written.directory if written else None,
            "estimate": self.estimate,
        }

    def row(self, kind: str, device: str, peak_flops: float | None, written: Written | None, bound: str | None = None,
            detail: str = "") -> Row:
        seconds = self.compared_seconds
        gflops = self.gflops(seconds)
        if not detail and not self.estimate and self.best is not None:
            detail = timing_note(self.retimed or self.best_trial.result, self.library)
            if self.algorithm is not None:  # named where another algorithm was searched
                detail = f"{self.algorithm}; {detail}"
        if self.fewer_flops:  # its GFLOPS are the operator's FLOPs over its time: no share of the device's peak
            peak_flops = None
            detail = f"{detail}; GFLOPS count direct convolution's FLOPs" if detail else detail
        return Row(kind, self.op.name, self.op.shape_name, device, "estimate" if self.estimate else "measured",
                   seconds, gflops,
                   gflops * 1e9 / peak_flops if gflops and peak_flops else None, bound, self.library_seconds,
                   self.explorer, self.trial_count, self.answered_all, len(self.failures), self.wall_s,
                   self.interrupted, written.directory if written else None, written.why if written else None,
                   "—" if written is None or written.passed is None else ("pass" if written.passed else "FAIL"),
                   detail, self.loaded, self.unstable, self.algorithm)

    def why_nothing(self) -> str:
        if self.interrupted or not self.failures:
            return super().why_nothing()
        return f"every trial failed ({'; '.join(sorted(set(self.failures))[:5])})"

    def no_best(self) -> HeteroDSEError:
        messages = "; ".join(sorted(set(self.failures))[:5])
        return HeteroDSEError(f"no schedule of {self.op.name} ran: every trial failed ({messages})")


def finalists(trials: Sequence[Trial], default: Point | None, count: int = FINALISTS) -> list[Trial]:
    """The ``count`` fastest distinct points of ``trials`` that ran, fastest first, then ``default``'s trial
    where it ran and is not among them: the engineer's schedule, which a search that timed it at a busy moment
    would otherwise lose (``FINALISTS``' ResNet-18 L4)."""
    ran = sorted((t for t in trials if t.result.ok), key=lambda t: t.result.seconds)
    out: list[Trial] = []
    for t in ran:
        if len(out) < count and not any(same_schedule(t.point, o.point) for o in out):
            out.append(t)
    start = next((t for t in ran if same_schedule(t.point, default)), None) if default is not None else None
    if start is not None and not any(same_schedule(start.point, o.point) for o in out):
        out.append(start)
    return out


def same_schedule(a: Point, b: Point) -> bool:
    """One schedule, whatever order its knobs were named in (a decoded row's, or the default point's)."""
    return a.to_json() == b.to_json()


#: an algorithm to compare: its label, its best as a point of the operator, and that best as its search found it
Candidate = tuple[str, Point, Trial]


def algorithm_candidates(direct: Trial | None, alternatives: Sequence[Searched],
                         alternatives_only: bool) -> list[Candidate]:
    """Each algorithm's best to compare (``CpuTarget._choose``, ``GpuTarget._choose``): direct convolution's
    (unless ``alternatives_only``: ``--winograd on``), then each other algorithm's that ran, as the operator's
    point."""
    candidates = [] if direct is None or alternatives_only else [("direct", direct.point, direct)]
    for s in alternatives:
        if (found := fastest(s.trials)) is not None:
            candidates.append((s.alternative.label, s.alternative.point_of(found.point), found))
    return candidates


def fastest_index(timed: Sequence[MeasureResult]) -> int | None:
    """The index of the fastest of ``timed`` that ran (None: none ran)."""
    ran = [(result.seconds, i) for i, result in enumerate(timed) if result.ok]
    return min(ran)[1] if ran else None


def compare_algorithms(candidates: Sequence[Candidate], timed: Sequence[MeasureResult],
                       alone: str) -> tuple[Trial | None, list[dict[str, Any]]]:
    """The fastest of ``candidates`` by ``timed`` (each the operator's time at that candidate, timed or
    estimated) and the comparison for the report: "seconds", the operator's; "searched_seconds", the search's
    best, of what it searched (another algorithm's search, ``alone``: its product alone, not to be compared)."""
    pick = fastest_index(timed)
    algorithms = [{"algorithm": label, "seconds": result.seconds, "error": result.error,
                   "unstable": result.unstable, "chosen": i == pick, "searched_seconds": found.result.seconds,
                   "searched": "convolution" if label == "direct" else alone}
                  for i, ((label, _, found), result) in enumerate(zip(candidates, timed, strict=True))]
    return (None if pick is None else Trial(candidates[pick][1], timed[pick])), algorithms


def timing_note(ours: MeasureResult, library: MeasureResult | None) -> str:
    """``median of 3, −2/+4 %; load 0.01`` for a timed figure (and the library's), ``UNDER LOAD`` flagged."""
    def one(result: MeasureResult) -> str:
        text = f"median of {len(result.repeats)}" if result.repeats else "one run"
        if result.repeats and result.seconds:
            low, high = min(result.repeats) / result.seconds - 1, max(result.repeats) / result.seconds - 1
            text += f", {100 * low:+.0f}/{100 * high:+.0f} %"
        if result.foreign_load is not None:
            text += f", load {result.foreign_load:.2f}" + (" UNDER LOAD" if result.loaded else "")
        if result.unstable:
            text += f", UNSTABLE ({result.unstable})"
        return text

    return f"ours {one(ours)}" + (f"; library {one(library)}" if library is not None else "")


def tvm_workload(op: Operator, target: dict[str, Any], analysis: Analysis) -> Workload:
    """The history's key for ``op`` (analysed as ``analysis``) measured on ``target``: numbers from other
    versions, or from TVM runtimes with another thread count, are not mixed in."""
    import tvm

    versions = {"hetero_dse": __version__, "tvm": tvm.__version__}
    if target.get("kind") == "llvm":  # a CPU schedule's time scales with the threads running its parallel loop
        # the count its workers run with (use_host_cores sets it when the first measurer starts, so reading the
        # variable alone keyed a process's first search apart from its later ones)
        versions["tvm_threads"] = os.environ.get("TVM_NUM_THREADS") or str(host_cores())
        if op.weights:  # the kernel takes its declared weights packed ahead: another kernel than without
            versions["cpu_codegen"] = CPU_CODEGEN
            versions["cpu_weights"] = ",".join(op.weights)
    return Workload(op.name, op.signature(), json.dumps(target, sort_keys=True), versions, workload_spec(analysis))


def schedule_json(t: Tuned, target: dict[str, Any], **extra: Any) -> str:
    """The one ``schedule.json`` of every TVM target: what to rebuild (operator, source, parameters, knobs,
    target) and the time recorded for it (``measured_seconds``; ``estimate`` says when a model gave it)."""
    schedule = {"generator": f"hetero_dse {__version__}", "operator": t.op.name, "source": t.source,
                "params": dict(t.op.params), "shape": t.op.shape_name, "signature": t.op.signature(),
                "epilogue": list(t.op.epilogue), "epilogue_axes": list(t.op.epilogue_axes),
                "target": target, **extra, "knobs": t.best.to_json(), "measured_seconds": t.best_seconds,
                "estimate": t.estimate,
                "timing": None if t.estimate or t.best_trial is None else t.best_trial.result.timing()}
    return json.dumps(schedule, indent=2) + "\n"


def read_schedule(directory: Path) -> dict[str, Any]:
    """``directory/schedule.json``, or one sentence saying why it is not a schedule hetero_dse wrote."""
    path = directory / "schedule.json"
    if not path.is_file():
        raise HeteroDSEError(f"{directory} has no schedule.json; give a directory written by "
                             "'explore --target cpu' or 'explore --target gpu'")
    try:
        record = json.loads(path.read_text())
        for key in ("source", "operator", "params", "knobs"):
            record[key]  # noqa: B018 -- present, or the file is not ours
        record["target"]["kind"]  # noqa: B018
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise HeteroDSEError(f"{path} is not a schedule written by hetero_dse ({exc})") from None
    return record


def recorded_seconds(record: dict[str, Any]) -> float | None:
    """The time a schedule.json recorded: ``measured_seconds`` for every target (GPU schedules written
    before it was one key said ``seconds``)."""
    value = record.get("measured_seconds", record.get("seconds"))
    return float(value) if isinstance(value, int | float) else None


def recorded_point(record: dict[str, Any]) -> Point:
    return Point(record["knobs"])
