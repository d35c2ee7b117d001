"""A layer-pipelined accelerator for a whole network (issue 38, item 5): one stage per layer, each its own PE
array with its weights on chip, the stages connected by FIFOs of words, every image streaming through all of
them (FINN's and DNNBuilder's architecture). This is the model of the code ``hls_templates/pipeline/`` builds
(``hetero_dse/hls/pipeline_project.py`` writes it for a traced network; its C-simulation counts the trips
charged here). ``explore --model`` reports it beside the shared network kernel's compute units, and writes its
project where the network traces as a chain of layers.

A stage is two processes. The window process reads each input pixel into a line buffer of ``R`` rows (a fold
of its lanes a word; a 1×1 convolution needs none), then sends each output pixel's window a word a trip. The PE
array holds ``in_lanes × out_lanes`` multiply-adds (a depthwise stage: one tap × ``out_lanes`` channels) and
runs one flattened loop over (output pixel, fold, step), ``R·S·⌈C/in_lanes⌉`` steps a fold (folds, in FINN's
word); each fold's output lanes go on as one word. Its weights sit in a RAM a lane grid a row, loaded once
from DDR, so UltraRAM may hold them. A max pool's stage has the depthwise window and a running maximum a lane
for a PE array (``fpga_pipeline_pool``). Where a producer's words and its consumer's lanes differ a regroup process
stands between them (``cost_models/fpga_pipeline_streams.py``). The processes overlap, so the pipeline takes a
new image every ``max(stage cycles, regroup trips)``. An image's latency is that interval plus the rows each
stage waits for before its first output row (an estimate). The device is shared among the stages as DNNBuilder
does (``cost_models/fpga_pipeline_balance.py``): for the least interval it can meet, each stage takes the
cheapest lanes that meet it, a side's lanes any count that takes a fold fewer (not only powers of two), and
every candidate is scored, with the regroups its lanes need, at the clock it closes at.

Weights stay on chip, loaded once, except a classifier's (one output pixel), which may be read from DDR each
image. A network whose weights do not fit is refused in one sentence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from cost_models.fpga_blocks import storage_cost
from cost_models.fpga_costs import ARITHMETIC, CHAIN_DELAY_FF, axi_max_beats, packed_chain
from cost_models.fpga_network import NetLayer
from cost_models.fpga_network_depths import accumulation_distance
from cost_models.fpga_network_resources import kernel_base
from cost_models.fpga_pipeline_balance import balance, lane_ladder
from cost_models.fpga_pipeline_design import PipelineDesign, Stage
from cost_models.fpga_pipeline_pool import pool_resources
from cost_models.fpga_pipeline_storage import (
    fifo_storage,
    has_weights,
    line_reads,
    line_storage,
    memory,
    pointwise,
    stream_trips,
    streams_weights,
    skip_block,
    branch_ahead,
    branch_lag,
    weight_rows,
    weights_moves,
    weights_storage,
)
from cost_models.fpga_pipeline_align import align
from cost_models.fpga_pipeline_slrs import over_slrs
from cost_models.fpga_pipeline_streams import (
    image_trips,
    frame_bytes,
    in_lanes_of,
    io_cycles,
    io_trips,
    load_trips,
    pipeline_buffers,
    port_pixel,
    regroups,
    stage_fifos,
    stage_regroups,
)
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import RESOURCE_KINDS, Board
from hetero_dse.model.layer_shape import LayerShape

__all__ = ["PipelineDesign", "Stage", "explore_pipeline", "explore_traced", "image_trips", "io_trips", "line_storage",
           "load_trips", "memory", "pipeline_buffers", "pointwise", "port_pixel", "stage_cycles", "stage_fifos",
           "stage_regroups", "stream_trips", "streams_weights", "weight_rows",
           "stage_layer", "stage_resources", "stage_time", "weights_storage", "window_trips"]

#: the most lanes a side of one stage may take
MAX_LANES = 64
#: cycles a window's loop takes to fill again each output row (its line buffer's read, its compares; *estimate*)
WINDOW_ROW_FILL = 4
#: a stage's counters, FIFO handshakes and line-buffer addressing (*estimate*, no synthesis behind it)
STAGE_CONTROL_LUT, STAGE_CONTROL_FF = 400, 600
_LUT, _FF, _DSP = (RESOURCE_KINDS.index(k) for k in ("lut", "ff", "dsp"))


def stage_layer(shape: LayerShape) -> NetLayer:
    """The layer as its stage runs it: a convolution on the network's image as a 1×1 convolution over its
    windows (the host lays the image out as im2col, so 3 channels do not leave the lanes idle); a linear layer
    after a flatten as one window over its input's pixels, which arrive as one row."""
    if shape.engine == "grid" and shape.from_host and shape.R * shape.S > 1:
        oh = (shape.H + 2 * shape.pad - shape.R) // shape.stride + 1
        ow = (shape.W + 2 * shape.pad - shape.S) // shape.stride + 1
        return NetLayer("grid", shape.C * shape.R * shape.S, shape.K, oh, ow, 1, 1)
    if shape.pixels_in > 1:
        per = shape.C // shape.pixels_in
        return NetLayer("grid", per, shape.K, 1, shape.pixels_in, 1, shape.pixels_in)
    return NetLayer(shape.engine, shape.C, shape.K, shape.H, shape.W, shape.R, shape.S, shape.stride, shape.pad)


