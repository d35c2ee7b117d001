"""A PyTorch network as the tool's operators: captured with ``torch.export``, every convolution, linear layer
and matrix product mapped to a built-in operator with its parameters, batch norms after a convolution folded
into it (inference), the element-wise ops that follow a layer noted as its epilogue, and every other op listed
with its share of torch's time, never dropped silently. Layers with the same operator and parameters are one
``Layer`` with a count: each is explored once."""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hetero_dse.epilogue import fuse
from hetero_dse.errors import HeteroDSEError
from hetero_dse.operator import Operator
from hetero_dse.ops import get_builtin
from hetero_dse.ops.conv import is_pointwise

__all__ = ["Group", "Layer", "LayerPair", "ModelGraph", "Unmapped", "capture", "layer_groups", "pointwise_pairs"]

#: ops that only relabel memory (no arithmetic): neither layers nor time worth listing
VIEWS = {"flatten", "view", "reshape", "_unsafe_view", "t", "transpose", "permute", "contiguous", "expand",
         "squeeze", "unsqueeze", "detach", "alias", "clone", "_to_copy", "dropout"}
#: element-wise ops that may follow a layer and become part of it (its epilogue, ``hetero_dse.epilogue``)
EPILOGUES = {"relu", "relu_", "relu6", "relu6_", "hardtanh", "hardtanh_", "leaky_relu", "leaky_relu_", "add", "add_",
             "clamp"}


@dataclass
class Layer:
    """One distinct mapped layer: a built-in operator with its parameters, how many times the network runs it,
    where (the graph's node names), and what follows it."""

    op: str
    params: dict[str, Any]
    count: int = 0
    nodes: list[str] = field(default_factory=list)
    folded_batch_norm: bool = False
    epilogue: tuple[str, ...] = ()  # the steps fused after it: bias, add, relu, relu6, leaky_relu(a), clip(lo,hi)

    def operator(self) -> Operator:
        """The layer's built-in operator with its epilogue fused (a bias per output channel: K of a
        convolution, its groups' and multipliers' dimensions together; N of a matrix product)."""
        op = get_builtin(self.op).instantiate(dict(self.params))
        rank = len(op.output.shape)
        return fuse(op, self.epilogue, (rank - 1,) if self.op == "gemm" else tuple(range(1, rank - 2)))

    @property
    def flops(self) -> int:
        return 2 * math.prod(lp.extent for lp in _analysis(self).main.loops)


@dataclass
class Unmapped:
    """Ops of the network no built-in operator covers, by kind: how many, and their share of torch's time."""

    op: str
    count: int
    share_of_torch_time: float | None = None
    why: str = ""
    torch_seconds: float | None = None  # its self CPU time in a profiled run of the network (the median of several)


@dataclass(frozen=True)
class LayerPair:
    """Two 1×1 convolutions back to back, the first's result (its epilogue applied) read by the second alone:
    what the GPU's fused kernel can take as one (``gpu_cpu/b2b.py``). Indices into ``ModelGraph.layers``;
    ``count``: how many times the network runs the pair."""

    first: int
    second: int
    count: int


