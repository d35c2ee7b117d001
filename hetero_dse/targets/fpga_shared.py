"""One FPGA accelerator for a whole network, by the model (issue 38, first part): a PE array fixed at synthesis
that every layer runs on, one after the other, instead of one accelerator per layer that could never share
the device.

The array is a GEMM-like grid: ``out`` lanes over the layer's output channels (a convolution's ``k``, a linear
layer's output features) times ``red`` lanes over its input channels (the reduction loop both operands index
alone: a convolution's ``rc``, a linear layer's ``k``). Each layer is then scheduled on it by the same model
that scores single layers: its tiles and loop order searched exhaustively with the lanes fixed
(``SpaceOptions.pe``; a loop shorter than its lanes padded, as a 3-channel image on 64 channel lanes). A
layer with no such reduction (a depthwise convolution: each channel its own) cannot run on the grid and is
listed as needing a second engine.

The design's resources are counted once: the array's DSPs; each on-chip buffer (input, weights, output) sized
for the largest tile any layer puts in it; the rest (ports, control) the largest any layer's design needs.
Not charged yet: what run-time loop bounds and strides cost the generated code (loop overhead, bank
multiplexers, the per-layer descriptor reads): there is no shared HLS kernel yet, so these latencies are the
model's for a design the code does not build.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cost_models.fpga import FpgaModel
from cost_models.fpga_blocks import storage_cost
from cost_models.fpga_describe import describe
from hetero_dse.analysis import Analysis, analyze
from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore.exhaustive import Exhaustive
from hetero_dse.hardware.board import RESOURCE_KINDS, Board
from hetero_dse.operator import Operator
from hetero_dse.space.fpga import FpgaSpace, SpaceOptions
from hetero_dse.targets.fpga_search import search

__all__ = ["LANES", "SharedAccelerator", "SharedLayer", "explore_shared", "grid_lanes"]

#: lane counts each side of the grid may take (powers of two: every layer's channels pad to few of them)
LANES = (4, 8, 16, 32, 64, 128)


def grid_lanes(analysis: Analysis) -> tuple[str, str] | None:
    """The layer's loops on the grid's two sides: (output channels, input channels), or None where it has no
    reduction loop that two operands index alone (a depthwise convolution)."""
    main = analysis.main
    alone: dict[str, list[str]] = {}  # loop -> the reads that index a dimension with it alone
    for read in analysis.reads:
        for index in read.indices:
            if len(index.terms) == 1 and index.terms[0][1] == 1:
                alone.setdefault(index.terms[0][0], []).append(read.tensor)
    reduce = [lp for lp in main.reduce if len(set(alone.get(lp.name, ()))) >= 2]
    if not reduce:
        return None
    red = max(reduce, key=lambda lp: lp.extent).name
    weights = {r for r in analysis.reads if any(i.terms == ((red, 1),) for i in r.indices)}
    written = {i.terms[0][0] for i in analysis.write.indices if len(i.terms) == 1}
    out = [lp for lp in main.spatial if lp.name in written and sum(
        any(i.terms == ((lp.name, 1),) for i in r.indices) for r in weights) == 1]
    if not out:
        return None
    return max(out, key=lambda lp: lp.extent).name, red


@dataclass
class SharedLayer:
    """One layer on the shared array: its schedule (``point``) and the model's figures of it (``design``)."""

    op: Operator
    count: int
    point: Any
    design: dict[str, Any]

    @property
    def latency_s(self) -> float:
        return self.design["latency_s"]


@dataclass
class SharedAccelerator:
    """The network's shared design: its lanes, each layer on it, its resources counted once."""

    board: Board
    dtype: str
    clock_mhz: float
    out_lanes: int
    red_lanes: int
    layers: list[SharedLayer]
    resources: dict[str, float]
    second_engine: list[str] = field(default_factory=list)  # layers the grid cannot take
    candidates: list[dict[str, Any]] = field(default_factory=list)  # every grid tried, for the report

    @property
    def latency_s(self) -> float:
        """The network at batch 1: every layer, as often as it occurs, one after the other."""
        return sum(layer.count * layer.latency_s for layer in self.layers)

    @property
    def utilisation(self) -> dict[str, float]:
        return {k: float(self.resources[k] / self.board.cap(k)) if self.board.cap(k) else 0.0 for k in RESOURCE_KINDS}

    def to_json(self) -> dict[str, Any]:
        return {"board": self.board.name, "dtype": self.dtype, "clock_mhz": self.clock_mhz,
                "pe": {"out_lanes": self.out_lanes, "red_lanes": self.red_lanes},
                "latency_s": self.latency_s, "resources": self.resources, "utilisation": self.utilisation,
                "layers": [{"layer": layer.op.shape_name, "count": layer.count, "knobs": layer.point.to_json(),
                            "latency_s": layer.latency_s, "pe": layer.design["pe"],
                            "bound": layer.design["bound"]} for layer in self.layers],
                "second_engine": self.second_engine,
                "basis": "the model's: the shared HLS kernel is not generated yet, and what its run-time loop "
                         "bounds cost is not charged",
                "candidates": self.candidates}


