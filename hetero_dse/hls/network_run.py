"""A run of the network kernel: the layers of its descriptor table with their weights, where each reads its
input and residual, and the reference each must produce; the descriptor's fields. Made from a traced network
(``model/chain.py``) or, where only a network's distinct layers are known, from random data of their shapes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from cost_models.fpga_network_placed import NetworkDesign, PlacedLayer
from hetero_dse.epilogue import activation_clamp, parse_step
from hetero_dse.errors import HeteroDSEError

__all__ = ["ENGINE_IDS", "FIELDS", "FLOAT_FIELDS", "NAMES", "NetworkRun", "RunLayer", "arena_halves", "design_name",
           "per_image", "quantized", "random_run", "run_bytes", "test_bench_layers", "tile_banks", "weight_ports",
           "write_process"]

#: the descriptor's fields, in the table's order (``kernel.h``'s layer_t); floats stored as their bits. Offsets
#: are in words, each tensor's at its pixel (0, 0); a pitch is the pixels of a row of its tensor as laid out (the
#: image and the zero halo and guard around it: ``network_layout``)
FIELDS = ("engine", "C", "K", "H", "W", "OH", "OW", "R", "S", "stride", "pad", "tk", "tc", "th", "tw", "in_off",
          "w_off", "bias_off", "out_off", "res_off", "lo", "hi", "slope", "shift", "res_mult", "res_shift",
          "slope_mult", "qlo", "qhi", "in_pitch", "out_pitch", "res_pitch")
FLOAT_FIELDS = ("lo", "hi", "slope")
ENGINE_IDS = {"grid": 0, "depthwise": 1, "winograd": 2}
NAMES = {"grid": "grid", "depthwise": "dw", "winograd": "wino"}


def weight_ports(ports: int) -> list[str]:
    """The kernel's first ``ports`` weight ports, as the code names them: ``wgt``, then ``wgt1``, ``wgt2``…"""
    return ["wgt"] + [f"wgt{q}" for q in range(1, ports)]


def arena_halves(parts: int) -> tuple[str, ...]:
    """The suffixes of each arena stream's ports, as the code names them: ``act_in``, and where a word spreads over
    two ports (``NetworkDesign.arena_ports``) ``act_in_hi`` beside it."""
    return ("", "_hi")[:parts]


def write_process(banks: int, cols: int = 1) -> str:
    """The generated write process of an engine whose output tile is in ``banks`` banks of ``cols`` each
    (``EngineShape.out_banks``, ``out_cols``): ``write_out``, a word from one memory, or ``write_out_BxM``, a
    word's B rows one from each of B banks, each from the pixel's of its M; a word a cycle all."""
    return "write_out" if banks == cols == 1 else f"write_out_{banks}x{cols}"


def tile_banks(banks: int, cols: int = 1) -> list[list[str]]:
    """What the code appends to the names of an output tile's banks (its streams ``out_s…``, their blocks
    ``obuf…``), for each of ``banks`` its ``cols`` banks by pixel: nothing where there is one, else ``u_c``."""
    if banks == cols == 1:
        return [[""]]
    return [[f"{u}_{c}" for c in range(cols)] for u in range(banks)]


@dataclass
class RunLayer:
    """One layer of the table: its design, weights and bias (torch's layout), where its input and residual come
    from (a tensor id: ``input:<name>`` or ``layer:<index>``), its activation and torch's output."""

    placed: PlacedLayer
    weight: np.ndarray
    bias: np.ndarray
    source: str
    residual: str | None
    activation: tuple[float, float, float]
    reference: np.ndarray  # [1, K, OH, OW] (a linear layer's [1, K] or [M, N])
    flatten: tuple[int, int, int] | None = None
    quant: dict[str, Any] | None = None  # int8: the epilogue's integers (``network_quant``)
    float_reference: np.ndarray | None = None  # int8: torch's float output, for the quantisation's error


