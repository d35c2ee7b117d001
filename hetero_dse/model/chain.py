"""A PyTorch network as the sequence of layers the shared FPGA kernel runs, with their weights and torch's
output of each: traced with ``torch.fx``, batch norms folded into the convolution before them, the bias,
residual add and activation after a layer made its epilogue, a global average pool made the depthwise layer
it is (a window of the whole image, each weight ``1 / (H·W)``), a max pool a layer of its own (engine
``maxpool``: no weights, no epilogue; the layer pipeline runs it, the shared kernel does not), ``flatten``
before a linear layer kept as the order its features are read in. Where the network does anything else, one
sentence says what and where.

Unlike ``capture`` (distinct layers and how often each runs, for exploring), this keeps every layer in
execution order with where its input and residual come from, so that the whole network can run through the
kernel in C-simulation and be checked layer by layer against torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from hetero_dse.epilogue import activation_clamp
from hetero_dse.errors import HeteroDSEError
from hetero_dse.model.layer_shape import LayerShape

__all__ = ["ChainLayer", "NETWORK_INPUT", "trace_chain"]

#: where a layer reads the network's input instead of another layer's output
NETWORK_INPUT = -1
INF = float("inf")


@dataclass
class ChainLayer:
    """One layer of the network in execution order."""

    shape: LayerShape
    weight: np.ndarray  # [K, C, R, S]; a depthwise layer's [C, 1, R, S]; a linear layer's [K, C·H·W] as torch
    bias: np.ndarray  # [K]
    source: int  # the layer whose output it reads, or NETWORK_INPUT
    residual: int | None = None  # the layer whose output its epilogue adds (or NETWORK_INPUT)
    activation: tuple[float, float, float] = (-INF, INF, 1.0)  # clamp low, high; slope below zero
    flatten: tuple[int, int, int] | None = None  # a linear layer's input: (C, H, W) of a layer's output, flattened
    reference: np.ndarray | None = None  # torch's output of the layer, its epilogue applied
    node: str = ""

    @property
    def has_activation(self) -> bool:
        return self.activation != (-INF, INF, 1.0)


def trace_chain(model: Any, example: Any) -> tuple[list[ChainLayer], np.ndarray]:
    """The layers of ``model`` (eval mode) on ``example`` in execution order, and the input as an array. The
    layers' shapes are an image's; their references are of every image of ``example``'s batch (a batch of
    several: ``network_run.per_image`` runs them through the shared kernel, a run of the batch)."""
    import torch
    from torch import fx

    try:
        graph = fx.symbolic_trace(model)
    except Exception as exc:  # noqa: BLE001 - fx raises many kinds on a forward it cannot trace
        raise HeteroDSEError(f"torch.fx cannot trace the network for the FPGA kernel: {exc}") from exc
    modules = dict(graph.named_modules())
    values: dict[str, Any] = {}
    owner: dict[str, int] = {}  # node -> the layer whose output (so far) it is
    flat: dict[str, tuple[int, int, int]] = {}
    layers: list[ChainLayer] = []

    def arg(node: Any, i: int = 0) -> Any:
        return node.args[i]

    def owned(node: Any, what: str, at: Any) -> int:
        if node.name not in owner:
            raise HeteroDSEError(f"{at.name} ({what}) reads {node.name}, which is computed by an op the network "
                                 "kernel does not run")
        return owner[node.name]

    def epilogue_of(node: Any, what: str) -> ChainLayer:
        """The layer ``node``'s input is the output of, when the step may join its epilogue."""
        src = arg(node)
        i = owned(src, what, node)
        if i == NETWORK_INPUT or len(src.users) != 1:
            raise HeteroDSEError(f"{node.name} ({what}) follows no layer whose result it alone reads, so it cannot "
                                 "be part of a layer's epilogue")
        if layers[i].shape.engine == "maxpool":
            raise HeteroDSEError(f"{node.name} ({what}) follows a max pool, whose result goes on as it is (a pool "
                                 "has no epilogue): apply it before the pool (max commutes with ReLU and clamps)")
        return layers[i]

    with torch.no_grad():
        for node in graph.graph.nodes:
            if node.op == "placeholder":
                values[node.name] = example
                owner[node.name] = NETWORK_INPUT
                continue
            if node.op == "output":
                break
            args = fx.node.map_arg(node.args, lambda n: values[n.name])
            kwargs = fx.node.map_arg(node.kwargs, lambda n: values[n.name])
            if node.op == "call_module":
                mod = modules[node.target]
                value = mod(*args, **kwargs)
                kind = type(mod).__name__
            elif node.op == "call_function":
                value = node.target(*args, **kwargs)
                kind = getattr(node.target, "__name__", str(node.target))
            elif node.op == "call_method":
                value = getattr(args[0], node.target)(*args[1:], **kwargs)
                kind = node.target
            else:
                value = getattr(graph, node.target) if node.op == "get_attr" else None
                kind = node.op
            values[node.name] = value
            kind = kind.lower().rstrip("_").replace("conv2d", "conv")
            if kind in ("conv", "linear"):
                if node.op != "call_module":
                    raise HeteroDSEError(f"{node.name}: a functional {kind} (its weights are not a module's)")
                mod = modules[node.target]
                src = owned(arg(node), f"a {kind} layer", node)
                if kind == "conv":
                    layers.append(_conv(mod, src, tuple(args[0].shape), node.name))
                else:
                    features = flat.get(arg(node).name)
                    pixels = features[1] * features[2] if features else 1
                    layers.append(ChainLayer(
                        LayerShape("grid", mod.in_features, mod.out_features, 1, 1, pixels_in=pixels, name=node.name),
                        mod.weight.detach().numpy().astype(np.float32), _bias(mod, mod.out_features), src,
                        flatten=features, node=node.name))
                owner[node.name] = len(layers) - 1
            elif kind in ("adaptive_avg_pool2d", "adaptiveavgpool2d"):
                size = modules[node.target].output_size if node.op == "call_module" else (
                    node.args[1] if len(node.args) > 1 else node.kwargs.get("output_size"))
                if size not in (1, (1, 1), [1, 1]):
                    raise HeteroDSEError(f"{node.name}: an average pool to {size}; the FPGA kernels run a global one "
                                         "(to 1 × 1) as a depthwise layer")
                src = owned(arg(node), "a global average pool", node)
                layers.append(_global_pool(src, tuple(args[0].shape), node.name))
                owner[node.name] = len(layers) - 1
            elif kind in ("maxpool2d", "max_pool2d"):
                src = owned(arg(node), "a max pool", node)
                layers.append(_max_pool(node, modules, src, tuple(args[0].shape)))
                owner[node.name] = len(layers) - 1
            elif kind == "batchnorm2d":
                _fold(epilogue_of(node, "a batch norm"), modules[node.target], node.name)
                owner[node.name] = owner[arg(node).name]
            elif kind in ("relu", "relu6", "hardtanh", "leakyrelu", "leaky_relu"):
                layer = epilogue_of(node, kind)
                if layer.has_activation:
                    raise HeteroDSEError(f"{node.name}: a second activation after one layer")
                layer.activation = _activation(node, kind, modules)
                layer.shape = replace(layer.shape, leaky=layer.activation[2] not in (0.0, 1.0))
                owner[node.name] = owner[arg(node).name]
            elif kind in ("add", "iadd"):
                a, b = node.args[:2]
                if not all(hasattr(n, "name") and n.name in owner for n in (a, b)):
                    raise HeteroDSEError(f"{node.name}: an add of something other than two layers' outputs")
                later = max((a, b), key=lambda n: owner[n.name])
                if a is b or owner[a.name] == owner[b.name]:
                    raise HeteroDSEError(f"{node.name}: an add of a layer's result to itself (the network kernel adds "
                                         "another layer's output as a residual)")
                i = owner[later.name]
                layer = layers[i] if i != NETWORK_INPUT else None
                if layer is not None and layer.shape.engine == "maxpool":
                    raise HeteroDSEError(f"{node.name}: a residual add into a max pool's result (a pool has no "
                                         "epilogue to add it in)")
                if layer is None or layer.residual is not None or layer.has_activation or len(later.users) != 1:
                    raise HeteroDSEError(f"{node.name}: a residual add the network kernel cannot fuse (it adds into "
                                         "the later layer's result, before its activation)")
                layer.residual = owner[(b if later is a else a).name]
                layer.shape = replace(layer.shape, residual=True)  # its epilogue's extra read, in the models
                owner[node.name] = i
            elif kind in ("flatten", "view", "reshape", "dropout", "identity"):
                owner[node.name] = owned(arg(node), kind, node)
                before, after = tuple(values[arg(node).name].shape), tuple(value.shape)
                if arg(node).name in flat and after == before:
                    flat[node.name] = flat[arg(node).name]
                elif len(before) == 4 and after == (before[0], before[1] * before[2] * before[3]):
                    flat[node.name] = (before[1], before[2], before[3])  # a flatten: the linear layer's features
                elif after != before:
                    raise HeteroDSEError(f"{node.name} ({kind}) turns {list(before)} into {list(after)}: the network "
                                         "kernel keeps every tensor in one layout, and only a flatten before a linear "
                                         "layer reads it as another shape")
                continue
            else:
                raise HeteroDSEError(f"{node.name} ({kind}) is not something the network kernel runs: it runs "
                                     "convolutions, depthwise convolutions, linear layers, batch norms after them, "
                                     "ReLU/ReLU6/LeakyReLU, residual adds, max pools (in the layer pipeline), a global "
                                     "average pool and flatten")
            layers[owner[node.name]].reference = np.asarray(value.detach().numpy(), dtype=np.float32)
    if not layers:
        raise HeteroDSEError("the network has no convolution or linear layer for the FPGA kernel to run")
    for layer in layers:
        if layer.source == NETWORK_INPUT and layer.shape.engine == "grid":
            layer.shape = replace(layer.shape, from_host=True)  # the host may lay its input out as im2col
    return layers, np.asarray(example.detach().numpy(), dtype=np.float32)


