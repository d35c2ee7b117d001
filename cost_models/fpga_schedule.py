"""The schedule of an FPGA design's processes: when each ends, and so the run's latency.

What is modelled is what ``hls_templates/kernel.cpp.j2`` emits: the read, compute and write processes run
concurrently; each starts when its first input is complete, and a buffer loaded once must be loaded whole
before the first compute. The run ends when the last process ends: ``max over processes of (start + total) +
what follows it``. The batch kernel (``cost_models.fpga_kernel``) inlines it.
"""

from __future__ import annotations

from numba import njit

__all__ = ["process_ends"]


@njit(cache=True, inline="always", error_model="numpy")
def process_ends(stages, ends, chbytes, port_loads, n_ports, n_stages, n_channels, channel_bw, n_tiles, c_cycles,
                 eff, compute_start, first_write):
    """When each process of a design ends, and which ends last.

    ``stages`` holds each read and write process's total time (s) and gets the compute's and each DDR
    channel's; ``ends`` (scratch) gets when each ends. ``compute_start`` is when every buffer's first block is
    whole, ``first_write`` the first tile's write. Returns ``(c_one, write_start, best, latency)``: a tile's
    compute (s), when the write starts, the process that bounds the run (its index in ``stages``) and the
    run's latency (s).
    """
    c_one = c_cycles / eff
    stages[n_ports] = n_tiles * c_one
    for ch in range(n_channels):
        stages[n_ports + 1 + ch] = chbytes[ch] / channel_bw
    # When each process ends: a read process runs ahead of the compute, so its end bounds the run
    # with, after its last block, the compute of every tile that block serves (the tiles a load) and the
    # last tile's write; the compute starts once every buffer's first block is whole; the write starts
    # after the first tile's compute.
    write_start = compute_start + c_one
    for s in range(n_stages):
        ends[s] = stages[s] + c_one + first_write
    for s in range(n_ports - 1):
        ends[s] = stages[s] + (n_tiles / port_loads[s]) * c_one + first_write
    ends[n_ports - 1] = write_start + stages[n_ports - 1]
    ends[n_ports] = compute_start + stages[n_ports] + first_write
    best = n_ports  # the compute, where another process ends with it (a read that gates its start)
    for s in range(n_stages):
        if ends[s] > ends[best] * (1.0 + 1e-12):
            best = s
    latency = ends[best]
    return c_one, write_start, best, latency