@dataclass
class NetworkRun:
    name: str
    layers: list[RunLayer]
    inputs: dict[str, np.ndarray]  # the network's inputs, NCHW (a linear layer's [M, K])
    reference_source: str
    #: a batch's tensors side by side (``per_image``): ``stack:<id>`` -> its images' tensor ids, each laid out
    #: flat right after the last, so that a linear layer reads image j's features as its pixel j
    stacks: dict[str, list[str]] = field(default_factory=dict)


def per_image(run: NetworkRun, images: int) -> NetworkRun:
    """``run`` of a batch of ``images`` (inputs and references of that batch, as ``trace_chain`` gives them on a
    batch; int8 already quantised, the scales the batch's) as one run of the kernel's table takes it
    (``fpga_network_units.batched``): each layer of an image's shape once an image, reading that image's tensors;
    each linear layer (its design's ``images``) once over the batch, reading the images' inputs side by side
    (``NetworkRun.stacks``) or the last linear layer's output over the batch."""
    if images == 1:
        return run
    odd = [name for name, x in run.inputs.items() if x.shape[0] != images]
    if odd:
        raise HeteroDSEError(f"the network's input {odd[0]} is not a batch of {images} images")
    inputs = {f"{name}@{j}": x[j:j + 1] for name, x in run.inputs.items() for j in range(images)}
    made: dict[str, list[str] | str] = {}  # a tensor of ``run`` -> its images' tensors, or the batch's one
    stacks: dict[str, list[str]] = {}
    layers: list[RunLayer] = []

    def images_of(tid: str) -> list[str] | str:
        return [f"{tid}@{j}" for j in range(images)] if tid.startswith("input:") else made[tid]

    def over_batch(tid: str | None) -> str | None:
        if tid is None:
            return None
        each = images_of(tid)
        if isinstance(each, str):
            return each
        stacks.setdefault(f"stack:{tid}", each)
        return f"stack:{tid}"

    def of_image(tid: str | None, j: int, layer: str) -> str | None:
        if tid is None:
            return None
        each = images_of(tid)
        if isinstance(each, str):
            raise HeteroDSEError(f"layer {layer} reads {tid}, a linear layer's output over the batch, as an image's: "
                                 "the network kernel runs its layers over a batch only where they are linear layers "
                                 "to the end")
        return each[j]

    for i, r in enumerate(run.layers):
        name = r.placed.shape.name or str(i)
        if r.placed.shape.images > 1:
            if r.placed.shape.images != images:
                raise HeteroDSEError(f"layer {name} is designed over {r.placed.shape.images} images, the run is of "
                                     f"{images}")
            # its output [images][K] (a 1×1 convolution on a 1×1 map gives NCHW: the same values)
            layers.append(replace(r, source=over_batch(r.source), residual=over_batch(r.residual),
                                  reference=r.reference.reshape(images, -1),
                                  float_reference=None if r.float_reference is None
                                  else r.float_reference.reshape(images, -1)))
            made[f"layer:{i}"] = f"layer:{len(layers) - 1}"
            continue
        made[f"layer:{i}"] = []
        for j in range(images):
            layers.append(replace(r, source=of_image(r.source, j, name), residual=of_image(r.residual, j, name),
                                  reference=r.reference[j:j + 1], float_reference=None if r.float_reference is None
                                  else r.float_reference[j:j + 1]))
            made[f"layer:{i}"].append(f"layer:{len(layers) - 1}")
    return replace(run, layers=layers, inputs=inputs, stacks=stacks,
                   reference_source=f"{run.reference_source}; a batch of {images} images")


def run_bytes(p: PlacedLayer) -> int:
    """What a distinct layer's random run holds at most, as ``write_network_project`` counts it: its weights, its
    input, a residual, and its reference twice (float32: an int8 run holds less)."""
    s = p.shape
    oh, ow = (s.H + 2 * s.pad - s.R) // s.stride + 1, (s.W + 2 * s.pad - s.S) // s.stride + 1
    weights = s.K * s.R * s.S * (s.C if s.engine == "grid" else 1)
    return 4 * (weights + s.C * s.H * s.W + 3 * s.K * oh * ow)


