"""The pipeline depths of the network kernel's PE arrays (``hls_templates/network/kernel.cpp.j2``): how many
iterations apart two updates of one output element must be, and how deep the compute loop's pipeline is. Both
follow from the cores' latencies (``fpga_costs.ARITHMETIC``) at the target clock; the network model and the layer
pipeline's take them from here."""

from __future__ import annotations

import math

from cost_models.fpga_costs import ARITHMETIC, COMPUTE_OVERHEAD_CYCLES, DEEPER_CORES_ABOVE_MHZ, RMW_EXTRA_CYCLES

__all__ = ["accumulation_distance", "compute_depth"]


def accumulation_distance(dtype: str, clock_mhz: float) -> int:
    """Iterations between two updates of one output element so that the add and the buffer's read and write
    of the last finish first (the loop-carried path of the accumulation)."""
    a = ARITHMETIC[dtype]
    deeper = 1 if a.floating and clock_mhz > DEEPER_CORES_ABOVE_MHZ else 0
    return a.add_latency + deeper + RMW_EXTRA_CYCLES


def compute_depth(dtype: str, clock_mhz: float, in_lanes: int, chain: int = 1) -> int:
    """The compute loop's pipeline depth: buffer reads, the multiply, the adder tree, the accumulation; with a
    ``chain`` of multiply-adds before the tree, each a DSP's stages one after the other (the sum passes through
    them) and a cycle to split the packed sums (*estimate*: Vitis schedules a matched multiply-add whole)."""
    a = ARITHMETIC[dtype]
    deeper = 1 if a.floating and clock_mhz > DEEPER_CORES_ABOVE_MHZ else 0
    sums = in_lanes // chain
    tree = math.ceil(math.log2(sums)) if sums > 1 else 0
    multiply = chain * a.mul_latency + 1 if chain > 1 else a.mul_latency
    return COMPUTE_OVERHEAD_CYCLES + multiply + deeper + (tree + 1) * (a.add_latency + deeper)
