"""The GPU target: measured on the CUDA device when this machine has one, estimated by the roofline model of
a named device otherwise (and then labelled an estimate everywhere it appears). The best schedule's CUDA
source, TIR and module are written either way: code generation needs nvcc, not a GPU."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from cost_models.gpu_roofline import ESTIMATE_OVER_H100, estimate_any
from gpu_cpu import intrinsics
from gpu_cpu.baselines import time_torch_cuda
from gpu_cpu.measure import MeasureResult, check_fits_in_memory
from gpu_cpu.pipeline import Pipeline
from gpu_cpu.remote import Remote, measure_remote_job
from gpu_cpu.schedule import ScheduleError, apply_gpu, build_cuda, ptxas_usage, staged_shared_bytes
from hetero_dse.analysis import analyze
from hetero_dse.atomic import atomic_directory
from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore.loop import LoopResult
from hetero_dse.explore.settings import AUTO_MEASURED, AUTO_MODELLED, MODEL_STARTS
from hetero_dse.hardware.gpus import DEVICES, GpuDevice, check_architecture, cuda_toolkit, get_device, present_gpu
from hetero_dse.history import Workload
from hetero_dse.history.store import WorkloadHistory
from hetero_dse.operator import Operator
from hetero_dse.space.gpu import GpuSpace
from hetero_dse.space.tensorcore import ARITHMETIC, TensorCoreSpace, tensor_core_arithmetic
from hetero_dse.space.point import Point
from hetero_dse.targets.base import Defaults, Row, Search, Written
from hetero_dse.targets.measured import TVM_STARTS, Trial, TrialLog, candidate_job, measured_evaluator
from hetero_dse.targets.tuned import Tuned, schedule_json, timing_note, tvm_workload

__all__ = ["ESTIMATE_BUDGET", "GpuTarget", "rebuild_gpu"]

#: points the roofline model scores when there is no GPU to measure on (a model is cheap; trials are not)
ESTIMATE_BUDGET = 4096
#: estimated points tried, best first, before writing gives up (each that nvcc rejects is a failed trial)
MAX_UNBUILT = 8


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
                 timeout_s: float = 60.0, dtype: str | None = None, remote: Remote | None = None) -> None:
        self.dtype = dtype  # the inputs' type the GPU computes in (None: the operator's own)
        cuda_toolkit()
        #: a GPU reached over TVM's RPC, of the kind ``device`` names: built here for its architecture, timed there
        self.remote = remote
        if remote is not None:
            remote.check()
        self.present = present_gpu() if remote is None else None
        self.gpu: GpuDevice = self.present or get_device(device)
        self.measured = self.present is not None or remote is not None
        self.source, self.timeout_s = source, timeout_s
        self._registers: dict[tuple[Operator, Point], int | None] = {}  # ptxas's count, per written best
        check_architecture(self.gpu)
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
        return ("Making the tensor cores' intrinsics from TVM's tables, once for this TVM version (about 25 s)",
                intrinsics.prepare)

    def off_tensor_cores(self, op: Operator) -> str | None:
        """Why ``op`` runs on the SIMT cores; None when it runs on the tensor cores. A float16, bfloat16 or
        int8 layer the tensor cores cannot take (a matrix-vector product, a depthwise convolution, a device
        without that arithmetic) is computed in its type on the SIMT cores, not refused: a network's other
        layers still get theirs."""
        if op.dtype not in ARITHMETIC:
            return "no tensor cores"
        return tensor_core_arithmetic(analyze(op), self.gpu)

    def space(self, op: Operator) -> GpuSpace | TensorCoreSpace:
        """The tensor cores' template (Bolt) for a float16, bfloat16 or int8 contraction they can take; the
        SIMT splits (FlexTensor) for the rest."""
        op = self.typed(op)
        analysis = analyze(op)
        if self.off_tensor_cores(op) is None:
            return TensorCoreSpace(analysis, self.gpu)
        # seed 001's domain spares measured trials on the unpromising; the roofline scores the whole space in
        # milliseconds and ranks some points outside it first (BENCHMARKS.md), so estimates search it whole
        return GpuSpace(analysis, self.gpu, domain=self.measured)

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
                yield measured_evaluator(space, lambda points, best: pipeline.evaluate(
                    [candidate_job(op, self.source, p, best, target="cuda", device=self.gpu.name) for p in points]),
                    history, progress)
            return

        incumbent = [float("inf")]

        def modelled(point: Point) -> MeasureResult:
            problem = space.beyond_limits(point)  # enforced before building, as on a real device
            if problem:
                return MeasureResult(None, problem)
            seconds = estimate_any(space, point).seconds
            if seconds < incumbent[0]:
                # a new best is generated (not compiled) first: for a custom operator the shared memory TVM's code
                # declares can exceed the tiles' footprint the model counts, and a best that cannot run is no
                # answer (for the built-ins they agree since the padding moved into the shared stage)
                staged = staged_shared_bytes(op, point, self.gpu)
                if staged > self.gpu.shared_memory_per_block:
                    return MeasureResult(None, f"TVM's code stages {staged} B of shared memory > "
                                               f"{self.gpu.shared_memory_per_block} (the model counted "
                                               f"{space.limits(point)['shared_bytes']} B)")
                incumbent[0] = seconds
            return MeasureResult(seconds)

        yield measured_evaluator(space, lambda points, _best: map(modelled, points), None, progress)

    def observers(self, space: GpuSpace, search: Search) -> Sequence[Any]:
        return ()

    def finish(self, op: Operator, space: GpuSpace, explorer: str, loop: LoopResult, evaluator: TrialLog,
               observers: Sequence[Any], history: WorkloadHistory | None, search: Search) -> Tuned:
        op = self.typed(op)
        # CUDA events: its own timing, not in a worker; the GPU is the device measured, and our kernels' times are
        # on it too. Torch does not run through RPC: a remote GPU has no library figure
        library = time_torch_cuda(op) if self.present is not None and not loop.interrupted else None
        return Tuned.of(op, self, space, explorer, loop, evaluator, self.source, library, estimate=not self.measured)

    def _ptxas_registers(self, op: Operator, point: Point) -> int | None:
        """The registers ptxas gives a thread of ``point``'s kernel; None where nvcc is missing or refuses it.
        Kept per operator and point: the row and the record of one result both ask, and each answer costs a
        schedule, a build and (once per source) ptxas."""
        key = (op, point)
        if key not in self._registers:
            try:
                _, source = build_cuda(apply_gpu(op, point), self.gpu, compile_here=False)
            except ScheduleError:
                self._registers[key] = None
            else:
                usage = ptxas_usage(source, self.gpu.arch)
                self._registers[key] = usage["registers"] if usage else None
        return self._registers[key]

    def directory(self, op: Operator) -> str:
        return f"{self.typed(op).slug}/gpu"

    def write(self, t: Tuned, out: Path, seed: int) -> Written:
        """CUDA source, TIR, module and ``schedule.json`` of the best point; checked against the reference when
        it ran on a GPU. Assembled aside, renamed when whole."""
        if t.best is None:
            raise t.no_best()
        warnings = []
        for _ in range(MAX_UNBUILT):
            mod = apply_gpu(t.op, t.best)
            try:
                executable, cuda_source = build_cuda(mod, self.gpu)
                break
            except ScheduleError as exc:
                if not t.estimate:  # a measured best was built and ran: nothing else can be wrong with it
                    raise
                # scored by the model, never built: the code may need what the model did not count (a shared
                # stage TVM sizes larger than the tile's footprint); the point fails, the next best is written
                warnings.append(f"the estimate's best point did not build ({exc}); the next best was written")
                t.trials = [Trial(x.point, MeasureResult(None, str(exc))) if x.point == t.best else x
                            for x in t.trials]
                best = t.best_trial
                if best is None:
                    raise t.no_best() from None
                t.best, t.best_seconds = best.point, best.result.seconds
        else:
            raise HeteroDSEError(f"none of the {MAX_UNBUILT} best estimated schedules of {t.op.name} builds: "
                                 f"{warnings[-1]}")
        checked = _check_on_gpu(executable, t.op, seed) if self.present is not None else False
        directory = out / self.directory(t.op)
        with atomic_directory(directory) as partial:
            executable.export_library(str(partial / "module.so"))
            (partial / "lowered_tir.py").write_text(mod.script())
            (partial / "kernel.cu").write_text(cuda_source)
            (partial / "schedule.json").write_text(schedule_json(t, self.gpu.target, device=self.gpu.name,
                                                                 checked_on_gpu=checked))
        return Written(str(directory.relative_to(out)), passed=True if checked else None, warnings=warnings)

    def back_to_back(self, graph: Any, outcomes: Sequence[Tuned], out: Path) -> list[dict[str, Any]]:
        """The network's back-to-back 1×1 convolutions (``graph.pairs``) on this GPU: each pair's fused kernel
        (``gpu_cpu/b2b.py``, Bolt's persistent fusion) against its two layers' best schedules, chosen where its
        estimate beats their sum; a chosen one is checked against the unfused pair on TVM's CPU path and its
        CUDA written beside the layers'. Estimates only: on a present GPU the layers are measured and the fused
        kernel is not yet, so they stay two kernels. One dict per pair (``why``: the reason it is not fused)."""
        from gpu_cpu.b2b import GemmPair, choose

        operators = graph.operators()
        best = {o.op.shape_name: o for o in outcomes if o.target is self and o.found}
        entries = []
        for pair_of in graph.pairs:
            first, second = (self.typed(operators[i]) for i in (pair_of.first, pair_of.second))
            entry: dict[str, Any] = {"device": self.device, "first": first.shape_name, "second": second.shape_name,
                                     "count": pair_of.count, "fuse": False}
            entries.append(entry)
            found = [best.get(op.shape_name) for op in (first, second)]
            if self.present is not None:
                entry["why"] = "measured on the GPU: the fused kernel is not measured yet, the layers stay two kernels"
                continue
            if None in found:
                entry["why"] = "a layer of the pair has no result"
                continue
            try:
                pair = GemmPair.of(first, second)
            except HeteroDSEError as exc:
                entry["why"] = str(exc)
                continue
            choice = choose(pair, (found[0].best_seconds, found[1].best_seconds), self.gpu)
            entry.update(shape={"M": pair.m, "K": pair.k, "N0": pair.n0, "N1": pair.n1},
                         unfused_s=list(choice.unfused_s), fused_s=choice.fused.seconds if choice.fused else None,
                         speedup=choice.speedup, point=dict(choice.point) if choice.point else None)
            if choice.point is None:
                entry["why"] = "a block's rows of A and of the intermediate exceed the shared memory"
            elif not choice.fuse:
                entry["why"] = "the two layers' kernels are faster"
            else:
                entry.update(self._write_fused(pair, choice, first, second, out))
                entry["fuse"] = entry["checked"]
                if not entry["checked"]:
                    entry["why"] = (f"the fused kernel differs from the unfused pair (max error "
                                    f"{entry['max_error']:.3g})")
        return entries

    def _write_fused(self, pair: Any, choice: Any, first: Operator, second: Operator, out: Path) -> dict[str, Any]:
        """The fused kernel checked on TVM's CPU path against the pair's reference (numpy, float64) and written:
        CUDA source (compiled by nvcc for the device), TIR and ``b2b.json``."""
        import tvm

        from gpu_cpu.b2b import apply_b2b
        from gpu_cpu.schedule import build_cpu

        inputs = pair.random_inputs(0)
        executable = build_cpu(apply_b2b(pair, choice.point, emulate=True))
        dev = tvm.cpu(0)
        got = tvm.runtime.tensor(np.zeros(pair.output_shape, "float32"), dev)
        executable(*(tvm.runtime.tensor(a, dev) for a in inputs), got)
        want = pair.reference(inputs)
        error = float(np.max(np.abs(got.numpy() - want)))
        checked = bool(np.allclose(got.numpy(), want, rtol=1e-4, atol=1e-4))
        mod = apply_b2b(pair, choice.point)
        _, cuda_source = build_cuda(mod, self.gpu)
        directory = out / f"b2b_{first.slug}_{second.slug}" / "gpu"
        record = {"first": first.shape_name, "second": second.shape_name, "device": self.gpu.name,
                  "target": self.gpu.target, "pair": {"M": pair.m, "K": pair.k, "N0": pair.n0, "N1": pair.n1,
                                                      "first": list(pair.first), "second": list(pair.second),
                                                      "channels_first": pair.channels_first},
                  "point": dict(choice.point), "estimate_s": choice.fused.seconds, "unfused_s": list(choice.unfused_s),
                  "checked_on_cpu_path": checked, "max_error": error, "checked_on_gpu": False}
        with atomic_directory(directory) as partial:
            (partial / "lowered_tir.py").write_text(mod.script())
            (partial / "kernel.cu").write_text(cuda_source)
            (partial / "b2b.json").write_text(json.dumps(record, indent=2) + "\n")
        return {"checked": checked, "max_error": error, "directory": str(directory.relative_to(out))}

    def _estimate(self, t: Tuned):
        """The row's estimate, its occupancy from the registers ptxas gives the written kernel (the model counts
        accumulators plus a constant; an unrolled kernel takes several times that: 64-254 against 30-60 on
        YOLO-v1's layers, which moved none of their estimates, a block of four warps keeping an SM's
        schedulers busy in the model either way)."""
        if t.best is None or not t.estimate:
            return None
        return estimate_any(self.space(t.op), t.best, self._ptxas_registers(t.op, t.best))

    def arithmetic(self, op: Operator, point: Point | None = None) -> str:
        """What the row's kernel computes with: the tensor cores' instruction (the best point's, where there is
        one), or the SIMT cores and why."""
        why = self.off_tensor_cores(op)
        if why is None:
            arithmetic = ARITHMETIC[op.dtype]
            instruction = point["mma"] if point is not None and "mma" in point else arithmetic.instruction
            return f"{op.dtype} tensor cores ({instruction}), {arithmetic.accumulator} accumulation"
        return f"{op.dtype} SIMT ({why})"

    def peak(self, op: Operator) -> float:
        """The device's peak for the row's arithmetic (FLOP/s)."""
        on_tensor_cores = self.off_tensor_cores(op) is None
        return (self.gpu.tensor_tflops(op.dtype) if on_tensor_cores else self.gpu.fp32_tflops) * 1e12

    def row(self, t: Tuned, written: Written | None) -> Row:
        figures = self._estimate(t)
        detail = self.arithmetic(t.op, t.best)
        if figures is not None and "padding_overhead" in figures.figures and figures.figures["padding_overhead"] > 1:
            detail += f"; padded to the tile: {figures.figures['padding_overhead']:.2f}x the multiply-adds"
        if not t.estimate and t.best is not None:
            detail += "; " + timing_note(t.retimed or t.best_trial.result, t.library)
        return t.row("gpu", self.device, self.peak(t.op), written, bound=figures.bound if figures else None,
                     detail=detail)

    def record(self, t: Tuned, written: Written | None) -> dict[str, Any]:
        out = {**t.record(written), "device": self.gpu.name, "target": self.gpu.target,
               "arithmetic": self.arithmetic(t.op, t.best)}
        figures = self._estimate(t)
        if figures is not None:
            out["best"]["bound"] = figures.bound
            out["best"]["figures"] = figures.figures
        return out

    def markdown(self, t: Tuned, written: Written | None) -> list[str]:
        return []

    def csv_rows(self, t: Tuned) -> list[dict[str, Any]]:
        return []

    def footnote(self) -> str:
        if self.remote is not None:
            return (f"GPU over TVM's RPC: each schedule was built here for {self.gpu.arch} and checked and timed on "
                    f"{self.remote}; torch does not run through RPC, so there is no library figure.")
        if self.measured:
            return (f"GPU: {self.gpu.name} ({self.gpu.arch}), each schedule built, checked and timed in a worker "
                    "process; torch (cuDNN) timed on the same device in the same run.")
        checked = "; ".join(f"{dtype} {low:.2f}–{high:.2f}× (geometric mean {mean:.2f}×)"
                            for dtype, (low, high, mean) in ESTIMATE_OVER_H100.items())
        return ("GPU estimates: no GPU on this machine. The time is the roofline model of the named device "
                "(`cost_models/gpu_roofline.py`: FP32 peak with issue, lane and FMA-latency losses; DRAM, L2 and "
                "shared-memory traffic), not a measurement; the CUDA source was generated and compiled by nvcc "
                "but not run, and no library baseline was taken. Checked against an H100 on the best points "
                f"measured there for YOLO-v1's layers, the estimate was this multiple of the measured speed: "
                f"{checked} (`bench/gpu_roofline_vs_measured.py`): mostly optimistic, and not the speed a "
                "kernel will reach.")


def _check_on_gpu(executable: Any, op: Operator, seed: int) -> bool:
    import tvm

    dev = tvm.cuda(0)
    inputs = op.random_inputs(seed)
    out = tvm.runtime.tensor(np.zeros([int(d) for d in op.output.shape], dtype=str(op.output.dtype)), dev)
    executable(*[tvm.runtime.tensor(a, dev) for a in inputs], out)
    want = op.reference(inputs)
    if want is None:
        return False
    if not np.allclose(out.numpy(), want, rtol=1e-3, atol=1e-3):
        raise HeteroDSEError(f"the best GPU schedule of {op.name} computes a wrong result; not written")
    return True


def rebuild_gpu(record: dict[str, Any]) -> str:
    """The CUDA source ``record``'s knobs generate today (replay without a GPU compares it with kernel.cu)."""
    from gpu_cpu.measure import rebuild_operator

    op = rebuild_operator(record["source"], record["operator"], record["params"], record.get("epilogue", ()),
                          record.get("epilogue_axes", ()))
    device = get_device(record["device"]) if record["device"] in DEVICES else present_gpu()
    if device is None:
        raise HeteroDSEError(f"the schedule was measured on {record['device']}, and this machine has no GPU")
    try:
        return build_cuda(apply_gpu(op, Point(record["knobs"])), device)[1]
    except ScheduleError as exc:
        raise HeteroDSEError(str(exc)) from None
