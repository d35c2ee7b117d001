"""A network's back-to-back 1×1 convolutions fused into one GPU kernel (Bolt's persistent fusion,
``gpu_cpu/b2b.py``) where it beats the two layers' best schedules: by the roofline's estimates where no GPU is
present, by measurement where one is (``gpu_cpu/b2b_measure.py``); checked against the unfused pair on TVM's CPU
path (and on the GPU where it ran there), and written beside the layers."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gpu_cpu.b2b import FUSE_MARGIN, FUSED_MEASURED_OVER_ESTIMATE, LAYERS_MEASURED_OVER_ESTIMATE, GemmPair, apply_b2b, \
    choose
from gpu_cpu.b2b_measure import FusedTrial, fastest_fused, measure_fused
from gpu_cpu.schedule import build_cpu, build_cuda
from hetero_dse.atomic import atomic_directory
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.gpus import GpuDevice
from hetero_dse.operator import Operator
from hetero_dse.targets.tuned import Tuned

__all__ = ["back_to_back"]


def back_to_back(graph: Any, outcomes: Sequence[Tuned], out: Path, gpu: GpuDevice, device: str,
                 typed: Callable[[Operator], Operator], on_gpu: bool) -> list[dict[str, Any]]:
    """The network's back-to-back 1×1 convolutions (``graph.pairs``) on ``gpu`` (``device``: as the report names
    it; ``typed``: a layer in the type the GPU computes in): each pair's fused kernel against its two layers'
    best schedules (``outcomes``: this GPU's), chosen where it beats their sum: estimates, or where the layers
    were measured ``on_gpu`` here, the fused template's best-estimated points measured too. One dict per pair
    (``why``: the reason it is not fused)."""
    operators = graph.operators()
    best = {o.op.shape_name: o for o in outcomes if o.found}
    entries = []
    for pair_of in graph.pairs:
        first, second = (typed(operators[i]) for i in (pair_of.first, pair_of.second))
        entry: dict[str, Any] = {"device": device, "first": first.shape_name, "second": second.shape_name,
                                 "count": pair_of.count, "fuse": False, "measured": on_gpu}
        entries.append(entry)
        found = [best.get(op.shape_name) for op in (first, second)]
        if None in found:
            entry["why"] = "a layer of the pair has no result"
            continue
        try:
            pair = GemmPair.of(first, second)
        except HeteroDSEError as exc:
            entry["why"] = str(exc)
            continue
        unfused_s = (found[0].best_seconds, found[1].best_seconds)
        entry.update(shape={"M": pair.m, "K": pair.k, "N0": pair.n0, "N1": pair.n1}, unfused_s=list(unfused_s))
        if on_gpu:
            # every point: the roofline's order of them was no better than chance on an H200 (BENCHMARKS.md), and
            # the template is small (at most 32 points, each a build and about a second of timing)
            trials = measure_fused(pair, gpu)
            timed = fastest_fused(trials)
            point, fused_s = (timed.point, timed.seconds) if timed else (None, None)
            no_point = "no point of the fused template ran on the GPU" + (f" ({trials[0].error})" if trials else "")
        else:
            timed = None
            choice = choose(pair, unfused_s, gpu)
            point, fused_s = choice.point, choice.fused.seconds if choice.fused else None
            no_point = "a block's rows of A and of the intermediate exceed the shared memory"
        entry.update(fused_s=fused_s, speedup=sum(unfused_s) / fused_s if fused_s else None,
                     point=dict(point) if point else None)
        if point is None:
            entry["why"] = no_point
        elif on_gpu and fused_s >= sum(unfused_s):
            entry["why"] = "the two layers' kernels are faster (measured)"
        elif not on_gpu and not choice.fuse:
            fused_over, layers_over = FUSED_MEASURED_OVER_ESTIMATE[2], LAYERS_MEASURED_OVER_ESTIMATE[2]
            entry["why"] = (f"the fused kernel's estimate is {choice.speedup:.3f}x the two layers', short of the "
                            f"{FUSE_MARGIN:.3f}x it needs: on an H200 it measured {fused_over:.2f}x its estimate, "
                            f"the layers {layers_over:.2f}x theirs")
        else:
            entry.update(write_fused(gpu, pair, point, fused_s, unfused_s, first, second, out, timed))
            entry["fuse"] = entry["checked"]
            if not entry["checked"]:
                entry["why"] = f"the fused kernel differs from the unfused pair (max error {entry['max_error']:.3g})"
    return entries


def write_fused(gpu: GpuDevice, pair: GemmPair, point: Any, fused_s: float, unfused_s: tuple[float, float],
                first: Operator, second: Operator, out: Path, measured: FusedTrial | None) -> dict[str, Any]:
    """The fused kernel at ``point`` checked on TVM's CPU path against the pair's reference (numpy, float64) and
    written: CUDA source (compiled by nvcc for the device), TIR and ``b2b.json``. ``measured``: its trial on the
    GPU, checked there against the same reference (None: ``fused_s`` is the roofline's)."""
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
              **({"measured_s": fused_s, "estimate_s": measured.estimate_s, "repeats": list(measured.repeats)}
                 if measured is not None else {"estimate_s": fused_s})}
    with atomic_directory(directory) as partial:
        (partial / "lowered_tir.py").write_text(mod.script())
        (partial / "kernel.cu").write_text(cuda_source)
        (partial / "b2b.json").write_text(json.dumps(record, indent=2) + "\n")
    return {"checked": checked, "max_error": error, "directory": str(directory.relative_to(out))}
