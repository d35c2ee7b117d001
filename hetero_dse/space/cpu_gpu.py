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

Pruned by fixed per-hardware decisions (§4.2), so that no trial is spent on a point known to be slow: the
vectorised loop's innermost factor must fill at least 40 % of the host's vector lanes (or as many as its
extent allows), the register tile must fit the vector registers (28 accumulators with AVX-512, 12 with
AVX2) and hold at least 4 (fewer leave the FMA latency exposed), the parallel outer loop must give every
core an iteration, and a padding is not inlined into a loop vectorised along the padded dimension.

``CpuSpace.default_point`` is the schedule an engineer would write first for the operator; every explorer
measures it in its first round (``hetero_dse.explore.base.first_round``) beside random points.
"""

from __future__ import annotations

from collections.abc import Sequence
import math
from functools import cache, cached_property

import numpy as np

from hetero_dse.hardware.gpus import GpuDevice
from hetero_dse.analysis import Analysis
from hetero_dse.space.encoding import row_keys
from hetero_dse.space.base import SpaceError, divisors
from hetero_dse.space.point import Point
from hetero_dse.space.rearrange import Knob, Neighbourhood, nearest_factors, nearest_valid, random_neighbours
from hetero_dse.hardware.host import host_cores

SPATIAL_LEVELS = 4
REDUCE_LEVELS = 3
UNROLL_STEPS = (0, 16, 64, 512)
MIN_LANE_USE = 0.4
MIN_ACCUMULATORS = 4  # independent FMAs in flight: 2 ports × 4-cycle latency wants 8; 4 keeps half busy
CPU_ORDERS = (0, 1)
MAX_REGISTERS_PER_THREAD = 255  # every NVIDIA architecture since Kepler
REGISTER_OVERHEAD = 24          # indices, addresses and operands beside the accumulators, a typical count


@cache
def host_vector_bits() -> int:
    """The host's widest float vector: 512 with AVX-512, 256 with AVX2, else 128."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return 256
    return 512 if " avx512f" in flags else 256 if " avx2" in flags else 128


def lane_use(factor: int, lanes: int) -> float:
    """Fraction of the vector lanes a vectorised loop of ``factor`` iterations keeps busy."""
    return factor / (math.ceil(factor / lanes) * lanes)


