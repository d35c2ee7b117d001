"""Which of a network's layers the network kernel's Winograd engine may run, and the layouts of layers over the grid
and the Winograd engine the explorer (``fpga_network_design``) designs a kernel for."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from cost_models.fpga_winograd import TILES, refusal
from hetero_dse.model.layer_shape import LayerShape

__all__ = ["ALGORITHMS", "LANES", "winograd_layouts", "winograd_tiles"]

#: lanes each side of an engine may take (powers of two: channels pad to few of them)
LANES = (4, 8, 16, 32, 64)
#: how the network kernel convolves its 3×3 stride-1 layers: the lower latency of both (``auto``), always the
#: grid (``direct``), or always the Winograd engine where it runs them (``winograd``)
ALGORITHMS = ("auto", "direct", "winograd")


def winograd_tiles(shape: LayerShape, dtype: str, min_lanes: int = LANES[0]) -> tuple[int, ...]:
    """The Winograd engine's tiles that run ``shape`` (none: it stays on the grid): a 3×3 stride-1 convolution by
    F(m×m, 3×3) where its numbers allow (``fpga_winograd.refusal``); in the engine's pointwise mode, a 1×1
    stride-1 convolution, a linear layer (one pixel: all but one of the α² grids idle, each weight row held for
    the accumulation distance) and the image's layer where the host gives it as im2col (fewer channels than the
    engine's fewest lanes, ``min_lanes``): any tile."""
    tiles = TILES.get(dtype, ())
    if shape.engine != "grid":
        return ()
    if (shape.R, shape.S, shape.stride) == (1, 1, 1) or (shape.from_host and shape.C < min_lanes):
        return tiles
    if shape.from_host or shape.pixels_in != 1:
        return ()
    return tuple(m for m in tiles if refusal(m, dtype, shape.C, shape.R, shape.S, shape.stride) is None)


def winograd_layouts(layers: Sequence[tuple[LayerShape, int]], tiles: Sequence[tuple[int, ...]], algorithm: str
                     ) -> list[list[tuple[LayerShape, int]]]:
    """The network's layers as the explorer designs a kernel with a Winograd engine for them: each layer the engine
    takes (``tiles``, ``winograd_tiles``'s) moved to it (with ``auto``, the explorer may still put it on a grid
    where the kernel has one). Where that moves every layer (VGG-16), a second layout keeps the 1×1 and linear
    layers and the image's (im2col: a 1×1 over its windows) on a grid beside the engine: on the engine alone they run
    in its pointwise mode, a linear layer's one pixel on one of its α² grids."""
    moved = [(replace(s, engine="winograd") if t else s, n) for (s, n), t in zip(layers, tiles, strict=True)]
    pointwise = [s.R == 1 or s.from_host for s, _ in layers]
    if algorithm != "auto" or any(s.engine != "winograd" for s, _ in moved) or not any(pointwise):
        return [moved]
    beside = [(s, n) if p else (m, n) for (s, n), (m, _), p in zip(layers, moved, pointwise, strict=True)]
    return [moved, beside]