def test_bench_layers(design: NetworkDesign, limit: int) -> list[int]:
    """The distinct layers whose random runs fit ``limit`` bytes together (``run_bytes``): all where they fit; else
    each engine's smallest layer first, so that every engine the design builds runs, then the others in the
    network's order while they fit (none where an engine's smallest does not)."""
    sizes = [run_bytes(p) for p in design.layers]
    if sum(sizes) <= limit:
        return list(range(len(sizes)))
    kinds = {p.layer.engine for p in design.layers}
    chosen = {min((i for i, p in enumerate(design.layers) if p.layer.engine == k), key=sizes.__getitem__)
              for k in kinds}
    held = sum(sizes[i] for i in chosen)
    if held > limit:
        return []
    for i, size in enumerate(sizes):
        if i not in chosen and held + size <= limit:
            chosen.add(i)
            held += size
    return sorted(chosen)


def random_run(design: NetworkDesign, ops: Sequence[Any], seed: int = 0, only: Sequence[int] | None = None
               ) -> NetworkRun:
    """Each distinct layer of ``design`` (``only``: those of these indices) on random data of its shape (its input,
    weights and a residual where its epilogue adds one), torch's output of it as the reference."""
    import torch

    rng = np.random.default_rng(seed)
    layers, inputs = [], {}
    for i, (p, op) in enumerate(zip(design.layers, ops, strict=True)):
        if only is not None and i not in only:
            continue
        s = p.shape
        red = s.C * s.R * s.S if s.engine == "grid" else s.R * s.S
        if op.name == "gemm":
            x = rng.uniform(-1, 1, (s.W, s.C)).astype(np.float32)
        else:
            x = rng.uniform(-1, 1, (1, s.C, s.H, s.W)).astype(np.float32)
        shape = (s.K, s.C, s.R, s.S) if s.engine == "grid" else (s.C, 1, s.R, s.S)
        w = (rng.uniform(-1, 1, shape) / np.sqrt(red)).astype(np.float32)
        b = rng.uniform(-1, 1, s.K if s.engine == "grid" else s.C).astype(np.float32)
        steps = [parse_step(st)[0] for st in op.epilogue]
        if "bias" not in steps:  # the kernel adds a bias always: zero, where the operator has none
            b[:] = 0
        if op.name == "gemm":
            ref = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w[:, :, 0, 0]), torch.from_numpy(b))
            w = w[:, :, 0, 0]
        else:
            ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), s.stride,
                                             s.pad, groups=1 if s.engine == "grid" else s.C)
        inputs[f"x{i}"] = x
        residual = None
        if "add" in steps:
            res = rng.uniform(-1, 1, tuple(ref.shape)).astype(np.float32)
            inputs[f"r{i}"] = res
            residual = f"input:r{i}"
            ref = ref + torch.from_numpy(res)
        activation = activation_clamp(op.epilogue)
        lo, hi, slope = activation
        ref = torch.where(ref < 0, ref * slope, ref).clamp(lo, hi)
        layers.append(RunLayer(p, w, b, f"input:x{i}", residual, activation, ref.numpy()))
    source = "torch.nn.functional on random data, layer by layer"
    if only is not None and len(layers) < len(design.layers):
        source += (f", {len(layers)} of the design's {len(design.layers)} distinct layers (the others' test data past "
                   "the limit; every engine runs)")
    run = NetworkRun(design_name(design), layers, inputs, source)
    return quantized(run, design)


def quantized(run: NetworkRun, design: NetworkDesign) -> NetworkRun:
    """``run`` as the design's data type runs it (int8: ``network_quant``)."""
    from hetero_dse.hls.network_quant import quantize_run

    return quantize_run(run) if design.dtype == "int8" else run


def design_name(design: NetworkDesign) -> str:
    return (design.layers[0].shape.name.split(":")[0] if design.layers else "network") or "network"
