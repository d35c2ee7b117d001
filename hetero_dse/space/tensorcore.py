"""The GPU's tensor-core space (Bolt, seed 003 §3): a templated, hardware-native space instead of loop splits.

A contraction of two tensors (a GEMM, a batched GEMM, a convolution as an implicit GEMM) is normalised to
``C[s, i, j] += A[s, i, k] · B[s, j, k]`` — TVM's ``reindex`` gathers the convolution's windows into the
GEMM's A — and computed by the MMA instruction of the device on 16×16×16 fragments. The knobs are the
template's: warps per thread block along M and N, fragments per warp along M and N (the warp tile), the K
chunk staged in shared memory, the pipeline stages of that stage and whether its copies are asynchronous
(Ampere's ``cp.async``: global to shared memory without a trip through registers, as CUTLASS's multistage
kernels do), the width of each thread's global loads, and the skew of a shared-memory row (which breaks bank
conflicts, the role a swizzle plays in CUTLASS).

Extents that are not a multiple of the block tile are padded (``pad_einsum``): the padded FLOPs are work the
device does, counted in the estimate and reported as the padding's cost. Points beyond the device's limits
(threads, shared memory, registers) are never built.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hetero_dse.analysis import Analysis, dtype_bytes
from hetero_dse.hardware.gpus import GpuDevice
from hetero_dse.space.point import Point
from hetero_dse.space.splits import SplitSpace

__all__ = ["ARITHMETIC", "BY_INSTRUCTION", "SHAPES", "Arithmetic", "GemmView", "TensorCoreSpace", "async_copy",
           "fragment_shape", "gathered_inputs", "gemm_view", "split_k", "tensor_core_arithmetic"]

#: the fragment's M and N of the square wmma instruction (its K is the arithmetic's)
FRAGMENT = 16
#: the wmma fragment shapes (M, N) CUDA has for every arithmetic here: square, tall and wide (the same 256
#: accumulators a warp; a tall or wide one pads a narrow extent to 8 instead of 16)
SHAPES = ((16, 16), (32, 8), (8, 32))


@dataclass(frozen=True)
class Arithmetic:
    """One tensor-core arithmetic: the inputs' type, the accumulator's, the wmma instruction and its K."""

    name: str         # what the report and --dtype call it
    inputs: str       # the operator's input type
    accumulator: str
    instruction: str  # the square shape's PTX name and types (wmma.m16n16k16.f16.f32)
    k: int            # the fragment's K (16 for these; TF32's would be 8)

    @property
    def instructions(self) -> tuple[str, ...]:
        """Every wmma instruction of this arithmetic, one per fragment shape: the point's "mma" knob."""
        types = self.instruction.split(".", 2)[2]
        return tuple(f"wmma.m{m}n{n}k{self.k}.{types}" for m, n in SHAPES)


#: every tensor-core arithmetic, by its input type. No TF32: TVM's CUDA code generator refuses float operand
#: fragments (codegen_cuda.cc: "Matrix_a and matrix_b only support half or char ..."), so float32 runs on
#: the SIMT cores.
ARITHMETIC = {a.name: a for a in (
    Arithmetic("float16", "float16", "float32", "wmma.m16n16k16.f16.f32", 16),
    Arithmetic("bfloat16", "bfloat16", "float32", "wmma.m16n16k16.bf16.f32", 16),
    Arithmetic("int8", "int8", "int32", "wmma.m16n16k16.s8.s32", 16),
)}
#: the instruction a tensor-core point names -> its arithmetic (how a schedule is rebuilt from its point)
BY_INSTRUCTION = {name: a for a in ARITHMETIC.values() for name in a.instructions}


def fragment_shape(instruction: str) -> tuple[int, int]:
    """The fragment's M and N of a wmma instruction's name."""
    m, n = re.match(r"wmma\.m(\d+)n(\d+)k", instruction).groups()
    return int(m), int(n)


