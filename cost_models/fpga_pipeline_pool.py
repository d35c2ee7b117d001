"""A max pool's stage in the layer pipeline (``cost_models/fpga_pipeline.py``): the depthwise stage's window (a
line buffer of its input, a tap of ``out_lanes`` channels a trip, the padding the lowest value), and instead of
its PE array a running maximum a lane, kept in ``distance`` partial maxima as the PE arrays keep their partial
sums and combined on a fold's last step. No weights and no multiplies: int8 keeps its input's scale (a maximum
of integers of one scale is exact), so no requantisation either."""

from __future__ import annotations

import numpy as np

from cost_models.fpga_pipeline_storage import fifo_storage, line_storage
from cost_models.fpga_pipeline_streams import stage_fifos
from cost_models.fpga_network import NetLayer
from hetero_dse.hardware.board import RESOURCE_KINDS

__all__ = ["POOL_COMPARE_LUT", "pool_resources"]

_LUT, _FF = RESOURCE_KINDS.index("lut"), RESOURCE_KINDS.index("ff")
#: a lane's compare and the select it drives, in LUTs: an 8-bit compare on the carry chain and an 8-bit 2:1 mux;
#: a float compare (Vitis's fcmp core in the fabric, ~66 LUTs) and a 32-bit mux (*estimate*, no synthesis behind it)
POOL_COMPARE_LUT = {"int8": 16, "float32": 98}
#: a pool stage's counters, FIFO handshakes and line-buffer addressing (*estimate*, as a PE array's stage)
POOL_CONTROL_LUT, POOL_CONTROL_FF = 400, 600


def pool_resources(layer: NetLayer, out_lanes: int, dtype: str, caps: dict[str, float], distance: int = 1,
                   in_pixels: int = 0) -> np.ndarray:
    """The pool stage in ``RESOURCE_KINDS`` order: its line buffer and FIFOs (the depthwise window's), a compare
    and select a lane for each tap and the ``distance - 1`` that join its partial maxima, those maxima and the
    output word's registers, and its control; no DSPs."""
    bits = 8.0 * np.dtype(dtype).itemsize
    res = np.zeros(len(RESOURCE_KINDS))
    line_storage(layer, 1, out_lanes, dtype, caps, res)
    for _, depth, width, _ in stage_fifos(layer, 1, out_lanes, dtype, caps, in_pixels=in_pixels):
        fifo_storage(depth, width, caps, res)
    res[_LUT] += out_lanes * POOL_COMPARE_LUT[dtype] * distance + POOL_CONTROL_LUT
    res[_FF] += out_lanes * bits * (distance + 1) + POOL_CONTROL_FF
    return res
