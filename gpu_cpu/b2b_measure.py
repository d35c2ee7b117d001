"""The fused back-to-back kernel (``gpu_cpu/b2b.py``) measured where a GPU is present: its template's points,
ranked by their roofline estimates, the best ``trials`` of them (or all) built for a device, each run once against
the pair's reference and then timed as every candidate of a search is (TVM's time evaluator: the median of
``repeat`` repeats of at least ``MIN_REPEAT_MS`` each, the first repeat dropped; under the machine's measurement
lock, again while foreign work loads it: ``measure.time_module``).

The template is small (at most 32 points), so the estimate only orders the points; the measurement chooses.
Given a ``Measurer``, each point is built, checked and timed in its worker process, as a search's candidates are:
a kernel that hangs is cut off at the timeout, one that crashes (a fault on the device poisons the process's CUDA
context) takes only its worker, and either is a failed trial. Without one (the tests' injected builds) the points
run in this process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpu_cpu.b2b import GemmPair, apply_b2b, estimate_b2b, fused_points
from gpu_cpu.measure import MIN_REPEAT_MS, Measurer, error_text, time_module
from hetero_dse.hardware.gpus import GpuDevice
from hetero_dse.ops.winograd import result_problem
from hetero_dse.space.point import Point

__all__ = ["FusedJob", "FusedTrial", "build_emulated", "fastest_fused", "fused_point_job", "measure_fused",
           "ranked_points"]


@dataclass(frozen=True)
class FusedTrial:
    """One point of the fused template: its roofline estimate and its measured seconds (None: it failed, ``error``
    says how), with the foreign load on the machine while it was timed."""

    point: Point
    estimate_s: float
    seconds: float | None
    error: str | None = None
    repeats: tuple[float, ...] = ()
    foreign_load: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"point": dict(self.point), "estimate_s": self.estimate_s, "seconds": self.seconds,
                "error": self.error, "repeats": list(self.repeats), "foreign_load": self.foreign_load}


def ranked_points(pair: GemmPair, device: GpuDevice) -> list[tuple[Point, float]]:
    """Every point of the fused template within ``device``'s limits with its estimate, the fastest first."""
    scored = [(p, estimate_b2b(pair, p, device).seconds) for p in fused_points(pair, device)]
    return sorted(scored, key=lambda ps: ps[1])


def _build_cuda(pair: GemmPair, device: GpuDevice) -> Callable[[Point], Any]:
    from gpu_cpu.schedule import build_cuda

    # the CUDA runtime is loaded here: TVM compiles the kernel as the module is created
    return lambda point: build_cuda(apply_b2b(pair, point), device, compile_here=False)[0].mod


def build_emulated(pair: GemmPair) -> Callable[[Point], Any]:
    """The fused kernel built for TVM's CPU backend (its GPU bindings emulated): where no GPU is present."""
    from gpu_cpu.schedule import build_cpu

    return lambda point: build_cpu(apply_b2b(pair, point, emulate=True)).mod


@dataclass(frozen=True)
class FusedJob:
    """One point of the fused template for a worker process (``fused_point_job``): built for ``target``
    (``cuda``: the device's, run on the first CUDA device; ``llvm``: TVM's CPU path, where no GPU is present)."""

    pair: GemmPair
    device: GpuDevice
    point: Point
    target: str = "cuda"
    number: int = 3
    repeat: int = 3


def fused_point_job(job: FusedJob) -> dict[str, Any]:
    """Build, check and time one point in a ``Measurer``'s worker: the timing dict, or an exception that says why
    the point has none."""
    import tvm

    on_gpu = job.target == "cuda"
    build = _build_cuda(job.pair, job.device) if on_gpu else build_emulated(job.pair)
    module = build(job.point)
    return _check_and_time(job.pair, module, tvm.cuda(0) if on_gpu else tvm.cpu(0), job.number, job.repeat,
                           MIN_REPEAT_MS[job.target])


def _check_and_time(pair: GemmPair, module: Any, dev: Any, number: int, repeat: int, min_repeat_ms: int,
                    reference: tuple[list[np.ndarray], np.ndarray] | None = None) -> dict[str, Any]:
    """The built point run once against the pair's reference (``reference``: its inputs and output, made here
    where not given), then timed (``time_module``'s dict); a wrong result raises."""
    import tvm

    if reference is None:
        made = pair.random_inputs(0)
        reference = (made, pair.reference(made))
    inputs, want = reference
    # the inputs afresh for each point: one that wrote past its output must not fail the next; NaN in the output:
    # a kernel that writes nothing must not pass on the last point's output
    args = [tvm.runtime.tensor(a, dev) for a in inputs]
    out = tvm.runtime.tensor(np.full(pair.output_shape, np.nan, "float32"), dev)
    module[module.entry_name](*args, out)
    dev.sync()
    got = out.numpy()
    if problem := result_problem(got, want, "float32"):
        raise ValueError(f"its result {problem} of the pair" + (" (some outputs unwritten)" if np.isnan(got).any()
                                                                else ""))
    return time_module(module, dev, [*args, out], number, repeat, min_repeat_ms)


def measure_fused(pair: GemmPair, device: GpuDevice, trials: int | None = None, *, dev: Any = None,
                  build: Callable[[Point], Any] | None = None, target: str = "cuda", number: int = 3,
                  repeat: int = 3, progress: Callable[[FusedTrial], None] | None = None,
                  measurer: Measurer | None = None) -> list[FusedTrial]:
    """The ``trials`` best-estimated points of the fused template (None: every point; none where no point fits
    the device), each built, checked against the pair's reference as every kernel is (``result_problem``) and
    timed. With a ``measurer``, each in its worker process for ``target`` (``FusedJob``), cut off at its timeout;
    without, in this process: built by ``build`` (point -> a TVM module whose entry takes the pair's inputs and
    output; the device's CUDA by default) and run on ``dev`` (the first CUDA device by default). A point that fails
    to build, computes a wrong result, crashes or hangs is a trial with its error. ``target`` names whose
    ``MIN_REPEAT_MS`` applies."""
    ranked = ranked_points(pair, device)[:trials]
    if not ranked:
        return []
    if measurer is None:
        import tvm

        dev = tvm.cuda(0) if dev is None else dev
        build = _build_cuda(pair, device) if build is None else build
        inputs = pair.random_inputs(0)
        reference = (inputs, pair.reference(inputs))
    trials_run: list[FusedTrial] = []
    for point, estimate_s in ranked:
        if measurer is not None:
            result = measurer.run(fused_point_job, FusedJob(pair, device, point, target, number, repeat))
            trial = (FusedTrial(point, estimate_s, result.seconds, repeats=result.repeats,
                                foreign_load=result.foreign_load) if result.ok else
                     FusedTrial(point, estimate_s, None, result.error))
        else:
            try:
                timed = _check_and_time(pair, build(point), dev, number, repeat, MIN_REPEAT_MS[target], reference)
                trial = FusedTrial(point, estimate_s, timed["seconds"], repeats=tuple(timed["repeats"]),
                                   foreign_load=timed["foreign_load"])
            except Exception as exc:  # noqa: BLE001 - a point TVM or the device rejects is a failed trial
                trial = FusedTrial(point, estimate_s, None, error_text(exc))
        trials_run.append(trial)
        if progress is not None:
            progress(trial)
    return trials_run


def fastest_fused(trials: list[FusedTrial]) -> FusedTrial | None:
    timed = [t for t in trials if t.seconds is not None]
    return min(timed, key=lambda t: t.seconds) if timed else None
