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
  with it innermost too: every load and FMA in the register tile is then a whole vector. A weight (an input
  the operator declares constant at inference) that the main node reads directly is not packed per tile: the
  kernel takes it in that layout, packed once where it is loaded (``gpu_cpu.schedule.weight_layouts``;
  ``schedule.json`` says how).

Fixed decisions for CPU (§4.2): the outermost spatial level is fused and parallelised, the innermost
spatial loop vectorised, the reduction's initialisation hoisted out of the reduce loops. Inlining a padding
puts a bounds test in the innermost loop, hence a knob. Points are immutable ``Point`` values, integer rows.

Pruned by fixed per-hardware decisions (§4.2), so that no trial is spent on a point known to be slow: the
vectorised loop's innermost factor must fill at least 40 % of the host's vector lanes (or as many as its
extent allows), the register tile must fit the vector registers (28 accumulators with AVX-512, 12 with
AVX2) and hold at least 4 (fewer leave the FMA latency exposed; not where a weight is streamed, each element
to one multiply-add, and the FMAs wait on memory), the parallel outer loop must give every
core an iteration, and a padding is not inlined into a loop vectorised along the padded dimension a lane an
element (read with a stride, its lanes are gathered anyway, and inlining it saves a pass over the image).

``CpuSpace.default_point`` is the schedule an engineer writes first, ``default_points`` adds what is tried next;
every explorer's first round measures them (``hetero_dse.explore.base.first_round``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cached_property

import numpy as np

from hetero_dse.analysis import Analysis, Loop
from hetero_dse.hardware.host import VECTOR_BITS_ENV, host_cores, host_vector_bits  # noqa: F401 (the space's)
from hetero_dse.space.base import SpaceError, divisors
from hetero_dse.space.point import OPTIONAL_KNOBS, Point
from hetero_dse.space.splits import SplitSpace

SPATIAL_LEVELS = 4
REDUCE_LEVELS = 3
UNROLL_STEPS = (0, 16, 64, 512)
MIN_LANE_USE = 0.4
MIN_ACCUMULATORS = 4  # independent FMAs in flight: 2 ports × 4-cycle latency wants 8; 4 keeps half busy
CPU_ORDERS = (0, 1)

def lane_use(factor: int, lanes: int) -> float:
    """Fraction of the vector lanes a vectorised loop of ``factor`` iterations keeps busy."""
    return factor / (math.ceil(factor / lanes) * lanes)


#: Seeded draws that decide whether a space keeps its soft rules (a small operator may meet none with them).
SOFT_RULE_DRAWS = 400


def _cpu_choices(analysis: Analysis) -> dict[str, tuple[object, ...]]:
    """The CPU's knobs beside the splits: the loop order, inlining the producers, the vectorised loop."""
    producers = len(analysis.nodes) > 1
    main = analysis.main
    spatial = [lp.name for lp in main.spatial if lp.extent > 1]
    # the vectorised loop, the innermost spatial loop first: the one that needs no packing
    vector = tuple(reversed(spatial)) or (main.spatial[-1].name,)
    # the packed weights blocked by the vectorised loop's tile (``gpu_cpu.main_block.weight_blocks``): 0 (no
    # block) first, and left out of a point that does not block, so points made before the knob keep their keys
    block = {"block": (0, 1)} if analysis.weights and main.reduce else {}
    return {"order": CPU_ORDERS, "inline": (1, 0) if producers else (1,), "vector": vector, **block}


def blocked_weights(analysis: Analysis, loop: str, factors: Sequence[int]) -> dict[str, int]:
    """The weights a point with ``block``, vectorised along ``loop`` split into ``factors``, takes blocked, and
    the block (``gpu_cpu.main_block.weight_blocks`` lays them out): each weight read directly that indexes
    ``loop`` in one dimension a step an element (not a group's g·Kg + k counted in groups), where one parallel
    iteration's share of ``loop`` (its factors below the outermost) makes whole blocks short of the dimension.
    Empty where the point would build the kernel of block 0."""
    block = math.prod(int(f) for f in factors[1:])
    if len(factors) < 2 or block == math.prod(int(f) for f in factors):
        return {}
    out = {}
    for a in analysis.reads:
        dims = a.dims(loop)
        if a.from_input and a.tensor in analysis.weights and len(dims) == 1 \
                and a.indices[dims[0]].coefficient(loop) == 1 and a.shape[dims[0]] % block == 0:
            out[a.tensor] = block
    return out


