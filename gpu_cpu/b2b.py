"""Persistent fusion of back-to-back GEMMs on the GPU (Bolt, seed 003 §4.2): ``O = e1(e0(A·B0)·B1)`` in one
kernel, ``e0`` and ``e1`` epilogues (a bias, a residual add, an activation), whose thread blocks each own
``rows`` rows of A, compute those rows of the intermediate ``T = e0(A·B0)`` — every one of its N0 columns — into
shared memory, and multiply them by B1 from there, ``e1`` applied on the way out. T never goes to
global memory and the pair is one launch; the price is that every block reads all of B0 and B1 (through L2),
and that a block's rows of T must fit in shared memory, so it pays where N0 is small and M large (1×1
convolutions, a transformer's MLP at long sequences) and loses where M is small (a batch-1 classifier).

``choose`` decides it the way the rest of the GPU flow decides without a GPU: the fused kernel's best point on
its roofline against the two GEMMs' best estimated schedules (``GpuTarget`` searches each), every figure an
estimate. The fused kernel is generated and compiled by nvcc like any other; ``emulate=True`` applies the
same fusion without the GPU bindings for TVM's CPU backend, where it is checked against the unfused pair.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from cost_models.gpu_roofline import LAUNCH_S, GpuEstimate, occupancy, roof, shared_seconds
from hetero_dse.analysis import analyze, dtype_bytes
from hetero_dse.epilogue import apply_numpy, apply_te, check_steps, fuse, parse_step
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.gpus import GpuDevice
from hetero_dse.operator import Operator
from hetero_dse.ops.conv import is_pointwise
from hetero_dse.space.point import Point
from hetero_dse.space.tensorcore import gemm_view

__all__ = ["FusedChoice", "GemmPair", "apply_b2b", "choose", "estimate_b2b", "fused_points"]

#: the fused kernel's knobs: rows of A per block, threads per block (both GEMMs share them), and the
#: independent accumulators of each thread (its register tile along the output's row-major order)
ROWS = (1, 2, 4, 8, 16, 32, 64, 128)
THREADS = (32, 64, 128, 256)
#: the accumulators the space offers: one. The template fuses a block's rows and columns into one loop before it
#: deals the outputs to threads, so a thread's accumulator is indexed by an expression of that fused index TVM
#: does not reduce to the accumulator's number: at 74 of the 102 points an H200 ran with several, ptxas keeps
#: the accumulators in local memory (frames of 72 bytes to 46 KB), and each accumulator's zeroing stays a branch
#: inside the reduction. On the H200 the median point with several ran 1.1-11x slower than the median with one,
#: where the roofline, which counts their independent FMA chains, ranked them first (bench/gpu_b2b_measured.py,
#: BENCHMARKS.md). ``apply_b2b`` still takes any number (``regs``): splitting the columns alone, dealing a
#: thread's outputs a warp apart and decomposing the reductions would make them registers (unmeasured)
REGS = (1,)
#: the shared-memory limit is the device's; the tiles' divisibility, checked before a schedule, is anyone's
_ANY_DEVICE = GpuDevice("any", "sm_90", 1024, 1 << 30, 16, 1, 1.0, 1.0, 1 << 30, 1.0, 1.0)
REGISTER_OVERHEAD = 24  # per thread besides its accumulators: addresses, loop counters
FMA_LATENCY_CYCLES = 4


@dataclass(frozen=True)
class GemmPair:
    """``O[m, n1] = second(Σ_n0 T[m, n0] · B1[n0, n1])`` with ``T = first(Σ_k A[m, k]·B0[k, n0])``; float32.
    ``first`` and ``second`` are epilogues (``hetero_dse.epilogue``: a bias per column, a residual add, an
    activation), each applied where its GEMM's accumulators are written: T's on the way into shared memory,
    O's on the way out.

    ``channels_first``: the layout of two 1×1 convolutions in NCHW, whose channels are the rows of A, T and O and
    whose pixels (M) are their columns: ``O[n1, m] = second(Σ_n0 B1[n1, n0] · T[n0, m])``, ``T[n0, m] =
    first(Σ_k B0[n0, k] · A[k, m])``, the weights as PyTorch holds them (output × input channels), a bias per
    channel (row), a residual in the same layout. The kernel still gives each block a run of M (pixels)."""

    m: int
    k: int
    n0: int
    n1: int
    first: tuple[str, ...] = ("relu",)
    second: tuple[str, ...] = ()
    channels_first: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "first", check_steps(self.first))
        object.__setattr__(self, "second", check_steps(self.second))

    @classmethod
    def of(cls, first: Operator, second: Operator) -> GemmPair:
        """The pair two GEMMs, or two 1×1 convolutions (NCHW, batch 1), make when the second's input is the
        first's output (its epilogue applied); one sentence where they do not."""
        convs = [op.name == "conv2d" for op in (first, second)]
        if any(convs):
            if not all(is_pointwise(op.name, op.params) for op in (first, second)):
                raise HeteroDSEError(f"{first.title} and {second.title} are not two 1×1 convolutions (stride 1, no "
                                     f"padding, one group, batch 1) nor two GEMMs: the fused kernel multiplies "
                                     f"matrices, it gathers no windows")
        views = [gemm_view(analyze(op)) for op in (first, second)]
        if any(v is None or v.batch != 1 or v.dtype != "float32" for v in views):
            raise HeteroDSEError(f"{first.title} and {second.title} are not two float32 GEMMs (batch 1): the fused "
                                 f"kernel computes in float32 on the SIMT cores")
        a, b = views
        if (a.m, a.n) != (b.m, b.k):
            raise HeteroDSEError(f"{second.title} does not multiply {first.title}'s {a.m}×{a.n} output: it takes "
                                 f"{b.m}×{b.k}")
        return cls(a.m, a.k, a.n, b.n, tuple(first.epilogue), tuple(second.epilogue), channels_first=convs[0])

    def unfused(self) -> tuple[Operator, Operator]:
        """The same computation as two kernels: the built-in gemm (1×1 conv2d, channels first) with the first
        epilogue in its write-back, then the same on its output with the second."""
        from hetero_dse.ops import get_builtin

        if self.channels_first:  # M pixels as a 1 × M image
            conv = get_builtin("conv2d")
            params = {"batch": 1, "H": 1, "W": self.m, "kernel": 1, "stride": 1, "padding": 0}
            first = fuse(conv.instantiate({**params, "C": self.k, "K": self.n0}), self.first, (1,))
            return first, fuse(conv.instantiate({**params, "C": self.n0, "K": self.n1}), self.second, (1,))
        gemm = get_builtin("gemm")
        first = fuse(gemm.instantiate({"M": self.m, "N": self.n0, "K": self.k}), self.first, (1,))
        return first, fuse(gemm.instantiate({"M": self.m, "N": self.n1, "K": self.n0}), self.second, (1,))

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n0 * (self.k + self.n1)

    def tensors(self) -> list[Any]:
        """The pair as one tensor expression: A, B0, the first epilogue's inputs, B1, the second's, and O, with
        S = A·B0 and T = first(S) in between."""
        from tvm import te

        # channels first, every matrix of the row-major pair is stored transposed: its columns are the rows
        flip = self.channels_first
        columns = (0,) if flip else (1,)  # where a product's columns are stored: a bias has one per column

        def matrix(rows: int, cols: int, name: str) -> Any:
            return te.placeholder((cols, rows) if flip else (rows, cols), name=name)

        def at(t: Any, row: Any, col: Any) -> Any:
            return t[col, row] if flip else t[row, col]

        def product(rows: int, cols: int, body: Callable[[Any, Any], Any], name: str) -> Any:
            if flip:
                return te.compute((cols, rows), lambda j, i: body(i, j), name=name)
            return te.compute((rows, cols), lambda i, j: body(i, j), name=name)

        A, B0, B1 = matrix(self.m, self.k, "A"), matrix(self.k, self.n0, "B0"), matrix(self.n0, self.n1, "B1")
        k = te.reduce_axis((0, self.k), name="k")
        n = te.reduce_axis((0, self.n0), name="n")
        # A read first: the kernel stages its first read (a block's run of M of A) in shared memory
        S = product(self.m, self.n0, lambda i, j: te.sum(at(A, i, k) * at(B0, k, j), axis=k), "S")
        first, T = apply_te(S, self.first, columns, name="T", prefix="T_") if self.first else ([], S)
        P = product(self.m, self.n1, lambda i, j: te.sum(at(T, i, n) * at(B1, n, j), axis=n),
                    "P" if self.second else "O")
        second, O = apply_te(P, self.second, columns, name="O", prefix="O_") if self.second else ([], P)
        return [A, B0, *first, B1, *second, O]

    @property
    def output_shape(self) -> tuple[int, int]:
        return (self.n1, self.m) if self.channels_first else (self.m, self.n1)

    def input_shapes(self) -> list[tuple[int, ...]]:
        """The shapes of the fused kernel's inputs, in ``tensors()``'s order."""
        return [tuple(int(d) for d in t.shape) for t in self.tensors()[:-1]]

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        return [rng.uniform(-1, 1, size=s).astype("float32") for s in self.input_shapes()]

    def split_inputs(self, inputs: list[Any]) -> tuple[list[Any], list[Any], Any]:
        """``inputs`` in ``tensors()``'s order as (A and B0 with the first epilogue's inputs, the second's, B1)."""
        n = 2 + sum(parse_step(step)[0] in ("bias", "add") for step in self.first)
        return list(inputs[:n]), list(inputs[n + 1:]), inputs[n]

    def reference(self, inputs: list[np.ndarray]) -> np.ndarray:
        (a, b0, *first), second, b1 = self.split_inputs([x.astype(np.float64) for x in inputs])
        if self.channels_first:
            t = apply_numpy(self.first, b0 @ a, first, (0,))
            return apply_numpy(self.second, b1 @ t, second, (0,))
        t = apply_numpy(self.first, a @ b0, first, (1,))
        return apply_numpy(self.second, t @ b1, second, (1,))

    def epilogue_reads(self) -> tuple[int, int]:
        """Bytes the epilogues read besides the GEMMs' operands: (biases, one row of the output's columns per
        bias; residuals, a whole M × N each), float32."""
        def kinds(steps: tuple[str, ...]) -> list[str]:
            return [parse_step(step)[0] for step in steps]
        word = dtype_bytes("float32")
        biases = (kinds(self.first).count("bias") * self.n0 + kinds(self.second).count("bias") * self.n1) * word
        residuals = (kinds(self.first).count("add") * self.n0 + kinds(self.second).count("add") * self.n1) * self.m
        return biases, residuals * word