#: the period of the staged rows' skew (elements): a row's stride is the skew modulo this
SKEW_FACTOR = 32
#: registers a thread spends beside its fragments: addresses, loop counters, the load pipeline's temporaries
REGISTER_OVERHEAD = 40
MAX_REGISTERS_PER_THREAD = 255
#: the knobs added after points were first recorded, and the value a point written before them ran with
LATER_KNOBS = {"split_k": 1, "async_copy": 0}
#: ``cp.async`` came with Ampere, and copies 4, 8 or 16 bytes a thread (a narrower copy stays a plain load)
ASYNC_COPY_FROM = 80
ASYNC_COPY_MIN_BYTES = 4


@dataclass(frozen=True)
class GemmView:
    """The operator as ``C[s, i, j] += A[s, i, k] · B[s, j, k]``: the extents of each role, which loops of the
    main node make it up, and the input type."""

    batch: int
    m: int
    n: int
    k: int
    dtype: str


def gemm_view(analysis: Analysis) -> GemmView | None:
    """The GEMM an operator is, or None: two inputs multiplied and summed (one multiply per iteration), every
    spatial loop indexing the output and at least one input, every reduce loop both inputs. A loop both inputs
    index is a batch loop (a depthwise convolution's channel), one only A indexes is M, one only B indexes N."""
    main = analysis.main
    if len(analysis.reads) != 2 or not main.reduce or main.multiplies_per_iteration != 1:
        return None
    a, b = ({name for ix in r.indices for name in ix.loops} for r in analysis.reads)
    extents = {"batch": 1, "m": 1, "n": 1, "k": 1}
    for loop in main.loops:
        if loop.kind == "reduce":
            if loop.name not in a or loop.name not in b:
                return None
            role = "k"
        else:
            role = "batch" if loop.name in a and loop.name in b else "m" if loop.name in a else (
                "n" if loop.name in b else None)
            if role is None:
                return None
        extents[role] *= loop.extent
    dtypes = {r.dtype for r in analysis.reads}
    if len(dtypes) != 1:
        return None
    return GemmView(**extents, dtype=dtypes.pop())


def tensor_core_arithmetic(analysis: Analysis, device: GpuDevice) -> str | None:
    """Why the tensor cores cannot take this operator on ``device``; None when they can."""
    view = gemm_view(analysis)
    if view is None:
        return f"{analysis.operator} is not a contraction of two tensors (a GEMM or a convolution)"
    arithmetic = ARITHMETIC.get(view.dtype)
    if arithmetic is None:
        return (f"{view.dtype} inputs have no tensor-core instruction here (float16 and bfloat16 with float32 "
                f"accumulation, int8 with int32)")
    if device.tensor_tflops(arithmetic.name) <= 0:
        return f"{device.name} ({device.arch}) has no {arithmetic.name} tensor cores"
    ones = [name for name, extent in (("M", view.m), ("N", view.n), ("K", view.k)) if extent == 1]
    if ones:  # a matrix-vector product, a depthwise convolution: TVM's GEMM normalisation drops the unit loop
        return f"its {' and '.join(ones)} {'is' if len(ones) == 1 else 'are'} 1, no tensor-core tile"
    return None


def _k_contiguous(access, reduce) -> bool:
    """Whether the reduce loops index ``access``'s last dimensions one each, in order, over their whole extents:
    then K, flattened, is contiguous in memory (a weight W[k, c, rx, ry], the A of A·B)."""
    n = len(reduce)
    if len(access.indices) < n:
        return False
    for index, size, loop in zip(access.indices[-n:], access.shape[-n:], reduce, strict=True):
        if index.terms != ((loop.name, 1),) or index.constant != 0 or size != loop.extent:
            return False
    return True


def gathered_inputs(analysis: Analysis) -> tuple[str, ...]:
    """The inputs of the main node whose K is not one contiguous run in memory (B of A·B, a convolution's input
    windows): a copy of their K chunk gathers element by element."""
    return tuple(r.tensor for r in analysis.reads if not _k_contiguous(r, analysis.main.reduce))


def skewed_row(bk, skew):
    """The elements of one staged row of a K chunk: TVM's ``storage_align`` makes the row's stride the smallest
    at least ``bk`` that is ``skew`` modulo 32 banks' worth (``bk`` itself without a skew). Ints or arrays."""
    return bk + (skew - bk) % SKEW_FACTOR * (skew > 0)


