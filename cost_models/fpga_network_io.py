"""A network-kernel layer's DDR traffic, as its processes move it (``network_trips``: the words each read and
writes), set against seed 001's I/O lower bound for the algorithm it runs (``io_bounds``): Theorem 4.12 for a 3×3
layer on the Winograd engine, F(e×e, r×r) moving at least Wout·Hout·Cout·Cin·(e+r−1)·r / (e·√S) words with S words
on chip, raised to the compulsory traffic (the input, the weights and the output each once), as a direct design's
bound is. S is the engine's buffers, every row of them (``fpga_network_resources``), in elements of the data type:
the bound is the lowest with the most on chip, so the ratio is a floor on how far the layer is from it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cost_models.fpga_network import EngineShape, NetLayer, Tiles, network_trips
from cost_models.fpga_network_resources import engine_onchip_bits
from cost_models.io_bounds import winograd_lower_bound_words

__all__ = ["layer_io"]


def layer_traffic_bytes(engine: EngineShape, layer: NetLayer, tiles: Tiles, dtype: str) -> float:
    """The bytes the layer's processes move: input boxes and the output a word of the arena's port each trip, the
    weights a word of each weight port, the epilogue's parameters (32-bit) a word of theirs."""
    elem = np.dtype(dtype).itemsize
    t = network_trips(engine, layer, tiles)
    return float((t["read_in"] * engine.word + t["write"] * engine.word
                  + t["read_w"] * engine.w_ports * engine.w_word) * elem + t["bias"] * engine.p_word * 4)


def layer_io(engine: EngineShape, layer: NetLayer, tiles: Tiles, dtype: str) -> dict[str, Any] | None:
    """The layer's DDR traffic and its I/O lower bound where seed 001 gives one for what it runs (a 3×3 stride-1
    layer on the Winograd engine: Theorem 4.12); None otherwise."""
    if engine.kind != "winograd" or (layer.R, layer.S, layer.stride) != (3, 3, 1):
        return None
    elem = np.dtype(dtype).itemsize
    onchip_words = engine_onchip_bits(engine, dtype) / (8 * elem)
    words = winograd_lower_bound_words(layer.OW, layer.OH, layer.K, layer.C, engine.tile, 3, onchip_words)
    compulsory = (layer.C * layer.H * layer.W + layer.K * layer.C * 9 + layer.K * layer.OH * layer.OW) * elem
    bound = max(words * elem, compulsory)
    traffic = layer_traffic_bytes(engine, layer, tiles, dtype)
    return {"traffic_bytes": traffic, "io_lower_bound_bytes": bound,
            "io_bound_kind": "Winograd (Theorem 4.12)" if words * elem >= compulsory else "compulsory",
            "traffic_over_bound": traffic / bound, "onchip_words": onchip_words}
