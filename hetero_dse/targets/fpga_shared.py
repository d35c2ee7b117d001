"""One FPGA accelerator for a whole network, by the model (issue 38, first part): PE arrays fixed at synthesis
that every layer runs on, one layer after the other, instead of one accelerator per layer that could never
share the device.

The main engine is a GEMM-like grid: ``out`` lanes over the layer's output channels (a convolution's ``k``, a
linear layer's output features) times ``red`` lanes over its input channels (the reduction loop both operands
index alone: a convolution's ``rc``, a linear layer's ``k``). A layer with no such reduction (a depthwise
convolution: each channel its own) runs on a second engine beside it: lanes over its channels times lanes
along its output rows. Each layer is scheduled on its engine by the same model that scores single layers:
its tiles and loop order searched exhaustively with the lanes fixed (``SpaceOptions.pe``; a loop shorter
than its lanes padded, as a 3-channel image on 64 channel lanes).

Each engine's resources are counted once: its array's DSPs; each on-chip buffer (input, weights, output) sized
for the largest tile any of its layers puts in it; the rest (ports, control) the most any of its layers'
designs needs. The engines share the device: their resources add up, and the pair of arrays chosen is the
one with the lowest network latency whose sum fits. Not charged yet: what run-time loop bounds and strides
cost the generated code (loop overhead, bank multiplexers, the per-layer descriptor reads): there is no
shared HLS kernel yet, so these latencies are the model's for a design the code does not build.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from cost_models.calibration import Calibration
from cost_models.fpga import FpgaModel, slr_resources
from cost_models.fpga_blocks import storage_cost
from cost_models.fpga_clock import achieved_clock
from cost_models.fpga_describe import describe
from cost_models.fpga_kernel import T_ESTIMATE, T_FANOUT_FREE, T_FANOUT_NS, T_SLR2, T_SLR3
from hetero_dse.analysis import Analysis, analyze
from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore.exhaustive import Exhaustive
from hetero_dse.hardware.board import RESOURCE_KINDS, Board
from hetero_dse.operator import Operator
from hetero_dse.space.fpga import FpgaSpace, SpaceOptions
from hetero_dse.targets.fpga_search import search

__all__ = ["ENGINES", "LANES", "MEMORY_SHARES", "Engine", "ModelSettings", "SharedAccelerator", "SharedLayer",
           "channel_lanes", "explore_shared", "grid_lanes", "shared_clock", "weight_tensors", "with_memory_share"]

#: lane counts each side of an engine may take (powers of two: every layer's channels pad to few of them)
LANES = (4, 8, 16, 32, 64, 128)
#: lanes along a depthwise layer's output rows (its window slides along them: a few, read as a register window)
ROW_LANES = (1, 2, 4, 8)
#: what the design's figures leave out: the shared HLS kernel does not exist yet to be read for them
NOT_CHARGED = ("the model's: the shared HLS kernel is not generated yet, and what it would add is not charged "
               "(run-time loop bounds and the per-layer descriptor reads; the lane-to-bank multiplexers of the "
               "buffers' other layers' mappings; activations kept in one DDR layout from layer to layer, where "
               "each layer's figure assumes the layout it prefers)")
#: the shares of the board's on-chip memory each layer's schedule may fill on its own: its best schedule alone
#: fills most of it, and the engine's buffers take, role by role, the largest any of its layers asks for, so
#: layers that each fit can together ask for more than the board has (YOLO-v1 on zcu102: 1.4-2.6 times)
MEMORY_SHARES = (1.0, 0.5, 0.34, 0.25)


def _alone(analysis: Analysis) -> dict[str, set[str]]:
    """Each loop, and the tensors (reads and the write) with a dimension indexed by it alone."""
    alone: dict[str, set[str]] = {}
    for access in (*analysis.reads, analysis.write):
        for index in access.indices:
            if len(index.terms) == 1 and index.terms[0][1] == 1:
                alone.setdefault(index.terms[0][0], set()).add(access.tensor)
    return alone


def grid_lanes(analysis: Analysis) -> tuple[str, str] | None:
    """The layer's loops on the grid's two sides: (output channels, input channels), or None where it has no
    reduction loop that two operands index alone (a depthwise convolution)."""
    main, alone = analysis.main, _alone(analysis)
    reads = {r.tensor for r in analysis.reads}
    reduce = [lp for lp in main.reduce if len(alone.get(lp.name, set()) & reads) >= 2]
    if not reduce:
        return None
    red = max(reduce, key=lambda lp: lp.extent).name
    # the output side: a loop of the output that an operand of the reduction indexes alone and with no other
    # output loop (a convolution's k in W[k, rc, ry, rx]; not its batch, which the image indexes with its rows)
    out = [lp for lp in main.spatial if analysis.write.tensor in alone.get(lp.name, set())
           and any(t in alone[red] and t in alone[lp.name] for t in weight_tensors(analysis, lp.name))]
    if not out:
        return None
    return max(out, key=lambda lp: lp.extent).name, red


def channel_lanes(analysis: Analysis) -> tuple[str, str] | None:
    """A depthwise layer's loops on the second engine: (its channels: every tensor indexes them alone, its
    output's innermost loop), or None where it has none."""
    main, alone = analysis.main, _alone(analysis)
    every = {r.tensor for r in analysis.reads} | {analysis.write.tensor}
    channels = [lp for lp in main.spatial if alone.get(lp.name, set()) >= every and lp.extent > 1]
    inner = analysis.write.indices[-1].terms
    if not channels:
        return None
    channel = max(channels, key=lambda lp: lp.extent).name
    if len(inner) != 1 or inner[0][0] == channel:
        return None
    return channel, inner[0][0]


