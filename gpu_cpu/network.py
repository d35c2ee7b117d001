"""A network run with its system-level plan on this CPU: the exported graph with each planned layer (a
convolution or linear layer, its batch norm folded, its epilogue fused) replaced by the kernel the plan chose
— our TVM module rebuilt from its schedule.json, or torch's call — and every other op left as torch runs it.

This is the plan executed, not summed: one forward pass, layer after layer, checked against torch eager on the
same input and timed against it in interleaved rounds (``bench/whole_model.py``, ``explore --model``). Our
kernels run their parallel loops on torch's OpenMP team (``gpu_cpu/one_pool.py``): with a pool each, the two
sides' spinning threads took turns on the cores and the executed plan was slower than eager.
"""

from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.allocator import serve_from_heap
from hetero_dse.hardware.host import torch_on_host_cores, use_host_cores

__all__ = ["PlannedNetwork", "layer_times", "time_against_eager", "time_variants"]

#: the exported ops the executed plan replaces; a planned layer of another kind runs as torch runs it
_RUNS = ("conv2d", "linear")


class PlannedNetwork:
    """``graph`` (``capture``'s, its torch.export program kept) run with ``plan`` (one device of plan.json),
    the modules under ``out`` (the explore run's output directory), our kernels' parallel loops on ``pool``'s
    threads ("torch": torch's OpenMP team; "tvm": TVM's own pool, kept for comparison). ``self.pool`` says
    which they got. ``kernels``, where given, holds the modules compiled so far (by directory, layer and pool:
    a module runs its loops on the pool it first ran on), shared by the networks built with it."""

    def __init__(self, graph: Any, plan: dict[str, Any], out: Path, pool: str = "torch",
                 kernels: dict | None = None) -> None:
        from gpu_cpu.one_pool import thread_pool

        # TVM's pool is sized when its first parallel loop runs: at half the logical CPUs unless told, which
        # on a machine without SMT ran every layer of ours on one core of two (2x slower than in the workers)
        use_host_cores()
        # a module binds its parallel loops to the pool registered when it first runs (each _Layer runs its
        # kernel once when made), so the choice holds for this network whatever is registered later
        self.kernels = {} if kernels is None else kernels
        with torch_on_host_cores(), thread_pool(pool) as self.pool:
            self._replace(graph, plan, out)

    def _replace(self, graph: Any, plan: dict[str, Any], out: Path) -> None:
        from hetero_dse.model.capture import layer_groups

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
            # "torch eager": the plan found no variant faster than eager (``apply_network_run``), so the layer
            # stays torch's own
            if entry is None or entry["call"] == "torch eager" or g.kind not in _RUNS:
                self.replaced["torch"] += g.repeats
                continue
            layer = graph.layers[int(labels[g.key].rsplit("L", 1)[1]) - 1]
            op = layer.operator()
            weight, bias = _folded(g, by_placeholder)
            if entry["call"] == "hetero_dse" and not entry.get("module"):
                raise HeteroDSEError(f"the plan calls our kernel for {entry['layer']}, but no module was written "
                                     "for it (see report.md)")
            if entry["call"] == "hetero_dse":
                # a module binds its parallel loops to the pool it first ran on: shared only within one pool
                key = (entry["module"], op.signature(), self.pool.kind)
                if key not in self.kernels:
                    self.kernels[key] = _ours(op, out / entry["module"])
                kernel = self.kernels[key]
            else:
                kernel = _library(op)
            wrapper = _Layer(op, g.kind, kernel, weight, bias, entry["call"] == "hetero_dse")
            wrapper.label = labels[g.key]
            wrapper.source = entry["module"] if entry["call"] == "hetero_dse" else "library"  # what it calls
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
    point = Point(record["knobs"])
    executable = build_cpu(apply_cpu(op, point))
    return executable, tvm, point


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
        if ours:  # packed once here, in the layout our kernel reads (gpu_cpu.schedule.weight_layouts)
            from gpu_cpu.schedule import pack_weights, weight_layouts

            if not set(weight_layouts(op, kernel[2])) <= {1}:
                raise HeteroDSEError(f"{op.title}: the plan's kernel takes a weight other than input 1 packed")
            self.weight = pack_weights(op, kernel[2], [None, self.weight, *[None] * (len(op.inputs) - 2)])[1]
        steps = list(op.epilogue)
        self.bias = bias.reshape(shapes[2]).contiguous() if "bias" in steps else None
        self.residual_shape = shapes[-1] if "add" in steps else None
        self.params = dict(op.params)
        if ours:  # bind the module to the pool registered now (see PlannedNetwork), on zeros of its shapes
            zeros = [torch.zeros(shape, dtype=self.weight.dtype) for shape in (shapes[0], self.residual_shape) if shape]
            self.forward(*zeros)

    def forward(self, x: Any, residual: Any = None) -> Any:
        rows = x.reshape(-1, x.shape[-1]) if self.kind == "linear" else x
        extras = ([self.bias] if self.bias is not None else []) + (
            [residual.reshape(self.residual_shape)] if residual is not None else [])
        if self.ours:
            executable, tvm, _ = self.kernel
            out = torch.empty(self.out_shape, dtype=x.dtype)
            args = [rows.contiguous(), self.weight, *[e.contiguous() for e in extras], out]
            executable(*[tvm.runtime.from_dlpack(a) for a in args])
        else:
            out = self.kernel(self.params, rows, self.weight, *extras)
        if self.kind == "linear":
            return out.reshape(*x.shape[:-1], -1)
        return out.reshape(x.shape[0], -1, *self.out_shape[-2:])


