"""A layer of a network as the shared FPGA kernel sees it (``cost_models/fpga_network_design.py``): its engine,
channels, image, kernel and stride, before the network's channel block pads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hetero_dse.epilogue import parse_step
from hetero_dse.errors import HeteroDSEError

__all__ = ["LayerShape", "shape_of"]


@dataclass(frozen=True)
class LayerShape:
    """A layer before the network's channel block pads it: its engine (``grid``, ``depthwise``, or ``maxpool``: a
    traced max pool, which only the layer pipeline runs), channels, image, kernel and stride.
    ``from_host``: its input is the network's (the host may lay it out as im2col)."""

    engine: str
    C: int
    K: int
    H: int
    W: int
    R: int = 1
    S: int = 1
    stride: int = 1
    pad: int = 0
    from_host: bool = False
    name: str = ""
    pixels_in: int = 1  # a linear layer after a flatten: its C features are this many pixels of C / pixels_in
    residual: bool = False  # its epilogue adds a residual (read beside each output word)
    leaky: bool = False  # its activation multiplies below zero (a leaky ReLU), where ReLU and clamps compare
    images: int = 1  # a linear layer run over a batch (``fpga_network_units.batched``): its W pixels, an image's each

    @property
    def macs(self) -> int:
        """Multiply-adds (a max pool's compares are none)."""
        if self.engine == "maxpool":
            return 0
        oh = (self.H + 2 * self.pad - self.R) // self.stride + 1
        ow = (self.W + 2 * self.pad - self.S) // self.stride + 1
        return self.K * oh * ow * self.R * self.S * (1 if self.engine == "depthwise" else self.C)


def shape_of(op: Any, from_host: bool = False) -> LayerShape:
    """The network-kernel shape of a built-in operator (conv2d, depthwise_conv2d, gemm), or one sentence on
    why the shared kernel does not run it."""
    p, name = dict(op.params), op.shape_name or op.name
    steps = [parse_step(s)[0] for s in op.epilogue]
    order = {"bias": 0, "add": 1, "relu": 2, "relu6": 2, "leaky_relu": 2, "clip": 2}
    if [order[s] for s in steps] != sorted(order[s] for s in steps) or len(set(steps)) != len(steps):
        raise HeteroDSEError(f"{name}: its epilogue {', '.join(op.epilogue)} is not bias, residual add, activation "
                             "in that order, which is what the network kernel's write process applies")
    if op.name in ("conv2d", "depthwise_conv2d"):
        if p.get("batch", 1) != 1 or p.get("dilation", 1) != 1 or p.get("multiplier", 1) != 1:
            raise HeteroDSEError(f"{name}: the network kernel runs undilated convolutions (one output channel per "
                                 "depthwise channel) of an image at a time: give the example at batch 1 (--batch N "
                                 "sets the images a run of its compute units takes)")
        if op.name == "conv2d" and p.get("groups", 1) != 1:
            raise HeteroDSEError(f"{name}: the network kernel runs dense and depthwise convolutions, not one of "
                                 f"{p['groups']} groups")
        engine = "grid" if op.name == "conv2d" else "depthwise"
        return LayerShape(engine, p["C"], p.get("K", p["C"]), p["H"], p["W"], p["kernel"], p["kernel"],
                          p["stride"], p["padding"], from_host, name, residual="add" in steps,
                          leaky="leaky_relu" in steps)
    if op.name == "gemm":  # rows of A as the pixels of a 1-row image
        return LayerShape("grid", p["K"], p["N"], 1, p["M"], name=name, residual="add" in steps,
                          leaky="leaky_relu" in steps)
    raise HeteroDSEError(f"{name}: the network kernel runs convolutions, depthwise convolutions and linear layers, "
                         f"not {op.name}")