@dataclass(frozen=True)
class EngineKind:
    """A kind of PE array: which loops of a layer its two sides take, and the lanes each side may have."""

    name: str
    lanes_of: Callable[[Analysis], tuple[str, str] | None]
    first: tuple[int, ...]
    second: tuple[int, ...]
    sides: tuple[str, str]  # what the two sides are called in the report


#: the engines a network may get, in the order a layer is offered to them
ENGINES = (EngineKind("grid", grid_lanes, LANES, LANES, ("output-channel", "input-channel")),
           EngineKind("depthwise", channel_lanes, LANES, ROW_LANES, ("channel", "row")))


@dataclass
class SharedLayer:
    """One layer on its engine: its schedule (``point``) and the model's figures of it (``design``)."""

    op: Operator
    count: int
    point: Any
    design: dict[str, Any]

    @property
    def latency_s(self) -> float:
        """On an engine of its own: at the clock the model expects of this layer's design alone."""
        return self.design["latency_s"]

    @property
    def clock_mhz(self) -> float:
        return self.design["clock"]["achieved_mhz"]


@dataclass
class Engine:
    """One PE array of the design: its lanes, the layers it runs, its resources counted once."""

    kind: EngineKind
    lanes: tuple[int, int]
    layers: list[SharedLayer]
    resources: dict[str, float]
    memory_share: float = 1.0  # of the board's on-chip memory each layer's schedule was held to
    timing: Any = None  # the model's clock constants (``fpga_kernel.T_*``)

    @property
    def latency_s(self) -> float:
        return sum(layer.count * layer.latency_s for layer in self.layers)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.name, "lanes": dict(zip(self.kind.sides, self.lanes, strict=True)),
                "memory_share": self.memory_share, "latency_s": self.latency_s, "resources": self.resources,
                "layers": [{"layer": layer.op.shape_name, "count": layer.count, "knobs": layer.point.to_json(),
                            "latency_s": layer.latency_s, "pe": layer.design["pe"],
                            "bound": layer.design["bound"]} for layer in self.layers]}


