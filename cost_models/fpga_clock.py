"""The clock an FPGA design closes at, as the model estimates it where no calibration measured it.

The target clock is derated twice: by the broadcast of one register to the PEs that share an element (a wire
delay for each doubling of the fan-out past a free one) and by the SLRs the design's resources span (the
generated code does not register the crossings). The batch kernel (``cost_models.fpga_kernel``) inlines it.
"""

from __future__ import annotations

import math

from numba import njit

__all__ = ["achieved_clock"]


@njit(cache=True, inline="always", error_model="numpy")
def achieved_clock(clock, res, slr_res, fanout, estimate, fanout_ns, fanout_free, slr2, slr3):
    """``(eff, slrs)``: the clock (Hz) a design of resources ``res`` and register fan-out ``fanout`` closes at
    for a target ``clock``, and the SLRs it spans. ``slr_res`` is one SLR's share of each resource (0 where the
    part has one die); ``estimate`` off keeps the target (a calibration measured it); ``fanout_ns``,
    ``fanout_free``, ``slr2`` and ``slr3`` are the derating's constants (``fpga_kernel.T_*``)."""
    eff = clock
    slrs = 1.0
    if estimate > 0:
        need = 0.0
        for k in range(5):
            if slr_res[k] > 0:
                need = max(need, res[k] / slr_res[k])
        slrs = max(1.0, math.ceil(need - 1e-9))
        extra_ns = fanout_ns * max(0.0, math.log2(max(fanout, 1.0) / fanout_free))
        eff = clock / (1.0 + clock * extra_ns * 1e-9)
        if slrs >= 3:
            eff *= slr3
        elif slrs >= 2:
            eff *= slr2
    return eff, slrs