# ------------------------------------------------------------------------------------------------ the kernel
def limits(pair: GemmPair, point: Point) -> dict[str, int]:
    """Shared memory (the block's rows of A and of T), threads, and registers per thread."""
    rows = point["rows"]
    return {"shared_bytes": rows * (pair.k + pair.n0) * 4, "threads": point["threads"],
            "registers": point["regs"] + REGISTER_OVERHEAD}


def violations(pair: GemmPair, point: Point, device: GpuDevice) -> list[str]:
    lim, out = limits(pair, point), []
    if lim["shared_bytes"] > device.shared_memory_per_block:
        out.append(f"{point['rows']} rows of A and T take {lim['shared_bytes']} B of shared memory > "
                   f"{device.shared_memory_per_block}")
    # exact tiles only: where the rows do not divide M, or the threads' outputs a block's rows × N0 or rows × N1,
    # TVM's region analysis ignores the tail's predicate and stages rows past the block's, past the matrix at
    # the last block (reads out of bounds); such shapes keep the rows and threads that divide them (one row a
    # block always divides M)
    if pair.m % point["rows"]:
        out.append(f"{point['rows']} rows per block do not divide M = {pair.m}")
    per_step = point["threads"] * point["regs"]
    for name, n in (("N0", pair.n0), ("N1", pair.n1)):
        if (point["rows"] * n) % per_step:
            out.append(f"{point['threads']} threads × {point['regs']} outputs do not divide {point['rows']} rows "
                       f"× {name} = {n}")
    return out