@dataclass
class SharedAccelerator:
    """The network's design: its engines, each layer on one, their resources added up on the device."""

    board: Board
    dtype: str
    clock_mhz: float  # the target
    engines: list[Engine]
    #: the one clock the whole design closes at, by the model: the target derated by the largest fan-out of any
    #: layer's PE broadcast and by the SLRs the engines' resources together span
    achieved_mhz: float = 0.0
    candidates: list[dict[str, Any]] = field(default_factory=list)  # every array tried, for the report

    @property
    def layers(self) -> list[SharedLayer]:
        return [layer for engine in self.engines for layer in engine.layers]

    def layer_latency_s(self, layer: SharedLayer) -> float:
        """A layer's latency at the design's one clock (its own design's time scaled by the clocks' ratio: a
        little pessimistic, as its DDR floors do not slow with the clock)."""
        return layer.latency_s * layer.clock_mhz / self.achieved_mhz if self.achieved_mhz else layer.latency_s

    @property
    def latency_s(self) -> float:
        """The network at batch 1: every layer, as often as it occurs, one after the other, at one clock."""
        return sum(layer.count * self.layer_latency_s(layer) for layer in self.layers)

    @property
    def resources(self) -> dict[str, float]:
        return {k: sum(engine.resources[k] for engine in self.engines) for k in RESOURCE_KINDS}

    @property
    def utilisation(self) -> dict[str, float]:
        return _utilisation(self.board, self.resources)

    def to_json(self) -> dict[str, Any]:
        engines = [engine.to_json() for engine in self.engines]
        for engine, record in zip(self.engines, engines, strict=True):
            for layer, entry in zip(engine.layers, record["layers"], strict=True):
                entry["latency_s"] = self.layer_latency_s(layer)
        return {"board": self.board.name, "dtype": self.dtype, "clock_mhz": self.clock_mhz,
                "achieved_mhz": self.achieved_mhz, "latency_s": self.latency_s, "resources": self.resources,
                "utilisation": self.utilisation, "engines": engines,
                "layers": [layer for record in engines for layer in record["layers"]],
                "basis": NOT_CHARGED, "candidates": self.candidates}


def _utilisation(board: Board, resources: dict[str, float]) -> dict[str, float]:
    return {k: float(resources[k] / board.cap(k)) if board.cap(k) else (0.0 if not resources[k] else float("inf"))
            for k in RESOURCE_KINDS}


def with_memory_share(board: Board, share: float) -> Board:
    """``board`` with ``share`` of its usable BRAM and URAM (what one layer's schedule may fill)."""
    if share >= 1.0:
        return board
    usable = {**board.usable, "bram18k": board.usable["bram18k"] * share, "uram": board.usable["uram"] * share}
    return replace(board, usable=usable)


@dataclass(frozen=True)
class ModelSettings:
    """How the run scores designs: the space's pruning, the traffic weight, a calibration."""

    options: SpaceOptions = SpaceOptions()
    traffic_weight: float = 0.01
    calibration: Calibration | None = None


def _layer_on(op: Operator, board: Board, dtype: str, clock: float, pe: tuple[tuple[str, int], ...],
              settings: ModelSettings) -> tuple[FpgaModel, Any, dict[str, Any]] | None:
    """``op``'s best schedule on the array ``pe`` (None: none fits the board alone)."""
    space = FpgaSpace(analyze(op.with_dtype(dtype)), board, [dtype], [clock], replace(settings.options, pe=pe))
    model = FpgaModel(space.tables, settings.traffic_weight, settings.calibration)
    found = search(space, model, Exhaustive(space), top_k=1)
    if not found.found:
        return None
    return model, space.decode(found.top_rows[0]), describe(model, found.top_rows[0])


def weight_tensors(analysis: Analysis, first: str) -> set[str]:
    """The reads that are a layer's weights on an engine whose first side runs over ``first``: they depend on
    no other output loop (a convolution's W, a linear layer's matrix), where its input does (the image)."""
    spatial = {lp.name for lp in analysis.main.spatial}
    return {r.tensor for r in analysis.reads
            if {name for index in r.indices for name, _ in index.terms} & spatial <= {first}}


