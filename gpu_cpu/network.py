"""A network run with its system-level plan on this CPU: the exported graph with each planned layer (a
convolution or linear layer, its batch norm folded, its epilogue fused) replaced by the kernel the plan chose
— our TVM module rebuilt from its schedule.json, or torch's call — and every other op left as torch runs it.

This is the plan executed, not summed: one forward pass, layer after layer, checked against torch eager on the
same input and timed against it in interleaved rounds (``bench/whole_model.py``).
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hetero_dse.errors import HeteroDSEError

__all__ = ["PlannedNetwork", "time_against_eager"]

#: the exported ops the executed plan replaces; a planned layer of another kind runs as torch runs it
_RUNS = ("conv2d", "linear")


class PlannedNetwork:
    """``graph`` (``capture``'s, its torch.export program kept) run with ``plan`` (one device of plan.json),
    the modules under ``out`` (the explore run's output directory)."""

    def __init__(self, graph: Any, plan: dict[str, Any], out: Path) -> None:
        from hetero_dse.hardware.host import use_host_cores
        from hetero_dse.model.capture import layer_groups

        # TVM's pool is sized when its first parallel loop runs: at half the logical CPUs unless told, which
        # on a machine without SMT ran every layer of ours on one core of two (2x slower than in the workers)
        use_host_cores()
        program = graph.program
        self.module = copy.deepcopy(program.graph_module)
        # the copy's nodes by the original's (in graph order: a copy may rename one, e.g. 'input' → 'input_1')
        nodes = dict(zip(program.graph.nodes, self.module.graph.nodes, strict=True))
        state = {**program.state_dict, **getattr(program, "constants", {})}
        self.inputs: list[Any] = []  # the placeholders' values in order; None for the user's input
        by_placeholder = {}
        for spec in program.graph_signature.input_specs:
            value = None if spec.target is None else state[spec.target]
            by_placeholder[spec.arg.name] = value
            self.inputs.append(value)
        calls = {entry["layer"]: entry for entry in plan["layers"]}
        labels = {_key(layer): f"{graph.label}:L{i}" for i, layer in enumerate(graph.layers, 1)}
        groups, _ = layer_groups(program)
        self.replaced = {"hetero_dse": 0, "library": 0, "torch": 0}
        for k, g in enumerate(groups):
            entry = calls.get(labels[g.key])
            if entry is None or g.kind not in _RUNS:
                self.replaced["torch"] += g.repeats
                continue
            layer = graph.layers[int(labels[g.key].rsplit("L", 1)[1]) - 1]
            op = layer.operator()
            weight, bias = _folded(g, by_placeholder)
            kernel = (_ours(op, out / entry["module"]) if entry["call"] == "hetero_dse" else _library(op))
            wrapper = _Layer(op, g.kind, kernel, weight, bias, entry["call"] == "hetero_dse")
            name = f"hdse_{k}"
            self.module.add_submodule(name, wrapper)
            tail = nodes[g.tail]
            args = (nodes[g.node.args[0]],) + ((nodes[g.residual],) if g.residual is not None else ())
            with self.module.graph.inserting_after(tail):
                new = self.module.graph.call_module(name, args)
            tail.replace_all_uses_with(new)
            nodes[g.tail] = new  # a later layer that reads this one's result reads the new node
            self.replaced[entry["call"]] += g.repeats
        self.module.graph.eliminate_dead_code()
        self.module.recompile()

    def __call__(self, x: Any) -> Any:
        out = self.module(*[x if v is None else v for v in self.inputs])
        return out[0] if isinstance(out, (tuple, list)) else out


def _key(layer: Any) -> tuple:
    return (layer.op, tuple(sorted(layer.params.items())), layer.folded_batch_norm, layer.epilogue)


def _folded(g: Any, values: dict[str, Any]) -> tuple[Any, Any]:
    """The layer's weight and bias with its batch norm folded in (inference): w·s, (b − mean)·s + β with
    s = γ / √(var + ε)."""
    def value(node: Any) -> Any:
        return None if node is None else values[node.name]

    weight = value(g.node.args[1])
    bias = value(g.node.args[2]) if len(g.node.args) > 2 else None
    if g.batch_norm is not None:
        gamma, beta, mean, var = (value(a) for a in g.batch_norm.args[1:5])
        eps = float(g.batch_norm.args[7])
        scale = gamma / torch.sqrt(var + eps)
        weight = weight * scale.reshape(-1, *[1] * (weight.dim() - 1))
        bias = ((bias if bias is not None else torch.zeros_like(mean)) - mean) * scale + beta
    return weight.contiguous(), None if bias is None else bias.contiguous()


def _ours(op: Any, directory: Path) -> Any:
    import tvm

    from gpu_cpu.schedule import apply_cpu, build_cpu
    from hetero_dse.space.point import Point

    path = directory / "schedule.json"
    if not path.is_file():
        raise HeteroDSEError(f"the plan calls the module in {directory}, which has no schedule.json")
    record = json.loads(path.read_text())
    if record.get("signature") != op.signature():
        raise HeteroDSEError(f"{path} was written for another layer ({record.get('signature')})")
    executable = build_cpu(apply_cpu(op, Point(record["knobs"])))
    return executable, tvm


def _library(op: Any) -> Any:
    from gpu_cpu.baselines import torch_call

    call = torch_call(op)
    if call is None:
        raise HeteroDSEError(f"torch has no call for {op.name}")
    return call


class _Layer(torch.nn.Module):
    """One planned layer as a module of the graph: our TVM function on the tensors' memory (DLPack, no copy),
    or torch's call, with the folded weight and bias."""

    def __init__(self, op: Any, kind: str, kernel: Any, weight: Any, bias: Any, ours: bool) -> None:
        super().__init__()
        self.kind, self.kernel, self.ours = kind, kernel, ours
        shapes = [tuple(int(d) for d in t.shape) for t in op.inputs]
        self.out_shape = tuple(int(d) for d in op.output.shape)
        # our gemm multiplies A (M×K) by B (K×N): a linear layer's weight is N×K, transposed once here
        self.weight = (weight.t().contiguous() if kind == "linear" else weight).reshape(shapes[1])
        steps = list(op.epilogue)
        self.bias = bias.reshape(shapes[2]).contiguous() if "bias" in steps else None
        self.residual_shape = shapes[-1] if "add" in steps else None
        self.params = dict(op.params)

    def forward(self, x: Any, residual: Any = None) -> Any:
        rows = x.reshape(-1, x.shape[-1]) if self.kind == "linear" else x
        extras = ([self.bias] if self.bias is not None else []) + (
            [residual.reshape(self.residual_shape)] if residual is not None else [])
        if self.ours:
            executable, tvm = self.kernel
            out = torch.empty(self.out_shape, dtype=x.dtype)
            args = [rows.contiguous(), self.weight, *[e.contiguous() for e in extras], out]
            executable(*[tvm.runtime.from_dlpack(a) for a in args])
        else:
            out = self.kernel(self.params, rows, self.weight, *extras)
        if self.kind == "linear":
            return out.reshape(*x.shape[:-1], -1)
        return out.reshape(x.shape[0], -1, *self.out_shape[-2:])


def time_against_eager(model: Any, planned: PlannedNetwork, example: Any, rounds: int = 5,
                       repeat: int = 10) -> dict[str, Any]:
    """Both on ``example``: the planned network's output against torch eager's, then each timed in
    alternating rounds (median of ``repeat`` runs a round); the medians over rounds and their ratio."""
    from hetero_dse.hardware.host import host_cores

    torch.set_num_threads(host_cores())
    with torch.no_grad():
        want, got = model(example), planned(example)
        scale = float(want.abs().max())
        error = float((want - got).abs().max())
        if not error <= 1e-3 * max(scale, 1.0):
            raise HeteroDSEError(f"the planned network computes another result than torch (max error {error:.3g} "
                                 f"at scale {scale:.3g})")
        eager, plan = [], []
        for _ in range(rounds):
            for run, samples in ((model, eager), (planned, plan)):
                run(example)
                times = []
                for _ in range(repeat):
                    start = time.perf_counter()
                    run(example)
                    times.append(time.perf_counter() - start)
                samples.append(float(np.median(times)))
    return {"eager_s": float(np.median(eager)), "plan_s": float(np.median(plan)),
            "speedup": float(np.median(eager) / np.median(plan)), "max_error": error, "scale": scale,
            "eager_rounds_s": eager, "plan_rounds_s": plan}
