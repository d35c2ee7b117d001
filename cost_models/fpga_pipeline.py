"""A layer-pipelined accelerator for a whole network (issue 38, item 5), as a model: one stage per layer, each
its own PE array with its weights on chip, the stages connected by FIFOs of pixels, every image streaming
through all of them (FINN's and DNNBuilder's architecture). **No code is generated for it yet**: these figures
are the model's, for choosing between it and the shared network kernel (``fpga_network_design``), whose code
exists and is checked. Where the two disagree on a number, the shared kernel's is the one a user can build.

A stage of a convolution holds ``in_lanes × out_lanes`` multiply-adds (a depthwise stage ``out_lanes``), and
runs each output pixel as ``R·S·⌈C/in_lanes⌉·⌈K/out_lanes⌉`` cycles (a fold, in FINN's word); its weights sit
in on-chip memory a lane grid a word, its input in a line buffer of ``R`` rows. The pipeline takes a new image
every ``max(stage cycles)`` cycles; an image's latency is that interval plus the rows each stage waits for
before its first output row (an estimate). The folding is chosen greedily, as FINN's optimiser does: the
slowest stage's lanes double while the design fits the board, so every stage ends near the bottleneck's rate.

The design exists only where every stage's weights fit on the chip: there is no DDR traffic but the image in
and the result out. A network whose weights do not fit is refused in one sentence (a design that streams them
from DDR is a third architecture, not modelled).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cost_models.fpga import slr_resources
from cost_models.fpga_blocks import storage_cost
from cost_models.fpga_clock import achieved_clock
from cost_models.fpga_costs import (
    ARITHMETIC,
    FANOUT_FREE,
    FANOUT_NS_PER_DOUBLING,
    FF_BASE,
    FF_PER_PORT,
    LUT_BASE,
    LUT_PER_PORT,
    SLR_DERATE,
)
from cost_models.fpga_network import NetLayer
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import RESOURCE_KINDS, Board
from hetero_dse.model.layer_shape import LayerShape

__all__ = ["PipelineDesign", "Stage", "explore_pipeline", "stage_cycles", "stage_layer", "stage_resources"]

#: the most lanes a side of one stage may take
MAX_LANES = 64
#: a stage's counters, FIFO handshakes and line-buffer addressing (*estimate*, no synthesis behind it)
STAGE_CONTROL_LUT, STAGE_CONTROL_FF = 400, 600
#: the widest word of the on-chip memory the weights are kept in: a URAM's 72 bits, a BRAM36's 36
MEMORY_WORD_BITS = {True: 72, False: 36}
#: the m_axi ports: the image in, the result out
PIPELINE_PORTS = 2
_LUT, _FF, _DSP = (RESOURCE_KINDS.index(k) for k in ("lut", "ff", "dsp"))


def stage_layer(shape: LayerShape) -> NetLayer:
    """The layer as its stage runs it: a convolution on the network's image as a 1×1 convolution over its
    windows (the host lays the image out as im2col, so 3 channels do not leave the lanes idle)."""
    if shape.engine == "grid" and shape.from_host and shape.R * shape.S > 1:
        oh = (shape.H + 2 * shape.pad - shape.R) // shape.stride + 1
        ow = (shape.W + 2 * shape.pad - shape.S) // shape.stride + 1
        return NetLayer("grid", shape.C * shape.R * shape.S, shape.K, oh, ow, 1, 1)
    return NetLayer(shape.engine, shape.C, shape.K, shape.H, shape.W, shape.R, shape.S, shape.stride, shape.pad)


def stage_cycles(layer: NetLayer, in_lanes: int, out_lanes: int) -> int:
    """Cycles the stage takes for one image: a cycle for each (output pixel, tap, input-channel fold,
    output-channel fold); on the depthwise engine for each (output pixel, window fold, channel fold), its
    ``in_lanes`` the window's taps taken at once."""
    pixels = layer.OH * layer.OW
    if layer.engine == "depthwise":
        return pixels * math.ceil(layer.R * layer.S / in_lanes) * math.ceil(layer.C / out_lanes)
    return pixels * layer.R * layer.S * math.ceil(layer.C / in_lanes) * math.ceil(layer.K / out_lanes)