def _buffers(model: FpgaModel, design: dict[str, Any], weights: set[str]
             ) -> tuple[dict[str, tuple[float, float, float]], np.ndarray]:
    """Each buffer's (words a bank, bits a word, banks × blocks) by its role on the array (``weights``: see
    ``weight_tensors``), and what they take in this layer's own design (BRAM18K, URAM, LUT as LUTRAM, FF as
    registers: ``RESOURCE_KINDS`` order)."""
    shapes: dict[str, tuple[float, float, float]] = {}
    total = np.zeros(len(RESOURCE_KINDS))
    consts = model.consts[0]  # a space here has one data type
    for buffer in design["buffers"]:
        write = buffer["role"] == "write"
        bits = 8.0 * (consts.acc_bytes if write else consts.in_bytes)
        copies = float(buffer["banks"] * buffer["blocks"])
        role = "output" if write else ("weights" if buffer["tensor"] in weights else "input")
        wpb, b, c = shapes.get(role, (0.0, 0.0, 0.0))
        shapes[role] = (max(wpb, buffer["words_per_bank"]), max(b, bits), max(c, copies))
        storage_cost(float(buffer["words_per_bank"]), bits, model.uram_available, total, copies)
    return shapes, total


def _engine_resources(board: Board, placed: Sequence[tuple[FpgaModel, dict[str, Any], set[str]]]
                      ) -> dict[str, float]:
    """An engine's resources. Its buffers are counted once, each at the largest shape any of its layers gives
    it (a flat, run-time addressed buffer: the most words a bank times the most banks, never fewer); the
    lane-to-bank multiplexers of every layer's mapping are all built, so their LUTs add up; the rest of each
    resource (the PE array, the ports, the epilogue, control) is the most any layer's design needs."""
    rest = np.zeros(len(RESOURCE_KINDS))
    muxes = 0.0
    shapes: dict[str, tuple[float, float, float]] = {}
    for model, design, weights in placed:
        own, storage = _buffers(model, design, weights)
        used = np.array([design["resources"][k] for k in RESOURCE_KINDS])
        mux = float(design.get("bank_mux_luts", 0.0))
        used[RESOURCE_KINDS.index("lut")] -= mux
        rest = np.maximum(rest, used - storage)
        muxes += mux
        for role, (wpb, bits, copies) in own.items():
            w0, b0, c0 = shapes.get(role, (0.0, 0.0, 0.0))
            shapes[role] = (max(w0, wpb), max(b0, bits), max(c0, copies))
    storage = np.zeros(len(RESOURCE_KINDS))
    for wpb, bits, copies in shapes.values():
        storage_cost(wpb, bits, board.cap("uram") > 0, storage, copies)
    total = rest + storage
    total[RESOURCE_KINDS.index("lut")] += muxes
    return {k: float(v) for k, v in zip(RESOURCE_KINDS, total, strict=True)}


def _engines(kind: EngineKind, layers: Sequence[tuple[Operator, int, tuple[str, str]]], board: Board, dtype: str,
             clock: float, settings: ModelSettings, candidates: list[dict[str, Any]]) -> list[Engine]:
    """Every array of ``kind`` on which each of ``layers`` has a schedule that fits the board alone, with each
    layer's schedule held to each share of the on-chip memory (``MEMORY_SHARES``)."""
    out = []
    whole: dict[tuple[int, int, int], Any] = {}  # each layer's schedule on the whole board, by array
    for first, second, share in itertools.product(kind.first, kind.second, MEMORY_SHARES):
        placed, failed = [], None
        held = with_memory_share(board, share)
        for i, (op, count, (a, b)) in enumerate(layers):
            pe = ((a, first), (b, second)) if second > 1 else ((a, first),)
            unheld = whole.get((i, first, second))
            if unheld is not None and all(unheld[2]["resources"][k] <= held.cap(k) for k in ("bram18k", "uram")):
                found = unheld  # its best schedule already fits the share: holding it there changes nothing
            else:
                found = _layer_on(op, held, dtype, clock, pe, settings)
                if share >= 1.0:
                    whole[(i, first, second)] = found
            if found is None:
                failed = op.shape_name or op.name
                break
            placed.append((op, count, *found, weight_tensors(analyze(op), a)))
        entry: dict[str, Any] = {"engine": kind.name, "lanes": [first, second], "memory_share": share}
        candidates.append(entry)
        if failed is not None:
            entry["why"] = f"{failed} has no schedule on it that fits {share:.0%} of the board's memory"
            continue
        on_it = [SharedLayer(op, count, point, d) for op, count, _, point, d, _ in placed]
        engine = Engine(kind, (first, second), on_it,
                        _engine_resources(board, [(model, d, weights) for _, _, model, _, d, weights in placed]),
                        share, placed[0][2].timing)
        entry.update(latency_s=engine.latency_s, utilisation=_utilisation(board, engine.resources))
        out.append(engine)
    return out