@dataclass
class ModelGraph:
    name: str
    input_shape: tuple[int, ...]
    layers: list[Layer]
    unmapped: list[Unmapped]
    torch_seconds: float | None = None  # the whole network in torch eager (median of runs), batch as given
    program: Any = field(default=None, repr=False)  # the torch.export program the layers were found in
    pairs: list[LayerPair] = field(default_factory=list)  # back-to-back pointwise convolutions
    #: the module and its input as given (``model/chain.py`` traces them into a chain of layers, in order)
    model: Any = field(default=None, repr=False)
    example: Any = field(default=None, repr=False)

    @property
    def mapped_flops(self) -> int:
        return sum(layer.flops * layer.count for layer in self.layers)

    @property
    def label(self) -> str:
        """The network's name as a shape-set name: ``resnet18``, or a model.py's stem."""
        return re.sub(r"[^A-Za-z0-9_]+", "_", Path(self.name).stem if self.name.endswith(".py") else self.name)

    def operators(self) -> list[Operator]:
        """Each distinct layer as its operator, named ``<network>:L<n>`` in reports and output directories."""
        return [replace(layer.operator(), shape_name=f"{self.label}:L{i}") for i, layer in enumerate(self.layers, 1)]

    def layer_of(self, shape_name: str | None) -> Layer | None:
        prefix = f"{self.label}:L"
        if not shape_name or not shape_name.startswith(prefix) or not shape_name[len(prefix):].isdigit():
            return None
        i = int(shape_name[len(prefix):]) - 1
        return self.layers[i] if 0 <= i < len(self.layers) else None

    @property
    def unmapped_torch_seconds(self) -> float | None:
        """What the ops left to torch take in one run (None where they were not timed)."""
        if any(u.torch_seconds is None for u in self.unmapped):
            return None
        return sum(u.torch_seconds for u in self.unmapped)