def _line_pixels(layer: NetLayer) -> int:
    """Input pixels the stage holds: ``R`` rows of its image for a window, one pixel for a 1×1 convolution
    (re-read for each output-channel fold)."""
    return layer.R * layer.W if layer.R > 1 else 1


def stage_resources(layer: NetLayer, in_lanes: int, out_lanes: int, dtype: str, uram: bool,
                    residual: bool = False, skip_pixels: int = 0) -> np.ndarray:
    """One stage in ``RESOURCE_KINDS`` order: its multiply-adds (int8: two a DSP48E2 where the output lanes
    pair; the depthwise engine's window taps × channels), its weights on chip (a lane grid a word), its line
    buffer (a word ``in_lanes`` wide; banked for the depthwise window), the FIFO that
    holds a residual's pixels until the stage adds them, its epilogue (a lane each) and its control."""
    a = ARITHMETIC[dtype]
    bits = 8.0 * np.dtype(dtype).itemsize
    res = np.zeros(len(RESOURCE_KINDS))
    grid = layer.engine == "grid"
    macs = in_lanes * out_lanes
    packed = dtype == "int8" and grid and out_lanes % 2 == 0
    muls = macs / 2 if packed else macs
    res[_DSP] += muls * a.dsp_mul + macs * a.dsp_add
    res[_LUT] += muls * a.lut_mul + macs * a.lut_add + (macs / 2 * 40 if packed else 0)
    res[_FF] += macs * (a.ff_mul + a.ff_add)
    folds_c = math.ceil(layer.C / (in_lanes if grid else out_lanes))
    folds_k = math.ceil(layer.K / out_lanes) if grid else 1
    w_words = folds_k * folds_c * (layer.R * layer.S if grid else math.ceil(layer.R * layer.S / in_lanes))
    # a lane grid narrower than the memory's word shares it with the next grids (read once, held in a register)
    pack = max(1, MEMORY_WORD_BITS[uram] // int(macs * bits))
    storage_cost(float(math.ceil(w_words / pack)), pack * macs * bits, uram, res, 1.0)
    if grid:
        storage_cost(float(_line_pixels(layer) * folds_c), in_lanes * bits, uram, res, 1.0)
    else:  # the window's taps read at once: the rows banked ``in_lanes`` ways
        storage_cost(float(math.ceil(_line_pixels(layer) * folds_c / in_lanes)), out_lanes * bits, uram, res,
                     float(in_lanes))
    if residual and skip_pixels:
        storage_cost(float(skip_pixels * math.ceil(layer.K / out_lanes)), out_lanes * bits, uram, res, 1.0)
    if a.floating:  # the bias add, the slope's multiply, the residual's add
        res[_DSP] += out_lanes * (2 * a.dsp_add + a.dsp_mul)
        res[_LUT] += out_lanes * (2 * a.lut_add + a.lut_mul + 64)
    else:  # the requantising 32 x 16 multiply (two DSPs), the slope's, the residual's 8 x 16
        res[_DSP] += out_lanes * (4 + (1 if residual else 0))
        res[_LUT] += out_lanes * 160
    res[_LUT] += STAGE_CONTROL_LUT
    res[_FF] += STAGE_CONTROL_FF + macs * bits  # the input pixel's lanes broadcast to the output lanes
    return res


@dataclass
class Stage:
    shape: LayerShape
    layer: NetLayer
    in_lanes: int
    out_lanes: int
    cycles: int
    resources: np.ndarray
    skip_pixels: int = 0

    def to_json(self, clock_hz: float) -> dict[str, Any]:
        return {"layer": self.shape.name, "engine": self.layer.engine, "in_lanes": self.in_lanes,
                "out_lanes": self.out_lanes, "cycles": self.cycles, "seconds": self.cycles / clock_hz,
                "dsp": float(self.resources[_DSP]), "skip_pixels": self.skip_pixels}


@dataclass
class PipelineDesign:
    board: Board
    dtype: str
    stages: list[Stage]
    resources: dict[str, float]
    clock_mhz: float
    achieved_mhz: float
    weights_bytes: int
    image_bytes: int
    io_cycles: float  # cycles a frame's image and result take on the port, if that is slower than every stage
    timing: dict[str, Any] = field(default_factory=dict)

    @property
    def interval_cycles(self) -> float:
        return max(max(s.cycles for s in self.stages), self.io_cycles)

    @property
    def fps(self) -> float:
        return self.achieved_mhz * 1e6 / self.interval_cycles

    @property
    def latency_s(self) -> float:
        """An image's time through the pipeline (estimate): the interval, plus for each stage the share of its
        image it waits for before its first output row (its window's rows, as its producer delivers them)."""
        fill = sum(s.cycles * min(1.0, max(s.layer.R - s.layer.pad, 1) / max(s.layer.H, 1)) for s in self.stages)
        return (self.interval_cycles + fill) / (self.achieved_mhz * 1e6)

    @property
    def macs(self) -> int:
        return sum(s.shape.macs for s in self.stages)

    @property
    def bottleneck(self) -> Stage:
        return max(self.stages, key=lambda s: s.cycles)

    def to_json(self) -> dict[str, Any]:
        hz = self.achieved_mhz * 1e6
        caps = self.board.caps
        return {"architecture": "layer-pipelined (modelled; no code generated)", "board": self.board.name,
                "dtype": self.dtype, "stages": len(self.stages), "clock_mhz": self.clock_mhz,
                "achieved_mhz": self.achieved_mhz, "fps": self.fps, "latency_s": self.latency_s,
                "gops": 2 * self.macs * self.fps / 1e9, "interval_cycles": self.interval_cycles,
                "bottleneck": self.bottleneck.shape.name, "weights_bytes": self.weights_bytes,
                "resources": self.resources,
                "utilisation": {k: self.resources[k] / caps[k] if caps[k] else 0.0 for k in RESOURCE_KINDS},
                "per_stage": [s.to_json(hz) for s in self.stages],
                "basis": "model only (cost_models/fpga_pipeline.py): one stage per layer, weights on chip, "
                         "folds chosen greedily; the latency's fill is an estimate"}


def _skip_pixels(stages: Sequence[tuple[LayerShape, NetLayer]], i: int) -> int:
    """Pixels a residual waits in its FIFO at stage ``i``: the rows every stage since the last one that added
    a residual (the block's start) holds before it answers (*estimate*: the branch is not traced)."""
    j = i
    while j > 0 and not stages[j - 1][0].residual:
        j -= 1
    return sum(max(n.R - n.pad, 1) * n.W for _, n in stages[j:i + 1])


def _fold(flat: Sequence[tuple[LayerShape, NetLayer]], skips: Sequence[int], caps: np.ndarray, fixed: np.ndarray,
          dtype: str, uram: bool) -> tuple[list[Stage], np.ndarray] | None:
    """FINN's folding, greedily: every stage starts at one lane a side; the slowest takes twice the lanes on the
    side that helps it most while the design fits ``caps``. None if one lane a stage does not fit."""
    lanes = [[1, 1] for _ in flat]

    def build(i: int) -> Stage:
        s, n = flat[i]
        return Stage(s, n, *lanes[i], stage_cycles(n, *lanes[i]),
                     stage_resources(n, *lanes[i], dtype, uram, s.residual, skips[i]), skips[i])

    stages = [build(i) for i in range(len(flat))]
    total = fixed + sum(s.resources for s in stages)
    if np.any(total > caps):
        return None
    while True:
        i = max(range(len(stages)), key=lambda k: stages[k].cycles)
        s = stages[i]
        # the sides' widths: input and output channels; on the depthwise engine its window's taps and channels
        grid = s.layer.engine == "grid"
        sides = {0: s.layer.C if grid else s.layer.R * s.layer.S, 1: s.layer.K if grid else s.layer.C}
        options = []
        for side, width in sides.items():
            if lanes[i][side] * 2 <= min(MAX_LANES, 1 << math.ceil(math.log2(width))):
                trial = list(lanes[i])
                trial[side] *= 2
                options.append((stage_cycles(s.layer, *trial), side))
        grew = False
        for cycles, side in sorted(options):
            if cycles >= s.cycles:
                break
            lanes[i][side] *= 2
            grown = build(i)
            trial_total = total - s.resources + grown.resources
            if np.all(trial_total <= caps):
                stages[i], total, grew = grown, trial_total, True
                break
            lanes[i][side] //= 2
        if not grew:
            return stages, total  # the pipeline's rate is this stage's: more lanes do not help it or do not fit


def explore_pipeline(layers: Sequence[tuple[LayerShape, int]], board: Board, dtype: str = "float32",
                     clock_mhz: float | None = None) -> PipelineDesign:
    """The layer-pipelined design of most images a second that fits ``board`` (see the module doc): each
    occurrence of a layer (its count) a stage of its own. On a part of several SLRs the folding is tried within
    one, two, ... SLRs' resources: a design that spans more closes at a lower clock, which can cost more than
    its lanes gain."""
    if not layers:
        raise HeteroDSEError("a network needs at least one layer to design a pipeline for")
    if dtype not in ("float32", "int8"):
        raise HeteroDSEError(f"the pipeline is modelled for float32 and int8, not {dtype}")
    clock = float(clock_mhz or board.default_clock_mhz)
    uram = board.cap("uram") > 0
    caps = np.array([board.cap(k) for k in RESOURCE_KINDS], dtype=float)
    itemsize = np.dtype(dtype).itemsize
    flat = [(s, stage_layer(s)) for s, count in layers for _ in range(count)]
    weights = sum(n.K * n.R * n.S * (n.C if n.engine == "grid" else 1) for _, n in flat) * itemsize
    fixed = np.zeros(len(RESOURCE_KINDS))
    fixed[_LUT] = LUT_BASE + PIPELINE_PORTS * LUT_PER_PORT
    fixed[_FF] = FF_BASE + PIPELINE_PORTS * FF_PER_PORT
    skips = [_skip_pixels(flat, i) if s.residual else 0 for i, (s, _) in enumerate(flat)]
    first, last = flat[0][1], flat[-1][1]
    image = (first.C * first.H * first.W + last.K * last.OH * last.OW) * itemsize
    best: PipelineDesign | None = None
    slrs = max(1, board.slrs)
    for k in range(1, slrs + 1):
        folded = _fold(flat, skips, caps * k / slrs, fixed, dtype, uram)
        if folded is None:
            continue
        stages, total = folded
        fanout = float(max(s.out_lanes for s in stages))
        eff, _ = achieved_clock(clock * 1e6, total, slr_resources(board), fanout, 1.0, FANOUT_NS_PER_DOUBLING,
                                FANOUT_FREE, SLR_DERATE[2], SLR_DERATE[3])
        achieved = float(eff) / 1e6
        port_bytes_per_cycle = board.memory.sustained_gbps_per_channel * 1e9 / (achieved * 1e6)
        design = PipelineDesign(board, dtype, stages,
                                {r: float(v) for r, v in zip(RESOURCE_KINDS, total, strict=True)}, clock, achieved,
                                weights, image, image / port_bytes_per_cycle,
                                timing={"port_gbps": board.memory.sustained_gbps_per_channel, "slr_budget": k})
        if best is None or design.fps > best.fps:
            best = design
    if best is None:
        raise HeteroDSEError(f"no layer-pipelined design fits {board.name} in {dtype}: the network's "
                             f"{weights / 2**20:.1f} MiB of weights, with one stage a layer at one lane each, need "
                             "more on-chip memory or logic than it has (streaming the weights from DDR is a design "
                             "not modelled; the shared network kernel serves it)")
    return best
