"""The GPU schedule space of an operator: the CPU's multi-level splits bound to the GPU's hierarchy
(FlexTensor §4.2): level 0 of the spatial loops to thread blocks, level 1 to virtual threads, level 2 to
threads, level 3 to registers; the reduce levels stage inputs through shared memory. The device's limits
(threads per block, virtual threads, registers, shared memory) are its rules: a point beyond them cannot run
and is never built."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from hetero_dse.analysis import Analysis
from hetero_dse.analysis.window import conv_window
from hetero_dse.hardware.gpus import GpuDevice
from hetero_dse.space.cpu import REDUCE_LEVELS, SPATIAL_LEVELS, UNROLL_STEPS
from hetero_dse.space.point import Point
from hetero_dse.space.splits import SplitSpace

__all__ = ["Dataflow", "GpuSpace"]

MAX_REGISTERS_PER_THREAD = 255  # every NVIDIA architecture since Kepler
REGISTER_OVERHEAD = 24          # indices, addresses and operands beside the accumulators, a typical count
WARP = 32


@dataclass(frozen=True)
class Dataflow:
    """Seed 001's near I/O-optimal dataflow as a block's output tile: x·y pixels (``output_loops``' tiles times
    ``pixels``), z channels (``channel_loops``'), kept within S' = ``words_scale`` · S_b words and near the
    optimality condition x·y = R·z. ``whole_loops`` are never split across blocks."""

    output_loops: tuple[str, ...]
    channel_loops: tuple[str, ...]
    ratio: float                      # R
    pixels: int = 1                   # output pixels per step of the output loops
    words_scale: float = 1.0          # the share of S_b the output tile may take
    whole_loops: tuple[str, ...] = ()

    @classmethod
    def direct(cls, analysis: Analysis) -> Dataflow | None:
        """§5.2 for a convolution-like operator (its sliding window, ``conv_window``); None for any other."""
        window = conv_window(analysis)
        return None if window is None else cls(window.output_loops, window.channel_loops, window.ratio)

    @classmethod
    def winograd(cls, m: int, r: int = 3) -> Dataflow:
        """§5.3 for the batched product of F(m×m, r×r) (``winograd_product``: loops e, p, k, reduce c): a block
        computes whole m×m×z output sub-blocks, every one of the α² points of its tiles (``e`` whole), x·y =
        m²·(tiles), 2·α²/m²·x·y·z ≤ S_b and x·y near r²·z (as for direct: z ≤ √(S'/R), x·y ≤ √(S'·R)). The
        paper's kernel also transforms the output in the block, Π never leaving the chip; here the product
        writes its α² sums to global memory for the output transform's kernel, and the block keeps them in
        registers while it sums over the channels."""
        alpha = m + r - 1
        return cls(("p",), ("k",), float(r * r), m * m, m * m / (2 * alpha * alpha), ("e",))


class GpuSpace(SplitSpace):
    """The same splits on a GPU: level 0 of the spatial loops binds to blocks, level 1 to virtual threads,
    level 2 to threads, level 3 stays in registers; the reduce levels stage inputs through shared memory.
    Points beyond the device's limits (threads per block, shared memory, virtual threads) are invalid and
    never built."""

    kind = "GPU space"

    def __init__(self, analysis: Analysis, device: GpuDevice, spatial_levels: int = SPATIAL_LEVELS,
                 reduce_levels: int = REDUCE_LEVELS, unroll_steps: Sequence[int] = UNROLL_STEPS,
                 domain: bool = True, dataflow: Dataflow | None = None) -> None:
        self.device = device  # its limits are hard rules: a point beyond them cannot run
        # one order (blocks, vthreads, threads, reduce, registers); producers always inlined
        super().__init__(analysis, spatial_levels, reduce_levels, {"unroll": tuple(unroll_steps)})
        #: the dataflow seed 001's domain keeps near (``Dataflow.direct`` unless given: Winograd's product)
        self.dataflow = dataflow or Dataflow.direct(analysis)
        self.extents = {lp.name: lp.extent for lp in analysis.main.loops}
        spatial = int(np.prod([lp.extent for lp in analysis.main.spatial]))
        # the occupancy rules, where the output has two warps' worth for every SM (a smaller kernel is launch
        # bound, and the rules would leave it a handful of points): two warps a block, a block for every SM
        filled = spatial >= 2 * WARP * device.sms
        self.min_blocks = device.sms if filled else 1
        self.min_threads = 2 * WARP if filled else 1
        # seed 001's domain prunes the space the explorers see; an operator too small for it keeps the whole
        if domain and self.dataflow is not None and self.dataflow.whole_loops:
            self._keep_whole(self.dataflow.whole_loops)
        else:
            self.domain = domain and self._domain_reachable()

    def _keep_whole(self, names: tuple[str, ...]) -> None:
        """The splits of the loops ``names`` reduced to those that keep the loop whole in a block (the rest
        are outside the domain: a random draw would hit one in a few thousand), and the domain kept where it is
        then reachable; the space as it was, whole, where it is not."""
        before = list(self.splits), self.cardinalities.copy()
        for i, name in enumerate(self.loop_names):
            if name in names:
                self.splits[i] = tuple(f for f in self.splits[i] if f[0] == 1)
        self.cardinalities = np.array([len(s) for s in self.splits] + [len(v) for v in self.choices.values()],
                                      dtype=np.int64)
        self.__dict__.pop("_factors", None)  # cached from the splits before
        self.domain = self._domain_reachable()
        if not self.domain:
            self.splits, self.cardinalities = before
            self.__dict__.pop("_factors", None)

    @cached_property
    def _factors(self) -> list[np.ndarray]:
        """Per loop, its factorisations as an array (one row per encoded value, one column per level)."""
        return [np.array(s, dtype=np.int64) for s in self.splits]

    def limits_of_rows(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """:meth:`limits` of every encoded row at once (arrays), and the blocks of each, for the rules and the
        rejection sampling: a pool of thousands judged in a few array operations, not point by point."""
        rows = np.atleast_2d(rows)
        return self._limits_of_splits([self._factors[i][rows[:, i]] for i in range(len(self.loops))])

    def _limits_of_splits(self, splits: list[np.ndarray]) -> dict[str, np.ndarray]:
        """The limits of ``n`` points given each loop's factors (an n × levels array per loop)."""
        n = len(splits[0]) if splits else 1
        threads, vthreads, accumulators, blocks = (np.ones(n, dtype=np.int64) for _ in range(4))
        tile: dict[str, np.ndarray] = {}
        for i, name in enumerate(self.loop_names):
            f = splits[i]
            tile[name] = f[:, 1:].prod(axis=1)  # the block's extent of the loop
            if i < self.num_spatial:
                blocks *= f[:, 0]
                vthreads *= f[:, 1]
                threads *= f[:, 2]
                accumulators *= f[:, 1] * f[:, 3]
        ones = np.ones(n, dtype=np.int64)
        shared = np.zeros(n, dtype=np.int64)
        for a in self.analysis.reads:  # each input's bounding box of the block's tile, as footprint.bounding_box
            box = ones.copy()
            for ix in a.indices:
                box *= 1 + sum((abs(c) * (tile.get(name, ones) - 1) for name, c in ix.terms), 0 * ones)
            shared += box * a.bytes_per_element
        return {"threads": threads, "vthreads": vthreads, "shared_bytes": shared, "accumulators": accumulators,
                "registers": accumulators + REGISTER_OVERHEAD, "blocks": blocks, "tile": tile}

    def limits(self, point: Point) -> dict[str, int]:
        """Threads per block, virtual threads, shared-memory bytes of the block's input tiles, accumulators and
        registers per thread of ``point``."""
        # from the point's own factors: a point made by hand need not be one of the space's factorisations
        lim = self._limits_of_splits([np.array([point[f"split.{n}"]], dtype=np.int64) for n in self.loop_names])
        return {k: int(lim[k][0]) for k in ("threads", "vthreads", "shared_bytes", "accumulators", "registers")}

    vectorised = True

    def _valid_rows(self, rows: np.ndarray) -> np.ndarray:
        return self._obeys(rows, self.domain)

    def _obeys(self, rows: np.ndarray, domain: bool) -> np.ndarray:
        """:meth:`violations` of many rows at once: the same rules as :meth:`limit_violations` and, with
        ``domain``, :meth:`domain_violations`, as array comparisons (tested to agree with them point by point)."""
        lim, dev = self.limits_of_rows(rows), self.device
        ok = ((lim["threads"] <= dev.max_threads_per_block) & (lim["vthreads"] <= dev.max_vthreads)
              & (lim["registers"] <= MAX_REGISTERS_PER_THREAD) & (lim["shared_bytes"] <= dev.shared_memory_per_block))
        if not domain:
            return ok
        ok &= lim["shared_bytes"] <= dev.shared_memory_per_sm // 2
        flow = self.dataflow
        if flow is not None:
            words = self._words(dev.shared_memory_per_sm // 2)
            xy = np.prod([lim["tile"][n] for n in flow.output_loops], axis=0) * flow.pixels
            z = np.prod([lim["tile"][n] for n in flow.channel_loops], axis=0)
            r = flow.ratio
            ok &= (xy * z <= words) & (z <= math.sqrt(words / r)) & (xy <= math.sqrt(words * r))
            for name in flow.whole_loops:
                ok &= lim["tile"][name] == self.extents[name]
        return ok & (lim["threads"] >= self.min_threads) & (lim["blocks"] >= self.min_blocks)

    def violations(self, point: Point) -> list[str]:
        return self.limit_violations(point) + (self.domain_violations(point) if self.domain else [])

    def domain_violations(self, point: Point) -> list[str]:
        """Seed 001's GPU searching domain (§6.2, Table 1) and two occupancy rules: the block's shared memory
        within half an SM's (two blocks resident per SM); for a convolution, the block's output tile of x·y
        pixels and z channels within S_b words (S_b: that half) and near the I/O optimality condition
        x·y = R·z, as z ≤ √(S_b/R) and x·y ≤ √(S_b·R); at least two warps a block and a block for every SM."""
        lim, dev = self.limits(point), self.device
        out = []
        budget = dev.shared_memory_per_sm // 2
        if lim["shared_bytes"] > budget:
            out.append(f"{lim['shared_bytes']} B of shared memory > half an SM's ({budget})")
        flow = self.dataflow
        if flow is not None:
            words = self._words(budget)
            tile = {name: int(np.prod(point[f"split.{name}"][1:])) for name in self.loop_names}
            xy = int(np.prod([tile[n] for n in flow.output_loops])) * flow.pixels
            z = int(np.prod([tile[n] for n in flow.channel_loops]))
            r = flow.ratio
            budget_name = "S_b" if flow.words_scale == 1 else "S'"
            if xy * z > words:
                out.append(f"output tile {xy}x{z} > {budget_name} = {words:g} words")
            if z > math.sqrt(words / r):
                out.append(f"channel tile {z} > sqrt({budget_name}/R) = {math.sqrt(words / r):.0f}")
            if xy > math.sqrt(words * r):
                out.append(f"pixel tile {xy} > sqrt({budget_name}*R) = {math.sqrt(words * r):.0f}")
            for name in flow.whole_loops:
                if tile[name] != self.extents[name]:
                    out.append(f"loop {name} split across blocks ({tile[name]} of its "
                               f"{self.extents[name]} a block)")
        if lim["threads"] < self.min_threads:
            out.append(f"{lim['threads']} threads a block < two warps")
        blocks = int(np.prod([point[f"split.{n}"][0] for n in self.loop_names[: self.num_spatial]]))
        if blocks < self.min_blocks:
            out.append(f"{blocks} blocks < {self.min_blocks} (one per SM)")
        return out

    @property
    def draws_per_point(self) -> int:
        """The domain holds a few in a thousand of the splits (YOLO-v1's layers on an H100: 0.1-1.7 %), so the
        rejection sampling draws ten times as many as the split space's."""
        return 2000 if self.domain else 200

    def _words(self, budget_bytes: int) -> float:
        """S' in words: the dataflow's share of ``budget_bytes`` (S_b) in words of the output's type."""
        return budget_bytes // self.analysis.write.bytes_per_element * self.dataflow.words_scale

    def _domain_reachable(self, draws: int = 4000, share: float = 0.001) -> bool:
        """Whether at least ``share`` of random draws fall in the domain: rejection sampling finds its points
        then. A small operator's domain can be a handful of points (one output a thread, one block an SM)."""
        rows = np.random.default_rng(0).integers(0, self.cardinalities, size=(draws, self.num_knobs))
        return bool(self._obeys(rows, domain=True).sum() >= share * draws)

    def limit_violations(self, point: Point) -> list[str]:
        """What the device cannot run: threads, virtual threads, registers, shared memory."""
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
        problems = self.limit_violations(point)
        return f"beyond the limits of {self.device.name}: {'; '.join(problems)}" if problems else None

    def _where(self) -> str:
        return f"within the limits of {self.device.name}" + (" and seed 001's domain" if self.domain else "")
