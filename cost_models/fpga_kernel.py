"""The FPGA model compiled per design with numba: the search's fast path.

The same arithmetic as ``FpgaModel.evaluate`` (the numpy model, which stays the reference and the only
path that returns per-buffer detail), written as one loop over designs so that no intermediate array is
made. ``tests/test_fpga_model.py`` checks that both agree on random designs of every built-in operator.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from cost_models.fpga_costs import (
    BRAM18K_CONFIGS,
    BUFFER_DEPTH,
    COMPUTE_OVERHEAD_CYCLES,
    DEEPER_CORES_ABOVE_MHZ,
    FF_BASE,
    FF_PER_PORT,
    LUT_BASE,
    LUT_PER_PORT,
    LUTRAM_MAX_BITS,
    LUTRAM_WORDS_PER_LUT_PAIR,
    PORT_BITS,
    URAM_DEPTH,
    URAM_WIDTH,
)

_BRAM_WIDTHS = np.array([w for w, _ in BRAM18K_CONFIGS], dtype=np.float64)
_BRAM_DEPTHS = np.array([d for _, d in BRAM18K_CONFIGS], dtype=np.float64)


@njit(cache=True, inline="always")
def _bram18k(words: float, bits: float, widths: np.ndarray, depths: np.ndarray) -> float:
    for i in range(len(widths)):
        if bits <= widths[i]:
            return math.ceil(words / depths[i])
    last = len(widths) - 1
    return math.ceil(words / depths[last]) * math.ceil(bits / widths[last])


@njit(cache=True, inline="always")
def _lcm(a: float, b: float) -> float:
    x, y = int(a), int(b)
    while y:
        x, y = y, x % y
    return float(int(a) // x * int(b))


@njit(cache=True)
def evaluate_kernel(rows, nl, ns, col_order, col_dtype, col_clock, extents, tile_tab, unroll_tab, order_pos,
                    entry_start, entry_loop, entry_coef, shape, ndims, used, in_bytes, acc_bytes, carried,
                    add_lat, mul_lat, lane_dsp, lane_lut, lane_ff, compulsory, clocks, peak, caps, channel_bw,
                    n_channels, uram_available, traffic_weight, total_ops, out_latency, out_objective, out_gops,
                    out_roofline, out_bound, out_traffic, out_pe, out_ii, out_resources, out_usage):
    """Score ``rows`` into the ``out_*`` arrays; the arguments are ``FpgaModel._pack()`` (see there)."""
    n = rows.shape[0]
    n_ports = shape.shape[0]
    max_dims = shape.shape[1]
    n_stages = n_ports + 1 + n_channels
    # scratch space, reused for every design (allocating per design would cost more than the model)
    t = np.empty(nl)
    u = np.empty(nl)
    trips = np.empty(nl)
    pos = np.empty(nl, dtype=np.int64)
    width = np.empty(max_dims)
    clipped = np.empty(max_dims)
    fac = np.empty(max_dims)
    stages = np.empty(n_stages)
    res = np.empty(5)
    chbytes = np.empty(n_channels)
    for i in range(n):
        stages[:] = 0.0
        res[:] = 0.0
        chbytes[:] = 0.0
        dt = rows[i, col_dtype]
        clock = clocks[rows[i, col_clock]]
        deeper = 1.0 if (clock > DEEPER_CORES_ABOVE_MHZ * 1e6 and carried[dt]) else 0.0
        addl = add_lat[dt] + deeper
        mull = mul_lat[dt] + deeper
        n_tiles = 1.0
        out_tiles = 1.0
        for lp in range(nl):
            t[lp] = tile_tab[lp, rows[i, lp]]
            u[lp] = unroll_tab[lp, rows[i, nl + lp]]
            trips[lp] = math.ceil(extents[lp] / t[lp])
            n_tiles *= trips[lp]
            if lp < ns:
                out_tiles *= trips[lp]
            pos[lp] = order_pos[rows[i, col_order], lp]
        traffic = 0.0
        first_read = 0.0
        first_write = 0.0
        for p in range(n_ports):
            is_write = p == n_ports - 1
            elem = acc_bytes[dt] if is_write else in_bytes[dt]
            dims = ndims[p]
            for d in range(dims):
                w = 1.0
                f = 1.0
                for e in range(entry_start[p, d], entry_start[p, d + 1]):
                    lp = entry_loop[e]
                    c = entry_coef[e]
                    w += c * (t[lp] - 1)
                    if u[lp] > 1:
                        f *= c * u[lp]
                width[d] = w
                clipped[d] = min(w, shape[p, d])
                fac[d] = f
            # transfer plan (cost_models/transfer.py)
            word = float((PORT_BITS // 8) // int(elem))
            packed = 1.0
            fitted = 0
            for d in range(dims - 1, -1, -1):
                if d < dims - 1 and width[d + 1] != shape[p, d + 1]:
                    break
                if packed * width[d] > word:
                    break
                packed *= width[d]
                fitted += 1
            split = dims - 1 - fitted
            lanes = 1.0
            at_width = 1.0
            if split >= 0:
                at_width = width[split]
                if split == dims - 1 or width[split + 1] == shape[p, split + 1]:
                    lanes = min(at_width, math.floor(word / packed))
            cycles = math.ceil(at_width / lanes)
            banks = 1.0
            wpb = 1.0
            elements = 1.0
            for d in range(dims):
                if d < split:
                    cycles *= width[d]
                f = fac[d]
                if d > split:
                    f = width[d]
                elif d == split and f % lanes != 0:
                    f = _lcm(f, lanes)
                f = min(f, width[d])
                banks *= f
                wpb *= math.ceil(width[d] / f)
                elements *= clipped[d]
            if is_write:
                loads = out_tiles
            else:
                level = -1
                for lp in range(nl):
                    if used[p, lp] and trips[lp] > 1 and pos[lp] > level:
                        level = pos[lp]
                loads = 1.0
                for lp in range(nl):
                    if pos[lp] <= level:
                        loads *= trips[lp]
            tile_bytes = elements * elem
            one = max(cycles / clock, tile_bytes / channel_bw)
            stages[p] = loads * one
            if is_write:
                first_write = one
            elif one > first_read:
                first_read = one
            traffic += loads * tile_bytes
            chbytes[p % n_channels] += loads * tile_bytes
            # storage of one bank, times banks, double-buffered
            bits = 8.0 * elem
            copies = BUFFER_DEPTH * banks
            if wpb <= 1:
                res[4] += copies * bits
            elif wpb <= LUTRAM_MAX_BITS // int(bits):
                res[3] += copies * 2 * bits * math.ceil(wpb / LUTRAM_WORDS_PER_LUT_PAIR)
            elif uram_available and wpb >= URAM_DEPTH:
                res[2] += copies * math.ceil(wpb / URAM_DEPTH) * math.ceil(bits / URAM_WIDTH)
            else:
                res[1] += copies * _bram18k(wpb, bits, _BRAM_WIDTHS, _BRAM_DEPTHS)
        # compute
        per_tile = 1.0
        spatial_iters = 1.0
        reduce_outer = 1.0
        reduce_lanes = 1.0
        pe = 1.0
        for lp in range(nl):
            r = t[lp] / u[lp]
            per_tile *= r
            pe *= u[lp]
            if lp < ns:
                spatial_iters *= r
            else:
                reduce_outer *= r
                reduce_lanes *= u[lp]
        ii = 1.0
        if carried[dt] and reduce_outer > 1:
            ii = math.ceil(addl / max(spatial_iters, 1.0))
        tree = math.ceil(math.log2(max(reduce_lanes, 1.0)))
        depth = mull + addl * (1 + tree) + COMPUTE_OVERHEAD_CYCLES
        c_one = (per_tile * ii + depth) / clock
        stages[n_ports] = n_tiles * c_one
        for ch in range(n_channels):
            stages[n_ports + 1 + ch] = chbytes[ch] / channel_bw
        best = 0
        for s in range(1, n_stages):
            if stages[s] > stages[best]:
                best = s
        fill_drain = first_read + c_one + first_write - max(first_read, c_one, first_write)
        latency = stages[best] + fill_drain
        res[0] += math.ceil(pe * lane_dsp[dt])
        res[3] += pe * lane_lut[dt] + LUT_BASE + LUT_PER_PORT * n_ports
        res[4] += pe * lane_ff[dt] + FF_BASE + FF_PER_PORT * n_ports
        worst = 0.0
        for k in range(5):
            if caps[k] > 0:
                use = res[k] / caps[k]
            elif res[k] > 0:
                use = np.inf
            else:
                use = 0.0
            out_usage[i, k] = use
            out_resources[i, k] = res[k]
            worst = max(worst, use)
        out_objective[i] = latency * (1.0 + 10.0 * max(worst - 1.0, 0.0) + traffic_weight * traffic / compulsory[dt]
                                      + 1e-6 * min(worst, 1.0))
        if worst > 1.0:
            latency = np.inf
        out_latency[i] = latency
        gops = total_ops / latency / 1e9
        out_gops[i] = gops
        pk = peak[dt, rows[i, col_clock]]
        out_roofline[i] = gops * 1e9 / pk if pk > 0 else 0.0
        out_bound[i] = best
        out_traffic[i] = traffic
        out_pe[i] = pe
        out_ii[i] = ii
