"""CPU exploration of one operator: measured search, the best schedule rebuilt and checked, the torch
baseline in the same run, and the artefacts a user keeps (module, TIR, LLVM IR, replayable schedule)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpu_cpu.measure import check_fits_in_memory, time_torch_isolated
from gpu_cpu.schedule import apply_cpu, build_cpu, host_target, run_cpu
from hetero_dse.space.cpu_gpu import CpuSpace
from gpu_cpu.tune import TVM_STARTS, tune_cpu
from gpu_cpu.tuned import Tuned, tvm_workload
from hetero_dse.atomic import atomic_directory
from hetero_dse import __version__
from hetero_dse.analysis import analyze
from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore.search import AUTO_MEASURED, ExplorerSettings
from hetero_dse.history import HistoryDB, WorkloadHistory
from hetero_dse.history.match import Prior
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point


@dataclass
class CpuExploration(Tuned):
    def record(self, directory: str | None) -> dict[str, Any]:
        return {**super().record(directory), "target": host_target(), "estimate": False}


def explore_cpu(op: Operator, *, source: str = "builtin", trials: int = 32, time_budget_s: float | None = None,
                seed: int = 0, timeout_s: float = 60.0, explorer: ExplorerSettings | str = "auto",
                progress: Callable[[int, float | None], None] | None = None,
                history: HistoryDB | None = None) -> CpuExploration:
    """Search ``op``'s CPU space with measured trials; with a ``history``, points measured before on this CPU
    (same operator, same TVM and hetero_dse) are answered from it, every new measurement is stored, and
    the records of the same operator at other shapes seed the guided GA and transfer learning."""
    check_fits_in_memory(op, "on the CPU")
    space = CpuSpace(analyze(op))
    settings = ExplorerSettings.of(explorer)
    workload = tvm_workload(op, host_target(), space.analysis)
    prior = None if history is None else Prior.load(history, workload)
    strategy = settings.make(space, seed, default_starts=TVM_STARTS, auto=AUTO_MEASURED, prior=prior)
    memo = None if history is None else WorkloadHistory(history, workload, strategy.name)
    result = tune_cpu(op, space, strategy, source=source, trials=trials, time_budget_s=time_budget_s,
                      patience=settings.patience, timeout_s=timeout_s, progress=progress, history=memo)
    settings.keep(strategy)
    torch_seconds = None if result.interrupted else time_torch_isolated(op, source)
    return CpuExploration(op, source, result, torch_seconds)


def write_cpu_artifacts(directory: Path, e: CpuExploration) -> Path:
    """The best schedule's module, TIR, LLVM IR and ``schedule.json``; assembled aside, renamed when whole."""
    best = e.tune.best
    if best is None:
        messages = "; ".join(e.record(None)["failure_messages"])
        raise HeteroDSEError(f"no schedule of {e.op.name} ran: every trial failed ({messages})")
    mod = apply_cpu(e.op, best.point)
    executable = build_cpu(mod)
    inputs = e.op.random_inputs(0)
    want = e.op.reference(inputs)
    if want is not None:
        got = run_cpu(executable, e.op, inputs)
        if not np.allclose(got, want, rtol=1e-3, atol=1e-3):
            raise HeteroDSEError(f"the best schedule of {e.op.name} computes a wrong result; not written")
    with atomic_directory(directory) as partial:
        executable.export_library(str(partial / "module.so"))
        (partial / "lowered_tir.py").write_text(mod.script())
        (partial / "llvm.ll").write_text(executable.mod.inspect_source("ll"))
        schedule = {"generator": f"hetero_dse {__version__}", "operator": e.op.name, "source": e.source,
                    "params": dict(e.op.params), "shape": e.op.shape_name, "signature": e.op.signature(),
                    "target": host_target(), "knobs": best.point.to_json(), "measured_seconds": best.result.seconds}
        (partial / "schedule.json").write_text(json.dumps(schedule, indent=2) + "\n")
    return directory


def replay(directory: Path) -> dict[str, Any]:
    """Rebuild the module of ``directory/schedule.json`` and check and time it: the same schedule, again."""
    path = directory / "schedule.json"
    if not path.is_file():
        raise HeteroDSEError(f"{directory} has no schedule.json; give a directory written by "
                             "'explore --target cpu' or 'explore --target gpu'")
    try:
        record = json.loads(path.read_text())
        source, name, params, knobs = record["source"], record["operator"], record["params"], record["knobs"]
        kind = record["target"]["kind"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise HeteroDSEError(f"{path} is not a schedule written by hetero_dse ({exc})") from None
    from hetero_dse.hardware.gpus import present_gpu
    from gpu_cpu.measure import MeasureJob, rebuild_operator
    from gpu_cpu.pipeline import Pipeline

    if kind == "cuda" and present_gpu() is None:
        from gpu_cpu.gpu_flow import rebuild_gpu

        written = directory / "kernel.cu"
        same = written.is_file() and rebuild_gpu(record) == written.read_text()
        return {"seconds": None, "gflops": None, "recorded_seconds": _recorded(record), "point": Point(knobs),
                "recorded_is_estimate": bool(record.get("estimate")), "cuda_source_identical": same}
    with Pipeline(overlap=False) as pipeline:  # built, then checked and timed, as during the search
        (result,) = pipeline.evaluate([MeasureJob(source, name, params, knobs, target=kind)])
    if not result.ok:
        raise HeteroDSEError(f"replaying {path} failed: {result.error}")
    op = rebuild_operator(source, name, params)
    return {"seconds": result.seconds, "gflops": analyze(op).flops / result.seconds / 1e9,
            "recorded_seconds": _recorded(record), "recorded_is_estimate": bool(record.get("estimate")),
            "point": Point(knobs)}


def _recorded(record: dict) -> float | None:
    """The time a schedule.json recorded: ``measured_seconds`` for every target (GPU schedules written
    before it was one key said ``seconds``)."""
    value = record.get("measured_seconds", record.get("seconds"))
    return float(value) if isinstance(value, int | float) else None