class CpuSpace(SplitSpace):
    """Multi-level tiling schedules of one operator's main node on a CPU."""

    kind = "CPU space"
    optional = {"block": OPTIONAL_KNOBS["block"]}
    #: the share of an explorer's first round after the default points drawn among the first one's neighbours
    #: (``hetero_dse.explore.base.first_round``): at a user's budget of 16 trials, one move from the engineer's
    #: schedule (a register tile of 4 rows instead of 7, a vector of 28 lanes instead of 14) finds more than a
    #: random point of a space where most points are slow
    near_default = 0.5

    def __init__(self, analysis: Analysis, spatial_levels: int = SPATIAL_LEVELS, reduce_levels: int = REDUCE_LEVELS,
                 unroll_steps: Sequence[int] = UNROLL_STEPS, vector_bits: int | None = None,
                 soft_rules: bool | None = None) -> None:
        bits = vector_bits or host_vector_bits()
        self.lanes = max(1, bits // (8 * analysis.write.bytes_per_element))
        self.max_accumulators = 28 if bits >= 512 else 12  # of 32 / 16 vector registers, operands aside
        self.cores = host_cores()
        self.soft_rules = True  # decided below, once: a space is a value, never changed by drawing from it
        spatial = [lp.extent for lp in analysis.main.spatial]
        self._most_parallel = math.prod(spatial)
        self._most_accumulators = {lp.name: math.ceil(lp.extent / self.lanes) * math.prod(spatial) // lp.extent
                                   for lp in analysis.main.spatial}
        super().__init__(analysis, spatial_levels, reduce_levels,
                         {"unroll": tuple(unroll_steps), **_cpu_choices(analysis)})
        self.soft_rules = self._soft_rules_hold() if soft_rules is None else soft_rules

    def _soft_rules_hold(self, draws: int = SOFT_RULE_DRAWS) -> bool:
        """Whether the soft rules (wishes a small operator cannot always meet together) leave any point:
        a fixed number of seeded draws, so the same operator always gets the same space."""
        rng = np.random.default_rng(0)
        return any(not self.violations(self.decode(self._draw(rng))) for _ in range(draws))

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
            if accumulators < min(MIN_ACCUMULATORS, self._most_accumulators[vector]) and not self.streams_weights:
                out.append(f"register tile of {accumulators} vectors < {MIN_ACCUMULATORS}: FMA latency exposed")
            parallel = math.prod(int(point[f"split.{n}"][0]) for n in spatial)
            if parallel < min(self.cores, self._most_parallel):
                out.append(f"{parallel} parallel outer iterations for {self.cores} cores")
        if point.get("inline") and self._padded_contiguous(vector):
            out.append(f"inlined padding would be tested in every lane of {vector}")
        if point.get("block") and not blocked_weights(self.analysis, vector, point[f"split.{vector}"]):
            out.append(f"no weight to block along {vector} (the kernel of block 0)")
        return out

    @cached_property  # of the analysis, fixed for the space; asked for each point violations() judges
    def streams_weights(self) -> bool:
        """Whether a weight feeds each of its elements to one multiply-add (a batch-1 linear layer: a matrix-vector
        product): its FMAs wait on memory, not on each other, so a register tile of one or two vectors is no
        loss, and what decides the speed is whether each core reads its weights as one run (``block``). A
        50,176 → 4,096 layer, AVX-512, two cores: one or two vectors 26-30 ms, eight 39 ms; blocked 29 ms,
        the same point not 65 ms (torch 41 ms)."""
        nest = math.prod(lp.extent for lp in self.loops)
        return any(a.from_input and a.tensor in self.analysis.weights and math.prod(a.shape) == nest
                   for a in self.analysis.reads)

    def _padded_contiguous(self, loop: str) -> bool:
        """Whether a producer's tensor (a padding) is read along ``loop`` a lane an element: inlined there, its
        bounds test would guard what are otherwise whole vector loads. Read with a stride, the lanes are gathered
        anyway and the test costs little beside the pass over the image that computing the padding first takes
        (a stride-2 depthwise on 144 × 56 × 56, AVX-512: 93 µs inlined against 155 µs padded first)."""
        return any(not a.from_input and any(abs(e.coefficient(loop)) == 1 for e in a.indices)
                   for a in self.analysis.reads)

    def _padded_strided(self, loop: str) -> bool:
        """Whether a producer's tensor is read along ``loop`` only with a stride (a stride-2 convolution's
        padding along its output row): the case where inlining it is the faster schedule."""
        strides = [abs(e.coefficient(loop)) for a in self.analysis.reads if not a.from_input for e in a.indices]
        return any(strides) and 1 not in strides

    def _gathers(self, loop: str) -> bool:
        """Whether vectorising ``loop`` reads some tensor at an index whose coefficient in ``loop`` is above one
        (a stride-2 convolution's image along its output row): its lanes are gathered."""
        return any(abs(e.coefficient(loop)) > 1 for a in self.analysis.reads for e in a.indices)

    def _packs_activation(self, loop: str) -> bool:
        """Whether vectorising ``loop`` makes every tile pack an input that is not a weight (a depthwise
        convolution's image along its channels), as ``gpu_cpu.main_block._packed_reads`` picks them. A weight is
        packed once ahead instead (``gpu_cpu.schedule.weight_layouts``); without a reduction there is no
        accumulated tile and nothing is packed."""
        return bool(self.analysis.main.reduce) and any(
            a.tensor not in self.analysis.weights and a.packed_dim(loop) is not None for a in self.analysis.reads)

    def default_point(self) -> Point | None:
        """The schedule a performance engineer writes first, derived from the analysis: the spatial loop that
        fills the most vector lanes without packing an activation every tile vectorised two vectors wide where it
        divides (else one), a register tile (``_register_tile``), the parallel outer loop split further only
        where the cores would be idle, the reduction's inner level at most 8 deep, the padding computed first
        unless the vectorised loop reads it only with a stride, a streamed weight (``streams_weights``) blocked.
        Where the tile reuses its operands: the reduction inside the tile's spatial loops (order 0), nothing
        unrolled, each core's share of the vectorised loop one tile, the other loops' rest outside the cache
        tile; else order 1, unrolled, each core's share up to 64 elements (so the packed input tile stays in
        cache). Measured in ``bench/data/cpu_points_order.txt`` and ``cpu_points_cache_tile.txt`` (MobileNet-V2
        L3 0.61 -> 1.46× torch; 1×1 256 -> 256 at 56² 0.73-0.79 -> 1.07×). None where the space cannot hold it.
        It is strong where random points are weak and weak where they are strong (YOLO-v1 C8: 151-178 GFLOPS
        against 32 trials' 111; C15: 18 against 52): a start point measured in the first round, not an answer."""
        levels, reduce_levels = self.levels
        if levels < 3 or reduce_levels < 2 or self.lanes < 2:
            return None
        spatial = list(self.loops[: self.num_spatial])

        def vector_factor(extent: int) -> int:
            wide = [m * self.lanes for m in (2, 1) if extent % (m * self.lanes) == 0]
            return wide[0] if wide else max(d for d in divisors(extent) if d <= self.lanes)

        candidates = [lp for lp in spatial if lp.extent > 1] or spatial[-1:]
        # a loop that leaves every tile's activations as they lie first, if it fills enough lanes: packing a
        # tile of the image costs a pass over it that a depthwise convolution's few taps do not repay (144 × 56 ×
        # 56, AVX-512: 821 µs along the channels, 149 µs along the output row)
        # then one whose lanes are read a lane an element: along a strided convolution's output row every vector
        # load of the image is a gather (YOLO-v1's 7×7 stride-2 first layer, 3 → 64 at 448², AVX-512: along the
        # row 118 ms, along the output channels 7.8 ms, torch 5.2)
        v = max(candidates, key=lambda lp: (
            not self._packs_activation(lp.name) and lane_use(vector_factor(lp.extent), self.lanes) >= MIN_LANE_USE,
            not self._gathers(lp.name), lane_use(vector_factor(lp.extent), self.lanes), vector_factor(lp.extent),
            spatial.index(lp)))
        fv = vector_factor(v.extent)
        others = [lp for lp in spatial if lp is not v and lp.extent > 1]
        tile, tile_factor, reused = self._register_tile(v, fv, others)
        if tile_factor * math.ceil(fv / self.lanes) < MIN_ACCUMULATORS and fv > self.lanes:
            # two vectors leave no tile that fills the FMA pipelines within the registers (AVX2, a 7 × 7 image:
            # 2 · 7 accumulators > 12): one vector, where its tile does (7 rows); else (a streamed weight, no
            # loop to tile) the two vectors stay
            narrow = self._register_tile(v, self.lanes, others)
            if narrow[1] >= MIN_ACCUMULATORS:
                fv, (tile, tile_factor, reused) = self.lanes, narrow
        return self._tiled(v, fv, tile, tile_factor, reused)

    def default_points(self) -> list[Point]:
        """``default_point`` first; where the tile reuses its operands, the same unrolled whole (MobileNet-V2 L1,
        L4, L7 1.3-1.5× faster, six layers within 5 %: ``bench/data/cpu_points_unroll.txt``), else the same in
        order 0 (``_rests_outside``); then the register tiles tried next: over each other loop they are reused
        across, as many vectors wide and one vector wide, by ``_register_tile``'s rule (YOLO-v1 L1 and L14 faster,
        most of ResNet-18's stride-2 layers slower: ``bench/data/cpu_points_rows.txt``). Which wins depends on
        the layer and the host, so every explorer measures them in its first round (``first_round``)."""
        first = self.default_point()
        if first is None:
            return []
        points, whole = [first], max(self.choices["unroll"])
        if first["order"] == 0 and whole > 0:  # order 0: the tile reuses them
            points.append(first.replace(unroll=whole))
        elif first["order"] == 1 and not self.streams_weights and \
                (flat := self._rests_outside(first, whole)) is not None:
            points.append(flat)
        v = self.loops[self.loop_names.index(first["vector"])]
        others = [lp for lp in self.loops[: self.num_spatial] if lp is not v and lp.extent > 1]
        tile = next((lp for lp in others if first[f"split.{lp.name}"][-1] > 1), None)
        reuse = self._reused_across(v, others)
        if tile is None or tile not in reuse:
            return points
        for lp in reversed(reuse):  # innermost first
            for fv in dict.fromkeys((first[f"split.{v.name}"][-1], self.lanes)):
                if lp is tile or v.extent % fv:
                    continue
                # the tile over lp alone, by _register_tile's rule: half the registers, else the fewest
                # accumulators that fill the FMA pipelines (AVX2, a 7 × 7 image: all 7 rows)
                over, factor, reused = self._register_tile(v, fv, [lp])
                if over is lp and reused and factor * math.ceil(fv / self.lanes) >= MIN_ACCUMULATORS:
                    point = self._tiled(v, fv, lp, factor, True)
                    if point is not None and point not in points:
                        points.append(point)
        return points

    def _rests_outside(self, point: Point, unroll: int) -> Point | None:
        """An order-1 ``point`` in order 0, unrolled ``unroll``, the parallel loop's rest at the outer level and
        each other loop's at the second: its cache tile the vector loop's share by the register tile (the vector
        loop's split unchanged). AVX-512: nine of MobileNet-V2's ten depthwise layers 1.08-4.2× faster than the
        order-1 default (L2: 0.54 -> 0.13 ms), L15 0.74×; the linear layers 0.46-0.91×, so not where a weight is
        streamed (``bench/data/cpu_points_depthwise_rests.txt``)."""
        others = [lp.name for lp in self.loops[: self.num_spatial] if lp.name != point["vector"] and lp.extent > 1]
        parallel = next((n for n in others if point[f"split.{n}"][-1] == 1), others[0] if others else None)
        knobs: dict[str, object] = {"order": 0, "unroll": unroll}
        for name in others:
            split, to = list(point[f"split.{name}"]), 0 if name == parallel else 1
            if to < len(split) - 2:
                split[to], split[-2] = split[to] * split[-2], 1
            knobs[f"split.{name}"] = tuple(split)
        return self._held(point.replace(**{k: v for k, v in knobs.items() if k in self.knob_names}))

    def _held(self, point: Point) -> Point | None:
        """``point`` where the space holds it (its factors among the choices, no rule broken), else None."""
        try:
            self.encode(point)
        except SpaceError:
            return None
        return None if self.violations(point) else point

    def _tiled(self, v: Loop, fv: int, tile: Loop | None, tile_factor: int, reused: bool) -> Point | None:
        """``default_point`` with ``v`` vectorised ``fv`` wide and the register tile ``tile_factor`` of
        ``tile``; None where the space cannot hold it."""
        levels, reduce_levels = self.levels
        spatial = list(self.loops[: self.num_spatial])
        others = [lp for lp in spatial if lp is not v and lp.extent > 1]
        # each core's share of the vectorised loop: one tile's vectors where the tile reuses its operands (a 1×1
        # layer's weight panel stays in L1 across the image: 96 -> 576 at 14², 0.204 against 0.239 ms at 64),
        # else up to 64 elements, so the packed input tile stays in cache
        share = 1 if reused else max(d for d in divisors(v.extent // fv) if d * fv <= max(64, fv))
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
            # order 0: the rest outside the cache tile S2·S3, then the register tile (was 800 KB on ResNet-18 L1)
            mid = (rest // outer, *pad) if reused else (*pad, rest // outer)
            knobs[f"split.{lp.name}"] = (outer, *mid, inner)
        for lp in self.loops[self.num_spatial:]:
            inner = max(d for d in divisors(lp.extent) if d <= 8)
            knobs[f"split.{lp.name}"] = (*(1,) * (reduce_levels - 2), lp.extent // inner, inner)
        unroll = 0 if reused else 64
        choices = {"unroll": unroll if unroll in self.choices["unroll"] else self.choices["unroll"][0],
                   "order": 0 if reused else 1,
                   "inline": 0 if 0 in self.choices.get("inline", ()) and not self._padded_strided(v.name) else 1,
                   "vector": v.name}
        if self.streams_weights and blocked_weights(self.analysis, v.name, knobs[f"split.{v.name}"]):
            choices["block"] = 1  # each core's share of the streamed weight one run: 2.2x on the layer above
        knobs.update({k: value for k, value in choices.items() if k in self.choices})
        return self._held(Point({name: knobs[name] for name in self.knob_names if name in knobs}))

    def _register_tile(self, v: Loop, fv: int, others: list[Loop]) -> tuple[Loop | None, int, bool]:
        """The register tile of ``default_point`` for ``v`` vectorised ``fv`` wide: (its loop or None, its
        factor, whether the vectorised operands are reused across it).

        Over a loop the vectorised operands do not vary in, each loaded once for the tile, about half the
        registers, the innermost such loop on a tie (the tile's broadcast operands then contiguous: 1×1 256 ->
        256 at 56², 7 pixels along the row 2.16 ms, along the column 2.78). Where none is (a depthwise
        convolution's image row varies in every loop), each accumulator has loads of its own: the tile only fills
        the FMA pipelines (2 ports × 4 cycles), over a loop some other operand is the same in (its weights, along
        the rows); more spent the registers on accumulators the loads could not feed (144 × 56 × 56 along the
        row, AVX-512: 14 rows 248-770 µs, 4 rows 150 µs). Where half the registers hold no divisor, the fewest
        accumulators that fill the FMA pipelines, if any fit."""
        vectors = math.ceil(fv / self.lanes)
        reuse = self._reused_across(v, others)[::-1]  # innermost first
        pool, budget = reuse, max(1, self.max_accumulators // 2 // vectors)
        if not pool:
            pool = [lp for lp in others if not all(a.dims(lp.name) for a in self.analysis.reads)] or others
            budget = max(1, 2 * MIN_ACCUMULATORS // vectors)
        tile, factor = None, 1
        for lp in pool:
            d = max(x for x in divisors(lp.extent) if x <= budget)
            if d > factor:
                tile, factor = lp, d
        if factor * vectors < MIN_ACCUMULATORS:
            for loops in (pool, others[::-1] if reuse else others):
                enough = [(d, lp) for lp in loops for d in divisors(lp.extent)
                          if MIN_ACCUMULATORS <= d * vectors <= self.max_accumulators]
                if enough:
                    factor, tile = min(enough, key=lambda pair: (pair[0], loops.index(pair[1])))
                    break
        return tile, factor, any(tile is lp for lp in reuse)

    def _reused_across(self, v: Loop, others: list[Loop]) -> list[Loop]:
        """The loops of ``others`` that no operand varying along ``v`` varies in: a register tile over one loads
        each of ``v``'s vectors once for all its accumulators."""
        varying = [a for a in self.analysis.reads if a.dims(v.name)]
        return [lp for lp in others if not any(a.dims(lp.name) for a in varying)]

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
