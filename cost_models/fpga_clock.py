"""The clock an FPGA design closes at, as the model estimates it where no calibration measured it.

The target clock is derated twice: by the broadcast of one register to the PEs that share an element (a wire
delay for each doubling of the fan-out past a free one) and by the SLRs the design's resources span (the
generated code does not register the crossings): the fewest adjacent SLRs that hold it, each SLR what the
platform's shell and the infrastructure leave of it (``fpga_slrs.slr_windows``). The batch kernel
(``cost_models.fpga_kernel``) inlines it.
"""

from __future__ import annotations

import math

from numba import njit

__all__ = ["achieved_clock"]


@njit(cache=True, inline="always", error_model="numpy")
def achieved_clock(clock, res, windows, fanout, estimate, fanout_ns, fanout_free, slr2, slr3):
    """``(eff, slrs)``: the clock (Hz) a design of resources ``res`` and register fan-out ``fanout`` closes at
    for a target ``clock``, and the SLRs it spans. ``windows`` (``fpga_slrs.slr_windows``): a row for each run of
    adjacent SLRs, its length first and then what it holds of each resource, shortest runs first (no rows where the
    part has one die); the design spans the shortest run that holds it, one SLR more than the part has where none
    does. ``estimate`` off keeps the target (a calibration measured it); ``fanout_ns``, ``fanout_free``, ``slr2``
    and ``slr3`` are the derating's constants (``fpga_kernel.T_*``)."""
    eff = clock
    slrs = 1.0
    if estimate > 0:
        if windows.shape[0] > 0:
            slrs = windows[windows.shape[0] - 1, 0] + 1.0
            for w in range(windows.shape[0]):
                fits = True
                for k in range(5):
                    if windows[w, k + 1] > 0 and res[k] > windows[w, k + 1]:
                        fits = False
                if fits:
                    slrs = windows[w, 0]
                    break
        extra_ns = fanout_ns * max(0.0, math.log2(max(fanout, 1.0) / fanout_free))
        eff = clock / (1.0 + clock * extra_ns * 1e-9)
        if slrs >= 3:
            eff *= slr3
        elif slrs >= 2:
            eff *= slr2
    return eff, slrs
