"""A network's back-to-back 1×1 convolutions fused into one GPU kernel (Bolt's persistent fusion,
``gpu_cpu/b2b.py``) where it beats the two layers' best schedules: by the roofline's estimates where no GPU is
present, by measurement where one is (``gpu_cpu/b2b_measure.py``); checked against the unfused pair on TVM's CPU
path (and on the GPU where it ran there), and written beside the layers."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gpu_cpu.b2b import FUSE_MARGIN, FUSED_MEASURED_OVER_ESTIMATE, GemmPair, apply_b2b, choose
from gpu_cpu.b2b_measure import FusedTrial, fastest_fused, measure_fused
from gpu_cpu.measure import Measurer, error_text
from gpu_cpu.schedule import build_cpu, build_cuda
from hetero_dse.atomic import atomic_directory
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.gpus import GpuDevice
from hetero_dse.operator import Operator
from hetero_dse.targets.tuned import Tuned

__all__ = ["FUSED_POINT_TIMEOUT_S", "back_to_back"]

#: seconds a point of the fused template may take in its worker: its build (TVM and nvcc, a few seconds; the
#: search's builds are allowed 120) and its check and timing (the search's candidates are allowed 60)
FUSED_POINT_TIMEOUT_S = 180.0


def back_to_back(graph: Any, outcomes: Sequence[Tuned], out: Path, gpu: GpuDevice, device: str,
                 typed: Callable[[Operator], Operator], on_gpu: bool, layers_measured: bool | None = None,
                 timeout_s: float = FUSED_POINT_TIMEOUT_S) -> list[dict[str, Any]]:
    """The network's back-to-back 1×1 convolutions (``graph.pairs``) on ``gpu`` (``device``: as the report names
    it; ``typed``: a layer in the type the GPU computes in): each pair's fused kernel against its two layers'
    best schedules (``outcomes``: this GPU's), fused where it is faster than their sum. ``on_gpu``: the GPU is
    here, and every point of the fused template is measured on it. Else the fused kernel's best estimate is
    booked as an H200 measured such estimates to be: times ``FUSED_MEASURED_OVER_ESTIMATE`` where the layers were
    measured (``layers_measured``: on a remote GPU; by default as ``on_gpu``), times ``FUSE_MARGIN`` (the same on
    the layers' estimates' scale) where they are estimates too. One dict per pair (``why``: the reason it is not
    fused). On the GPU each point runs in a worker process, cut off after ``timeout_s``."""
    layers_measured = on_gpu if layers_measured is None else layers_measured
    with Measurer(timeout_s) if on_gpu else contextlib.nullcontext() as measurer:
        return [_pair_entry(graph, pair_of, outcomes, out, gpu, device, typed, on_gpu, layers_measured, measurer)
                for pair_of in graph.pairs]


def _pair_entry(graph: Any, pair_of: Any, outcomes: Sequence[Tuned], out: Path, gpu: GpuDevice, device: str,
                typed: Callable[[Operator], Operator], on_gpu: bool, layers_measured: bool,
                measurer: Measurer | None) -> dict[str, Any]:
    """One pair's entry of ``back_to_back``."""
    operators = graph.operators()
    best = {o.op.shape_name: o for o in outcomes if o.found}
    first, second = (typed(operators[i]) for i in (pair_of.first, pair_of.second))
    entry: dict[str, Any] = {"device": device, "first": first.shape_name, "second": second.shape_name,
                             "count": pair_of.count, "fuse": False, "measured": on_gpu}
    found = [best.get(op.shape_name) for op in (first, second)]
    if None in found:
        entry["why"] = "a layer of the pair has no result"
        return entry
    try:
        pair = GemmPair.of(first, second)
    except HeteroDSEError as exc:
        entry["why"] = str(exc)
        return entry
    unfused_s = (found[0].best_seconds, found[1].best_seconds)
    entry.update(shape={"M": pair.m, "K": pair.k, "N0": pair.n0, "N1": pair.n1}, unfused_s=list(unfused_s))
    timed = None
    if on_gpu:
        # every point: the roofline's order of them was no better than chance on an H200 (BENCHMARKS.md), and
        # the template is small (at most 32 points, each a build and about a second of timing)
        try:
            trials = measure_fused(pair, gpu, measurer=measurer)
        except Exception as exc:  # noqa: BLE001 - the device or the reference failed: the layers stand
            entry["why"] = f"the fused kernel could not be measured on the GPU ({error_text(exc)})"
            return entry
        timed = fastest_fused(trials)
        point, fused_s = (timed.point, timed.seconds) if timed else (None, None)
        estimate_s = timed.estimate_s if timed else None
        no_point = (f"no point of the fused template ran on the GPU ({trials[0].error})" if trials else
                    "a block's rows of A and of the intermediate exceed the shared memory")
        # fused only where its slowest repeat beats the two layers: a win inside its own spread is noise
        faster = timed is not None and max(timed.repeats or (timed.seconds,)) < sum(unfused_s)
        within = timed is not None and timed.seconds < sum(unfused_s) and not faster
    else:
        choice = choose(pair, unfused_s, gpu, FUSED_MEASURED_OVER_ESTIMATE[2] if layers_measured else FUSE_MARGIN)
        point, estimate_s = choice.point, choice.fused.seconds if choice.fused else None
        fused_s, faster, within = choice.booked_s, choice.fuse, False
        no_point = "a block's rows of A and of the intermediate exceed the shared memory"
    entry.update(fused_s=fused_s, estimate_s=estimate_s, speedup=sum(unfused_s) / fused_s if fused_s else None,
                 point=dict(point) if point else None)
    if point is None:
        entry["why"] = no_point
    elif not faster:
        against = "measured times" if layers_measured else "estimates"
        entry["why"] = (("the fused kernel's median beats the two layers' by less than its repeats spread (measured)"
                         if within else "the two layers' kernels are faster (measured)") if on_gpu else
                        f"the fused kernel's estimate times {choice.scale:.2f} (how much slower than their "
                        f"estimates an H200 ran such kernels, against the layers' {against}) is not below the "
                        f"two layers'")
    else:
        entry.update(write_fused(gpu, pair, point, fused_s, estimate_s, unfused_s, first, second, out, timed))
        entry["fuse"] = entry["checked"]
        if not entry["checked"]:
            entry["why"] = f"the fused kernel differs from the unfused pair (max error {entry['max_error']:.3g})"
    return entry


def write_fused(gpu: GpuDevice, pair: GemmPair, point: Any, fused_s: float, estimate_s: float,
                unfused_s: tuple[float, float], first: Operator, second: Operator, out: Path,
                measured: FusedTrial | None) -> dict[str, Any]:
    """The fused kernel at ``point`` checked on TVM's CPU path against the pair's reference (numpy, float64) and
    written: CUDA source (compiled by nvcc for the device), TIR and ``b2b.json``. ``measured``: its trial on the
    GPU, checked there against the same reference (None: ``fused_s`` is the roofline's ``estimate_s`` scaled as
    ``back_to_back`` books it)."""
    import tvm

    inputs = pair.random_inputs(0)
    executable = build_cpu(apply_b2b(pair, point, emulate=True))
    dev = tvm.cpu(0)
    got = tvm.runtime.tensor(np.zeros(pair.output_shape, "float32"), dev)
    executable(*(tvm.runtime.tensor(a, dev) for a in inputs), got)
    want = pair.reference(inputs)
    error = float(np.max(np.abs(got.numpy() - want)))
    checked = bool(np.allclose(got.numpy(), want, rtol=1e-4, atol=1e-4))
    mod = apply_b2b(pair, point)
    _, cuda_source = build_cuda(mod, gpu)
    directory = out / f"b2b_{first.slug}_{second.slug}" / "gpu"
    record = {"first": first.shape_name, "second": second.shape_name, "device": gpu.name,
              "target": gpu.target, "pair": {"M": pair.m, "K": pair.k, "N0": pair.n0, "N1": pair.n1,
                                                    "first": list(pair.first), "second": list(pair.second),
                                                    "channels_first": pair.channels_first},
              "point": dict(point), "unfused_s": list(unfused_s), "checked_on_cpu_path": checked, "max_error": error,
              # a measured trial ran the reference check on the GPU before it was timed
              "checked_on_gpu": measured is not None,
              "estimate_s": estimate_s,
              **({"measured_s": fused_s, "repeats": list(measured.repeats), "foreign_load": measured.foreign_load}
                 if measured is not None else {"booked_s": fused_s})}
    with atomic_directory(directory) as partial:
        (partial / "lowered_tir.py").write_text(mod.script())
        (partial / "kernel.cu").write_text(cuda_source)
        (partial / "b2b.json").write_text(json.dumps(record, indent=2) + "\n")
    return {"checked": checked, "max_error": error, "directory": str(directory.relative_to(out))}
