"""A network-kernel layer's DDR traffic, as its processes move it (``network_trips``: the words each reads and
writes, and the residual read beside each output word), set against seed 001's I/O lower bound for the algorithm it
runs (``io_bounds``): for a 3×3 layer on the Winograd engine, Theorem 4.12's Wout·Hout·Cout·Cin·(e+r−1)·r / (e·√S)
words for F(e×e, r×r) with S on chip — the paper states it as Ω(·); its constant is taken as 1 here — raised to
the compulsory traffic (the input, the weights, the residual and the output each once, their channels as the
network has them, unpadded), as a direct design's bound is.

S is every value the engine's buffers hold (``engine_onchip_values``): the most S, the lowest the theorem's term,
so the ratio of traffic to bound is an upper estimate of how far a layer is from the bound. With the engines' S
(10⁵–10⁶ values) the theorem's term falls below the compulsory traffic on the layers of the built-in networks, and
the bound is the compulsory traffic (``io_bound_kind`` says which).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cost_models.fpga_network import EngineShape, NetLayer, Tiles, network_trips
from cost_models.fpga_network_resources import engine_onchip_values
from cost_models.io_bounds import winograd_lower_bound_words

__all__ = ["layer_io", "layer_traffic_bytes"]


def layer_traffic_bytes(engine: EngineShape, layer: NetLayer, tiles: Tiles, dtype: str, residual: bool = False
                        ) -> float:
    """The bytes the layer's processes move: input boxes and the output a word of the arena's port each trip (and
    where the layer adds a residual, a word of it beside each output word), the weights a word of each weight port,
    the epilogue's parameters (32-bit) a word of theirs."""
    elem = np.dtype(dtype).itemsize
    t = network_trips(engine, layer, tiles)
    return float((t["read_in"] * engine.word + t["write"] * engine.word * (2 if residual else 1)
                  + t["read_w"] * engine.w_ports * engine.w_word) * elem + t["bias"] * engine.p_word * 4)


def layer_io(engine: EngineShape, layer: NetLayer, tiles: Tiles, dtype: str, channels: tuple[int, int] | None = None,
             residual: bool = False) -> dict[str, Any] | None:
    """The layer's DDR traffic and its I/O lower bound where seed 001 gives one for what it runs (a 3×3 stride-1
    layer on the Winograd engine: Theorem 4.12); None otherwise. ``channels``: the layer's (C, K) as the network has
    them (the kernel's ``layer`` pads them to its block); ``residual``: its epilogue adds one."""
    if engine.kind != "winograd" or (layer.R, layer.S, layer.stride) != (3, 3, 1):
        return None
    elem = np.dtype(dtype).itemsize
    c, k = channels or (layer.C, layer.K)
    onchip = engine_onchip_values(engine, dtype)
    words = winograd_lower_bound_words(layer.OW, layer.OH, k, c, engine.tile, 3, onchip)
    compulsory = (c * layer.H * layer.W + k * c * 9 + k * layer.OH * layer.OW * (2 if residual else 1)) * elem
    bound = max(words * elem, compulsory)
    traffic = layer_traffic_bytes(engine, layer, tiles, dtype, residual)
    kind = "Winograd, Theorem 4.12 (its Ω with constant 1)" if words * elem >= compulsory else "compulsory traffic"
    return {"traffic_bytes": traffic, "io_lower_bound_bytes": bound, "io_bound_kind": kind,
            "traffic_over_bound": traffic / bound, "onchip_values": onchip}