def layer_times(planned: PlannedNetwork, example: Any, runs: int = 10) -> dict[str, float]:
    """Seconds each planned layer (by label, its repeats together) takes inside the network, the median over
    ``runs`` forward passes: its inputs as the layer before left them, its weights as the layers before left the
    caches. Alone, timed again and again, a layer's weights stay in cache; inside ResNet-18 our deeper layers
    took 1.5-3x their time alone (BENCHMARKS.md, issue 39)."""
    spent: dict[str, float] = {}
    starts: dict[int, float] = {}

    def before(layer: Any, _args: Any) -> None:
        starts[id(layer)] = time.perf_counter()

    def after(layer: Any, _args: Any, _out: Any) -> None:
        spent[layer.label] = spent.get(layer.label, 0.0) + time.perf_counter() - starts[id(layer)]

    layers = [m for m in planned.module.modules() if isinstance(m, _Layer)]
    handles = [h for m in layers for h in (m.register_forward_pre_hook(before), m.register_forward_hook(after))]
    samples: dict[str, list[float]] = {}
    try:
        with torch_on_host_cores(), torch.no_grad():
            planned(example)
            for _ in range(runs):
                spent.clear()
                planned(example)
                for label, seconds in spent.items():
                    samples.setdefault(label, []).append(seconds)
    finally:
        for handle in handles:
            handle.remove()
    return {label: float(np.median(values)) for label, values in samples.items()}


def time_against_eager(model: Any, planned: PlannedNetwork, example: Any, rounds: int = 5,
                       repeat: int = 10) -> dict[str, Any]:
    """Both on ``example``: the planned network's output against torch eager's, then each timed in
    alternating rounds (median of ``repeat`` runs a round); the medians over rounds and their ratio."""
    timed = time_variants(model, {"plan": planned}, example, rounds, repeat)
    plan = timed["variants"]["plan"]
    return {"eager_s": timed["eager_s"], "plan_s": plan["seconds"], "speedup": plan["speedup"],
            "max_error": plan["max_error"], "scale": timed["scale"], "eager_rounds_s": timed["eager_rounds_s"],
            "plan_rounds_s": plan["rounds_s"], "pool": planned.pool.kind, "pool_why": planned.pool.why}


def time_variants(model: Any, variants: dict[str, PlannedNetwork], example: Any, rounds: int = 5,
                  repeat: int = 10) -> dict[str, Any]:
    """Torch eager and each planned network of ``variants`` (by name) on ``example``: each one's output checked
    against eager's, then all timed in alternating rounds, each round in another order, under the machine's
    measurement lock (median of ``repeat`` runs a round); per variant the median over rounds and its speedup
    over eager's, and the foreign load during the rounds. A variant whose output differs is an error where it is
    the first (the plan), and dropped with its reason otherwise."""
    from gpu_cpu.conditions import timing

    serve_from_heap()  # eager's memory as its per-layer calls are timed: from the heap, reused
    with torch_on_host_cores(), torch.no_grad():
        want = _first_tensor(model(example))
        if not torch.equal(want, _first_tensor(model(example))):
            raise HeteroDSEError("the model computes another result each time it runs on the same input (is "
                                 "something random in its forward?): the plan run as one network cannot be "
                                 "checked against it")
        scale = float(want.abs().max())
        errors, dropped = {}, {}
        for name, planned in variants.items():
            got = _first_tensor(planned(example))
            error = float((want - got).abs().max()) if got.shape == want.shape else math.inf
            if not error <= 1e-3 * max(scale, 1.0):
                why = (f"the planned network ({name}) computes another result than torch (max error {error:.3g} "
                       f"at scale {scale:.3g})")
                if not errors and not dropped:  # the plan itself
                    raise HeteroDSEError(why)
                dropped[name] = why
                continue
            errors[name] = error
        runs = {"eager": model, **{name: v for name, v in variants.items() if name in errors}}
        samples: dict[str, list[float]] = {name: [] for name in runs}
        with timing() as conditions:
            for k in range(rounds):
                order = list(runs)[k % len(runs):] + list(runs)[:k % len(runs)]  # none always first
                for name in order:
                    run = runs[name]
                    run(example)
                    times = []
                    for _ in range(repeat):
                        start = time.perf_counter()
                        run(example)
                        times.append(time.perf_counter() - start)
                    samples[name].append(float(np.median(times)))
    eager = float(np.median(samples["eager"]))
    return {"eager_s": eager, "eager_rounds_s": samples["eager"], "scale": scale,
            "foreign_load": conditions.foreign_load, "dropped": dropped,
            "variants": {name: {"seconds": float(np.median(samples[name])),
                                "speedup": eager / float(np.median(samples[name])), "max_error": errors[name],
                                "rounds_s": samples[name]} for name in errors}}


def _first_tensor(out: Any) -> Any:
    """A network's result, or the first tensor of a tuple, list or dict of them."""
    while isinstance(out, (tuple, list, dict)):
        if not out:
            raise HeteroDSEError("the model returns an empty result: there is nothing to check the plan against")
        out = next(iter(out.values())) if isinstance(out, dict) else out[0]
    if not isinstance(out, torch.Tensor):
        raise HeteroDSEError(f"the model returns {type(out).__name__}, not a tensor: the plan run as one network "
                             "cannot be checked against it")
    return out
