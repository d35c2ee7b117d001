"""The GPU target: measured on the CUDA device when this machine has one, estimated by the roofline model of
a named device otherwise (and then labelled an estimate everywhere it appears). The best schedule's CUDA
source, TIR and module are written either way (``gpu_write``): code generation needs nvcc, not a GPU. Its report
rows are ``gpu_report``'s, a network's fused pairs ``gpu_fusion``'s."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from cost_models.gpu_roofline import estimate, estimate_tensor_cores
from gpu_cpu import intrinsics
from gpu_cpu.baselines import time_torch_cuda
from gpu_cpu.measure import MeasureResult, check_fits_in_memory
from gpu_cpu.pipeline import Pipeline
from gpu_cpu.remote import Remote, measure_remote_job
from gpu_cpu.stability import retime_until_stable
from gpu_cpu.winograd import algorithm_name, product_operator, winograd_point, winograd_shape
from hetero_dse.analysis import analyze
from hetero_dse.errors import HeteroDSEError
from hetero_dse.evaluate.estimate import Roofline, RooflineEvaluator
from hetero_dse.evaluate.measured import Trial, TrialLog, candidate_job, fastest, measured_evaluator
from hetero_dse.explore.loop import LoopResult
from hetero_dse.explore.settings import AUTO_MEASURED, AUTO_MODELLED, MODEL_STARTS
from hetero_dse.hardware.gpus import GpuDevice, check_architecture, cuda_toolkit, get_device, present_gpu
from hetero_dse.history import Workload
from hetero_dse.history.store import WorkloadHistory
from hetero_dse.operator import Operator
from hetero_dse.space.gpu import Dataflow, GpuSpace
from hetero_dse.space.point import Point
from hetero_dse.space.tensorcore import ARITHMETIC, TensorCoreSpace, tensor_core_arithmetic
from hetero_dse.targets.base import Alternative, Defaults, Row, Search, Searched, Written
from hetero_dse.targets.gpu_fusion import back_to_back
from hetero_dse.targets.gpu_report import PtxasRegisters, gpu_footnote, gpu_record, gpu_row, winograd_estimate
from hetero_dse.targets.gpu_write import write_gpu
from hetero_dse.targets.tuned import TVM_STARTS, Tuned, algorithm_candidates, compare_algorithms, tvm_workload

__all__ = ["ESTIMATE_BUDGET", "GpuTarget"]

#: points the roofline model scores when there is no GPU to measure on (a model is cheap; trials are not)
ESTIMATE_BUDGET = 4096
#: the algorithms a convolution may be computed by (``GpuTarget.algorithm``), as on the CPU
ALGORITHMS = ("auto", "direct", "winograd")
#: Winograd's output tiles searched beside direct convolution, as on the CPU
WINOGRAD_TILES = (2, 4)


class GpuTarget:
    """The GPU present, or the roofline of ``device`` (h100, v100) where there is none. ``trials``:
    schedules measured when the search is given no budget (estimates score at least ``ESTIMATE_BUDGET``)."""

    kind = "gpu"
    report_key = "gpu"
    artefact = "CUDA module"

    @property
    def bandwidth_gbps(self) -> float:
        """The GPU's DRAM bandwidth (the roofline's memory roof)."""
        return self.gpu.memory_gbps

    def __init__(self, device: str = "h100", *, trials: int = 32, source: str = "builtin",
                 timeout_s: float = 60.0, dtype: str | None = None, remote: Remote | None = None,
                 algorithm: str = "auto") -> None:
        self.dtype = dtype  # the inputs' type the GPU computes in (None: the operator's own)
        if algorithm not in ALGORITHMS:
            raise HeteroDSEError(f"the GPU's convolution algorithm is one of {', '.join(ALGORITHMS)}, not {algorithm}")
        #: auto: the faster of direct convolution and Winograd by the roofline (a float32 3×3 stride-1
        #: convolution, estimated); direct: direct only; winograd: the fastest Winograd tile where it takes the layer
        self.algorithm = algorithm
        cuda_toolkit()
        #: a GPU reached over TVM's RPC, of the kind ``device`` names: built here for its architecture, timed there
        self.remote = remote
        if remote is not None:
            remote.check()
        self.present = present_gpu() if remote is None else None
        self.gpu: GpuDevice = self.present or get_device(device)
        self.measured = self.present is not None or remote is not None
        self.source, self.timeout_s = source, timeout_s
        check_architecture(self.gpu)
        #: ptxas's count per written best, for the occupancy of an estimate's row
        self.registers = PtxasRegisters(self.gpu)
        self.device = self.gpu.name + ("" if self.measured else " (estimate)") + (
            f" over RPC ({remote})" if remote is not None else "")
        # scored by the roofline, a candidate costs microseconds: wide rounds, as on the FPGA model
        self.defaults = (Defaults(TVM_STARTS, AUTO_MEASURED, trials, "trials", auto_from_history=True)
                         if self.measured else
                         Defaults(MODEL_STARTS, AUTO_MODELLED, max(trials, ESTIMATE_BUDGET), "estimates",
                                  auto_from_history=False))

    def typed(self, op: Operator) -> Operator:
        """``op`` in the data type this target computes in."""
        return op if self.dtype is None else op.with_dtype(self.dtype)

    def check(self, op: Operator) -> None:
        op = self.typed(op)
        if op.dtype not in ("float32", *ARITHMETIC):
            raise HeteroDSEError(f"the GPU computes in float32, or on its tensor cores in {', '.join(ARITHMETIC)}; "
                                 f"{op.title} is {op.dtype}")
        if self.present is not None:
            check_fits_in_memory(op, f"on the {self.present.name}")

    def preparation(self, operators: Sequence[Operator]) -> tuple[str, Callable[[], None]] | None:
        """The tensor cores' intrinsics made from TVM's tables and kept on disk before the first search that
        uses them: else its first build (or, measuring, every builder process's) stalls for them unannounced."""
        if all(self.off_tensor_cores(self.typed(op)) is not None for op in operators) or intrinsics.cached():
            return None
        return ("Making the tensor cores' intrinsics from TVM's tables, once for this TVM version (about 10 s)",
                intrinsics.prepare)

    def off_tensor_cores(self, op: Operator) -> str | None:
        """Why ``op`` runs on the SIMT cores; None when it runs on the tensor cores. A float16, bfloat16 or
        int8 layer the tensor cores cannot take (a matrix-vector product, a depthwise convolution, a device
        without that arithmetic) is computed in its type on the SIMT cores, not refused: a network's other
        layers still get theirs."""
        if op.dtype not in ARITHMETIC:
            return "no tensor cores"
        return tensor_core_arithmetic(analyze(op), self.gpu)

    def alternatives(self, op: Operator) -> Sequence[Alternative]:
        """Winograd F(m×m, 3×3) for each output tile m in ``WINOGRAD_TILES`` that takes ``op`` (a float32 3×3
        stride-1 convolution of one image and one group), its batched product searched on the SIMT cores (in
        seed 001's Winograd domain, ``Dataflow.winograd``, where trials are measured, as direct's is)."""
        if self.algorithm == "direct" or self.typed(op).dtype != "float32":
            return ()
        product = copy.copy(self)  # a built-in, in float32: the product's own operator, not op.py's
        product.source, product.dtype = "builtin", None
        out = []
        for m in WINOGRAD_TILES:
            try:
                shape = winograd_shape(op, m)
            except HeteroDSEError:  # not a convolution Winograd computes, or a tile it refuses
                continue
            if shape.groups > 1:  # the CPU's grouped product; on the GPU not built (its domain is one product's)
                continue
            out.append(Alternative(algorithm_name(m), product_operator(shape), product, partial(winograd_point, m)))
        return tuple(out)

    def space(self, op: Operator) -> GpuSpace | TensorCoreSpace:
        """The tensor cores' template (Bolt) for a float16, bfloat16 or int8 contraction they can take; the
        SIMT splits (FlexTensor) for the rest."""
        op = self.typed(op)
        analysis = analyze(op)
        if self.off_tensor_cores(op) is None:
            return TensorCoreSpace(analysis, self.gpu)
        # seed 001's domain spares measured trials on the unpromising; the roofline scores the whole space in
        # milliseconds and ranks some points outside it first (BENCHMARKS.md), so estimates search it whole
        return GpuSpace(analysis, self.gpu, domain=self.measured, dataflow=_dataflow(op))

    def roofline(self, op: Operator) -> Roofline:
        """The roofline formula of the space ``space(op)`` gives: the tensor cores' template's, or the SIMT
        splits'."""
        return estimate_tensor_cores if self.off_tensor_cores(self.typed(op)) is None else estimate

    def workload(self, op: Operator, space: GpuSpace) -> Workload | None:
        # only measurements enter the history: estimates neither read it nor write it
        return tvm_workload(self.typed(op), self.gpu.target, space.analysis) if self.measured else None

    @contextmanager
    def evaluator(self, op: Operator, space: GpuSpace, history: WorkloadHistory | None,
                  progress: Callable[[int, float | None], None] | None = None):
        op = self.typed(op)
        if self.measured:
            measure = {} if self.remote is None else {"measure": partial(measure_remote_job, remote=self.remote)}
            with Pipeline(timeout_s=self.timeout_s, **measure) as pipeline:
                def built_and_timed(points: list[Point], best: float | None) -> Iterator[MeasureResult]:
                    # a point beyond the device's limits is a failed trial with the space's reason, never built
                    problems = [space.beyond_limits(p) for p in points]
                    results = pipeline.evaluate([candidate_job(op, self.source, p, best, target="cuda",
                                                               device=self.gpu.name)
                                                 for p, problem in zip(points, problems, strict=True) if not problem])
                    for problem in problems:
                        yield MeasureResult(None, problem) if problem else next(results)

                yield measured_evaluator(space, built_and_timed, history, progress)
            return

        yield TrialLog(RooflineEvaluator(op, space, self.gpu, self.roofline(op)), space, progress)

    def observers(self, space: GpuSpace, search: Search) -> Sequence[Any]:
        return ()

    def finish(self, op: Operator, space: GpuSpace, explorer: str, loop: LoopResult, evaluator: TrialLog,
               observers: Sequence[Any], history: WorkloadHistory | None, search: Search,
               alternatives: Sequence[Searched] = ()) -> Tuned:
        op = self.typed(op)
        # CUDA events: its own timing, not in a worker; the GPU is the device measured, and our kernels' times are
        # on it too. Torch does not run through RPC: a remote GPU has no library figure
        library = None
        if self.present is not None and not loop.interrupted:
            # again while its repeats disagree; ours are the search's own repeats, their flag carried as timed
            (library,) = retime_until_stable(lambda: (_torch_cuda_timing(op),))
        chosen, algorithms = None, []
        if alternatives and not loop.interrupted and not any(s.loop.interrupted for s in alternatives):
            chosen, algorithms = self._choose(op, space, fastest(evaluator.trials), alternatives)
        return Tuned.of(op, self, space, explorer, loop, evaluator, self.source, library, estimate=not self.measured,
                        chosen=chosen, algorithms=algorithms, searched=alternatives)

    def _choose(self, op: Operator, space: GpuSpace, direct: Trial | None,
                alternatives: Sequence[Searched]) -> tuple[Trial | None, list[dict[str, Any]]]:
        """The fastest algorithm: each one's best timed as the whole convolution on the GPU, one right after the
        other (all again while any one's repeats disagree), where it measures; else by the roofline, direct
        convolution's best estimate against each Winograd tile's product best plus its two transform kernels'
        (``winograd_estimate``), each with the registers ptxas gives its kernel, as the report's row."""
        candidates = algorithm_candidates(direct, alternatives, self.algorithm == "winograd")
        if not candidates:  # winograd asked for and none ran: the direct search's best
            return None, []
        if self.measured:
            timed = list(retime_until_stable(lambda: tuple(self._measure(op, [p for _, p, _ in candidates]))))
        else:
            searched = {s.alternative.label: s for s in alternatives}
            timed = [MeasureResult(self.roofline(op)(space, point, self.registers(op, point)).seconds
                                   if label == "direct" else
                                   winograd_estimate(self, op, searched[label], found.point).seconds)
                     for label, point, found in candidates]
        return compare_algorithms(candidates, timed, "product alone" + ("" if self.measured else " (estimate)"))

    def _measure(self, op: Operator, points: Sequence[Point]) -> list[MeasureResult]:
        """``op`` at each of ``points`` built, checked and timed on the GPU, one after the other."""
        measure = {} if self.remote is None else {"measure": partial(measure_remote_job, remote=self.remote)}
        with Pipeline(timeout_s=self.timeout_s, **measure) as pipeline:
            return list(pipeline.evaluate([candidate_job(op, self.source, p, None, target="cuda",
                                                         device=self.gpu.name) for p in points]))

    def directory(self, op: Operator) -> str:
        return f"{self.typed(op).slug}/gpu"

    def write(self, t: Tuned, out: Path, seed: int) -> Written:
        return write_gpu(t, out, seed, self.gpu, self.directory(t.op), on_gpu=self.present is not None)

    def back_to_back(self, graph: Any, outcomes: Sequence[Tuned], out: Path) -> list[dict[str, Any]]:
        """The network's back-to-back 1×1 convolutions fused where that wins (``gpu_fusion.back_to_back``)."""
        return back_to_back(graph, [o for o in outcomes if o.target is self], out, self.gpu, self.device, self.typed,
                            on_gpu=self.present is not None, layers_measured=self.measured)

    def row(self, t: Tuned, written: Written | None) -> Row:
        row = gpu_row(self, t, written)
        if self.algorithm == "winograd" and t.best is not None and t.algorithm in (None, "direct"):
            row.detail = f"direct: {self._why_direct(t)}; {row.detail}"
        return row

    def _why_direct(self, t: Tuned) -> str:
        """Why ``--winograd on`` kept a direct schedule: Winograd does not take the layer, or none of it ran."""
        if not t.searched:
            try:
                shape = winograd_shape(self.typed(t.op), WINOGRAD_TILES[0])
            except HeteroDSEError as exc:
                return str(exc)
            if shape.groups > 1:
                return f"Winograd on the GPU takes a convolution of one group, not {shape.groups} (the CPU's does)"
            return f"Winograd here computes in float32, not {self.typed(t.op).dtype}"
        if t.interrupted:
            return "interrupted before Winograd's search ended"
        return "; ".join(s.why for s in t.searched if s.why) or "no Winograd point ran"

    def record(self, t: Tuned, written: Written | None) -> dict[str, Any]:
        return gpu_record(self, t, written)

    def markdown(self, t: Tuned, written: Written | None) -> list[str]:
        return []

    def csv_rows(self, t: Tuned) -> list[dict[str, Any]]:
        return []

    def footnote(self) -> str:
        return gpu_footnote(self)


def _dataflow(op: Operator) -> Dataflow | None:
    """Seed 001's dataflow of ``op``'s domain: §5.3's for Winograd's product, whose F(m×m, 3×3) its α² points
    give; §5.2's (from the operator's window) for any other."""
    if op.name != "winograd_product":
        return None
    alpha = math.isqrt(int(op.params["E"]))
    return Dataflow.winograd(alpha - 2) if alpha * alpha == int(op.params["E"]) and alpha > 3 else None


def _torch_cuda_timing(op: Operator) -> MeasureResult | None:
    """The library's time on the GPU with its repeats (None where torch has no call for ``op``)."""
    samples: list[float] = []
    seconds = time_torch_cuda(op, samples=samples)
    return None if seconds is None else MeasureResult(seconds, repeats=tuple(samples))