def capture(model: Any, example: Any, name: str = "model", profile: bool = True) -> ModelGraph:
    """``model`` (a ``torch.nn.Module`` in eval mode) on ``example`` as its layers (see the module doc);
    ``profile``: time the unmapped ops with torch's profiler."""
    import torch

    try:
        with torch.no_grad():
            program = torch.export.export(model, (example,))
    except Exception as exc:  # torch's own message says which construct it cannot capture
        raise HeteroDSEError(f"torch.export cannot capture {name} on an input of shape "
                             f"{'x'.join(map(str, getattr(example, 'shape', ())))}: {type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    groups, unmapped = layer_groups(program)
    layers: dict[tuple, Layer] = {}
    for g in groups:
        layer = layers.setdefault(g.key, Layer(g.op, g.params, folded_batch_norm=g.batch_norm is not None,
                                               epilogue=g.epilogue))
        layer.count += g.repeats
        layer.nodes.append(g.node.name)
    index = {key: i for i, key in enumerate(layers)}
    pairs: dict[tuple[int, int], int] = {}
    for first, second in pointwise_pairs(groups):
        key = (index[first.key], index[second.key])
        pairs[key] = pairs.get(key, 0) + first.repeats
    result = ModelGraph(name, tuple(example.shape), list(layers.values()), list(unmapped.values()),
                        program=program, pairs=[LayerPair(a, b, n) for (a, b), n in pairs.items()], model=model,
                        example=example)
    if profile:
        if result.unmapped:
            _time_shares(model, example, result.unmapped)
        result.torch_seconds = time_eager(model, example)
    return result


def time_eager(model: Any, example: Any, repeat: int = 10) -> float:
    """Median seconds of one run of the network in torch eager on this CPU (all cores), taken when the network
    is captured, before any search runs; its memory from the heap, reused (``serve_from_heap``), as torch's
    per-layer calls are timed."""
    import time

    import torch

    from hetero_dse.hardware.allocator import serve_from_heap
    from hetero_dse.hardware.host import host_cores

    serve_from_heap()
    torch.set_num_threads(host_cores())
    with torch.no_grad():
        model(example)  # warm-up: oneDNN picks its kernels on the first run
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            model(example)
            samples.append(time.perf_counter() - start)
    return float(sorted(samples)[len(samples) // 2])


@dataclass
class Group:
    """One occurrence of a layer in the exported graph: its node, the nodes its epilogue consumed (in order),
    the batch norm folded into it and the residual it adds (graph nodes), and what it maps to."""

    node: Any
    kind: str
    op: str
    params: dict[str, Any]
    repeats: int
    epilogue: tuple[str, ...]
    chain: list[Any]
    batch_norm: Any = None
    residual: Any = None

    @property
    def key(self) -> tuple:
        return (self.op, tuple(sorted(self.params.items())), self.batch_norm is not None, self.epilogue)

    @property
    def tail(self) -> Any:
        """The node whose value is the layer's result, its epilogue applied."""
        return self.chain[-1] if self.chain else self.node


def layer_groups(program: Any) -> tuple[list[Group], dict[str, Unmapped]]:
    """The exported program's layers, in graph order, and the ops no built-in covers, by kind."""
    nodes = [n for n in program.graph.nodes if n.op == "call_function"]
    users = {n: [u for u in n.users if u.op == "call_function"] for n in nodes}
    groups: list[Group] = []
    unmapped: dict[str, Unmapped] = {}
    consumed: set[Any] = set()
    for node in nodes:
        kind = _kind(node)
        if node in consumed or kind in VIEWS:
            continue
        mapped = _map(node, kind)
        if isinstance(mapped, str):  # an op no built-in covers, and why
            entry = unmapped.setdefault(kind, Unmapped(kind, 0, why=mapped))
            entry.count += 1
            continue
        op, params, repeats = mapped
        group = Group(node, kind, op, params, repeats, (), [])
        epilogue, tail = ["bias"] if _has_bias(node, kind) else [], node
        while len(users[tail]) == 1:  # what follows this layer and only it
            nxt = users[tail][0]
            nxt_kind = _kind(nxt)
            if nxt in consumed:  # a residual add already taken by the other branch's layer
                break
            if nxt_kind == "batch_norm" and op != "gemm" and group.batch_norm is None and epilogue in ([], ["bias"]):
                group.batch_norm = nxt  # (x - mean) * scale + shift: the scale into the weights, the rest a bias
                epilogue = ["bias"]
            elif nxt_kind in EPILOGUES and (step := _step(nxt, nxt_kind, tail)):
                epilogue.append(step)
                if step == "add":
                    group.residual = next(a for a in nxt.args[:2] if a is not tail)
            else:
                break
            consumed.add(nxt)
            group.chain.append(nxt)
            tail = nxt
        group.epilogue = tuple(epilogue)
        groups.append(group)
    return groups, unmapped


def pointwise_pairs(groups: Sequence[Group]) -> list[tuple[Group, Group]]:
    """The occurrences of a 1×1 convolution whose result, its epilogue applied, only the next 1×1 convolution
    reads: a result another branch also reads (a residual's skip) must reach memory anyway."""
    by_node = {g.node: g for g in groups}
    out = []
    for g in groups:
        users = [u for u in g.tail.users if u.op == "call_function"]
        if len(users) != 1 or not is_pointwise(g.op, g.params):
            continue
        h = by_node.get(users[0])
        if h is not None and is_pointwise(h.op, h.params) and h.node.args[0] is g.tail:
            out.append((g, h))
    return out


def _has_bias(node: Any, kind: str) -> bool:
    if kind == "addmm":
        return True
    return kind in ("conv2d", "linear") and len(node.args) > 2 and node.args[2] is not None


def _step(node: Any, kind: str, tail: Any) -> str | None:
    """The epilogue step ``node`` is, applied to ``tail``'s result; None where it is not one (an add of a
    scalar or of a tensor broadcast against the layer's output)."""
    args = list(node.args)
    base = kind.rstrip("_")
    if base in ("relu", "relu6"):
        return base
    if base == "leaky_relu":
        return f"leaky_relu({float(args[1]) if len(args) > 1 else 0.01:g})"
    if base in ("hardtanh", "clamp"):
        lo, hi = (float(a) if a is not None else None for a in
                  (args[1] if len(args) > 1 else -1.0, args[2] if len(args) > 2 else 1.0))
        if lo is None or hi is None:
            return None
        return "relu6" if (lo, hi) == (0.0, 6.0) else f"clip({lo:g},{hi:g})"
    if base == "add":
        other = [a for a in args[:2] if a is not tail]
        if len(other) != 1 or len(node.kwargs) or not hasattr(other[0], "meta") or \
                _shape(other[0]) != _shape(tail):
            return None
        return "add"
    return None


def _kind(node: Any) -> str:
    """``aten.conv2d.default`` -> ``conv2d``."""
    parts = str(node.target).split(".")
    return parts[1] if len(parts) >= 3 and parts[0] == "aten" else str(node.target)


def _shape(arg: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in arg.meta["val"].shape)


def _map(node: Any, kind: str) -> tuple[str, dict[str, Any], int] | str:
    """(built-in operator, its parameters, how many times one node runs it), or why there is none."""
    args = list(node.args)
    if kind == "conv2d":
        return _conv2d(args)
    if kind == "linear":
        x, w = _shape(args[0]), _shape(args[1])
        return "gemm", {"M": math.prod(x[:-1]), "N": w[0], "K": w[1]}, 1
    if kind in ("mm", "matmul", "addmm", "bmm"):
        a, b = (args[1], args[2]) if kind == "addmm" else (args[0], args[1])
        sa, sb = _shape(a), _shape(b)
        if len(sa) < 2 or len(sb) < 2:
            return "a matrix-vector product (gemv) is not mapped yet"
        batch = math.prod(sa[:-2]) if len(sa) > 2 else 1
        return "gemm", {"M": sa[-2], "N": sb[-1], "K": sa[-1]}, batch  # a batched product: one GEMM per batch
    if kind == "batch_norm":
        return "a batch norm that follows no convolution is not folded"
    return "no built-in operator"


def _conv2d(args: Sequence[Any]) -> tuple[str, dict[str, Any], int] | str:
    x, w = _shape(args[0]), _shape(args[1])
    stride, padding, dilation = (list(args[i]) if len(args) > i else [d, d] for i, d in ((3, 1), (4, 0), (5, 1)))
    groups = int(args[6]) if len(args) > 6 else 1
    if isinstance(padding, str) or any(len(set(v)) != 1 for v in (stride, padding, dilation)) or w[2] != w[3]:
        return "asymmetric kernel, stride, padding or dilation"
    batch, c, h, width = x
    k, kernel = w[0], w[2]
    common = {"batch": batch, "C": c, "H": h, "W": width, "kernel": kernel, "stride": stride[0],
              "padding": padding[0], "dilation": dilation[0]}
    if groups == 1:
        op = "dilated_conv2d" if dilation[0] > 1 else "conv2d"
        return op, {**common, "K": k, "groups": 1}, 1
    if groups == c and k % c == 0:
        return "depthwise_conv2d", {**common, "multiplier": k // c}, 1
    return "group_conv2d", {**common, "K": k, "groups": groups}, 1


def _analysis(layer: Layer) -> Any:
    from hetero_dse.analysis import analyze

    return analyze(layer.operator())


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """The profiler's C++ side prints start/stop lines on file descriptor 2: not for the user's terminal."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


#: profiled forward passes whose median gives each unmapped op's time: one pass caught under a moment's foreign
#: load gave ResNet-18's ops left to torch 19.8 ms in one run where they take 2.5 ms
SHARE_RUNS = 5


def _time_shares(model: Any, example: Any, unmapped: list[Unmapped]) -> None:
    """Each unmapped op's time in torch and its share of the network's time (its self CPU time over the total):
    the median over ``SHARE_RUNS`` profiled passes, on the threads ``time_eager`` gives torch."""
    import statistics

    import torch
    from torch.profiler import ProfilerActivity, profile

    from hetero_dse.hardware.host import torch_on_host_cores

    runs = []
    with torch_on_host_cores(), torch.no_grad():
        model(example)  # warm-up: oneDNN picks its kernels
        for _ in range(SHARE_RUNS):
            with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
                model(example)
            runs.append({e.key: e.self_cpu_time_total for e in prof.key_averages() if e.key.startswith("aten::")})
    for entry in unmapped:
        # max_pool2d runs as max_pool2d_with_indices, relu_ as relu: an op's time is that of its aten calls
        spent = [sum(t for key, t in times.items() if key.removeprefix("aten::").startswith(entry.op.rstrip("_")))
                 for times in runs]
        shares = [s / sum(times.values()) for s, times in zip(spent, runs, strict=True) if sum(times.values())]
        entry.share_of_torch_time = statistics.median(shares) if shares else None
        entry.torch_seconds = statistics.median(spent) / 1e6  # the profiler counts microseconds