def stage_cycles(layer: NetLayer, in_lanes: int, out_lanes: int, distance: int = 1) -> int:
    """Trips of the stage's PE array for one image: one loop over (output pixel, output-channel fold, step), a
    step for each (tap, input-channel fold); on the depthwise engine over (output pixel, channel fold, tap
    group of ``in_lanes`` taps). A fold of fewer steps than the accumulation ``distance`` idles up to it (the
    partial sums rotate over that many)."""
    pixels = layer.OH * layer.OW
    if layer.engine != "grid":  # depthwise, or a max pool's running maxima (``fpga_pipeline_pool``)
        return pixels * math.ceil(layer.C / out_lanes) * max(math.ceil(layer.R * layer.S / in_lanes), distance)
    return pixels * math.ceil(layer.K / out_lanes) * max(layer.R * layer.S * math.ceil(layer.C / in_lanes), distance)


def stage_time(layer: NetLayer, in_lanes: int, out_lanes: int, distance: int = 1) -> int:
    """Cycles the stage takes an image: its two processes overlap (DATAFLOW), so the slower one's (a window's
    trips and its loop's fill each output row, ``WINDOW_ROW_FILL``)."""
    fill = 0 if pointwise(layer) else (layer.OH + 1) * WINDOW_ROW_FILL
    return max(stage_cycles(layer, in_lanes, out_lanes, distance), window_trips(layer, in_lanes, out_lanes) + fill)


def window_trips(layer: NetLayer, in_lanes: int, out_lanes: int) -> int:
    """Trips of the stage's window process for one image: the rows its first output row reaches read into the
    line buffer (a fold a word), then for each output row the larger of its windows' words and the next rows'
    words, which it reads in the same trips (a 1×1 convolution's: each pixel's folds passed on)."""
    cf = math.ceil(layer.C / in_lanes_of(layer, in_lanes, out_lanes))
    if pointwise(layer):
        return layer.H * layer.W * cf
    per_pixel = cf * (layer.R * layer.S if layer.engine == "grid" else math.ceil(layer.R * layer.S / in_lanes))
    first, ahead = line_reads(layer)
    return first * layer.W * cf + sum(max(layer.OW * per_pixel, rows * layer.W * cf) for rows in ahead)


