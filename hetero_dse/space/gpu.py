"""The GPU schedule space of an operator: the CPU's multi-level splits bound to the GPU's hierarchy
(FlexTensor §4.2): level 0 of the spatial loops to thread blocks, level 1 to virtual threads, level 2 to
threads, level 3 to registers; the reduce levels stage inputs through shared memory. The device's limits
(threads per block, virtual threads, registers, shared memory) are its rules: a point beyond them cannot run
and is never built."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hetero_dse.analysis import Analysis
from hetero_dse.hardware.gpus import GpuDevice
from hetero_dse.space.cpu import REDUCE_LEVELS, SPATIAL_LEVELS, UNROLL_STEPS
from hetero_dse.space.point import Point
from hetero_dse.space.splits import SplitSpace

__all__ = ["GpuSpace"]

MAX_REGISTERS_PER_THREAD = 255  # every NVIDIA architecture since Kepler
REGISTER_OVERHEAD = 24          # indices, addresses and operands beside the accumulators, a typical count


class GpuSpace(SplitSpace):
    """The same splits on a GPU: level 0 of the spatial loops binds to blocks, level 1 to virtual threads,
    level 2 to threads, level 3 stays in registers; the reduce levels stage inputs through shared memory.
    Points beyond the device's limits (threads per block, shared memory, virtual threads) are invalid and
    never built."""

    kind = "GPU space"

    def __init__(self, analysis: Analysis, device: GpuDevice, spatial_levels: int = SPATIAL_LEVELS,
                 reduce_levels: int = REDUCE_LEVELS, unroll_steps: Sequence[int] = UNROLL_STEPS) -> None:
        self.device = device  # its limits are hard rules: a point beyond them cannot run
        # one order (blocks, vthreads, threads, reduce, registers); producers always inlined
        super().__init__(analysis, spatial_levels, reduce_levels, {"unroll": tuple(unroll_steps)})

    def limits(self, point: Point) -> dict[str, int]:
        """Threads per block, virtual threads, shared-memory bytes of the block's input tiles, accumulators and
        registers per thread of ``point``."""
        threads = vthreads = accumulators = 1
        tile: dict[str, int] = {}
        for i, name in enumerate(self.loop_names):
            f = point[f"split.{name}"]
            tile[name] = int(np.prod(f[1:]))  # the block's extent of the loop
            if i < self.num_spatial:
                vthreads *= f[1]
                threads *= f[2]
                accumulators *= f[1] * f[3]
        shared = sum(int(np.prod(a.bounding_box(tile))) * a.bytes_per_element for a in self.analysis.reads)
        return {"threads": threads, "vthreads": vthreads, "shared_bytes": shared, "accumulators": accumulators,
                "registers": accumulators + REGISTER_OVERHEAD}

    def violations(self, point: Point) -> list[str]:
        lim, dev = self.limits(point), self.device
        out = []
        if lim["threads"] > dev.max_threads_per_block:
            out.append(f"{lim['threads']} threads per block > {dev.max_threads_per_block}")
        if lim["vthreads"] > dev.max_vthreads:
            out.append(f"{lim['vthreads']} virtual threads > {dev.max_vthreads}")
        if lim["registers"] > MAX_REGISTERS_PER_THREAD:  # beyond it the output tile spills to local memory
            out.append(f"~{lim['registers']} registers per thread > {MAX_REGISTERS_PER_THREAD}")
        if lim["shared_bytes"] > dev.shared_memory_per_block:
            out.append(f"{lim['shared_bytes']} B of shared memory > {dev.shared_memory_per_block}")
        return out

    def beyond_limits(self, point: Point) -> str | None:
        """What a failed trial records for a point the device cannot run; None when it can."""
        problems = self.violations(point)
        return f"beyond the limits of {self.device.name}: {'; '.join(problems)}" if problems else None

    def _where(self) -> str:
        return f"within the limits of {self.device.name}"
