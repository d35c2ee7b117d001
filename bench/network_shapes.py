"""What the FPGA network benches share: a built-in network's distinct layers as the shared network kernel sees
them (``model/layer_shape.py``), its first convolution reading the image from the host."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hetero_dse.model.capture import capture  # noqa: E402
from hetero_dse.model.layer_shape import LayerShape, shape_of  # noqa: E402
from hetero_dse.model.zoo import build  # noqa: E402


def network_shapes(net: str) -> tuple[list[Any], list[tuple[LayerShape, int]]]:
    """The network's distinct layers as operators, and each as (its network-kernel shape, times it runs)."""
    model, example = build(net)
    graph = capture(model, example, net, profile=False)
    ops = graph.operators()
    shapes = [(shape_of(op, from_host=i == 0 and op.name == "conv2d"), layer.count)
              for i, (op, layer) in enumerate(zip(ops, graph.layers, strict=True))]
    return ops, shapes
