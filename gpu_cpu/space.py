"""The CPU schedule space of an operator, generated from its analysis (FlexTensor §4.2, Figure 4a).

Every loop of the main node is split into divisible factors — four levels for spatial loops, three for
reduce loops. The knobs are the split of every loop, the unroll depth, the order of the levels and whether
producer nodes (padding, expansion) are inlined into the main node or computed on their own first:

- order 0, ``S0 S1 R0 S2 R1 R2 S3`` — a tile S2·S3 accumulated in a cache buffer written back after the
  reduction, S3 the register tile (Ansor's CPU sketch);
- order 1, ``S0 R0 S1 R1 S2 R2 S3`` — FlexTensor's interleaved order, written back at S0;
- vector: the spatial loop innermost in S3 and vectorised. Where it is not the innermost dimension of an
  input, that input's tile is packed at the outer reduce level into a layout where it is (weights
  ``W[k, c, r, s]`` read as ``[c, r, s, k]`` when vectorising over ``k``), and the accumulated tile is kept
  with it innermost too: every load and FMA in the register tile is then a whole vector.

Fixed decisions for CPU (§4.2): the outermost spatial level is fused and parallelised, the innermost
spatial loop vectorised, the reduction's initialisation hoisted out of the reduce loops. Inlining a padding
puts a bounds test in the innermost loop: cheap for small kernels, ruinous for vectorised 3×3 convolutions,
hence a knob. Points are the same immutable ``Point`` values as on FPGA, encoded as integer rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

from gpu_cpu.devices import GpuDevice
from hetero_dse.analysis import Analysis
from hetero_dse.space.encoding import row_keys
from hetero_dse.space.fpga import SpaceError, divisors
from hetero_dse.space.point import Point

SPATIAL_LEVELS = 4
REDUCE_LEVELS = 3
UNROLL_STEPS = (0, 16, 64, 512)
CPU_ORDERS = (0, 1)
MAX_REGISTERS_PER_THREAD = 255  # every NVIDIA architecture since Kepler
REGISTER_OVERHEAD = 24          # indices, addresses and operands beside the accumulators, a typical count


@cache
def factorizations(extent: int, parts: int) -> tuple[tuple[int, ...], ...]:
    """Every ordered way to write ``extent`` as a product of ``parts`` factors (divisible splits)."""
    if parts == 1:
        return ((extent,),)
    return tuple((d, *rest) for d in divisors(extent) for rest in factorizations(extent // d, parts - 1))


class CpuSpace:
    """Multi-level tiling schedules of one operator's main node on a CPU."""

    def __init__(self, analysis: Analysis, spatial_levels: int = SPATIAL_LEVELS, reduce_levels: int = REDUCE_LEVELS,
                 unroll_steps: Sequence[int] = UNROLL_STEPS) -> None:
        self.analysis = analysis
        main = analysis.main
        self.loops = main.loops
        self.loop_names = tuple(lp.name for lp in self.loops)
        self.num_spatial = len(main.spatial)
        self.levels = (spatial_levels, reduce_levels)
        self.splits = [factorizations(lp.extent, spatial_levels if lp.kind == "spatial" else reduce_levels)
                       for lp in self.loops]
        #: the knobs other than splits, each with its values in encoding order
        self.choices: dict[str, tuple[object, ...]] = {"unroll": tuple(unroll_steps), **self._fixed_choices()}
        self.knob_names = [f"split.{n}" for n in self.loop_names] + list(self.choices)
        self.cardinalities = np.array([len(s) for s in self.splits] + [len(v) for v in self.choices.values()],
                                      dtype=np.int64)

    def _fixed_choices(self) -> dict[str, tuple[object, ...]]:
        producers = len(self.analysis.nodes) > 1
        spatial = [lp.name for lp in self.loops[: self.num_spatial] if lp.extent > 1]
        # the vectorised loop, the innermost spatial loop first: the one that needs no packing
        vector = tuple(reversed(spatial)) or (self.loop_names[self.num_spatial - 1],)
        return {"order": CPU_ORDERS, "inline": (1, 0) if producers else (1,), "vector": vector}

    @property
    def num_knobs(self) -> int:
        return len(self.cardinalities)

    @property
    def size(self) -> int:
        return int(np.prod(self.cardinalities.astype(object)))

    def decode(self, row: Sequence[int] | np.ndarray) -> Point:
        row = [int(x) for x in row]
        if len(row) != self.num_knobs or any(not 0 <= x < c for x, c in zip(row, self.cardinalities, strict=True)):
            raise SpaceError(f"encoded row {row} is not a point of the CPU space")
        knobs: dict[str, object] = {f"split.{n}": self.splits[i][row[i]] for i, n in enumerate(self.loop_names)}
        for j, (name, values) in enumerate(self.choices.items()):
            knobs[name] = values[row[len(self.loops) + j]]
        return Point(knobs)

    def encode(self, point: Point) -> np.ndarray:
        row = np.empty(self.num_knobs, dtype=np.int64)
        for i, name in enumerate(self.loop_names):
            value = tuple(point[f"split.{name}"]) if f"split.{name}" in point else None
            if value not in self.splits[i]:
                raise SpaceError(f"knob split.{name}={value} is not a factorisation of {self.loops[i].extent} into "
                                 f"{len(self.splits[i][0])} factors")
            row[i] = self.splits[i].index(value)
        for j, (name, values) in enumerate(self.choices.items()):
            if point.get(name) not in values:
                raise SpaceError(f"knob {name}={point.get(name)} is not one of {list(values)}")
            row[len(self.loops) + j] = values.index(point[name])
        return row

    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(0, self.cardinalities, size=(count, self.num_knobs))

    def valid(self, rows: np.ndarray) -> np.ndarray:
        rows = np.atleast_2d(rows)
        return ((rows >= 0) & (rows < self.cardinalities)).all(axis=1)

    def keys(self, rows: np.ndarray) -> np.ndarray:
        """One integer per row, equal for equal rows."""
        return row_keys(rows, self.cardinalities)

    def neighbours(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One random neighbour per row: one knob moved ±1 along its values (issue 5 rearranges splits)."""
        rows = np.atleast_2d(rows).copy()
        movable = np.flatnonzero(self.cardinalities > 1)
        if not len(movable):
            return rows
        knob = movable[rng.integers(0, len(movable), size=len(rows))]
        step = rng.choice([-1, 1], size=len(rows))
        moved = rows[np.arange(len(rows)), knob] + step
        moved = np.where((moved < 0) | (moved >= self.cardinalities[knob]), rows[np.arange(len(rows)), knob] - step,
                         moved)
        rows[np.arange(len(rows)), knob] = np.clip(moved, 0, self.cardinalities[knob] - 1)
        return rows


class GpuSpace(CpuSpace):
    """The same splits on a GPU: level 0 of the spatial loops binds to blocks, level 1 to virtual threads,
    level 2 to threads, level 3 stays in registers; the reduce levels stage inputs through shared memory.
    Points beyond the device's limits (threads per block, shared memory, virtual threads) are invalid and
    never built."""

    def __init__(self, analysis: Analysis, device: GpuDevice, **kwargs: object) -> None:
        self.device = device
        super().__init__(analysis, **kwargs)  # type: ignore[arg-type]

    def _fixed_choices(self) -> dict[str, tuple[object, ...]]:
        return {}  # one order (blocks, vthreads, threads, reduce, registers); producers always inlined

    def limits(self, point: Point) -> dict[str, int]:
        """Threads per block, virtual threads and shared-memory bytes of ``point``."""
        threads = vthreads = accumulators = 1
        tile: dict[str, int] = {}
        for i, name in enumerate(self.loop_names):
            f = point[f"split.{name}"]
            if i < self.num_spatial:
                vthreads *= f[1]
                threads *= f[2]
                accumulators *= f[1] * f[3]
                tile[name] = int(np.prod(f[1:]))
            else:
                tile[name] = int(np.prod(f[1:]))
        shared = sum(int(np.prod(a.bounding_box(tile))) * a.bytes_per_element for a in self.analysis.reads)
        return {"threads": threads, "vthreads": vthreads, "shared_bytes": shared,
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

    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """Valid rows only (rejection sampling against the device limits)."""
        rows: list[np.ndarray] = []
        for _ in range(200 * count):
            row = rng.integers(0, self.cardinalities)
            if not self.violations(self.decode(row)):
                rows.append(row)
                if len(rows) == count:
                    return np.array(rows)
        raise SpaceError(f"found no point of {self.analysis.operator} within the limits of {self.device.name}")