def _bias(mod: Any, k: int) -> np.ndarray:
    return (mod.bias.detach().numpy().astype(np.float32) if mod.bias is not None
            else np.zeros(k, dtype=np.float32))


def _conv(mod: Any, src: int, in_shape: tuple[int, ...], name: str) -> ChainLayer:
    kernel, stride, pad, dil = mod.kernel_size, mod.stride, mod.padding, mod.dilation
    if (len(set(kernel)) != 1 or len(set(stride)) != 1 or isinstance(pad, str) or len(set(pad)) != 1
            or dil != (1, 1)):
        raise HeteroDSEError(f"{name}: the network kernel runs square, undilated convolutions")
    c, k = mod.in_channels, mod.out_channels
    if mod.groups == 1:
        engine = "grid"
    elif mod.groups == c == k:
        engine = "depthwise"
    else:
        raise HeteroDSEError(f"{name}: a grouped convolution ({mod.groups} groups) fits neither engine of the network "
                             "kernel (a grid over all channels, or one channel a lane)")
    shape = LayerShape(engine, c, k, in_shape[2], in_shape[3], kernel[0], kernel[1], stride[0], pad[0], name=name)
    return ChainLayer(shape, mod.weight.detach().numpy().astype(np.float32), _bias(mod, k), src, node=name)