def _layer_on(op: Operator, board: Board, dtype: str, clock: float, pe: tuple[tuple[str, int], ...]
              ) -> tuple[FpgaModel, Any, dict[str, Any]] | None:
    """``op``'s best schedule on the array ``pe`` (None: none fits the board alone)."""
    space = FpgaSpace(analyze(op.with_dtype(dtype)), board, [dtype], [clock], SpaceOptions(pe=pe))
    model = FpgaModel(space.tables)
    found = search(space, model, Exhaustive(space), top_k=1)
    if not found.found:
        return None
    return model, space.decode(found.top_rows[0]), describe(model, found.top_rows[0])


def _buffer_bram(model: FpgaModel, design: dict[str, Any], weights: set[str]
                 ) -> tuple[dict[str, tuple[float, float, float]], float]:
    """Each buffer's (words a bank, bits a word, banks × blocks) by its role on the array (``weights``: the
    tensors indexed by the output-channel lanes), and the BRAM18K they take in this layer's own design."""
    shapes: dict[str, tuple[float, float, float]] = {}
    total = 0.0
    consts = model.consts[0]  # a space here has one data type
    for buffer in design["buffers"]:
        write = buffer["role"] == "write"
        bits = 8.0 * (consts.acc_bytes if write else consts.in_bytes)
        copies = float(buffer["banks"] * buffer["blocks"])
        role = "output" if write else ("weights" if buffer["tensor"] in weights else "input")
        wpb, b, c = shapes.get(role, (0.0, 0.0, 0.0))
        shapes[role] = (max(wpb, buffer["words_per_bank"]), max(b, bits), max(c, copies))
        res = np.zeros(len(RESOURCE_KINDS))
        storage_cost(float(buffer["words_per_bank"]), bits, model.uram_available, res, copies)
        total += res[1]
    return shapes, total


def _shared_resources(board: Board, placed: Sequence[tuple[FpgaModel, dict[str, Any], set[str]]]
                      ) -> dict[str, float]:
    """The shared design's resources: per resource the most any layer's design needs, except the buffers'
    BRAM18K and URAM, counted once per buffer at the largest shape any layer gives it."""
    resources = {k: max(d["resources"][k] for _, d, _ in placed) for k in RESOURCE_KINDS}
    shapes: dict[str, tuple[float, float, float]] = {}
    rest_bram = 0.0
    for model, design, weights in placed:
        own, buffers_bram = _buffer_bram(model, design, weights)
        rest_bram = max(rest_bram, design["resources"]["bram18k"] - buffers_bram)
        for role, (wpb, bits, copies) in own.items():
            w0, b0, c0 = shapes.get(role, (0.0, 0.0, 0.0))
            shapes[role] = (max(w0, wpb), max(b0, bits), max(c0, copies))
    res = np.zeros(len(RESOURCE_KINDS))
    for wpb, bits, copies in shapes.values():
        storage_cost(wpb, bits, board.cap("uram") > 0, res, copies)
    resources["bram18k"] = rest_bram + float(res[1])
    resources["uram"] = max(resources["uram"], float(res[2]))
    return {k: float(v) for k, v in resources.items()}


def explore_shared(layers: Sequence[tuple[Operator, int]], board: Board, dtype: str = "float32",
                   clock_mhz: float | None = None, lanes: Sequence[int] = LANES) -> SharedAccelerator:
    """The grid (out lanes × red lanes) whose network latency at batch 1 is lowest among those whose design,
    counted once, fits ``board``; each layer (operator, how often the network runs it) scheduled on it."""
    clock = clock_mhz or board.default_clock_mhz
    on_grid, second = [], []
    for op, count in layers:
        sides = grid_lanes(analyze(op))
        (on_grid if sides else second).append((op, count, sides))
    if not on_grid:
        raise HeteroDSEError("no layer of the network has a channel reduction a shared PE grid can take")
    best: SharedAccelerator | None = None
    candidates = []
    for out_lanes, red_lanes in itertools.product(lanes, lanes):
        placed, failed = [], None
        for op, count, (out, red) in on_grid:
            found = _layer_on(op, board, dtype, clock, ((out, out_lanes), (red, red_lanes)))
            if found is None:
                failed = op.shape_name or op.name
                break
            weights = {r.tensor for r in analyze(op).reads if any(i.terms == ((out, 1),) for i in r.indices)}
            placed.append((op, count, *found, weights))
        entry: dict[str, Any] = {"out_lanes": out_lanes, "red_lanes": red_lanes}
        candidates.append(entry)
        if failed is not None:
            entry["why"] = f"{failed} has no schedule on it that fits the board"
            continue
        resources = _shared_resources(board, [(model, d, weights) for _, _, model, _, d, weights in placed])
        design = SharedAccelerator(board, dtype, clock, out_lanes, red_lanes,
                                   [SharedLayer(op, count, point, d) for op, count, _, point, d, _ in placed],
                                   resources, [op.shape_name or op.name for op, _, _ in second])
        over = [k for k, u in design.utilisation.items() if u > 1.0]
        entry.update(latency_s=design.latency_s, utilisation=design.utilisation)
        if over:
            entry["why"] = f"the shared design exceeds the board's usable {', '.join(over)}"
            continue
        if best is None or design.latency_s < best.latency_s:
            best = design
    if best is None:
        raise HeteroDSEError(f"no shared PE grid of {min(lanes)}–{max(lanes)} lanes a side fits {board.name} for "
                             "every layer at once")
    best.candidates = candidates
    return best
