"""Roofline estimate of a GPU schedule point on a named device, for machines without a GPU.

A tensor-core point (``hetero_dse/space/tensorcore.py``) has its own roofline, ``estimate_tensor_cores``.

Nothing here is measured: the figure is the slowest of four ceilings, each a plain count divided by a
datasheet rate, with the losses a schedule controls: SMs without enough warps to issue every cycle, idle
warp lanes, too few independent accumulators per thread, occupancy limited by threads, registers or shared
memory. Every row it produces is labelled an estimate.

- compute: FLOPs / (FP32 peak × issue × lane efficiency), or the chain of dependent FMAs of one thread when it
  has fewer independent accumulators than the FMA latency, whichever is longer;
- DRAM: compulsory bytes (inputs once, output once) / HBM bandwidth;
- L2 → shared: every block stages the bounding box of each input per outer reduce step;
- shared → registers: every thread reads, per inner reduce step, the inputs of its register tile, at the
  shared-memory bandwidth of the SMs that have a block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hetero_dse.analysis import dtype_bytes
from hetero_dse.hardware.gpus import GpuDevice
from hetero_dse.space.gpu import GpuSpace
from hetero_dse.space.point import Point
from hetero_dse.space.tensorcore import TensorCoreSpace, split_k

#: how far the estimate is from an H100 (bench/gpu_roofline_vs_measured.py): for the best points of YOLO-v1's layers
#: measured there (bench/data/gpu_yolo_h100*.json), the estimated speed over the measured one, as (lowest,
#: highest, geometric mean) per arithmetic. Above 1 the model promises more than the device gave. The reports
#: quote it; tests/test_gpu_estimate.py recomputes it, so a change to the model that moves it fails until the
#: bench is run again and the figures here and in BENCHMARKS.md are updated.
ESTIMATE_OVER_H100 = {"float32": (0.92, 5.16, 1.79), "float16": (1.25, 3.96, 2.29)}
#: the same for each algorithm of a float32 3×3 stride-1 convolution (bench/gpu_winograd_vs_measured.py): each
#: algorithm's best point of four layers as an H200 measured it (bench/data/gpu_winograd_h200*.json), estimated on
#: the H200's roofline with the model's register count (as the search ranks), Winograd's as its product plus its
#: two transform kernels. On average the model is about as optimistic for Winograd as for direct convolution (the
#: geometric means within 20 %); on one layer (R-L11) it was 1.4× more optimistic for direct. Few points, each a
#: search's best: a check, not a calibration.
ESTIMATE_OVER_H200 = {"direct": (1.15, 2.11, 1.53), "Winograd F(2×2, 3×3)": (1.01, 1.87, 1.43),
                      "Winograd F(4×4, 3×3)": (1.46, 2.39, 1.74)}
LAUNCH_S = 3e-6            # kernel launch and tail, a typical measured floor for one small CUDA kernel
SHARED_BYTES_PER_CLOCK = 128  # per SM: 32 banks × 4 bytes
MAX_BLOCKS_PER_SM = 32
MAX_THREADS_PER_SM = 2048
REGISTERS_PER_SM = 65536
WARP_SCHEDULERS = 4  # per SM, Volta to Hopper
FMA_LATENCY_CYCLES = 4  # dependent FP32 FMA latency, Volta to Hopper (microbenchmarks: 4 cycles)


@dataclass(frozen=True)
class GpuEstimate:
    seconds: float
    bound: str  # compute | dram | l2 | shared | launch (the fixed launch cost exceeds all four)
    figures: dict[str, float]


def occupancy(dev: GpuDevice, blocks: int, threads: int, registers: int, shared_bytes: int) -> tuple[int, int, float]:
    """Blocks resident per SM (threads, registers, shared memory), waves over the grid, and the share of the
    device's issue rate the resident warps reach: an SM issues from 4 schedulers and needs 4 resident warps to
    issue every cycle (latency is counted apart); an SM without a block does nothing."""
    per_sm = min(MAX_BLOCKS_PER_SM, MAX_THREADS_PER_SM // threads, REGISTERS_PER_SM // (threads * registers),
                 (dev.shared_memory_per_sm // shared_bytes) if shared_bytes else MAX_BLOCKS_PER_SM)
    per_sm = max(per_sm, 1)
    waves = math.ceil(blocks / (dev.sms * per_sm))
    active = min(blocks, dev.sms)
    warps_per_sm = blocks / (waves * active) * math.ceil(threads / 32)
    return per_sm, waves, min(1.0, warps_per_sm / WARP_SCHEDULERS) * active / dev.sms


def shared_seconds(dev: GpuDevice, blocks: int, loaded_bytes: float) -> float:
    """Shared-memory reads at the bandwidth of the SMs a block runs on (fewer blocks than SMs leave the rest
    idle)."""
    return loaded_bytes / (min(blocks, dev.sms) * SHARED_BYTES_PER_CLOCK * dev.clock_ghz * 1e9)


def roof(parts: dict[str, float]) -> tuple[float, str]:
    """The slowest ceiling plus the launch, and what binds (``launch`` when the launch exceeds every ceiling)."""
    bound = max(parts, key=parts.__getitem__)
    if LAUNCH_S > parts[bound]:
        bound = "launch"
    return LAUNCH_S + max(parts.values()), bound


def estimate(space: GpuSpace, point: Point, registers: int | None = None) -> GpuEstimate:
    """``registers``: what ptxas allots a thread of the generated kernel, where it has been compiled (the
    space's count, accumulators plus a constant, otherwise)."""
    dev: GpuDevice = space.device
    analysis = space.analysis
    limits = space.limits(point)
    threads, vthreads, shared_bytes = limits["threads"], limits["vthreads"], limits["shared_bytes"]
    registers, regs = registers or limits["registers"], limits["accumulators"]
    blocks = outer_steps = inner_steps = 1
    thread_tile: dict[str, int] = {}
    for i, name in enumerate(space.loop_names):
        f = [int(x) for x in point[f"split.{name}"]]
        if i < space.num_spatial:
            blocks *= f[0]
            thread_tile[name] = f[1] * f[3]
        else:
            outer_steps *= f[0]
            inner_steps *= math.prod(f[1:])
            thread_tile[name] = 1  # one inner reduce step at a time

    per_sm, waves, issue_eff = occupancy(dev, blocks, threads, registers, shared_bytes)
    lane_eff = threads / (math.ceil(threads / 32) * 32)
    flops = analysis.flops
    throughput_s = flops / (dev.fp32_tflops * 1e12 * issue_eff * lane_eff)
    # a thread's accumulations form ``regs`` independent chains of dependent FMAs: with fewer chains than the
    # FMA latency, a thread waits on itself whatever the occupancy
    fmas_per_thread = flops / 2 / (blocks * threads)
    latency_s = waves * fmas_per_thread * FMA_LATENCY_CYCLES / min(regs, FMA_LATENCY_CYCLES) / (dev.clock_ghz * 1e9)
    compute_s = max(throughput_s, latency_s)

    dram_s = analysis.compulsory_bytes / (dev.memory_gbps * 1e9)
    l2_bytes = blocks * outer_steps * shared_bytes
    l2_s = l2_bytes / (dev.l2_gbps * 1e9)
    per_thread = sum(math.prod(a.bounding_box(thread_tile)) * a.bytes_per_element for a in analysis.reads)
    shared_loads = blocks * threads * outer_steps * inner_steps * per_thread
    shared_s = shared_seconds(dev, blocks, shared_loads)

    parts = {"compute": compute_s, "dram": dram_s, "l2": l2_s, "shared": shared_s}
    seconds, bound = roof(parts)
    figures = {"blocks": blocks, "threads": threads, "vthreads": vthreads, "accumulators_per_thread": regs,
               "registers": registers,
               "shared_bytes": shared_bytes, "blocks_per_sm": per_sm, "waves": waves, "issue_efficiency": issue_eff,
               "lane_efficiency": lane_eff, "throughput_s": throughput_s, "latency_s": latency_s, "l2_bytes": l2_bytes,
               "shared_load_bytes": shared_loads, "launch_s": LAUNCH_S, **{f"{k}_s": v for k, v in parts.items()}}
    return GpuEstimate(seconds, bound, figures)


def estimate_tensor_cores(space: TensorCoreSpace, point: Point, registers: int | None = None) -> GpuEstimate:
    """The roofline of a tensor-core point: the padded GEMM's FLOPs on the device's tensor-core peak (the
    warp-level MMA's share of it), the resident warps feeding the four tensor cores of an SM; DRAM's
    compulsory bytes; L2 → shared: every block stages its A and B chunks over the whole padded K; shared →
    fragments: every warp loads its A and B fragments per step of the fragment's K. With one stage and one
    resident block per SM nothing hides a chunk's load behind the MMAs: the two add up instead of overlapping.
    There is no latency term: stages beyond two and cp.async change the figure only through the shared memory
    they take (fewer blocks resident), so the estimate never prefers them; a measurement can."""
    dev: GpuDevice = space.device
    view, lim, tiles, padded = space.view, space.limits(point), space.tiles(point), space.padded(point)
    threads, warps, shared_bytes = lim["threads"], lim["warps"], lim["shared_bytes"]
    registers = registers or lim["registers"]  # ptxas's count where the kernel was compiled
    blocks = space.grid(point)
    # one tensor core per SM sub-partition: fed as the schedulers are, by resident warps
    per_sm, waves, issue_eff = occupancy(dev, blocks, threads, registers, shared_bytes)
    padded_flops = 2 * padded["batch"] * padded["m"] * padded["n"] * padded["k"]
    peak = dev.tensor_tflops(space.arithmetic.name) * 1e12 * dev.warp_mma_fraction
    compute_s = padded_flops / (peak * issue_eff)
    in_bytes = dtype_bytes(view.dtype)
    split = split_k(point)
    block_k = padded["k"] // split  # the K each block multiplies
    partial_bytes = out_bytes = 0
    if split > 1:  # the partials written here, read back by the summing kernel, which writes the output
        acc_bytes = dtype_bytes(space.arithmetic.accumulator)
        partial_bytes = split * padded["batch"] * padded["m"] * padded["n"] * acc_bytes
        out_bytes = view.batch * view.m * view.n * dtype_bytes(space.analysis.write.dtype)
    dram_s = (space.analysis.compulsory_bytes - out_bytes + partial_bytes) / (dev.memory_gbps * 1e9)
    l2_bytes = blocks * (tiles["bm"] + tiles["bn"]) * block_k * in_bytes
    l2_s = l2_bytes / (dev.l2_gbps * 1e9)
    steps = block_k // space.arithmetic.k
    # per step of K, a warp loads its A fragments (fm rows each) and its B fragments (fn rows each)
    rows = point["frags_m"] * tiles["fm"] + point["frags_n"] * tiles["fn"]
    shared_loads = blocks * warps * steps * rows * space.arithmetic.k * in_bytes
    shared_s = shared_seconds(dev, blocks, shared_loads)
    overlapped = point["stages"] > 1 or per_sm > 1
    parts = {"compute": compute_s if overlapped else compute_s + max(l2_s, shared_s), "dram": dram_s, "l2": l2_s,
             "shared": shared_s}
    seconds, bound = roof(parts)
    # split-K's second kernel: a launch, and a pass over the partials in DRAM
    sum_s = LAUNCH_S + (partial_bytes + out_bytes) / (dev.memory_gbps * 1e9) if split > 1 else 0.0
    seconds += sum_s
    figures = {"blocks": blocks, "threads": threads, "warps": warps, "shared_bytes": shared_bytes,
               "registers": registers, "blocks_per_sm": per_sm, "waves": waves, "issue_efficiency": issue_eff,
               "split_k": split, "partial_bytes": partial_bytes, "sum_s": sum_s,
               "padded_flops": padded_flops, "padding_overhead": space.padding_overhead(point),
               "tensor_peak_tflops": peak / 1e12, "overlapped": float(overlapped), "l2_bytes": l2_bytes,
               "shared_load_bytes": shared_loads, "launch_s": LAUNCH_S, **{f"{k}_s": v for k, v in parts.items()}}
    return GpuEstimate(seconds, bound, figures)


#: a scattered 4-byte access moves one L2 sector
SECTOR_BYTES = 32
#: registers a thread of a transform kernel takes (ptxas: 32-48 for F(2×2) and F(4×4), bias, residual and ReLU
#: fused): for its occupancy only
TRANSFORM_REGISTERS = 64


@dataclass(frozen=True)
class TransformKernel:
    """One of Winograd's transform kernels as the roofline sees it (``gpu_cpu/winograd_gpu.py``): its threads
    (one a tile and channel, ``block`` a block), the FLOPs of its unrolled sums, the bytes it reads and writes
    in runs a warp coalesces, and the accesses a warp gathers or scatters (each lane its own channel plane)."""

    name: str
    threads: int
    flops: float
    coalesced_bytes: float
    scattered_accesses: float
    block: int = 128


def transform_seconds(dev: GpuDevice, kernel: TransformKernel) -> GpuEstimate:
    """A transform kernel's time: its launch and the slowest of its FP32 sums (at the issue rate its resident
    warps reach), its bytes once through DRAM, its traffic through L2 (the coalesced bytes, and a 32-byte sector
    for every scattered access), and its L1 wavefronts (a warp's access that touches 32 lines is 32 passes of
    its SM's L1, one a cycle). A grid of fewer blocks than SMs gets their share of each rate."""
    blocks = math.ceil(kernel.threads / kernel.block)
    _, _, issue_eff = occupancy(dev, blocks, kernel.block, TRANSFORM_REGISTERS, 0)
    active = min(blocks, dev.sms) / dev.sms
    scattered_bytes = kernel.scattered_accesses * SECTOR_BYTES
    parts = {"compute": kernel.flops / (dev.fp32_tflops * 1e12 * issue_eff),
             "dram": (kernel.coalesced_bytes + kernel.scattered_accesses * 4) / (dev.memory_gbps * 1e9 * active),
             "l2": (kernel.coalesced_bytes + scattered_bytes) / (dev.l2_gbps * 1e9 * active),
             "l1": kernel.scattered_accesses / (min(blocks, dev.sms) * dev.clock_ghz * 1e9)}
    seconds, bound = roof(parts)
    return GpuEstimate(seconds, bound, {"threads": kernel.threads, "blocks": blocks, "issue_efficiency": issue_eff,
                                        "flops": kernel.flops, "coalesced_bytes": kernel.coalesced_bytes,
                                        "scattered_bytes": scattered_bytes, "launch_s": LAUNCH_S,
                                        **{f"{k}_s": v for k, v in parts.items()}})


def winograd_estimate(product: GpuEstimate, transforms: dict[str, GpuEstimate]) -> GpuEstimate:
    """A Winograd convolution's estimate: its three kernels one after the other (the input transform, the
    product, the output transform); bound by the slowest kernel's bound, named ``kernel:bound``."""
    kernels = {"input_transform": transforms["input_transform"], "product": product,
               "output_transform": transforms["output_transform"]}
    slowest = max(kernels, key=lambda k: kernels[k].seconds)
    figures = {f"{k}_s": e.seconds for k, e in kernels.items()}
    figures.update({f"product_{k}": v for k, v in product.figures.items()})
    return GpuEstimate(sum(e.seconds for e in kernels.values()), f"{slowest}:{kernels[slowest].bound}", figures)
