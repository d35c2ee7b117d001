"""Where a layer-pipelined stage keeps its memories (``cost_models/fpga_pipeline.py``): its weights (a RAM the
load writes once) and its line buffer, each in whichever of block RAM, LUTs and UltraRAM takes the least of the
device, and its FIFOs; the code binds the same choice (BIND_STORAGE) and the pipeline's lint checks it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from cost_models.fpga_costs import BRAM18K_CONFIGS, LUTRAM_WORDS_PER_LUT_PAIR, URAM_DEPTH, URAM_WIDTH
from cost_models.fpga_network import NetLayer
from hetero_dse.hardware.board import RESOURCE_KINDS

__all__ = ["SRL_DEPTH", "block_lag", "branch_ahead", "branch_lag", "consumed", "fifo_storage", "has_weights",
           "in_lanes_of", "line_reads", "line_rows", "line_storage", "memories", "memory", "path_reads", "pointwise",
           "skip_block", "stream_trips", "streams_weights", "weight_rows", "weights_moves", "weights_storage"]

_LUT, _FF = RESOURCE_KINDS.index("lut"), RESOURCE_KINDS.index("ff")
#: the deepest FIFO the code keeps in shift registers: an SRL32 is one LUT holding 32 bits of one lane
SRL_DEPTH = 32
#: a FIFO's pointers, full and empty flags and handshake (*estimate*, no synthesis behind it)
FIFO_CONTROL_LUT, FIFO_CONTROL_FF = 16, 10


def in_lanes_of(layer: NetLayer, in_lanes: int, out_lanes: int) -> int:
    """The lanes a stage's window reads its input in: the grid's input lanes, the depthwise engine's channels."""
    return in_lanes if layer.engine == "grid" else out_lanes


def has_weights(layer: NetLayer) -> bool:
    """Whether a stage holds weights: every one but a max pool (compares over its window, nothing to multiply)."""
    return layer.engine != "maxpool"


def pointwise(layer: NetLayer) -> bool:
    """A 1×1 convolution of stride 1: its window process passes pixels on, with no line buffer."""
    return layer.R == layer.S == layer.stride == 1 and layer.pad == 0


def memory(words: float, bits: float, caps: dict[str, float], rom: bool = False) -> tuple[str, np.ndarray]:
    """The on-chip memory of ``words`` × ``bits`` that takes the least of its kind's share of the device, and
    its cost in ``RESOURCE_KINDS`` order (of ``memories``). Its name is the code's BIND_STORAGE impl."""
    share = lambda r: max(r[k] / caps[name] for k, name in enumerate(RESOURCE_KINDS) if r[k])  # noqa: E731
    return min(memories(words, bits, caps, rom), key=lambda o: share(o[1]))


def memories(words: float, bits: float, caps: dict[str, float], rom: bool = False) -> list[tuple[str, np.ndarray]]:
    """Each on-chip memory that can hold ``words`` × ``bits``, and its cost in ``RESOURCE_KINDS`` order: block
    RAM (18 Kb blocks in their width × depth shapes), LUTs (64 words a pair of LUTs a bit) or UltraRAM (4096 ×
    72 bits a block; not for a ROM: it has no initial contents on these parts)."""
    options = []
    bram = np.zeros(len(RESOURCE_KINDS))
    width, depth = next(((w, d) for w, d in BRAM18K_CONFIGS if bits <= w), BRAM18K_CONFIGS[-1])
    bram[RESOURCE_KINDS.index("bram18k")] = math.ceil(words / depth) * math.ceil(bits / width)
    options.append(("bram", bram))
    lutram = np.zeros(len(RESOURCE_KINDS))
    lutram[_LUT] = 2 * bits * math.ceil(words / LUTRAM_WORDS_PER_LUT_PAIR)
    options.append(("lutram", lutram))
    if not rom and caps.get("uram", 0) > 0:
        uram = np.zeros(len(RESOURCE_KINDS))
        uram[RESOURCE_KINDS.index("uram")] = math.ceil(words / URAM_DEPTH) * math.ceil(bits / URAM_WIDTH)
        options.append(("uram", uram))
    return options


def _weights_ram(layer: NetLayer, in_lanes: int, out_lanes: int, dtype: str) -> tuple[int, float]:
    """A stage's weight RAM: its rows (a lane grid each, in the order the PE array reads them) and a row's bits."""
    return weight_rows(layer, in_lanes, out_lanes), in_lanes * out_lanes * 8.0 * np.dtype(dtype).itemsize


def weights_storage(layer: NetLayer, in_lanes: int, out_lanes: int, dtype: str, caps: dict[str, float],
                    res: np.ndarray | None = None) -> str:
    """Where a stage's weights live: a RAM the load writes once (``_weights_ram``), in whichever memory takes
    least of the device; its cost added to ``res``; returns its name (``none``: a max pool's)."""
    if not has_weights(layer):
        return "none"
    name, cost = memory(*_weights_ram(layer, in_lanes, out_lanes, dtype), caps)
    if res is not None:
        res += cost
    return name


