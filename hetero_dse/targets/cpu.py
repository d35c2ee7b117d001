"""The CPU target: this machine's CPU, schedules measured in isolated workers (answered from and written to
the history), the torch baseline timed in the same run, and the artefacts a user keeps (module, TIR, LLVM
IR, replayable schedule)."""

from __future__ import annotations

import copy
import dataclasses
import shutil
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from gpu_cpu.main_block import packed_shape, weight_blocks
from gpu_cpu.measure import MeasureResult, Measurer, check_fits_in_memory, measure_cpu_job, time_torch_isolated
from gpu_cpu.pipeline import Pipeline
from gpu_cpu.remote import Remote, measure_remote_job
from gpu_cpu.schedule import CPU_CODEGEN, apply_cpu, build_cpu, host_target, run_cpu, weight_layouts
from gpu_cpu.stability import retime_until_stable
from gpu_cpu.winograd import TILE_KNOB, algorithm_name, product_operator, transformed_weights, winograd_point, \
    winograd_shape
from hetero_dse.analysis import analyze
from hetero_dse.atomic import atomic_directory
from hetero_dse.errors import HeteroDSEError
from hetero_dse.ops.winograd import result_problem
from hetero_dse.explore.loop import LoopResult, run_search
from hetero_dse.explore.settings import AUTO_MEASURED
from hetero_dse.hardware.cpu_peak import host_cpu_peak
from hetero_dse.history import Workload
from hetero_dse.history.store import WorkloadHistory
from hetero_dse.operator import Operator
from hetero_dse.space.cpu import CpuSpace
from hetero_dse.space.point import Point
from hetero_dse.targets.base import Alternative, Defaults, Row, Search, Searched, Written
from hetero_dse.evaluate.measured import Trial, TrialLog, TuneResult, candidate_job, fastest, measured_evaluator
from hetero_dse.targets.cpu_network import ALTERNATIVES, alternatives_of, run_plan
from hetero_dse.targets.tuned import TVM_STARTS, Tuned, algorithm_candidates, compare_algorithms, fastest_index, \
    finalists, same_schedule, schedule_json, tvm_workload

__all__ = ["CpuTarget", "tune_cpu"]


#: the algorithms a convolution may be computed by here (``CpuTarget.algorithm``)
ALGORITHMS = ("auto", "direct", "winograd")
#: Winograd's output tiles searched beside direct convolution: F(6×6, 3×3) is accurate enough but was never
#: measured to win here (``bench/cpu_winograd.py``), and each tile searched costs a search as long as direct's
WINOGRAD_TILES = (2, 4)