def split_k(point: Point) -> int:
    """The splits of K of a tensor-core point (1 for points written before the knob existed)."""
    return int(point.get("split_k", LATER_KNOBS["split_k"]))


def async_copy(point: Point) -> bool:
    """Whether a tensor-core point stages its chunks with ``cp.async`` (not for points written before the knob)."""
    return bool(point.get("async_copy", LATER_KNOBS["async_copy"]))


def _ceil(x: int, to: int) -> int:
    return -(-x // to) * to


class TensorCoreSpace(SplitSpace):
    """Bolt's templated space on the tensor cores of ``device`` for an operator ``gemm_view`` accepts."""

    kind = "tensor-core space"

    def __init__(self, analysis: Analysis, device: GpuDevice) -> None:
        self.device = device
        view = gemm_view(analysis)
        why = tensor_core_arithmetic(analysis, device)
        if view is None or why:
            raise ValueError(why)
        self.view = view
        self.arithmetic = ARITHMETIC[view.dtype]
        #: the inputs whose K is not one contiguous run in memory (B of A·B, a convolution's input windows):
        #: their loads along K are gathers
        self.gathered = gathered_inputs(analysis)
        super().__init__(analysis, 0, 0, {
            "mma": self.arithmetic.instructions,
            "warps_m": (1, 2, 4), "warps_n": (1, 2, 4),
            "frags_m": (1, 2, 4, 8), "frags_n": (1, 2, 4, 8),
            "k_frags": (1, 2, 4, 8),
            "stages": (1, 2, 3, 4),
            # cp.async (sm_80 on): each stage's copy goes from global to shared memory without registers, and
            # the copies of the next chunks are in flight while this one multiplies (the deeper pipelines)
            "async_copy": (0, 1),
            "vector": (1, 2, 4, 8),
            "skew": (0, 8),
            # split-K (CUTLASS's): K cut among more blocks, their partial sums added by a second kernel; for
            # layers whose tiles are too few to fill the SMs (a 7×7 output of 1,024 channels: 8 blocks of 64×128)
            "split_k": (1, 2, 4, 8),
        }, split_loops=False)

    # -------------------------------------------------------------------------------------- the template
    def _template(self, knob: Mapping[str, Any]) -> dict[str, Any]:
        """The tiles, threads, shared-memory bytes and registers of knob values: the ints of one point, or arrays
        of many (the rejection sampling's rows). One formula for :meth:`limits` and for the rules on arrays."""
        fm, fn, k = knob["fm"], knob["fn"], self.arithmetic.k
        bm, bn, bk = fm * knob["warps_m"] * knob["frags_m"], fn * knob["warps_n"] * knob["frags_n"], k * knob["k_frags"]
        warps = knob["warps_m"] * knob["warps_n"]
        in_bytes, acc_bytes = dtype_bytes(self.view.dtype), dtype_bytes(self.arithmetic.accumulator)
        staged = knob["stages"] * (bm + bn) * skewed_row(bk, knob["skew"]) * in_bytes
        out = bm * bn * acc_bytes  # the accumulators' write-back through shared memory, unskewed
        # per thread: an accumulator fragment is 256 values over 32 lanes (8 words); an A or B fragment
        # 16 (or 32, or 8) × K values over 32 lanes (4 words of 16-bit inputs, 2 of int8, for 16 rows)
        acc = knob["frags_m"] * knob["frags_n"] * fm * fn * acc_bytes // (32 * 4)
        operands = (knob["frags_m"] * fm + knob["frags_n"] * fn) * k * in_bytes // (32 * 4)
        return {"bm": bm, "bn": bn, "bk": bk, "wm": fm * knob["frags_m"], "wn": fn * knob["frags_n"], "fm": fm,
                "fn": fn, "threads": warps * 32, "warps": warps, "shared_bytes": staged + out,
                "registers": acc + operands + REGISTER_OVERHEAD}

    def _knobs(self, point: Point) -> dict[str, Any]:
        fm, fn = fragment_shape(point["mma"])
        return {**point, "fm": fm, "fn": fn}

    def tiles(self, point: Point) -> dict[str, int]:
        """The block tile (BM × BN × BK), the warp tile and the fragment of ``point``."""
        t = self._template(self._knobs(point))
        return {key: t[key] for key in ("bm", "bn", "bk", "wm", "wn", "fm", "fn")}

    def padded(self, point: Point) -> dict[str, int]:
        """The GEMM's extents after padding to the block tile (the work the device does)."""
        t, v = self.tiles(point), self.view
        return {"batch": v.batch, "m": _ceil(v.m, t["bm"]), "n": _ceil(v.n, t["bn"]),
                "k": _ceil(v.k, t["bk"] * split_k(point))}

    def padding_overhead(self, point: Point) -> float:
        """Padded multiply-adds over the operator's own: 1.0 when the extents fit the tile."""
        p, v = self.padded(point), self.view
        return (p["m"] * p["n"] * p["k"]) / (v.m * v.n * v.k)

    def limits(self, point: Point) -> dict[str, int]:
        """Threads per block, shared-memory bytes (the staged A and B tiles, each stage, skewed rows; and the
        block's accumulator tile staged on the way out) and registers per thread."""
        t = self._template(self._knobs(point))
        return {key: int(t[key]) for key in ("threads", "warps", "shared_bytes", "registers")}

    def violations(self, point: Point) -> list[str]:
        lim, dev, t, v = self.limits(point), self.device, self.tiles(point), self.view
        out = []
        if lim["threads"] > dev.max_threads_per_block:
            out.append(f"{lim['threads']} threads per block > {dev.max_threads_per_block}")
        if lim["shared_bytes"] > dev.shared_memory_per_block:
            out.append(f"{lim['shared_bytes']} B of shared memory > {dev.shared_memory_per_block}")
        if lim["registers"] > MAX_REGISTERS_PER_THREAD:
            out.append(f"~{lim['registers']} registers per thread > {MAX_REGISTERS_PER_THREAD}")
        # a block tile past the padded matrix only multiplies zeros
        k = self.arithmetic.k
        for name, tile, extent, frag in (("M", t["bm"], v.m, t["fm"]), ("N", t["bn"], v.n, t["fn"]),
                                         ("K", t["bk"], v.k, k)):
            if tile > _ceil(extent, frag) and tile > frag:
                out.append(f"the {name} tile {tile} exceeds the {name} extent {extent} padded to {frag}")
        # each thread's load of A and B is vector-wide along K: the K chunk must hold whole vectors, and the
        # widest loads need K innermost in memory (TVM's CUDA code for an 8-wide gather does not compile)
        chunks = -(-v.k // t["bk"])
        if split_k(point) > chunks:
            out.append(f"split-K {split_k(point)} > the {chunks} K chunks")
        per_block = -(-chunks // split_k(point))
        if point["stages"] > max(2, per_block):
            out.append(f"{point['stages']} stages for {per_block} K chunks a block: buffers never filled")
        if t["bk"] % point["vector"]:
            out.append(f"{point['vector']}-wide loads do not divide the K chunk {t['bk']}")
        if point["vector"] == 8 and self.gathered and not async_copy(point):  # (cp.async's copy them one by one)
            out.append(f"8-wide loads of {', '.join(self.gathered)} would gather along K")
        if async_copy(point):
            # cp.async copies a contiguous, aligned run: the inputs that gather along K keep plain loads (the
            # schedule copies them element by element, too narrow for cp.async), the others need whole vectors
            if self.device.compute_capability < ASYNC_COPY_FROM:
                out.append(f"{self.device.name} ({self.device.arch}) has no cp.async (sm_80 on)")
            if point["stages"] < 2:
                out.append("asynchronous copies with one stage: nothing overlaps them")
            if len(self.gathered) == len(self.analysis.reads):
                out.append("every input gathers along K: no copy cp.async can take")
            if point["vector"] * dtype_bytes(v.dtype) < ASYNC_COPY_MIN_BYTES:
                out.append(f"{point['vector']}-wide copies of {v.dtype} are narrower than cp.async's "
                           f"{ASYNC_COPY_MIN_BYTES} bytes")
            if v.k % point["vector"]:
                out.append(f"rows of K = {v.k} are not whole {point['vector']}-wide copies: cp.async's would be "
                           f"misaligned")
        elif point["stages"] > 2:
            # without cp.async a stage's copy passes through registers and must land before the chunk it
            # precedes is multiplied: a third buffer only spends shared memory
            out.append(f"{point['stages']} stages of synchronous copies: only cp.async keeps more than two in flight")
        return out

    #: the rules are array arithmetic on the knobs (``_valid_rows``): a block of draws costs little
    vectorised = True
    draws_per_point = 2000

    def _valid_rows(self, rows: np.ndarray) -> np.ndarray:
        """:meth:`violations` of many rows at once, as array comparisons (tested to agree point by point)."""
        knob = {name: np.asarray(values)[rows[:, j]] for j, (name, values) in enumerate(self.choices.items())
                if name != "mma"}
        shapes = np.array([fragment_shape(i) for i in self.choices["mma"]])[rows[:, list(self.choices).index("mma")]]
        t = self._template({**knob, "fm": shapes[:, 0], "fn": shapes[:, 1]})
        dev, v, k, bk = self.device, self.view, self.arithmetic.k, t["bk"]
        ok = ((t["threads"] <= dev.max_threads_per_block) & (t["shared_bytes"] <= dev.shared_memory_per_block)
              & (t["registers"] <= MAX_REGISTERS_PER_THREAD))
        for tile, extent, frag in ((t["bm"], v.m, t["fm"]), (t["bn"], v.n, t["fn"]), (bk, v.k, k)):
            ok &= ~((tile > _ceil(extent, frag)) & (tile > frag))
        chunks = -(-v.k // bk)
        ok &= knob["split_k"] <= chunks
        ok &= knob["stages"] <= np.maximum(2, -(-chunks // knob["split_k"]))
        ok &= bk % knob["vector"] == 0
        if self.gathered:
            ok &= (knob["vector"] != 8) | (knob["async_copy"] == 1)
        copies = knob["async_copy"] == 1
        ok &= ~copies | ((dev.compute_capability >= ASYNC_COPY_FROM) & (knob["stages"] >= 2)
                         & (len(self.gathered) < len(self.analysis.reads))
                         & (knob["vector"] * dtype_bytes(v.dtype) >= ASYNC_COPY_MIN_BYTES)
                         & (v.k % knob["vector"] == 0))
        ok &= copies | (knob["stages"] <= 2)
        return ok

    def encode(self, point: Point) -> np.ndarray:
        # a point of the history written before a knob existed ran with the knob's old behaviour
        missing = {k: v for k, v in LATER_KNOBS.items() if k not in point}
        return super().encode(point.replace(**missing) if missing else point)

    def beyond_limits(self, point: Point) -> str | None:
        problems = [p for p in self.violations(point) if "threads" in p or "shared" in p or "registers" in p]
        return f"beyond the limits of {self.device.name}: {'; '.join(problems)}" if problems else None

    def default_point(self) -> Point:
        """CUTLASS's default for these shapes: a 2×2-warp block of 2×2-fragment warps (64×64), K chunk 32,
        double buffered, 8-wide loads (4 where K is strided), skewed rows; shrunk where the matrix is smaller."""
        point = Point({"mma": self.arithmetic.instruction, "warps_m": 2, "warps_n": 2, "frags_m": 2, "frags_n": 2,
                       "k_frags": 2, "stages": 2, "vector": 4 if self.gathered else 8, "skew": 8, "split_k": 1,
                       "async_copy": 0})
        for knob in ("frags_m", "frags_n", "warps_m", "warps_n", "k_frags", "vector"):
            while self.violations(point) and point[knob] > 1:
                point = point.replace(**{knob: point[knob] // 2})
        return point if not self.violations(point) else None

    def grid(self, point: Point) -> int:
        """Thread blocks launched by the multiplying kernel (each split of K its own)."""
        p, t = self.padded(point), self.tiles(point)
        return p["batch"] * (p["m"] // t["bm"]) * (p["n"] // t["bn"]) * split_k(point)

    def _where(self) -> str:
        return f"within the limits of {self.device.name}"