def stage_resources(layer: NetLayer, in_lanes: int, out_lanes: int, dtype: str, caps: dict[str, float],
                    residual: bool = False, skip_pixels: int = 0, leaky: bool = False,
                    distance: int = 1, streamed: bool = False, port_bits: int = 0, in_pixels: int = 0) -> np.ndarray:
    """One stage in ``RESOURCE_KINDS`` order: its multiply-adds (int8: two a DSP48E2 where the output lanes
    pair; the depthwise engine's window taps × channels), its weights on chip (a lane grid a word), its line
    buffer (a pixel a word), the FIFO that
    holds a residual's pixels until the stage adds them, its epilogue (a lane each) and its control."""
    if not has_weights(layer):  # a max pool: compares and a line buffer
        return pool_resources(layer, out_lanes, dtype, caps, distance, in_pixels)
    a = ARITHMETIC[dtype]
    bits = 8.0 * np.dtype(dtype).itemsize
    res = np.zeros(len(RESOURCE_KINDS))
    grid = layer.engine == "grid"
    macs = in_lanes * out_lanes
    packed = dtype == "int8" and grid and out_lanes % 2 == 0
    muls = macs / 2 if packed else macs
    # packed: a chain of multiply-adds sums a run of input lanes in the DSPs (PACKED_CHAIN, as the network
    # kernel's grid), the fabric splits each chain's sum and adds the two lanes' chains
    chain = packed_chain(in_lanes) if packed else 1
    res[_DSP] += muls * a.dsp_mul + macs * a.dsp_add
    res[_LUT] += muls * a.lut_mul + macs / chain * a.lut_add + (muls / chain * 40 if packed else 0)
    res[_FF] += macs * a.ff_mul + macs / chain * a.ff_add + (muls / chain * CHAIN_DELAY_FF if chain > 1 else 0)
    folds_c = math.ceil(layer.C / in_lanes_of(layer, in_lanes, out_lanes))
    if streamed:  # the weights read from DDR each image (``streams_weights``): an m_axi port of its own instead
        res += kernel_base([(port_bits, axi_max_beats(port_bits // 8))]) - kernel_base([])
    else:
        weights_storage(layer, in_lanes, out_lanes, dtype, caps, res)
    line_storage(layer, in_lanes, out_lanes, dtype, caps, res)
    if grid:  # the pixel's window, kept for its output-channel folds after the first
        storage_cost(float(layer.R * layer.S * folds_c), in_lanes * bits, caps.get("uram", 0) > 0, res, 1.0)
    for _, depth, width, _ in stage_fifos(layer, in_lanes, out_lanes, dtype, caps, residual, skip_pixels, in_pixels):
        fifo_storage(depth, width, caps, res)
    # the fold of output lanes the PE array writes on (and the residual's it adds), a register each
    res[_FF] += out_lanes * bits * (2 if residual else 1)
    # the epilogue, a lane each: the slope's multiply only for a leaky activation (ReLU and its clamps compare)
    if a.floating:  # the partial sums' adds, the bias add, the residual's add, the slope's multiply
        adds = distance - 1 + (2 if residual else 1)
        res[_DSP] += out_lanes * (a.dsp_add * adds + (a.dsp_mul if leaky else 0))
        res[_LUT] += out_lanes * (a.lut_add * adds + (a.lut_mul if leaky else 0) + 64)
    else:  # the requantising 32 x 16 multiply (two DSPs), the residual's 8 x 16 (one), the slope's 32 x 16 (two)
        res[_DSP] += out_lanes * (2 + (1 if residual else 0) + (2 if leaky else 0))
        res[_LUT] += out_lanes * 160
    # the row register its weights are gathered in (its FIFO is among the stage's FIFOs): by the load, once before
    # the first image, or by the stage's reader from DDR each image
    res[_FF] += macs * bits
    res[_LUT] += STAGE_CONTROL_LUT
    res[_FF] += STAGE_CONTROL_FF + macs * bits  # the input pixel's lanes broadcast to the output lanes
    return res


def _design(board: Board, dtype: str, stages: list[Stage], total: np.ndarray, clock: float, weights: int,
            image: int, buffers: list[tuple[int, int]]) -> PipelineDesign:
    """The pipeline at the clock it closes at (derated by the lanes' fan-out and the SLRs it spans, or cut into
    kernels one an SLR: ``over_slrs``); ``total`` its stages' resources, to which its regroups' are added."""
    elem_bits = 8 * np.dtype(dtype).itemsize
    port_elems = board.memory.port_bits // elem_bits
    groups = stage_regroups(stages, port_elems)
    total = total + sum((g.resources(dtype) for g in groups), np.zeros(len(RESOURCE_KINDS)))
    caps = {k: float(board.cap(k)) for k in RESOURCE_KINDS}
    moves = [[] if s.weights == "ddr" else weights_moves(s.layer, s.in_lanes, s.out_lanes, dtype, caps) for s in stages]
    achieved, kernels, extra = over_slrs(board, clock, [s.resources for s in stages], [(g.stage, g.resources(
        dtype)) for g in groups], buffers, _reads([s.skip_source for s in stages], [s.in_source for s in stages]),
        [s.out_lanes for s in stages], elem_bits,
        moves)
    total = total + extra
    for i, name in (m for k in kernels for m in k.moved):  # weights a kernel keeps in another memory
        stages[i] = replace(stages[i], weights=name, resources=stages[i].resources + dict(moves[i])[name])
    io = io_trips(stages, port_elems)
    frame = frame_bytes(image, [(s.layer, s.in_lanes, s.out_lanes) for s in stages if s.weights == "ddr"], port_elems,
                        board.memory.port_bits)
    return PipelineDesign(board, dtype, list(stages), {r: float(v) for r, v in zip(RESOURCE_KINDS, total, strict=True)},
                          clock, achieved, weights, image, io_cycles(board, io, frame, achieved),
                          timing={"port_gbps": board.memory.sustained_gbps_per_channel}, regroups=groups,
                          kernels=kernels)


def _reads(skips: Sequence[int | None], branch: Sequence[int | None]) -> list[int | None]:
    """The earliest tensor each stage reads besides its own input (a residual's, a branch's): no cut may fall
    between it and the stage (``cut_points``)."""
    return [min((t for t in (a, b) if t is not None), default=None) for a, b in zip(skips, branch, strict=True)]


def _edges(flat: list[tuple[LayerShape, NetLayer]], residuals: Sequence[int | None] | None,
           inputs: Sequence[int] | None) -> tuple[list, list[int], list[int | None], list[int]]:
    """For each stage: the tensor it adds as a residual and the pixels its FIFO holds (``skip_block``), the
    tensor it reads where that is not its own (a branch) and the pixels its input's FIFO holds (``branch_lag``).
    A branch is built as ResNet's downsampling block is: the stage reads a tensor another path also reads, and
    adds that path's output, its stage's before it."""
    sources, skips, branch, lags = [], [], [], []
    for i, (s, n) in enumerate(flat):
        read = i if inputs is None else inputs[i]
        if read == i:
            source, pixels = skip_block(flat, i, None if residuals is None else residuals[i]) if s.residual else (
                None, 0)
            branch.append(None)
            lags.append(0)
        elif residuals is None or residuals[i] != i or not 0 <= read < i:
            raise HeteroDSEError(f"{s.name}: it reads tensor {read} and adds {residuals and residuals[i]}; the "
                                 "pipeline builds a branch only where a stage reads an earlier tensor and adds the "
                                 "output of the stage before it (ResNet's downsampling block)")
        elif branch_ahead([m for _, m in flat[read:i]], n) > 0:
            raise HeteroDSEError(f"{s.name}: its window needs more of tensor {read} than the path it adds reads "
                                 "before each pixel, so that path would run ahead of it past its residual FIFO; the "
                                 "pipeline builds a branch whose window reads no further ahead than the path's "
                                 "(ResNet's 1×1 downsampling beside its 3×3 convolutions)")
        else:  # the path's stages run ahead of this one's window by the lag; a pixel a stage for its regroups
            source, pixels = i, 1
            branch.append(read)
            lags.append(branch_lag([m for _, m in flat[read:i]], n) + i - read)
        sources.append(source)
        skips.append(pixels)
    return sources, skips, branch, lags


def explore_pipeline(layers: Sequence[tuple[LayerShape, int]], board: Board, dtype: str = "float32",
                     clock_mhz: float | None = None, residuals: Sequence[int | None] | None = None,
                     inputs: Sequence[int] | None = None) -> PipelineDesign:
    """The layer-pipelined design of most images a second that fits ``board`` (see the module doc): each
    occurrence of a layer (its count) a stage of its own, the device shared among them by ``balance``: for each
    interval every stage takes its cheapest lanes that meet it, and each design is scored at the clock it closes
    at (a design that spans more SLRs closes slower, which can cost more than its lanes gain). ``residuals``: for
    a traced chain, the tensor each stage adds (0 the image, ``i + 1`` stage ``i``'s output), else guessed;
    ``inputs``: the tensor each stage reads (a branch's is not ``i``, its stage's before it), else ``i``."""
    if not layers:
        raise HeteroDSEError("a network needs at least one layer to design a pipeline for")
    if dtype not in ("float32", "int8"):
        raise HeteroDSEError(f"the pipeline is modelled for float32 and int8, not {dtype}")
    clock = float(clock_mhz or board.default_clock_mhz)
    caps = np.array([board.cap(k) for k in RESOURCE_KINDS], dtype=float)
    cap = {k: float(board.cap(k)) for k in RESOURCE_KINDS}
    itemsize = np.dtype(dtype).itemsize
    flat = [(s, stage_layer(s)) for s, count in layers for _ in range(count)]
    weights = sum(n.K * n.R * n.S * (n.C if n.engine == "grid" else 1) for _, n in flat if has_weights(n)) * itemsize
    first, last = flat[0][1], flat[-1][1]
    image = (first.C * first.H * first.W + last.K * last.OH * last.OW) * itemsize
    buffers = pipeline_buffers(board.memory.port_bits, 8 * itemsize)
    fixed = kernel_base(buffers)
    sources, skips, branch, lags = _edges(flat, residuals, inputs)
    reads = _reads(sources, branch)
    distance = 1 if dtype == "int8" else accumulation_distance(dtype, clock)
    port_elems = board.memory.port_bits // (8 * itemsize)
    # every stage's lanes worth building: a side's counts from its ladder (a depthwise stage takes its window's
    # taps one at a time: its line buffer gives one pixel a cycle), each option's cycles and resources
    # and, where a stage has one output pixel, its weights on chip or read from DDR each image (its reader's
    # trips bound it, and its bytes share the channel with the image's)
    options, streamed, times, costs, movable = [], [], [], [], []
    port_bits = board.memory.port_bits
    late = math.ceil(board.memory.latency_ns * clock / 1e3)  # a reader's first word, each image (its burst's)
    for i, (s, n) in enumerate(flat):
        grid = n.engine == "grid"
        pairs = [(p, q) for p in (lane_ladder(n.C, MAX_LANES) if grid else [1])
                 for q in lane_ladder(n.K if grid else n.C, MAX_LANES)]
        ddr = [False] * len(pairs) + ([True] * len(pairs) if streams_weights(n) else [])
        pairs = pairs * (2 if streams_weights(n) else 1)
        options.append(pairs)
        streamed.append(ddr)
        times.append(np.array([max(stage_time(n, p, q, distance), d * (stream_trips(n, p, q, port_elems) + late))
                               for (p, q), d in zip(pairs, ddr, strict=True)], dtype=float))
        cost = np.array([stage_resources(n, p, q, dtype, cap, s.residual, skips[i], s.leaky, distance, d, port_bits,
                                         lags[i]) for (p, q), d in zip(pairs, ddr, strict=True)])
        if i == len(flat) - 1:  # the FIFO of the result's port words, before the writer
            for k, (_, q) in enumerate(pairs):
                fifo_storage(2, port_pixel(n.K, q, port_elems)[1] * 8.0 * itemsize, cap, cost[k])
        costs.append(cost)
        movable.append([[] if d else weights_moves(n, p, q, dtype, cap) for (p, q), d in zip(pairs, ddr, strict=True)])

    layers_, zero, share = [n for _, n in flat], np.zeros(len(caps)), 1 / np.maximum(caps, 1)
    ports = len(pipeline_buffers(port_bits, 8 * itemsize))

    def stages_total(pick: list[int]) -> np.ndarray:
        return fixed + sum(costs[i][k] for i, k in enumerate(pick))

    def spend(pick: list[int]) -> float:  # the device's share a choice takes, its regroups counted
        groups = regroups(layers_, [options[i][k] for i, k in enumerate(pick)], sources, port_elems, branch)
        return float((stages_total(pick) + sum((g.resources(dtype) for g in groups), zero)) @ share)

    def score(pick: list[int], total: np.ndarray) -> tuple[float, list[int], np.ndarray] | float:
        """Images a second of the stages' options ``pick`` with the regroups they need (none where the design
        with them does not fit): at the clock the design closes at, its interval its slowest stage's or
        regroup's, or its image's and result's time on the port."""
        chosen = [options[i][k] for i, k in enumerate(pick)]
        readers = [(n, *options[i][k]) for i, ((_, n), k) in enumerate(zip(flat, pick, strict=True))
                   if streamed[i][k]]
        if board.memory.axi_ports and ports + len(readers) > board.memory.axi_ports:
            return -np.inf  # a port each, more than the board's AXI ports
        groups = regroups(layers_, chosen, sources, port_elems, branch)
        full = total + sum((g.resources(dtype) for g in groups), zero)
        if np.any(full > caps):  # the regroups push it past the device: lanes that agree across edges may not
            pick = align(pick, options, times, costs, layers_, spend)
            chosen, total = [options[i][k] for i, k in enumerate(pick)], stages_total(pick)
            groups = regroups(layers_, chosen, sources, port_elems, branch)
            full = total + sum((g.resources(dtype) for g in groups), zero)
            if np.any(full > caps):
                return -np.inf
        achieved, _, extra = over_slrs(board, clock, [costs[i][k] for i, k in enumerate(pick)],
                                       [(g.stage, g.resources(dtype)) for g in groups], buffers, reads,
                                       [q for _, q in chosen], 8 * itemsize,
                                       [movable[i][k] for i, k in enumerate(pick)])
        if np.any(full + extra > caps):
            return -np.inf
        first = in_lanes_of(flat[0][1], *chosen[0])
        io = image_trips(flat[0][1], first, flat[-1][1], chosen[-1][1], port_elems)
        frame = frame_bytes(image, readers, port_elems, port_bits)
        return achieved * 1e6 / max(*(times[i][k] for i, k in enumerate(pick)), *(g.trips for g in groups),
                                    io_cycles(board, io, frame, achieved)), pick, total

    found = balance(times, costs, fixed, caps, lambda interval: clock * 1e6 / interval, score)
    if found is None:
        raise HeteroDSEError(f"no layer-pipelined design fits {board.name} in {dtype}: the network's "
                             f"{weights / 2**20:.1f} MiB of weights, with one stage a layer at its fewest lanes, need "
                             "more on-chip memory or logic than it has (a classifier's may stream from DDR; every "
                             "stage's streaming is a design not modelled; the shared network kernel serves it)")
    pick, total = found
    stages = []
    for i, ((s, n), k) in enumerate(zip(flat, pick, strict=True)):
        p, q = options[i][k]
        stages.append(Stage(s, n, p, q, int(times[i][k]), costs[i][k], skips[i], sources[i], branch[i], lags[i],
                            "ddr" if streamed[i][k] else weights_storage(n, p, q, dtype, cap),
                            line_storage(n, p, q, dtype, cap),
                            stage_fifos(n, p, q, dtype, cap, s.residual, skips[i], lags[i])))
    return _design(board, dtype, stages, total, clock, weights, image, buffers)


def explore_traced(layers: Sequence[Any], board: Board, dtype: str = "float32", clock_mhz: float | None = None
                   ) -> PipelineDesign:
    """``explore_pipeline`` for a traced network (``model/chain.py``'s layers in execution order, one stage each):
    the tensor each stage reads and the one it adds as the trace found them (0 the image, ``i + 1`` layer ``i``'s
    output)."""
    return explore_pipeline([(c.shape, 1) for c in layers], board, dtype, clock_mhz,
                            [None if c.residual is None else c.residual + 1 for c in layers],
                            [c.source + 1 for c in layers])