class CpuTarget:
    """This machine's CPU. ``trials``: schedules measured when the search is given no budget; ``source``:
    where the measuring workers rebuild the operator from (an op.py path, or ``builtin``); ``algorithm``: a
    3×3 convolution's (``ALGORITHMS``)."""

    kind = "cpu"
    report_key = "cpu"
    artefact = "TVM module"

    def __init__(self, *, trials: int = 32, source: str = "builtin", timeout_s: float = 60.0,
                 measurer: Measurer | None = None, remote: Remote | None = None, algorithm: str = "auto") -> None:
        self.source, self.timeout_s, self.measurer = source, timeout_s, measurer
        if algorithm not in ALGORITHMS:
            raise HeteroDSEError(f"the CPU's convolution algorithm is one of {', '.join(ALGORITHMS)}, not {algorithm}")
        #: auto: the faster of direct convolution and Winograd (where it takes the layer); direct: direct only;
        #: winograd: the fastest Winograd tile where it takes the layer
        self.algorithm = algorithm
        #: a CPU of this one's architecture reached over TVM's RPC: built here for this host's target, timed there
        self.remote = remote
        if remote is not None:
            remote.check()
        self.device = "this CPU" if remote is None else f"remote CPU ({remote})"
        self.defaults = Defaults(TVM_STARTS, AUTO_MEASURED, trials, "trials", auto_from_history=True)

    def check(self, op: Operator) -> None:
        check_fits_in_memory(op, "on the CPU")

    def preparation(self, operators: Sequence[Operator]) -> None:
        return None

    def space(self, op: Operator) -> CpuSpace:
        return CpuSpace(analyze(op))

    def alternatives(self, op: Operator) -> Sequence[Alternative]:
        """Winograd F(m×m, 3×3) for each output tile m in ``WINOGRAD_TILES`` that takes ``op`` (a float32 3×3
        stride-1 convolution; a grouped or depthwise one only under ``--winograd on``): its batched product
        searched as an operator of its own (its trials kept in the history under the product's own workload),
        on this CPU."""
        if self.algorithm == "direct" or self.remote is not None:
            return ()
        product = copy.copy(self)  # the product is a built-in: the workers rebuild it from there, not from op.py
        product.source = "builtin"
        out = []
        for m in WINOGRAD_TILES:
            try:
                shape = winograd_shape(op, m)
            except HeteroDSEError:  # not a convolution Winograd computes here, or a tile it refuses
                continue
            if shape.groups > 1 and self.algorithm == "auto":  # searched only when asked (--winograd on): it
                continue  # lost on every grouped and depthwise layer measured, 1.2-7x direct (BENCHMARKS.md)
            out.append(Alternative(algorithm_name(m), product_operator(shape), product, partial(winograd_point, m)))
        return tuple(out)

    def workload(self, op: Operator, space: CpuSpace) -> Workload:
        return tvm_workload(op, host_target(), space.analysis)

    @contextmanager
    def evaluator(self, op: Operator, space: CpuSpace, history: WorkloadHistory | None,
                  progress: Callable[[int, float | None], None] | None = None):
        if self.measurer is not None:  # built and timed by it, one at a time
            yield measured_evaluator(space, lambda points, best: (
                self.measurer.run(measure_cpu_job, candidate_job(op, self.source, p, best)) for p in points),
                                     history, progress)
            return
        with self._pipeline() as pipeline:
            yield measured_evaluator(space, lambda points, best: pipeline.evaluate(
                [candidate_job(op, self.source, p, best) for p in points]), history, progress)

    def _pipeline(self) -> Pipeline:
        if self.remote is not None:  # built here beside the remote timing: the builds use this machine's cores
            return Pipeline(timeout_s=self.timeout_s, measure=partial(measure_remote_job, remote=self.remote))
        return Pipeline(timeout_s=self.timeout_s, overlap=False)  # the kernel is timed on every core

    def observers(self, space: CpuSpace, search: Search) -> Sequence[Any]:
        return ()

    def finish(self, op: Operator, space: CpuSpace, explorer: str, loop: LoopResult, evaluator: TrialLog,
               observers: Sequence[Any], history: WorkloadHistory | None, search: Search,
               alternatives: Sequence[Searched] = ()) -> Tuned:
        retimed = library = chosen = None
        algorithms: list[dict[str, Any]] = []
        final: tuple[Trial | None, list[dict[str, Any]]] = (None, [])
        if not loop.interrupted and not any(s.loop.interrupted for s in alternatives):
            try:
                default = space.default_point()
                # the search's own trial of the finalist kept: the comparison reports what the search timed it at
                kept, rows, searched = self._final(op, finalists(evaluator.trials, default), default)
                final, direct = (kept, rows), searched or fastest(evaluator.trials)
                if alternatives:
                    chosen, algorithms = self._choose(op, direct, alternatives)
                best = chosen or final[0] or direct

                def ours_then_library() -> tuple[MeasureResult | None, MeasureResult | None]:
                    # ours, then the library's, one right after the other, in fresh workers
                    (ours,) = self._measure(op, [best.point]) if best is not None else (None,)
                    # torch does not run through TVM's RPC: a remote device has no library figure
                    return ours, time_torch_isolated(op, self.source) if self.remote is None else None

                # both again while either's repeats disagree (foreign work during part of a timing)
                retimed, library = retime_until_stable(ours_then_library)
            except KeyboardInterrupt:  # Ctrl-C after the search: what it measured is kept, and said interrupted
                loop = dataclasses.replace(loop, interrupted=True, ended="interrupted")
        return Tuned.of(op, self, space, explorer, loop, evaluator, self.source, library, estimate=False,
                        retimed=retimed, chosen=chosen, algorithms=algorithms, searched=alternatives, final=final)

    def _final(self, op: Operator, finals: Sequence[Trial],
               default: Point | None) -> tuple[Trial | None, list[dict[str, Any]], Trial | None]:
        """The fastest of ``finals`` timed again, one right after the other in fresh workers (all again while
        any one's repeats disagree), each one's figures for the report (``default``: the space's default point,
        marked), and that finalist as the search timed it; (None, [], None) where there is at most one, and no
        finalist (None, the rows, None) where none ran when timed again.

        A round of its own, before the other algorithms are compared: the fastest of several timings is a lucky
        one, and set against each other algorithm's single timing it would tip close calls to direct."""
        if len(finals) < 2:
            return None, [], None
        timed = retime_until_stable(lambda: tuple(self._measure(op, [t.point for t in finals])))
        pick = fastest_index(timed)
        rows = [{"knobs": t.point.to_json(), "searched_seconds": t.result.seconds, "seconds": result.seconds,
                 "error": result.error, "unstable": result.unstable, "chosen": i == pick,
                 "default": default is not None and same_schedule(t.point, default)}
                for i, (t, result) in enumerate(zip(finals, timed, strict=True))]
        if pick is None:
            return None, rows, None
        return Trial(finals[pick].point, timed[pick]), rows, finals[pick]

    def _choose(self, op: Operator, direct: Trial | None,
                alternatives: Sequence[Searched]) -> tuple[Trial | None, list[dict[str, Any]]]:
        """The fastest algorithm's best point, each algorithm's best timed again as the operator's function, one
        right after the other in fresh workers (a Winograd search times its product alone, and the direct
        search's best may come from the history or another moment); the comparison, for the report."""
        candidates = algorithm_candidates(direct, alternatives, self.algorithm == "winograd")
        if not candidates:  # winograd asked for and none ran: the direct search's best
            return None, []
        # all again while any one's repeats disagree (foreign work during part of a timing)
        timed = retime_until_stable(lambda: tuple(self._measure(op, [point for _, point, _ in candidates])))
        return compare_algorithms(candidates, timed, "product alone")

    def _measure(self, op: Operator, points: Sequence[Point]) -> list[MeasureResult]:
        """``op`` at each of ``points`` built, checked and timed, one after the other, each in a fresh worker."""
        jobs = [candidate_job(op, self.source, p, None) for p in points]
        if self.measurer is not None:
            return [self.measurer.run(measure_cpu_job, job) for job in jobs]
        with self._pipeline() as pipeline:
            return list(pipeline.evaluate(jobs))

    def directory(self, op: Operator) -> str:
        return f"{op.slug}/cpu"

    def write(self, t: Tuned, out: Path, seed: int) -> Written:
        """The best schedule's module, TIR, LLVM IR and ``schedule.json``, checked against the reference, and
        each other algorithm's best beside it (``alternatives/``: a network may run one faster where the best's
        weights or intermediates come from memory); assembled aside, renamed when whole."""
        if t.best is None:
            raise t.no_best()
        inputs = t.op.random_inputs(seed)
        want = t.op.reference(inputs)
        directory = out / self.directory(t.op)
        warnings = []
        with atomic_directory(directory) as partial:
            passed = self._write_module(t, t, partial, inputs, want)
            for slug, other in alternatives_of(t, self.algorithm == "winograd"):
                try:
                    self._write_module(other, t, partial / ALTERNATIVES / slug, inputs, want)
                except Exception as exc:  # noqa: BLE001 -- the chosen module stands without another's
                    shutil.rmtree(partial / ALTERNATIVES / slug, ignore_errors=True)
                    warnings.append(f"{t.op.name}: {other.algorithm}'s best is not written beside the chosen "
                                    f"module ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})")
        return Written(str(directory.relative_to(out)), passed=passed, warnings=warnings)

    def _write_module(self, t: Tuned, of: Tuned, where: Path, inputs: Any, want: Any) -> bool | None:
        """``t.best``'s module, TIR, LLVM IR and schedule.json in ``where``, checked against ``want`` first
        (``of``: the search it was chosen from, named in the error)."""
        mod = apply_cpu(t.op, t.best)
        executable = build_cpu(mod)
        passed = None
        if want is not None:
            problem = result_problem(run_cpu(executable, t.op, inputs, t.best), want, t.op.dtype, TILE_KNOB in t.best)
            if problem:
                which = "best schedule" if t is of else f"best {t.algorithm or 'direct'} schedule"
                raise HeteroDSEError(f"the {which} of {of.op.name} computes a wrong result (it {problem}); "
                                     "not written")
            passed = True
        where.mkdir(parents=True, exist_ok=True)
        executable.export_library(str(where / "module.so"))
        (where / "lowered_tir.py").write_text(mod.script())
        (where / "llvm.ll").write_text(executable.mod.inspect_source("ll"))
        (where / "schedule.json").write_text(schedule_json(t, host_target(), cpu_codegen=CPU_CODEGEN,
                                                           algorithm=t.algorithm or "direct",
                                                           packed_weights=packed_weights(t.op, t.best)))
        return passed

    def row(self, t: Tuned, written: Written | None) -> Row:
        target = host_target()
        if self.remote is not None:
            return t.row("cpu", f"{target['mcpu']} over RPC ({self.remote})", None, written)
        row = t.row("cpu", f"{target['mcpu']} ({target['num-cores']} cores)", self.peak_flops(t.op), written)
        if t.finalists and t.final is None and t.chosen is None:  # each crashed when timed again
            row.detail = f"no finalist ran when timed again: the search's fastest kept; {row.detail}"
        if self.algorithm == "winograd" and t.best is not None and TILE_KNOB not in t.best:
            row.detail = f"direct: {self.why_direct(t)}; {row.detail}"
        if t.best is not None and (TILE_KNOB in t.best or weight_layouts(t.op, t.best)):
            # as a network's layers hold them, and oneDNN's; torch's call takes them as given
            how = "transformed (G W Gᵀ)" if TILE_KNOB in t.best else "packed"
            said = f"{', '.join(t.op.weights)} {how} ahead, not timed"
            row.detail = f"{row.detail}; {said}" if row.detail else said
        return row

    def why_direct(self, t: Tuned) -> str:
        """Why ``--winograd on`` kept a direct schedule: Winograd does not take the layer, or none of its points
        ran."""
        if not t.searched:
            try:
                winograd_shape(t.op, WINOGRAD_TILES[0])
            except HeteroDSEError as exc:
                return str(exc)
        if t.interrupted:
            return "interrupted before Winograd's search ended"
        whys = [s.why for s in t.searched if s.why]
        return "; ".join(whys) or "no Winograd point ran"

    def peak_flops(self, op: Operator) -> float | None:
        """This CPU's FP32 peak (FLOP/s) for an FP32 operator; None for other arithmetic (its peak is another
        instruction's) and for a remote CPU (its cores and clock are not read here)."""
        peak = host_cpu_peak() if self.remote is None and op.dtype == "float32" else None
        return peak.gflops * 1e9 if peak else None

    def footnote(self) -> str:
        if self.remote is not None:
            return (f"CPU over TVM's RPC: each schedule was built here for `{host_target()}` and checked and timed "
                    f"on {self.remote}; torch does not run through RPC, so there is no library figure.")
        peak = host_cpu_peak()
        peak_text = peak.describe() if peak else "no FP32 peak known (no AVX2 with FMA, no AVX-512, or no clock)"
        return (f"CPU: `{host_target()}`; {peak_text}, the % peak of its FP32 rows. Each schedule was built, "
                "checked against the reference and timed in a "
                "worker process under the machine's measurement lock; the search's three fastest points and its "
                "default point were timed again one right after the other and the fastest kept (finalists in "
                "report.json); it was timed again right before torch, "
                "each in a fresh worker (both again, up to three times, while either's repeats disagree), and the "
                "speedup and latency are those two timings. A 3×3 stride-1 convolution is also searched by Winograd "
                "(each tile's batched product), each algorithm's best then timed as the whole convolution one right "
                "after the other, and the fastest kept; its GFLOPS count direct convolution's FLOPs and it has no % "
                "peak. Failures are counted, with their messages in report.json.")

    def record(self, t: Tuned, written: Written | None) -> dict[str, Any]:
        return {**t.record(written), "target": host_target()}

    def execute_plan(self, graph: Any, plan: dict[str, Any], out: Path) -> dict[str, Any] | None:
        """The network run as one forward pass in this process against torch eager (``cpu_network.run_plan``);
        None for a remote CPU, whose network does not run here."""
        return None if self.remote is not None else run_plan(graph, plan, out)

    def markdown(self, t: Tuned, written: Written | None) -> list[str]:
        return []

    def csv_rows(self, t: Tuned) -> list[dict[str, Any]]:
        return []