def fused_points(pair: GemmPair, device: GpuDevice) -> list[Point]:
    """Every point of the fused kernel's template within the device's limits."""
    points = (Point({"rows": r, "threads": t, "regs": g}) for r, t, g in itertools.product(ROWS, THREADS, REGS))
    return [p for p in points if not violations(pair, p, device)]


def apply_b2b(pair: GemmPair, point: Point, emulate: bool = False) -> Any:
    """The fused kernel as a TIR module. ``emulate``: the same blocks, loops and staging without the GPU's
    thread bindings and memory scopes, for TVM's CPU backend."""
    import tvm
    from tvm import s_tir, te

    from gpu_cpu.blocks import ScheduleError, rejected

    problems = [v for v in violations(pair, point, _ANY_DEVICE) if "shared memory" not in v]
    if problems:
        raise ScheduleError(f"{point} is no point of the fused template for {pair}: {'; '.join(problems)}")
    rows, threads, regs = point["rows"], point["threads"], point["regs"]
    try:
        sch = s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func(pair.tensors())}))
        first, second = sch.get_sblock("S"), sch.get_sblock("P" if pair.second else "O")
        local = "global" if emulate else "local"
        # the first GEMM accumulates in registers; its write-back applies the activation and writes T
        write_back = sch.cache_write(first, 0, local)
        if pair.first:
            sch.reverse_compute_inline(sch.get_sblock("T"))

        def inside_rows(block: Any) -> list[Any]:
            """``block``'s loops inside the block's rows (one row per block leaves no row loop of its own)."""
            loops = sch.get_loops(block)
            return loops[next(n for n, loop in enumerate(loops) if sch.get(loop).same_as(sch.get(block_rows))) + 1:]

        def one(loops: list[Any]) -> Any:
            return sch.fuse(*loops) if len(loops) > 1 else loops[0]

        def threaded(block: Any) -> Any:
            """``block``'s spatial loops inside the block's rows as one, dealt over the threads ``regs`` at a time,
            each thread's outputs accumulated side by side inside the reduction (independent FMA chains)."""
            *spatial, r = inside_rows(block)
            serial, tx, tile = sch.split(one(spatial), [None, threads, regs])
            sch.reorder(serial, tx, r, tile)
            if not emulate:
                sch.bind(tx, "threadIdx.x")
            return tx

        if pair.channels_first:  # O[n1, m]: a block's run of M (pixels), its channels outside it
            c, i, _ = sch.get_loops(second)
            block_rows, inner = sch.split(i, [None, rows])
            sch.reorder(block_rows, c, inner)
        else:
            i, _, _ = sch.get_loops(second)
            block_rows, _ = sch.split(i, [None, rows])
        if not emulate:
            sch.bind(block_rows, "blockIdx.x")
        tx = threaded(second)
        out = sch.cache_write(second, 0, local)
        if pair.second:  # the second epilogue applied on the way out of the accumulators
            sch.reverse_compute_inline(sch.get_sblock("O"))
        sch.reverse_compute_at(out, tx)
        # the block's rows of T computed by the block itself, kept in shared memory for the second GEMM
        sch.compute_at(write_back, block_rows)
        sch.compute_at(first, block_rows)
        staged_a = sch.cache_read(first, 0, "global" if emulate else "shared")
        sch.compute_at(staged_a, block_rows)
        sch.reverse_compute_at(write_back, threaded(first))
        if not emulate:
            sch.set_scope(write_back, 0, "shared")
            _, ax = sch.split(one(inside_rows(staged_a)), [None, threads])
            sch.bind(ax, "threadIdx.x")
    except Exception as exc:  # TVM's ScheduleError and friends: the point fails, the search goes on
        raise rejected(point, exc) from exc
    return sch.mod


