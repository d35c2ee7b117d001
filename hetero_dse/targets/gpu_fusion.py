"""A network's back-to-back 1×1 convolutions fused into one GPU kernel (Bolt's persistent fusion,
``gpu_cpu/b2b.py``) where its estimate beats the two layers' best schedules: chosen, checked against the unfused
pair on TVM's CPU path, and written beside the layers."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gpu_cpu.b2b import GemmPair, FusedChoice, apply_b2b, choose
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
    best schedules (``outcomes``: this GPU's), chosen where its estimate beats their sum. Estimates only: where
    the layers were measured ``on_gpu`` here the fused kernel is not yet, so they stay two kernels. One dict
    per pair (``why``: the reason it is not fused)."""
    operators = graph.operators()
    best = {o.op.shape_name: o for o in outcomes if o.found}
    entries = []
    for pair_of in graph.pairs:
        first, second = (typed(operators[i]) for i in (pair_of.first, pair_of.second))
        entry: dict[str, Any] = {"device": device, "first": first.shape_name, "second": second.shape_name,
                                 "count": pair_of.count, "fuse": False}
        entries.append(entry)
        found = [best.get(op.shape_name) for op in (first, second)]
        if on_gpu:
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
        choice = choose(pair, (found[0].best_seconds, found[1].best_seconds), gpu)
        entry.update(shape={"M": pair.m, "K": pair.k, "N0": pair.n0, "N1": pair.n1},
                     unfused_s=list(choice.unfused_s), fused_s=choice.fused.seconds if choice.fused else None,
                     speedup=choice.speedup, point=dict(choice.point) if choice.point else None)
        if choice.point is None:
            entry["why"] = "a block's rows of A and of the intermediate exceed the shared memory"
        elif not choice.fuse:
            entry["why"] = "the two layers' kernels are faster"
        else:
            entry.update(write_fused(gpu, pair, choice, first, second, out))
            entry["fuse"] = entry["checked"]
            if not entry["checked"]:
                entry["why"] = f"the fused kernel differs from the unfused pair (max error {entry['max_error']:.3g})"
    return entries


def write_fused(gpu: GpuDevice, pair: GemmPair, choice: FusedChoice, first: Operator, second: Operator,
                out: Path) -> dict[str, Any]:
    """The fused kernel checked on TVM's CPU path against the pair's reference (numpy, float64) and written:
    CUDA source (compiled by nvcc for the device), TIR and ``b2b.json``."""
    import tvm

    inputs = pair.random_inputs(0)
    executable = build_cpu(apply_b2b(pair, choice.point, emulate=True))
    dev = tvm.cpu(0)
    got = tvm.runtime.tensor(np.zeros(pair.output_shape, "float32"), dev)
    executable(*(tvm.runtime.tensor(a, dev) for a in inputs), got)
    want = pair.reference(inputs)
    error = float(np.max(np.abs(got.numpy() - want)))
    checked = bool(np.allclose(got.numpy(), want, rtol=1e-4, atol=1e-4))
    mod = apply_b2b(pair, choice.point)
    _, cuda_source = build_cuda(mod, gpu)
    directory = out / f"b2b_{first.slug}_{second.slug}" / "gpu"
    record = {"first": first.shape_name, "second": second.shape_name, "device": gpu.name,
              "target": gpu.target, "pair": {"M": pair.m, "K": pair.k, "N0": pair.n0, "N1": pair.n1,
                                                    "first": list(pair.first), "second": list(pair.second),
                                                    "channels_first": pair.channels_first},
              "point": dict(choice.point), "estimate_s": choice.fused.seconds, "unfused_s": list(choice.unfused_s),
              "checked_on_cpu_path": checked, "max_error": error, "checked_on_gpu": False}
    with atomic_directory(directory) as partial:
        (partial / "lowered_tir.py").write_text(mod.script())
        (partial / "kernel.cu").write_text(cuda_source)
        (partial / "b2b.json").write_text(json.dumps(record, indent=2) + "\n")
    return {"checked": checked, "max_error": error, "directory": str(directory.relative_to(out))}