def _global_pool(src: int, in_shape: tuple[int, ...], name: str) -> ChainLayer:
    """A global average pool as the depthwise layer it is: one window of the whole image, every tap's weight
    ``1 / (H·W)``, no bias (in int8 each channel's weights quantise to 127 exactly, their scale the mean's)."""
    c, h, w = in_shape[1:]
    weight = np.full((c, 1, h, w), 1.0 / (h * w), dtype=np.float32)
    return ChainLayer(LayerShape("depthwise", c, c, h, w, h, w, 1, 0, name=name), weight,
                      np.zeros(c, dtype=np.float32), src, node=name)


def _max_pool(node: Any, modules: dict[str, Any], src: int, in_shape: tuple[int, ...]) -> ChainLayer:
    """A max pool as the layer pipeline's pool stage runs it: a square window of a stride, padded with the
    lowest value (torch's ``-inf``), no weights; one sentence where it is another pool."""
    names = ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices")
    if node.op == "call_module":
        given = {k: getattr(modules[node.target], k) for k in names}
    else:  # F.max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False)
        given = {"stride": None, "padding": 0, "dilation": 1, "ceil_mode": False, "return_indices": False,
                 **dict(zip(names, node.args[1:], strict=False)), **dict(node.kwargs)}
    pair = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v, v)  # noqa: E731
    kernel = pair(given["kernel_size"])
    stride = pair(given["stride"] or given["kernel_size"])
    pad, dil = pair(given["padding"]), pair(given["dilation"])
    if (len(set(kernel)) != 1 or len(set(stride)) != 1 or len(set(pad)) != 1 or dil != (1, 1)
            or given["ceil_mode"] or given["return_indices"] or in_shape[0] != 1):
        raise HeteroDSEError(f"{node.name}: the layer pipeline runs batch 1, square, undilated max pools that round "
                             "their output down (no ceil_mode) and return no indices")
    c, h, w = in_shape[1:]
    shape = LayerShape("maxpool", c, c, h, w, kernel[0], kernel[1], stride[0], pad[0], name=node.name)
    return ChainLayer(shape, np.zeros((c, 0), dtype=np.float32), np.zeros(c, dtype=np.float32), src, node=node.name)


def _fold(layer: ChainLayer, bn: Any, name: str) -> None:
    """A batch norm after the layer, folded into its weights and bias (inference)."""
    if layer.residual is not None or layer.has_activation or layer.flatten is not None:
        raise HeteroDSEError(f"{name}: a batch norm after a layer's residual add or activation cannot be folded")
    scale = (bn.weight.detach().numpy() / np.sqrt(bn.running_var.detach().numpy() + bn.eps)).astype(np.float32)
    layer.weight = (layer.weight * scale.reshape(-1, *([1] * (layer.weight.ndim - 1)))).astype(np.float32)
    layer.bias = ((layer.bias - bn.running_mean.detach().numpy()) * scale + bn.bias.detach().numpy()
                  ).astype(np.float32)


def _activation(node: Any, kind: str, modules: dict[str, Any]) -> tuple[float, float, float]:
    """The activation ``node`` applies, as the epilogue step it is, in the kernel's slope-and-clamp form."""
    mod = modules.get(node.target) if node.op == "call_module" else None
    if kind in ("relu", "relu6"):
        return activation_clamp([kind])
    if kind == "hardtanh":
        if mod is not None:
            lo, hi = mod.min_val, mod.max_val
        else:
            given = dict(zip(("min_val", "max_val"), node.args[1:3], strict=False)) | dict(node.kwargs)
            lo, hi = given.get("min_val", -1.0), given.get("max_val", 1.0)
        return activation_clamp([f"clip({float(lo)!r},{float(hi)!r})"])
    slope = mod.negative_slope if mod is not None else (node.args[1] if len(node.args) > 1 else
                                                         node.kwargs.get("negative_slope", 0.01))
    return activation_clamp([f"leaky_relu({float(slope)!r})"])