# --------------------------------------------------------------------------------------------- the roofline
def estimate_b2b(pair: GemmPair, point: Point, device: GpuDevice) -> GpuEstimate:
    """The fused kernel's roofline, counted as ``gpu_roofline.estimate`` counts a SIMT point: compute at the
    FP32 peak the resident warps reach, or a thread's chains of dependent FMAs; DRAM: A, B0, B1, O and the
    epilogues' biases and residuals once (T never leaves the chip); L2: every block reads all of B0, B1 and the
    biases, and its rows of A and of the residuals; shared: each FMA's
    operand from shared memory (A's row in the first GEMM, T's in the second) is one word broadcast to a warp."""
    lim = limits(pair, point)
    threads, regs = lim["threads"], point["regs"]
    blocks = math.ceil(pair.m / point["rows"])
    per_sm, waves, issue_eff = occupancy(device, blocks, threads, lim["registers"], lim["shared_bytes"])
    lane_eff = threads / (math.ceil(threads / 32) * 32)
    throughput_s = pair.flops / (device.fp32_tflops * 1e12 * issue_eff * lane_eff)
    fmas_per_thread = pair.flops / 2 / (blocks * threads)
    latency_s = waves * fmas_per_thread * FMA_LATENCY_CYCLES / min(regs, FMA_LATENCY_CYCLES) / (device.clock_ghz * 1e9)
    compute_s = max(throughput_s, latency_s)
    word = dtype_bytes("float32")
    weights = (pair.k * pair.n0 + pair.n0 * pair.n1) * word
    biases, residuals = pair.epilogue_reads()  # a bias read by every block, a residual's rows by their block
    dram_s = ((pair.m * pair.k + pair.m * pair.n1) * word + weights + biases + residuals) / (device.memory_gbps * 1e9)
    l2_bytes = blocks * (weights + biases) + pair.m * pair.k * word + residuals
    l2_s = l2_bytes / (device.l2_gbps * 1e9)
    shared_loads = pair.flops / 2 / 32 * word
    shared_s = shared_seconds(device, blocks, shared_loads)
    parts = {"compute": compute_s, "dram": dram_s, "l2": l2_s, "shared": shared_s}
    seconds, bound = roof(parts)
    return GpuEstimate(seconds, bound, {"blocks": blocks, "threads": threads, "blocks_per_sm": per_sm,
                                        "waves": waves, "issue_efficiency": issue_eff, "l2_bytes": l2_bytes,
                                        "shared_bytes": lim["shared_bytes"], "launch_s": LAUNCH_S,
                                        **{f"{k}_s": v for k, v in parts.items()}})


