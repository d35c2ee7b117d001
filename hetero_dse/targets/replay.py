"""Replaying a saved CPU or GPU schedule: rebuilt from its ``schedule.json``, checked and timed as during the
search (a GPU schedule without a GPU: rebuilt, and its CUDA compared with the ``kernel.cu`` written)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpu_cpu.main_block import stages_epilogue
from gpu_cpu.measure import MeasureJob, rebuild_operator
from gpu_cpu.pipeline import Pipeline
from gpu_cpu.schedule import CPU_CODEGEN, weight_layouts
from gpu_cpu.winograd import TILE_KNOB, product_operator, product_point, winograd_shape
from hetero_dse.analysis import analyze
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.gpus import get_device, present_gpu
from hetero_dse.targets.gpu_write import rebuild_gpu
from hetero_dse.targets.tuned import read_schedule, recorded_point, recorded_seconds

__all__ = ["replay"]


def _check_knobs(directory: Path, record: dict[str, Any], op: Any) -> None:
    """Refuse a schedule.json whose operator or knobs are not what the tool wrote: another signature, or a
    knob value outside the operator's space (a replay must run what the file says, or nothing)."""
    from hetero_dse.space.base import SpaceError
    from hetero_dse.space.cpu import CpuSpace
    from hetero_dse.space.gpu import GpuSpace
    from hetero_dse.space.tensorcore import TensorCoreSpace

    if record.get("signature") not in (None, op.signature()):
        raise HeteroDSEError(f"{directory / 'schedule.json'} was written for {record['signature']}, but its "
                             f"operator and parameters build {op.signature()}")
    analysis = analyze(op)
    try:
        if record["target"]["kind"] == "cuda":
            device = present_gpu() or get_device(record.get("device", "h100"))
            point = recorded_point(record)
            if TILE_KNOB in point:  # Winograd: its knobs beyond the tile are its product's
                analysis = analyze(product_operator(winograd_shape(op, int(point[TILE_KNOB]))))
                point = product_point(point)
            space = TensorCoreSpace(analysis, device) if "mma" in point else GpuSpace(analysis, device, domain=False)
            space.encode(point)
            # a schedule estimated for a larger device is refused here, before TVM builds and launches it
            if problem := space.beyond_limits(point):
                raise HeteroDSEError(f"{directory / 'schedule.json'} cannot run here: {problem}")
        elif TILE_KNOB in record["knobs"]:  # Winograd: its knobs beyond the tile are its product's
            point = recorded_point(record)
            product = product_operator(winograd_shape(op, int(point[TILE_KNOB])))
            CpuSpace(analyze(product)).encode(product_point(point))
        else:
            CpuSpace(analysis).encode(recorded_point(record))
    except (SpaceError, TypeError, ValueError, HeteroDSEError) as exc:
        raise HeteroDSEError(f"{directory / 'schedule.json'} holds a schedule outside the operator's space: "
                             f"{exc}") from None


def _other_codegen(record: dict[str, Any], op: Any) -> str | None:
    """Why a CPU schedule's recorded time was another kernel's than the one rebuilt now (None: the same)."""
    if record["target"]["kind"] != "llvm" or record.get("cpu_codegen") == CPU_CODEGEN:
        return None
    point, since = recorded_point(record), int(record.get("cpu_codegen", 1))
    changed = []  # what each revision after the record's changed in this point's kernel (else the same code)
    if since < 2 and weight_layouts(op, point):
        changed.append("take their weights packed ahead")
    if since < 3 and stages_epilogue(op, point):
        changed.append("compute the epilogue of a tile vectorised along the channels on whole vectors")
    if not changed:
        return None
    return (f"another code generation: revision {since}, this is {CPU_CODEGEN}, whose kernels "
            + " and ".join(changed))


def replay(directory: Path) -> dict[str, Any]:
    """Rebuild the module of ``directory/schedule.json`` and check and time it: the same schedule, again."""
    record = read_schedule(directory)
    kind = record["target"]["kind"]
    op = rebuild_operator(record["source"], record["operator"], record["params"],
                          record.get("epilogue", ()), record.get("epilogue_axes", ()))
    _check_knobs(directory, record, op)
    recorded = {"recorded_seconds": recorded_seconds(record), "recorded_is_estimate": bool(record.get("estimate")),
                "point": recorded_point(record), "other_codegen": _other_codegen(record, op)}
    if kind == "cuda" and present_gpu() is None:
        written = directory / "kernel.cu"
        same = written.is_file() and rebuild_gpu(record) == written.read_text()
        return {"seconds": None, "gflops": None, **recorded, "cuda_source_identical": same}
    with Pipeline(overlap=False) as pipeline:  # built, then checked and timed, as during the search
        (result,) = pipeline.evaluate([MeasureJob(record["source"], record["operator"], record["params"],
                                                  record["knobs"], target=kind,
                                                  epilogue=tuple(record.get("epilogue", ())),
                                                  epilogue_axes=tuple(record.get("epilogue_axes", ())))])
    if not result.ok:
        raise HeteroDSEError(f"replaying {directory / 'schedule.json'} failed: {result.error}")
    return {"seconds": result.seconds, "gflops": analyze(op).flops / result.seconds / 1e9, **recorded}
