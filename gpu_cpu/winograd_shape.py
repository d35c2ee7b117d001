"""How Winograd's F(m×m, 3×3) tiles a convolution (``WinogradShape``, ``winograd_shape``), the batched product it
leaves to search (``product_operator``) and the weights that product reads (``transform_weights``): what the
CPU's and the GPU's Winograd functions (``gpu_cpu/winograd.py``, ``gpu_cpu/winograd_gpu.py``) share.

A grouped convolution (``group_conv2d``, or ``conv2d`` with ``groups``) and a depthwise one
(``depthwise_conv2d``: a group a channel) are one Winograd convolution a group: the transforms are a
channel's whatever the groups, and the product is a matrix product a point and group
(``winograd_group_product``; for a depthwise layer, a product a channel and no sum).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from hetero_dse.errors import HeteroDSEError
from hetero_dse.operator import Operator
from hetero_dse.ops.winograd import TILES_3X3, refused, transforms, winograd_group_product, winograd_product

__all__ = ["WINOGRAD_OPERATORS", "WinogradShape", "product_operator", "transform_weights", "winograd_shape"]

#: the operators a Winograd function computes, each a 3×3 stride-1 float32 convolution of one image
WINOGRAD_OPERATORS = ("conv2d", "group_conv2d", "depthwise_conv2d")


@dataclass(frozen=True)
class WinogradShape:
    """A convolution's sizes as F(m×m, 3×3) tiles it: C → K channels in ``groups`` groups, an H×W input padded
    by ``padding``; ``grouped_output``: the output laid out (1, groups, K / groups, H, W), as a grouped
    convolution's and a depthwise convolution's of several filters a channel are."""

    C: int
    K: int
    H: int
    W: int
    padding: int
    m: int
    r: int = 3
    groups: int = 1
    grouped_output: bool = False

    @property
    def alpha(self) -> int:
        return self.m + self.r - 1

    @property
    def out_h(self) -> int:
        return self.H + 2 * self.padding - self.r + 1

    @property
    def out_w(self) -> int:
        return self.W + 2 * self.padding - self.r + 1

    @property
    def tiles_h(self) -> int:
        return -(-self.out_h // self.m)

    @property
    def tiles_w(self) -> int:
        return -(-self.out_w // self.m)

    @property
    def tiles(self) -> int:
        return self.tiles_h * self.tiles_w

    @property
    def points(self) -> int:
        """α²: the products a tile and channel takes."""
        return self.alpha * self.alpha

    @property
    def group_in(self) -> int:
        """Input channels a group."""
        return self.C // self.groups

    @property
    def group_out(self) -> int:
        """Output channels a group."""
        return self.K // self.groups

    @property
    def output_shape(self) -> tuple[int, ...]:
        if self.grouped_output:
            return (1, self.groups, self.group_out, self.out_h, self.out_w)
        return (1, self.K, self.out_h, self.out_w)


def winograd_shape(op: Operator, m: int) -> WinogradShape:
    """``op`` (a captured or built-in convolution: ``WINOGRAD_OPERATORS``) as F(m×m, 3×3) tiles it; one sentence
    where it cannot be."""
    p = op.params
    if op.name not in WINOGRAD_OPERATORS:
        raise HeteroDSEError(f"Winograd takes a convolution ({', '.join(WINOGRAD_OPERATORS)}), not {op.name}")
    wrong = [f"{name} {p.get(name)}" for name, want in (("kernel", 3), ("stride", 1), ("dilation", 1), ("batch", 1))
             if int(p.get(name, want)) != want]
    if str(p.get("dtype", "float32")) != "float32":
        wrong.append(f"dtype {p['dtype']}")
    if wrong:
        raise HeteroDSEError(f"Winograd F({m}×{m}, 3×3) takes a float32 3×3 stride-1 convolution of one image; "
                             f"{op.title} has {', '.join(wrong)}")
    if m not in TILES_3X3:
        raise HeteroDSEError(f"Winograd's output tile is one of {', '.join(map(str, TILES_3X3))}, not {m}")
    if why := _refused(m):
        raise HeteroDSEError(why)
    C = int(p["C"])
    if op.name == "depthwise_conv2d":
        multiplier = int(p["multiplier"])
        return WinogradShape(C, C * multiplier, int(p["H"]), int(p["W"]), int(p["padding"]), m, groups=C,
                             grouped_output=multiplier > 1)
    groups = int(p.get("groups", 1))
    return WinogradShape(C, int(p["K"]), int(p["H"]), int(p["W"]), int(p["padding"]), m, groups=groups,
                         grouped_output=groups > 1)  # a grouped conv2d's output: (1, G, K / G, H, W) too


@functools.cache
def _refused(m: int) -> str | None:
    return refused(m, 3, "float32")


def product_operator(shape: WinogradShape) -> Operator:
    """The batched product over the α² points (and the groups), as the CPU and GPU spaces search it."""
    if shape.groups == 1:
        return winograd_product.instantiate(dict(E=shape.points, P=shape.tiles, C=shape.C, K=shape.K))
    return winograd_group_product.instantiate(dict(E=shape.points, P=shape.tiles, G=shape.groups, C=shape.group_in,
                                                   K=shape.group_out))


def transform_weights(w: np.ndarray, m: int, groups: int = 1) -> np.ndarray:
    """``U = (G g Gᵀ)`` at each point of the weights ``w`` (K×C/groups×3×3), in float64 then rounded to float32:
    laid out [point, C, K] (one group), or [point, group, C / group, K / group]."""
    g = transforms(m, w.shape[-1]).arrays()[1]
    u = np.einsum("ai,kcij,bj->abck", g, np.asarray(w, dtype=np.float64), g)
    u = u.reshape(g.shape[0] ** 2, w.shape[1], w.shape[0])
    if groups > 1:  # output channel k = group · K/G + k': [point, c, group, k'] → [point, group, c, k']
        u = u.reshape(u.shape[0], w.shape[1], groups, w.shape[0] // groups).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(u, dtype=np.float32)