def packed_weights(op: Operator, point: Any) -> dict[str, Any]:
    """What ``module.so`` takes in place of each weight it reads packed: the operator's tensor transposed
    (numpy's order) once, where it is loaded; for a Winograd point, transformed. Written into ``schedule.json``
    for whoever calls the module."""
    if TILE_KNOB in point:
        return transformed_weights(op, point)
    out = {}
    blocks = weight_blocks(op, point)
    for index, order in weight_layouts(op, point).items():
        tensor = op.inputs[index]
        name, block = tensor.op.name, blocks.get(index)
        how = f"numpy.ascontiguousarray({name}.transpose({tuple(order)}))"
        if block:  # the last dimension n then split as [n / block, ..., block]
            how = (f"P = {name}.transpose({tuple(order)}); numpy.ascontiguousarray(numpy.moveaxis("
                   f"P.reshape(*P.shape[:-1], -1, {block}), -2, 0))")
        out[name] = {"transpose": list(order), **({"block": block} if block else {}),
                     "shape": packed_shape([int(d) for d in tensor.shape], order, block), "how": how}
    return out


def tune_cpu(op: Operator, space: CpuSpace, explorer: Any, *, source: str = "builtin", trials: int = 32,
             time_budget_s: float | None = None, patience: int | None = None, timeout_s: float = 60.0,
             progress: Callable[[int, float | None], None] | None = None, measurer: Measurer | None = None,
             history: WorkloadHistory | None = None) -> TuneResult:
    """Measure up to ``trials`` distinct points of ``space`` proposed by ``explorer`` (the CPU target's
    evaluator without the rest of the flow: for tests and benchmarks of one explorer)."""
    target = CpuTarget(trials=trials, source=source, timeout_s=timeout_s, measurer=measurer)
    with target.evaluator(op, space, history, progress) as log:
        run = run_search(space, explorer, log, budget=trials, time_budget_s=time_budget_s, patience=patience)
    return log.result(explorer.name, run.wall_s, run.interrupted)