def shared_clock(board: Board, design: SharedAccelerator, target_mhz: float, derate: float) -> float:
    """The one clock (MHz) ``design`` closes at by the model: the target (times a calibration's ``derate``)
    derated by the largest PE broadcast fan-out of any layer and by the SLRs its engines' resources span."""
    timing = design.engines[0].timing
    fanout = max(layer.design["clock"].get("fanout", 1.0) for layer in design.layers)
    used = np.array([design.resources[k] for k in RESOURCE_KINDS], dtype=np.float64)
    hz, _ = achieved_clock(target_mhz * 1e6 * derate, used, slr_resources(board), float(fanout), timing[T_ESTIMATE],
                           timing[T_FANOUT_NS], timing[T_FANOUT_FREE], timing[T_SLR2], timing[T_SLR3])
    return min(float(hz) / 1e6, min(layer.clock_mhz for layer in design.layers))


def explore_shared(layers: Sequence[tuple[Operator, int]], board: Board, dtype: str = "float32",
                   clock_mhz: float | None = None, lanes: Sequence[int] | None = None,
                   settings: ModelSettings | None = None) -> SharedAccelerator:
    """The engines (one array per kind the network's layers need) whose network latency at batch 1, at the one
    clock they close at together, is lowest among those whose resources, added up, fit ``board``; each layer
    (operator, how often the network runs it) scheduled on its engine. ``lanes``: the lane counts each side may
    take (default ``LANES``, and ``ROW_LANES`` along a depthwise layer's rows); ``settings``: the run's space
    pruning, traffic weight and calibration."""
    if not layers:
        raise HeteroDSEError("a network needs at least one layer to design an accelerator for")
    settings = settings or ModelSettings()
    clock = clock_mhz or board.default_clock_mhz
    derate = settings.calibration.fmax_derate if settings.calibration else 1.0
    kinds = [kind if lanes is None else EngineKind(kind.name, kind.lanes_of, tuple(lanes),
                                                   tuple(lanes) if kind.second == LANES else kind.second, kind.sides)
             for kind in ENGINES]
    groups: dict[str, list[tuple[Operator, int, tuple[str, str]]]] = {}
    for op, count in layers:
        analysis = analyze(op)
        for kind in kinds:
            if (sides := kind.lanes_of(analysis)) is not None:
                groups.setdefault(kind.name, []).append((op, count, sides))
                break
        else:
            raise HeteroDSEError(f"{op.shape_name or op.name} ({op.name}) fits no engine of a shared accelerator "
                                 "(a grid over its channels, or one over a depthwise layer's)")
    candidates: list[dict[str, Any]] = []
    options = [_engines(kind, groups[kind.name], board, dtype, clock, settings, candidates)
               for kind in kinds if kind.name in groups]
    best: SharedAccelerator | None = None
    for engines in itertools.product(*options):
        design = SharedAccelerator(board, dtype, clock, list(engines))
        if not all(u <= 1.0 for u in design.utilisation.values()):
            continue
        design.achieved_mhz = shared_clock(board, design, clock, derate)
        if best is None or design.latency_s < best.latency_s:
            best = design
    if best is None:
        raise HeteroDSEError(f"no set of PE arrays of {min(kinds[0].first)}–{max(kinds[0].first)} lanes a side fits "
                             f"{board.name} with every layer on it")
    best.candidates = candidates
    return best
