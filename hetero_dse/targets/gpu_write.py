"""What the GPU target writes for its best schedule: the CUDA source, TIR, module and ``schedule.json`` (the next
best estimated point written where nvcc rejects an estimate's best), checked on the GPU where there is one; and
the CUDA source a recorded schedule's knobs generate today, for replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from gpu_cpu.measure import MeasureResult, rebuild_operator
from gpu_cpu.schedule import ScheduleError, apply_gpu, build_cuda
from gpu_cpu.winograd import TILE_KNOB, transform_weights
from gpu_cpu.winograd_gpu import gpu_weights
from hetero_dse.atomic import atomic_directory
from hetero_dse.errors import HeteroDSEError
from hetero_dse.ops.winograd import result_problem
from hetero_dse.evaluate.measured import Trial, fastest
from hetero_dse.hardware.gpus import DEVICES, GpuDevice, get_device, present_gpu
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point
from hetero_dse.targets.base import Written
from hetero_dse.targets.tuned import Tuned, schedule_json

__all__ = ["MAX_UNBUILT", "rebuild_gpu", "write_gpu"]

#: estimated points tried, best first, before writing gives up (each that nvcc rejects is a failed trial)
MAX_UNBUILT = 8


def write_gpu(t: Tuned, out: Path, seed: int, gpu: GpuDevice, directory: str, on_gpu: bool) -> Written:
    """CUDA source, TIR, module and ``schedule.json`` of the best point for ``gpu`` under ``out / directory``;
    checked against the reference when it runs on a GPU here (``on_gpu``). Assembled aside, renamed when
    whole."""
    if t.best is None:
        raise t.no_best()
    warnings = []
    for _ in range(MAX_UNBUILT):
        mod = apply_gpu(t.op, t.best)
        try:
            executable, cuda_source = build_cuda(mod, gpu)
            break
        except ScheduleError as exc:
            if not t.estimate:  # a measured best was built and ran: nothing else can be wrong with it
                raise
            # scored by the model, never built: the code may need what the model did not count (a shared
            # stage TVM sizes larger than the tile's footprint); the point fails, the next best is written
            if t.chosen is not None and t.chosen.point == t.best:  # the chosen algorithm's best did not build
                label = _label(t)
                _chosen_unbuilt(t, str(exc))
                warnings.append(f"the chosen {label} schedule did not build ({exc}); direct convolution's best "
                                "was written")
                continue
            warnings.append(f"the estimate's best point did not build ({exc}); the next best was written")
            t.trials = [Trial(x.point, MeasureResult(None, str(exc))) if x.point == t.best else x for x in t.trials]
            best = t.best_trial
            if best is None:
                raise t.no_best() from None
            t.best, t.best_seconds = best.point, best.result.seconds
    else:
        raise HeteroDSEError(f"none of the {MAX_UNBUILT} best estimated schedules of {t.op.name} builds: "
                             f"{warnings[-1]}")
    checked = check_on_gpu(executable, t.op, seed, t.best) if on_gpu else False
    weights = {"packed_weights": gpu_weights(t.op, t.best)} if TILE_KNOB in t.best else {}
    path = out / directory
    with atomic_directory(path) as partial:
        executable.export_library(str(partial / "module.so"))
        (partial / "lowered_tir.py").write_text(mod.script())
        (partial / "kernel.cu").write_text(cuda_source)
        (partial / "schedule.json").write_text(schedule_json(t, gpu.target, device=gpu.name,
                                                             checked_on_gpu=checked, **weights))
    return Written(str(path.relative_to(out)), passed=True if checked else None, warnings=warnings)


def _label(t: Tuned) -> str:
    return next(a["algorithm"] for a in t.algorithms if a["chosen"])


def _chosen_unbuilt(t: Tuned, error: str) -> None:
    """Direct convolution's best in place of the chosen algorithm's, which nvcc rejected (its estimate kept in
    the comparison, marked with the error); refused where only Winograd was asked for."""
    label = _label(t)
    direct = next((a for a in t.algorithms if a["algorithm"] == "direct"), None)
    best = fastest(t.trials)
    if direct is None or best is None:
        raise HeteroDSEError(f"the best {label} schedule of {t.op.name} does not build ({error}); leave "
                             "--winograd on out to keep direct convolution where it does not")
    t.algorithms = [{**a, "chosen": a is direct, "error": error if a["algorithm"] == label else a["error"]}
                    for a in t.algorithms]
    t.chosen = Trial(best.point, MeasureResult(direct["seconds"]))
    t.best, t.best_seconds = best.point, direct["seconds"]


def check_on_gpu(executable: Any, op: Operator, seed: int, point: Point | None = None) -> bool:
    """Whether the module computes ``op``'s reference on the GPU (False: no reference to compare with); a wrong
    result is refused with one sentence. A Winograd ``point``'s module takes the weights transformed."""
    import tvm

    dev = tvm.cuda(0)
    inputs = op.random_inputs(seed)
    given = list(inputs)
    if point is not None and TILE_KNOB in point:
        given[1] = transform_weights(given[1], int(point[TILE_KNOB]))
    out = tvm.runtime.tensor(np.zeros([int(d) for d in op.output.shape], dtype=str(op.output.dtype)), dev)
    executable(*[tvm.runtime.tensor(a, dev) for a in given], out)
    want = op.reference(inputs)
    if want is None:
        return False
    if problem := result_problem(out.numpy(), want, op.dtype, point is not None and TILE_KNOB in point):
        raise HeteroDSEError(f"the best GPU schedule of {op.name} computes a wrong result (it {problem}); not written")
    return True


def rebuild_gpu(record: dict[str, Any]) -> str:
    """The CUDA source ``record``'s knobs generate today (replay without a GPU compares it with kernel.cu)."""
    op = rebuild_operator(record["source"], record["operator"], record["params"], record.get("epilogue", ()),
                          record.get("epilogue_axes", ()))
    device = get_device(record["device"]) if record["device"] in DEVICES else present_gpu()
    if device is None:
        raise HeteroDSEError(f"the schedule was measured on {record['device']}, and this machine has no GPU")
    try:
        return build_cuda(apply_gpu(op, Point(record["knobs"])), device)[1]
    except ScheduleError as exc:
        raise HeteroDSEError(str(exc)) from None
