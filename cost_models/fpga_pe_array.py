"""The compute side of the FPGA model: the PE array, which is the unrolled loops.

What is modelled is what ``hls_templates/kernel.cpp.j2`` emits. An input that slides along its one unrolled
dimension (``j + ry``, ``j`` unrolled, ``ry`` walked by the pipeline) is partitioned completely along it and read
whole into registers each iteration, each lane picking its element through a multiplexer of the positions it
can take (a register window: banks fixed, one more pipeline stage, the mux LUTs). Each spatial lane multiplies
its ``U`` reduce lanes, sums the products with a balanced adder tree (``U − 1`` adders, seeded with the first
product, not 0), and adds the tree's result to its output element only where the reduction continues across
pipeline iterations or tiles. The read-modify-write of that element recurs every ``D`` iterations (the
spatial iterations per tile); its loop-carried path is the add plus the buffer's read and write, so
``II = ceil(recurrence / D)`` for every data type.

The batch kernel (``cost_models.fpga_kernel``) inlines these functions.
"""

from __future__ import annotations

import math

from numba import njit

from cost_models.fpga_blocks import IMPL_REGISTERS
from cost_models.fpga_costs import FUNNEL_INPUTS_PER_LUT, RMW_EXTRA_CYCLES

__all__ = ["arithmetic_units", "partition_box", "pipeline"]


@njit(cache=True, inline="always", error_model="numpy")
def partition_box(p, dims, is_write, t, u, shape, entry_start, entry_loop, entry_coef, in_bytes, dt, width,
                  clipped, fac, res):
    """The box of port ``p`` a tile holds and how the PE array banks it: fills ``width`` (the box),
    ``clipped`` (the box within the tensor) and ``fac`` (the partition factors), and adds a register window's
    multiplexer LUTs to ``res``. Returns ``(windows, distinct)``: the dimensions read as register windows (a
    bit each) and the elements of the buffer one iteration reads (the PEs share each).
    """
    # box widths and the compute's partition factors: an unrolled loop of coefficient c and
    # unroll u puts its lanes c apart, so a cyclic factor of c·u gives each lane its own bank
    windows = 0
    distinct = 1.0  # the elements of the buffer one iteration reads: the PEs share each
    for d in range(dims):
        w = 1.0
        f = 1.0
        lane_span = 0.0
        lane_u = 1.0
        for e in range(entry_start[p, d], entry_start[p, d + 1]):
            lp = entry_loop[e]
            c = entry_coef[e]
            w += c * (t[lp] - 1)
            if u[lp] > 1:
                f *= c * u[lp]
                lane_span += c * (u[lp] - 1)
                lane_u *= u[lp]
        width[d] = w
        clipped[d] = min(w, shape[p, d])
        fac[d] = min(f, w)
        distinct *= lane_u
        if not is_write and f > 1:
            for e in range(entry_start[p, d], entry_start[p, d + 1]):
                lp = entry_loop[e]
                if u[lp] == 1 and t[lp] > 1 and entry_coef[e] % fac[d] != 0:
                    # a sliding window (i + rx, i unrolled, rx walked by the pipeline): the dimension
                    # is partitioned completely, each iteration reads it whole (one element a bank,
                    # banks fixed) into registers, and each lane picks its element there through a
                    # multiplexer of the positions its offset can take
                    fac[d] = w
                    windows |= 1 << d
                    res[3] += lane_u * 8.0 * in_bytes[dt] * math.ceil((w - lane_span) / FUNNEL_INPUTS_PER_LUT)
                    break
    return windows, distinct


@njit(cache=True, inline="always", error_model="numpy")
def pipeline(t, u, nl, ns, reduction, reduce_tiles, addl, mull, out_impl, overhead, window_stage):
    """The PE array's pipeline over one tile. Returns ``(spatial_iters, reduce_outer, spatial_lanes,
    reduce_lanes, pe, accumulate, recurrence, ii, depth, c_cycles)``: the pipeline's iterations along the
    spatial and the reduce loops, the lanes of each, the PEs, whether the output element accumulates across
    iterations or tiles, the loop-carried path, the II, the pipeline's depth and the cycles a tile takes.
    """
    per_tile = 1.0
    spatial_iters = 1.0
    reduce_outer = 1.0
    spatial_lanes = 1.0
    reduce_lanes = 1.0
    for lp in range(nl):
        r = t[lp] / u[lp]
        per_tile *= r
        if lp < ns:
            spatial_iters *= r
            spatial_lanes *= u[lp]
        else:
            reduce_outer *= r
            reduce_lanes *= u[lp]
    pe = spatial_lanes * reduce_lanes
    # the output element is read, added to and written back only where the reduction goes on past
    # one pipeline iteration of one tile; the read-modify-write recurs every spatial_iters iterations
    accumulate = 1.0 if reduction and (reduce_outer > 1 or reduce_tiles > 1) else 0.0
    recurrence = addl + (RMW_EXTRA_CYCLES if out_impl != IMPL_REGISTERS else 0.0)
    ii = 1.0
    if reduction and reduce_outer > 1:
        ii = math.ceil(recurrence / max(spatial_iters, 1.0))
    tree = math.ceil(math.log2(max(reduce_lanes, 1.0)))
    # a window's multiplexer is one more stage between the buffer's read and the multiply
    depth = mull + addl * (tree + accumulate) + overhead + window_stage
    c_cycles = per_tile * ii + depth
    return spatial_iters, reduce_outer, spatial_lanes, reduce_lanes, pe, accumulate, recurrence, ii, depth, c_cycles


@njit(cache=True, inline="always", error_model="numpy")
def arithmetic_units(reduction, pe, spatial_lanes, reduce_lanes, body_muls, body_adds, accumulate):
    """The multipliers and adders of the PE array, ``(mul_units, add_units)``."""
    # arithmetic units, exactly as the code instantiates them: per spatial lane, U products (each
    # with the body's other multiplies and adds), a tree of U - 1 adders and the accumulation
    if reduction:
        mul_units = spatial_lanes * reduce_lanes * body_muls
        add_units = spatial_lanes * (reduce_lanes * body_adds + reduce_lanes - 1 + accumulate)
    else:
        mul_units = pe * body_muls
        add_units = pe * body_adds
    return mul_units, add_units