def weights_moves(layer: NetLayer, in_lanes: int, out_lanes: int, dtype: str, caps: dict[str, float]
                  ) -> list[tuple[str, np.ndarray]]:
    """The other memories a stage's weights could live in than ``weights_storage``'s, each with what it adds to
    the stage's resources (negative where it saves): an SLR short of one memory may take them in another."""
    if not has_weights(layer):
        return []
    ram = _weights_ram(layer, in_lanes, out_lanes, dtype)
    chosen, cost = memory(*ram, caps)
    return [(name, other - cost) for name, other in memories(*ram, caps) if name != chosen]


def line_storage(layer: NetLayer, in_lanes: int, out_lanes: int, dtype: str, caps: dict[str, float],
                 res: np.ndarray | None = None) -> str:
    """Where a stage's line buffer lives (``line_rows`` of its image, a fold of its lanes a word, as its input
    arrives and its window reads it; none for a 1×1 convolution, whose words pass on), its cost added to
    ``res``; returns the memory's name."""
    lanes = in_lanes_of(layer, in_lanes, out_lanes)
    if pointwise(layer):
        return "registers"
    name, cost = memory(line_rows(layer) * layer.W * math.ceil(layer.C / lanes),
                        lanes * 8.0 * np.dtype(dtype).itemsize, caps)
    if res is not None:
        res += cost
    return name