@cache
def factorizations(extent: int, parts: int) -> tuple[tuple[int, ...], ...]:
    """Every ordered way to write ``extent`` as a product of ``parts`` factors (divisible splits)."""
    if parts == 1:
        return ((extent,),)
    return tuple((d, *rest) for d in divisors(extent) for rest in factorizations(extent // d, parts - 1))


#: Seeded draws that decide whether a space keeps its soft rules (a small operator may meet none with them).
SOFT_RULE_DRAWS = 400


class CpuSpace:
    """Multi-level tiling schedules of one operator's main node on a CPU."""

    def __init__(self, analysis: Analysis, spatial_levels: int = SPATIAL_LEVELS, reduce_levels: int = REDUCE_LEVELS,
                 unroll_steps: Sequence[int] = UNROLL_STEPS, vector_bits: int | None = None,
                 soft_rules: bool | None = None) -> None:
        self.analysis = analysis
        bits = vector_bits or host_vector_bits()
        self.lanes = max(1, bits // (8 * analysis.write.bytes_per_element))
        self.max_accumulators = 28 if bits >= 512 else 12  # of 32 / 16 vector registers, operands aside
        self.cores = host_cores()
        self.soft_rules = True  # decided below, once: a space is a value, never changed by drawing from it
        spatial = [lp.extent for lp in analysis.main.spatial]
        self._most_parallel = math.prod(spatial)
        self._most_accumulators = {lp.name: math.ceil(lp.extent / self.lanes) * math.prod(spatial) // lp.extent
                                   for lp in analysis.main.spatial}
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
        self.soft_rules = self._soft_rules_hold() if soft_rules is None else soft_rules

    def _soft_rules_hold(self, draws: int = SOFT_RULE_DRAWS) -> bool:
        """Whether the soft rules (wishes a small operator cannot always meet together) leave any point:
        a fixed number of seeded draws, so the same operator always gets the same space."""
        rng = np.random.default_rng(0)
        return any(not self.violations(self.decode(self._draw(rng))) for _ in range(draws))

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

    def violations(self, point: Point) -> list[str]:
        """Why ``point`` is pruned from the space (empty: it is in)."""
        vector = point.get("vector")
        if vector not in self.loop_names:
            return []
        out = []
        spatial = self.loop_names[: self.num_spatial]
        inner = {n: int(point[f"split.{n}"][-1]) for n in spatial}
        extent = self.loops[self.loop_names.index(vector)].extent
        reachable = max(lane_use(d, self.lanes) for d in divisors(extent))
        if lane_use(inner[vector], self.lanes) < min(MIN_LANE_USE, reachable):
            out.append(f"vectorised loop {vector} fills {inner[vector]} of {self.lanes} lanes")
        accumulators = math.ceil(inner[vector] / self.lanes) * math.prod(v for n, v in inner.items() if n != vector)
        if accumulators > self.max_accumulators:
            out.append(f"register tile of {accumulators} vectors > {self.max_accumulators}")
        if self.soft_rules:  # wishes that small operators cannot always meet together: dropped if they must be
            if accumulators < min(MIN_ACCUMULATORS, self._most_accumulators[vector]):
                out.append(f"register tile of {accumulators} vectors < {MIN_ACCUMULATORS}: FMA latency exposed")
            parallel = math.prod(int(point[f"split.{n}"][0]) for n in spatial)
            if parallel < min(self.cores, self._most_parallel):
                out.append(f"{parallel} parallel outer iterations for {self.cores} cores")
        if point.get("inline") and any(not a.from_input and any(e.coefficient(vector) for e in a.indices)
                                       for a in self.analysis.reads):
            out.append(f"inlined padding would be tested in every lane of {vector}")
        return out

    def default_point(self) -> Point | None:
        """The schedule a performance engineer writes first, derived from the analysis: the spatial loop that
        fills the most vector lanes vectorised two vectors wide where it divides (else one), a register tile
        of about half the vector registers over the outermost other loop, each core's share of the vectorised
        loop capped at 64 elements (so the packed input tile stays in cache), the parallel outer loop split
        further only where that share leaves a core idle, the reduction's inner level at most 8 deep.
        None where the space cannot hold it (too few levels, or a rule it breaks).

        On YOLO-v1 it is strong where random points are weak (C8: 151-178 GFLOPS where 32 trials of search
        found 111; torch 132-142) and weak where they are strong (C15: 18 against 52), so it is a start
        point measured in the first round, not an answer."""
        levels, reduce_levels = self.levels
        if levels < 3 or reduce_levels < 2 or self.lanes < 2:
            return None
        spatial = list(self.loops[: self.num_spatial])

        def vector_factor(extent: int) -> int:
            wide = [m * self.lanes for m in (2, 1) if extent % (m * self.lanes) == 0]
            return wide[0] if wide else max(d for d in divisors(extent) if d <= self.lanes)

        candidates = [lp for lp in spatial if lp.extent > 1] or spatial[-1:]
        v = max(candidates, key=lambda lp: (lane_use(vector_factor(lp.extent), self.lanes),
                                            vector_factor(lp.extent), spatial.index(lp)))
        fv = vector_factor(v.extent)
        others = [lp for lp in spatial if lp is not v and lp.extent > 1]
        budget = max(1, self.max_accumulators // 2 // math.ceil(fv / self.lanes))
        tile, tile_factor = None, 1
        for lp in others:  # the outermost first: the innermost loop stays long at level 2, its reads contiguous
            d = max(x for x in divisors(lp.extent) if x <= budget)
            if d > tile_factor:
                tile, tile_factor = lp, d
        share = max(d for d in divisors(v.extent // fv) if d * fv <= max(64, fv))
        missing = math.ceil(2 * self.cores / (v.extent // fv // share))
        parallel = next((lp for lp in others if lp is not tile), tile)
        pad = (1,) * (levels - 3)
        knobs: dict[str, object] = {}
        for lp in spatial:
            if lp is v:
                knobs[f"split.{lp.name}"] = (v.extent // fv // share, *pad, share, fv)
                continue
            inner = tile_factor if lp is tile else 1
            rest = lp.extent // inner
            outer = min((d for d in divisors(rest) if d >= missing), default=rest) \
                if lp is parallel and missing > 1 else 1
            knobs[f"split.{lp.name}"] = (outer, *pad, rest // outer, inner)
        for lp in self.loops[self.num_spatial:]:
            inner = max(d for d in divisors(lp.extent) if d <= 8)
            knobs[f"split.{lp.name}"] = (*(1,) * (reduce_levels - 2), lp.extent // inner, inner)
        choices = {"unroll": 64 if 64 in self.choices["unroll"] else self.choices["unroll"][0], "order": 1,
                   "inline": 0 if 0 in self.choices.get("inline", ()) else 1, "vector": v.name}
        knobs.update({k: value for k, value in choices.items() if k in self.choices})
        point = Point({name: knobs[name] for name in self.knob_names})
        try:
            self.encode(point)
        except SpaceError:
            return None
        return None if self.violations(point) else point

    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """Points of the pruned space (rejection sampling)."""
        rows: list[np.ndarray] = []
        for _ in range(200 * count):
            row = self._draw(rng)
            if not self.violations(self.decode(row)):
                rows.append(row)
                if len(rows) == count:
                    return np.array(rows)
        raise SpaceError(f"found no point of {self.analysis.operator} {self._where()} in {200 * count:,} draws")

    def _where(self) -> str:
        return f"in the CPU space pruned for {self.lanes} vector lanes"

    def _draw(self, rng: np.random.Generator) -> np.ndarray:
        """A uniform row, then its vectorised loop's split drawn among those that fill the lanes and the
        padding not inlined where it cannot be: the rules a uniform draw breaks most often."""
        row = rng.integers(0, self.cardinalities)
        column = {name: i for i, name in enumerate(self.knob_names)}
        point = self.decode(row)
        vector = point.get("vector")
        if vector in self.loop_names:
            i = self.loop_names.index(vector)
            extent = self.loops[i].extent
            floor = min(MIN_LANE_USE, max(lane_use(d, self.lanes) for d in divisors(extent)))
            good = [j for j, f in enumerate(self.splits[i]) if lane_use(f[-1], self.lanes) >= floor]
            row[i] = good[rng.integers(0, len(good))]
            if len(self.choices["inline"]) > 1 and self.violations(self.decode(row)):
                row[column["inline"]] = self.choices["inline"].index(0)
        return row

    def valid(self, rows: np.ndarray) -> np.ndarray:
        rows = np.atleast_2d(rows)
        inside = ((rows >= 0) & (rows < self.cardinalities)).all(axis=1)
        return np.array([ok and not self.violations(self.decode(r)) for ok, r in zip(inside, rows, strict=True)],
                        dtype=bool)

    def keys(self, rows: np.ndarray) -> np.ndarray:
        """One integer per row, equal for equal rows."""
        return row_keys(rows, self.cardinalities)

    @cached_property
    def neighbourhood(self) -> Neighbourhood:
        """FlexTensor's rearranged directions: (i, j) moves on each split, ±1 on the other knobs."""
        knobs = [Knob.split(f"split.{n}", i, np.array(self.splits[i])) for i, n in enumerate(self.loop_names)]
        knobs += [Knob.choice(name, len(self.loops) + j, len(values)) for j, (name, values)
                  in enumerate(self.choices.items())]
        return Neighbourhood(knobs, self.cardinalities)

    def neighbours(self, rows: np.ndarray, rng: np.random.Generator, tries: int = 16) -> np.ndarray:
        """One random neighbour per row inside the pruned space, along the rearranged directions (the row
        itself when ``tries`` random directions all leave it)."""
        return random_neighbours(self, rows, rng, tries)

    # ------------------------------------------------------------------------------ other shapes' points
    @property
    def loop_extents(self) -> dict[str, int]:
        return {lp.name: int(lp.extent) for lp in self.loops}

    @staticmethod
    def parallelism(point: Point) -> dict[str, int]:
        """P(h, k) of seed 002's equation 3 for a schedule of any shape: each loop's tile below its outermost
        level (the work of one parallel iteration, or one thread block on a GPU)."""
        return {k.removeprefix("split."): int(np.prod(v[1:])) for k, v in point.items() if k.startswith("split.")}

    def adapt(self, point: Point) -> np.ndarray | None:
        """The schedule of this space nearest ``point``, a schedule of the same operator at other extents:
        each split's inner factors nearest in log scale among this loop's factorisations (re-factored to
        divide the new extent), the other knobs by value where this space has it (the nearest unroll step).
        None when no point of the pruned space is that near (see :func:`nearest_valid`)."""
        row = np.zeros(self.num_knobs, dtype=np.int64)
        for i, name in enumerate(self.loop_names):
            have = np.array(self.splits[i])
            wanted = tuple(point.get(f"split.{name}", ()))
            if len(wanted) == have.shape[1]:
                row[i] = nearest_factors(have, [max(int(f), 1) for f in wanted])
            else:  # a history from other split levels: the whole loop in its outermost level
                row[i] = 0 if have.shape[1] == 1 else int(np.argmax(have[:, 0]))
        for j, (name, values) in enumerate(self.choices.items()):
            value = point.get(name)
            if value in values:
                row[len(self.loops) + j] = values.index(value)
            elif name == "unroll" and isinstance(value, int | float):
                row[len(self.loops) + j] = int(np.argmin([abs(v - value) for v in values]))
        return nearest_valid(self, row)


class GpuSpace(CpuSpace):
    """The same splits on a GPU: level 0 of the spatial loops binds to blocks, level 1 to virtual threads,
    level 2 to threads, level 3 stays in registers; the reduce levels stage inputs through shared memory.
    Points beyond the device's limits (threads per block, shared memory, virtual threads) are invalid and
    never built."""

    def __init__(self, analysis: Analysis, device: GpuDevice, **kwargs: object) -> None:
        self.device = device
        super().__init__(analysis, soft_rules=False, **kwargs)  # type: ignore[arg-type]  # its limits are hard

    def _fixed_choices(self) -> dict[str, tuple[object, ...]]:
        return {}  # one order (blocks, vthreads, threads, reduce, registers); producers always inlined

    def default_point(self) -> Point | None:
        return None  # the CPU's rules (vector lanes, cache-sized shares) do not carry over to a GPU

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

    def _draw(self, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(0, self.cardinalities)