#: an H200's seconds over the roofline's (bench/gpu_b2b_measured.py: bench/data/gpu_b2b_h200.json against
#: bench/data/gpu_b2b_h200_roofline.json), each (least, most, geometric mean): the fused kernel at the point the
#: roofline ranks first, five pairs (row-major GEMMs, not the channels-first layout of a network's 1×1
#: convolutions); the two layers' best schedules, ten layers. The fused kernel's roofline is the more
#: optimistic. It counts a warp's operand broadcast from shared memory as 4 bytes of the 128 a cycle moves, not
#: as a cycle, no load of B0 or B1 per FMA where a thread cannot hold their columns in registers, and 25
#: registers a thread where ptxas gives 32-255; which of these it is was not measured
FUSED_MEASURED_OVER_ESTIMATE = (1.31, 2.69, 2.00)
LAYERS_MEASURED_OVER_ESTIMATE = (0.89, 1.93, 1.17)
#: the estimated speedup the fused kernel needs to be chosen where nothing is measured: the ratio of the two
#: geometric means, fitted on the five pairs it is checked on (in-sample), on one device (an H200). At it the two
#: pairs fused measured 1.34x and 1.02x; fused at their estimates' point, the three kept as two kernels would have
#: measured 0.84x, 0.70x and 0.38x. A network's plan books the fused kernel's estimate times it (gpu_fusion)
FUSE_MARGIN = FUSED_MEASURED_OVER_ESTIMATE[2] / LAYERS_MEASURED_OVER_ESTIMATE[2]


@dataclass(frozen=True)
class FusedChoice:
    """The fused kernel's best point and estimate against the unfused pair's two figures: its estimate booked times
    ``scale`` (how much slower than its estimate an H200 ran it, over how much slower the layers ran than theirs:
    ``FUSE_MARGIN`` against the layers' estimates, ``FUSED_MEASURED_OVER_ESTIMATE``'s mean against their measured
    times), fused where that is no slower than the two layers."""

    pair: GemmPair
    point: Point | None         # None: no point of the template fits the device
    fused: GpuEstimate | None
    unfused_s: tuple[float, float]
    scale: float = FUSE_MARGIN

    @property
    def booked_s(self) -> float | None:
        return self.fused.seconds * self.scale if self.fused else None

    @property
    def fuse(self) -> bool:
        return self.fused is not None and self.booked_s <= sum(self.unfused_s)

    @property
    def speedup(self) -> float | None:
        return sum(self.unfused_s) / self.fused.seconds if self.fused else None


def best_fused(pair: GemmPair, device: GpuDevice) -> tuple[Point | None, GpuEstimate | None]:
    """The template's best point on the roofline (the space is small: every point is scored) whose generated
    code stays within the block's shared memory: where the threads' share of a block's outputs does not
    divide them, TVM stages a few more rows of A and T than the block owns (the predicated tail)."""
    from gpu_cpu.cuda_usage import declared_shared_bytes
    from gpu_cpu.schedule import ScheduleError, build_cuda

    scored = sorted(((estimate_b2b(pair, p, device), p) for p in fused_points(pair, device)),
                    key=lambda sp: sp[0].seconds)
    for est, point in scored:
        try:
            _, source = build_cuda(apply_b2b(pair, point), device, compile_here=False)
        except ScheduleError:  # a point TVM cannot schedule is no answer; the next best may be
            continue
        if declared_shared_bytes(source) <= device.shared_memory_per_block:
            return point, est
    return None, None


def choose(pair: GemmPair, unfused_s: tuple[float, float], device: GpuDevice, scale: float = FUSE_MARGIN
           ) -> FusedChoice:
    """Fuse when the fused kernel's best estimate, booked times ``scale``, beats the two GEMMs' figures (their best
    schedules' estimates with ``FUSE_MARGIN``, the margin the roofline's optimism for it asks)."""
    point, est = best_fused(pair, device)
    return FusedChoice(pair, point, est, unfused_s, scale)