def fifo_storage(depth: int, bits: float, caps: dict[str, float], res: np.ndarray | None = None) -> str:
    """Where a FIFO of ``depth`` words × ``bits`` lives, its cost added to ``res``; returns the name the code binds
    (BIND_STORAGE type=fifo). Left to Vitis, a FIFO is shift registers only up to 2 words and 1,024 bits
    (UG1399, config_storage) and memory past that: a pixel of 960 int8 channels would take 214 BRAM18K for two
    words. So the code binds each: up to ``SRL_DEPTH`` words in shift registers (SRL: a LUT a bit, half a LUT up
    to 16 words, UG574), deeper in the memory that takes least of the device (``memory``); and its control.
    SRLs and LUT RAM use only SLICEM LUTs, which the model does not count apart (about half the part's)."""
    if depth <= SRL_DEPTH:
        if res is not None:  # two SRL16s share a LUT6 up to 16 words (one address), an SRL32 a LUT past that
            res[_LUT] += (math.ceil(bits / 2) if depth <= SRL_DEPTH // 2 else bits) + FIFO_CONTROL_LUT
            res[_FF] += FIFO_CONTROL_FF
        return "srl"
    name, cost = memory(depth, bits, caps)
    if res is not None:
        res += cost
        res[_LUT] += FIFO_CONTROL_LUT
        res[_FF] += FIFO_CONTROL_FF
    return name


def weight_rows(layer: NetLayer, in_lanes: int, out_lanes: int) -> int:
    """The stage's weight rows, a row its lane grid: one for each (output fold, step) of its PE array (a max
    pool has none)."""
    if not has_weights(layer):
        return 0
    grid = layer.engine == "grid"
    folds_k = math.ceil(layer.K / out_lanes) if grid else 1
    folds = folds_k * math.ceil(layer.C / in_lanes_of(layer, in_lanes, out_lanes))
    return folds * (layer.R * layer.S if grid else math.ceil(layer.R * layer.S / in_lanes))


def streams_weights(layer: NetLayer) -> bool:
    """Whether a stage may read its weights from DDR each image rather than keep them on chip: where it has one
    output pixel (a classifier), so each weight is read once an image either way (FINN's external weights)."""
    return layer.OH * layer.OW == 1 and has_weights(layer)


def stream_trips(layer: NetLayer, in_lanes: int, out_lanes: int, port_elems: int) -> int:
    """Trips of a stage's weight reader for one image: its rows in whole words of its port."""
    return weight_rows(layer, in_lanes, out_lanes) * math.ceil(in_lanes * out_lanes / port_elems)


def line_rows(layer: NetLayer) -> int:
    """The rows a stage's line buffer holds: the ``R`` its windows span and the ``stride`` it reads ahead for the
    next output row while this one's windows go out (all of the image where that is fewer)."""
    return min(layer.R + layer.stride, layer.H)


def line_reads(layer: NetLayer) -> tuple[int, list[int]]:
    """The input rows a stage's window reads before its first output row, and while each output row's windows
    go out: those the next output row reaches (after the last, those no window reaches)."""
    first = min(layer.H, layer.R - layer.pad)
    done, ahead = first, []
    for oy in range(layer.OH):
        upto = min((oy + 1) * layer.stride - layer.pad + layer.R, layer.H) if oy + 1 < layer.OH else layer.H
        ahead.append(upto - done)
        done = upto
    return first, ahead


def consumed(layer: NetLayer) -> list[int]:
    """For each output pixel of a stage (in order), how many of its input pixels its window has read by the
    time that pixel's last window word goes out, in the window's schedule (``line_reads``: the next rows read
    spread evenly over each output row's trips, a fold a trip, while its windows go out, a word a trip); a 1×1
    convolution passes each pixel on as it reads it. The same for any lanes: a pixel's folds and its window's
    words scale together (the depthwise engine takes a tap a trip)."""
    if pointwise(layer):
        return list(range(1, layer.H * layer.W + 1))
    per_pixel = layer.R * layer.S  # window words a pixel, per fold of channels
    first, ahead = line_reads(layer)
    done, out = first * layer.W, []
    for rows in ahead:
        reads = rows * layer.W
        trips = max(reads, layer.OW * per_pixel)
        # the reads spread evenly over the row's trips (a credit of ``reads`` a trip, a read each ``trips``); a
        # pixel more, for the folds' rounding where a pixel is several words
        out += [done + min(reads, (j + 1) * per_pixel * reads // trips + 1) for j in range(layer.OW)]
        done += reads
    return out


def path_reads(path: list[NetLayer]) -> list[int]:
    """For each output pixel of a chain of stages (in order), how many pixels of the chain's input its windows
    have read by the time that pixel goes out (``consumed`` of each stage, composed)."""
    needs = [consumed(n) for n in path]
    out = []
    for p in range(path[-1].OH * path[-1].OW):
        for need in reversed(needs):
            p = need[min(p, len(need) - 1)] - 1
        out.append(p + 1)
    return out


def block_lag(block: list[NetLayer]) -> int:
    """The most pixels of a block's input that its stages have read, past the one its last stage adds as a
    residual, when that stage's output pixel goes out: the pixels the residual's FIFO must hold for the block
    to run without stalling on it (C-simulation's streams are unbounded, so no C-simulation would show it)."""
    return max(0, *(read - k for k, read in enumerate(path_reads(block))))


def branch_lag(path: list[NetLayer], reader: NetLayer) -> int:
    """A branch: one tensor read by two paths that join at ``reader``, whose window reads the tensor and whose
    epilogue adds the output of ``path`` (the stages of the other path) as a residual: ResNet's downsampling
    block, its 1×1 convolution beside the two 3×3. The most pixels of the tensor the path's windows have read
    past those the reader's window has, when the reader waits on the path's pixel it adds: the pixels the
    reader's input FIFO must hold for the producer to keep feeding the path (``block_lag``'s, with a window on
    both sides)."""
    made, mine = path_reads(path), consumed(reader)
    return max(0, *(made[min(k, len(made) - 1)] - mine[min(k, len(mine) - 1)]
                    for k in range(reader.OH * reader.OW)))


def branch_ahead(path: list[NetLayer], reader: NetLayer) -> int:
    """A branch the other way round: the most output pixels of ``path`` made, past the one the ``reader`` adds
    next, while the reader's window still waits on the tensor's pixels for its own (a reader whose window needs
    more of the tensor than the path's). Its residual FIFO holds one pixel: more than that and the path stalls,
    the tensor's producer with it, and the reader never gets the pixels it waits on (a deadlock no sequential
    C-simulation shows)."""
    made, mine, ahead, j = path_reads(path), consumed(reader), 0, 0
    for k in range(reader.OH * reader.OW):
        while j < len(made) and made[j] <= mine[min(k, len(mine) - 1)]:
            j += 1
        ahead = max(ahead, j - (k + 1))
    return ahead


def skip_block(stages: Sequence[tuple[Any, NetLayer]], i: int, source: int | None = None) -> tuple[int, int]:
    """The residual stage ``i`` adds: the tensor its block starts from (``source`` where the network was traced),
    and the pixels it waits in its FIFO (as many as its block's windows read ahead of the pixel it adds,
    ``block_lag``, and a pixel a stage for the regroup that may stand before it). Untraced, the
    block is taken as the stages since the last one that added a residual, at most three and of this stage's
    resolution (a bottleneck's or a basic block's; *estimate*)."""
    j = i
    while source is None and j > 0 and i - j < 2 and not stages[j - 1][0].residual and (
            stages[j - 1][1].OH, stages[j - 1][1].OW) == (stages[i][1].OH, stages[i][1].OW):
        j -= 1
    j = j if source is None else source
    # and a pixel for each stage: a regroup on the block's path holds one back
    return j, block_lag([n for _, n in stages[j:i + 1]]) + (i - j + 1)
