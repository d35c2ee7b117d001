"""GPU exploration of one operator: measured on the CUDA device when this machine has one, estimated by the
roofline model of a named device otherwise (and then labelled an estimate everywhere it appears). The best
schedule's CUDA source, TIR and module are written either way: code generation needs nvcc, not a GPU."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpu_cpu.baselines import time_torch_cuda
from hetero_dse.hardware.gpus import GpuDevice, cuda_toolkit, get_device, present_gpu
from gpu_cpu.measure import MeasureResult, check_fits_in_memory
from gpu_cpu.pipeline import Pipeline
from cost_models.gpu_roofline import estimate
from gpu_cpu.schedule import ScheduleError, apply_gpu, build_cuda
from hetero_dse.space.cpu_gpu import GpuSpace
from gpu_cpu.tune import TVM_STARTS, candidate_job, tune
from gpu_cpu.tuned import Tuned, tvm_workload
from hetero_dse.atomic import atomic_directory
from hetero_dse import __version__
from hetero_dse.analysis import analyze
from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore.search import AUTO_MEASURED, AUTO_MODELLED, MODEL_STARTS, ExplorerSettings
from hetero_dse.history import HistoryDB, WorkloadHistory
from hetero_dse.history.match import Prior
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point

#: points the roofline model scores when there is no GPU to measure on (a model is cheap; trials are not)
ESTIMATE_BUDGET = 4096


@dataclass
class GpuExploration(Tuned):
    device: GpuDevice
    measured: bool = False

    def record(self, directory: str | None) -> dict[str, Any]:
        out = {**super().record(directory), "device": self.device.name, "target": self.device.target,
               "estimate": not self.measured}
        best = self.tune.best
        if best is not None and not self.measured:
            figures = estimate(GpuSpace(analyze(self.op), self.device), best.point)
            out["best"]["bound"] = figures.bound
            out["best"]["figures"] = figures.figures
        return out


def explore_gpu(op: Operator, *, device: str = "h100", source: str = "builtin", trials: int = 32,
                time_budget_s: float | None = None, seed: int = 0, timeout_s: float = 60.0,
                explorer: ExplorerSettings | str = "auto",
                progress: Callable[[int, float | None], None] | None = None,
                history: HistoryDB | None = None) -> GpuExploration:
    """Search ``op``'s GPU space: on the GPU present (``trials`` measurements), else on ``device``'s roofline."""
    cuda_toolkit()
    present = present_gpu()
    gpu = present or get_device(device)
    space = GpuSpace(analyze(op), gpu)
    settings = ExplorerSettings.of(explorer)
    # only measurements enter the history: estimates neither read it nor write it
    workload = tvm_workload(op, gpu.target, space.analysis) if present is not None and history is not None else None
    prior = None if workload is None else Prior.load(history, workload)
    # scored by the roofline, a candidate costs microseconds: wide rounds, as on the FPGA model
    strategy = settings.make(space, seed, default_starts=TVM_STARTS if present else MODEL_STARTS,
                             auto=AUTO_MEASURED if present else AUTO_MODELLED, prior=prior)
    if present is not None:
        check_fits_in_memory(op, f"on the {present.name}")
        with Pipeline(timeout_s=timeout_s) as pipeline:
            memo = None if workload is None else WorkloadHistory(history, workload, strategy.name)
            result = tune(space, strategy, lambda points, best: pipeline.evaluate(
                [candidate_job(op, source, p, best, target="cuda") for p in points]),
                          trials=trials, time_budget_s=time_budget_s, patience=settings.patience,
                          progress=progress, history=memo)
        settings.keep(strategy)
        library = None if result.interrupted else time_torch_cuda(op)
        return GpuExploration(op, source, result, library, device=gpu, measured=True)

    def modelled(point: Point) -> MeasureResult:
        problem = space.beyond_limits(point)  # enforced before building, as on a real device
        return MeasureResult(None, problem) if problem else MeasureResult(estimate(space, point).seconds)

    result = tune(space, strategy, lambda points, _best: map(modelled, points), trials=max(trials, ESTIMATE_BUDGET),
                  time_budget_s=time_budget_s, patience=settings.patience, progress=progress)
    settings.keep(strategy)
    return GpuExploration(op, source, result, None, device=gpu, measured=False)


def write_gpu_artifacts(directory: Path, e: GpuExploration) -> Path:
    """CUDA source, TIR, module and ``schedule.json`` of the best point; checked against the reference when
    it ran on a GPU. Assembled aside, renamed when whole."""
    best = e.tune.best
    if best is None:
        messages = "; ".join(e.record(None)["failure_messages"])
        raise HeteroDSEError(f"no GPU schedule of {e.op.name} was found: every trial failed ({messages})")
    mod = apply_gpu(e.op, best.point)
    executable, cuda_source = build_cuda(mod, e.device)
    checked = False
    if e.measured:
        checked = _check_on_gpu(executable, e.op)
    with atomic_directory(directory) as partial:
        executable.export_library(str(partial / "module.so"))
        (partial / "lowered_tir.py").write_text(mod.script())
        (partial / "kernel.cu").write_text(cuda_source)
        schedule = {"generator": f"hetero_dse {__version__}", "operator": e.op.name, "source": e.source,
                    "params": dict(e.op.params), "shape": e.op.shape_name, "signature": e.op.signature(),
                    "target": e.device.target, "device": e.device.name, "knobs": best.point.to_json(),
                    "measured_seconds": best.result.seconds, "estimate": not e.measured, "checked_on_gpu": checked}
        (partial / "schedule.json").write_text(json.dumps(schedule, indent=2) + "\n")
    return directory


def _check_on_gpu(executable: Any, op: Operator) -> bool:
    import tvm

    dev = tvm.cuda(0)
    inputs = op.random_inputs(0)
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

    op = rebuild_operator(record["source"], record["operator"], record["params"])
    device = get_device(record["device"]) if record["device"] in ("h100", "v100") else present_gpu()
    if device is None:
        raise HeteroDSEError(f"the schedule was measured on {record['device']}, and this machine has no GPU")
    try:
        return build_cuda(apply_gpu(op, Point(record["knobs"])), device)[1]
    except ScheduleError as exc:
        raise HeteroDSEError(str(exc)) from None
