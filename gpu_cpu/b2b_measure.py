"""The fused back-to-back kernel (``gpu_cpu/b2b.py``) measured where a GPU is present: its template's points,
ranked by their roofline estimates, the best ``trials`` of them built for the device, each run once against the
pair's reference and then timed as every candidate of a search is (TVM's time evaluator: the median of
``repeat`` repeats of at least ``MIN_REPEAT_MS`` each, the first repeat dropped).

The template is small (at most 128 points), so the estimate only orders the points; the measurement chooses.
Every point runs in this process: a fused kernel is one launch of code TVM generated, as the written GPU
kernels are checked (``gpu_write.check_on_gpu``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpu_cpu.b2b import GemmPair, apply_b2b, estimate_b2b, fused_points
from gpu_cpu.measure import MIN_REPEAT_MS
from hetero_dse.hardware.gpus import GpuDevice
from hetero_dse.space.point import Point

__all__ = ["FusedTrial", "fastest_fused", "measure_fused", "ranked_points"]

#: the fused kernel's tolerance against the float64 reference: float32 sums of K + N0 products
RTOL = ATOL = 1e-4


@dataclass(frozen=True)
class FusedTrial:
    """One point of the fused template: its roofline estimate and its measured seconds (None: it failed, ``error``
    says how)."""

    point: Point
    estimate_s: float
    seconds: float | None
    error: str | None = None
    repeats: tuple[float, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"point": dict(self.point), "estimate_s": self.estimate_s, "seconds": self.seconds,
                "error": self.error, "repeats": list(self.repeats)}


def ranked_points(pair: GemmPair, device: GpuDevice) -> list[tuple[Point, float]]:
    """Every point of the fused template within ``device``'s limits with its estimate, the fastest first."""
    scored = [(p, estimate_b2b(pair, p, device).seconds) for p in fused_points(pair, device)]
    return sorted(scored, key=lambda ps: ps[1])


def _build_cuda(pair: GemmPair, device: GpuDevice) -> Callable[[Point], Any]:
    from gpu_cpu.schedule import build_cuda

    # the CUDA runtime is loaded here: TVM compiles the kernel as the module is created
    return lambda point: build_cuda(apply_b2b(pair, point), device, compile_here=False)[0].mod


def measure_fused(pair: GemmPair, device: GpuDevice, trials: int | None = None, *, dev: Any = None,
                  build: Callable[[Point], Any] | None = None, target: str = "cuda", number: int = 3,
                  repeat: int = 3, progress: Callable[[FusedTrial], None] | None = None) -> list[FusedTrial]:
    """The ``trials`` best-estimated points of the fused template (None: every point), each built (``build``:
    point -> a TVM module whose entry takes the pair's inputs and output; the device's CUDA by default), checked
    against the pair's reference and timed on ``dev`` (the first CUDA device by default). A point that fails to
    build, or computes a wrong result, is a trial with its error. ``target`` names whose ``MIN_REPEAT_MS`` applies."""
    import tvm

    dev = tvm.cuda(0) if dev is None else dev
    build = _build_cuda(pair, device) if build is None else build
    inputs = pair.random_inputs(0)
    want = pair.reference(inputs)
    args = [tvm.runtime.tensor(a, dev) for a in inputs]
    # NaN before every point: a kernel that writes nothing must not pass on the last point's output
    unset = np.full(pair.output_shape, np.nan, "float32")
    out = tvm.runtime.tensor(unset, dev)
    trials_run: list[FusedTrial] = []
    for point, estimate_s in ranked_points(pair, device)[:trials]:
        try:
            module = build(point)
            out.copyfrom(unset)
            module[module.entry_name](*args, out)
            dev.sync()
            got = out.numpy()
            if not np.allclose(got, want, rtol=RTOL, atol=ATOL):
                worst = float(np.nanmax(np.abs(got - want))) if not np.isnan(got).all() else float("nan")
                raise ValueError(f"its result differs from the pair's reference (max error {worst:.3g}"
                                 f"{', some outputs unwritten' if np.isnan(got).any() else ''})")
            # one more repeat than asked, dropped, as every candidate is timed (gpu_cpu/measure.check_and_time)
            timer = module.time_evaluator(module.entry_name, dev, number=number, repeat=repeat + 1,
                                          min_repeat_ms=MIN_REPEAT_MS[target])
            repeats = tuple(float(x) for x in timer(*args, out).results)[1:]
            trial = FusedTrial(point, estimate_s, float(np.median(repeats)), repeats=repeats)
        except Exception as exc:  # noqa: BLE001 - a point TVM or the device rejects is a failed trial
            trial = FusedTrial(point, estimate_s, None, f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
                               if str(exc) else type(exc).__name__)
        trials_run.append(trial)
        if progress is not None:
            progress(trial)
    return trials_run


def fastest_fused(trials: list[FusedTrial]) -> FusedTrial | None:
    timed = [t for t in trials if t.seconds is not None]
    return min(timed, key=lambda t: t.seconds) if timed else None
