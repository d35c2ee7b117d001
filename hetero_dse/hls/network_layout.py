"""The network kernel's DDR layout: one arena of activations, each tensor ``[rows][pitch][C padded]`` with a zero
halo around its image as wide as the largest padding a layer reading it uses, and a guard past its last row and
column as deep as a tile that does not divide the image reads; the weights in the order the weight FIFO takes
them, dealt out a word at a time to the weights' ports an engine reads at once; the epilogue's parameters a
tile's in one burst; and the descriptor table.

With the halo in memory, every read of a box is a run of whole words at consecutive addresses, with no
condition (a burst), and a layer writes only its image's pixels, so the halo a later layer reads stays zero.
A tensor a linear layer reads flattened has neither (its pixels must be contiguous); over a batch
(``network_run.per_image``), the images' such tensors lie end to end, image j's features the linear layer's pixel j.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cost_models.fpga_network import DESCRIPTOR_WORDS, EngineShape, NetLayer, network_trips
from cost_models.fpga_network_placed import NetworkDesign
from cost_models.fpga_network_shapes import reads_past
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hls.network_run import ENGINE_IDS, FIELDS, NetworkRun, RunLayer

__all__ = ["Region", "lay_out"]


def _nhwc(x: np.ndarray, block: int) -> tuple[np.ndarray, tuple[int, int, int]]:
    """A tensor as the arena holds it: [H][W][C padded to ``block``] (a matrix [M, K] as H=1, W=M)."""
    x = np.asarray(x)
    if x.ndim == 2:
        x = x.T[None, :, None, :]  # [M, K] -> [1, K, 1, M]
    c, h, w = x.shape[1:]
    out = np.zeros((h, w, -(-c // block) * block), dtype=x.dtype)
    out[:, :, :c] = x[0].transpose(1, 2, 0)
    return out, out.shape


def _im2col(x: np.ndarray, r: int, s: int, stride: int, pad: int, block: int) -> np.ndarray:
    """The network's image as a 1×1 convolution over its windows reads it: [OH][OW][C·R·S padded]."""
    c, h, w = x.shape[1:]
    xp = np.pad(x[0], ((0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - r) // stride + 1, (w + 2 * pad - s) // stride + 1
    cols = np.zeros((oh, ow, c, r, s), dtype=x.dtype)
    for i in range(r):
        for j in range(s):
            cols[:, :, :, i, j] = xp[:, i:i + stride * oh:stride, j:j + stride * ow:stride].transpose(1, 2, 0)
    out = np.zeros((oh, ow, -(-c * r * s // block) * block), dtype=x.dtype)
    out[:, :, :c * r * s] = cols.reshape(oh, ow, -1)
    return out


def _weight_blocks(run: RunLayer, design: NetworkDesign) -> tuple[np.ndarray, np.ndarray]:
    """The layer's weights in the order its weight buffer holds them (a block per step) and its bias padded to
    whole tiles."""
    p, engine = run.placed, design.engines[run.placed.layer.engine]
    layer, t = p.layer, p.tiles
    w = np.asarray(run.weight)
    if p.layer.engine == "depthwise":
        n_c = -(-layer.C // t.tc)
        wp = np.zeros((n_c * t.tc, layer.R, layer.S), dtype=w.dtype)
        wp[:w.shape[0]] = w[:, 0]
        # (channel tile, group, pass of window rows, pass of a row's taps, lane, window row of the pass, tap of the
        # pass): a row a pass, lane l's taps side by side, a window row's after another's
        u, v = engine.taps, engine.tap_rows
        blocks = wp.reshape(n_c, t.tc // engine.out_lanes, engine.out_lanes, layer.R // v, v, layer.S // u, u)
        blocks = blocks.transpose(0, 1, 3, 5, 2, 4, 6)
        tch = t.tc
    else:
        if w.ndim == 2:  # a linear layer: [K, features] as a 1×1 convolution, features in the arena's order
            if run.flatten is not None:
                c, h, wd = run.flatten
                cp = -(-c // design.block) * design.block
                w4 = np.zeros((w.shape[0], h, wd, cp), dtype=w.dtype)
                w4[..., :c] = w.reshape(w.shape[0], c, h, wd).transpose(0, 2, 3, 1)
                w = w4.reshape(w.shape[0], -1)
            w = w[:, :, None, None]
        if p.im2col:
            w = w.reshape(w.shape[0], -1, 1, 1)
        if p.layer.engine == "winograd":
            return _winograd_blocks(w, layer, t, engine), _params(run, layer, t.tk)
        # (kt, ct, group, r, s, channel group, lane, lane)
        blocks = _lane_tiles(w, layer, t, engine).transpose(0, 3, 1, 6, 7, 4, 2, 5)
        tch = t.tk
    return blocks.ravel(), _params(run, layer, tch)


def _dealt(blocks: np.ndarray, engine: EngineShape, layer: NetLayer, ports: int, step_rows: int) -> list[np.ndarray]:
    """A layer's weight words dealt out to the kernel's ``ports``: each row padded at its front with words of
    zeros to whole iterations of its engine's reads (``EngineShape.row_reads``: the row register shifts them
    out), or, where the engine takes a 3×3 layer's rows end to end (``row_picks``), each step's ``step_rows`` rows
    so and the step padded at its end (``step_reads``); then word j to port j % ``w_ports`` (the engine reads that
    many at once, a word from each, in turn), each port's at the same offset; a port the engine does not read
    holds zeros there."""
    reads, row = engine.w_ports, engine.row_words(layer)
    packed = engine.row_picks > 1 and layer.R > 1
    if packed:
        words = blocks.reshape(-1, engine.w_word)
        if len(words) % (row * step_rows):
            raise HeteroDSEError(f"{len(words)} weight words are not whole steps of {step_rows} rows of {row} (a "
                                 "bug: please report it)")
        steps = words.reshape(-1, step_rows * row, engine.w_word)
        pad = engine.step_reads(layer, step_rows) * reads - step_rows * row
        words = np.concatenate([steps, np.zeros((len(steps), pad, engine.w_word), dtype=words.dtype)], axis=1)
    else:  # (a row of the depthwise engine's taps may end inside a word: padded at its front all the same)
        elements = engine.row_elements(layer)
        if blocks.size % elements:
            raise HeteroDSEError(f"{blocks.size} weights are not whole rows of {elements} (a bug: please report it)")
        pad = engine.row_reads(layer) * reads * engine.w_word - elements
        rows = blocks.reshape(-1, elements)
        words = np.concatenate([np.zeros((len(rows), pad), dtype=blocks.dtype), rows], axis=1)
    words = words.reshape(-1, engine.w_word)
    dealt = [words[p::reads] for p in range(reads)]
    dealt += [np.zeros_like(dealt[0])] * (ports - reads)
    return [d.ravel() for d in dealt]


def _step_rows(engine: EngineShape, layer: NetLayer, t: Any) -> int:
    """The weight rows one step of the layer streams (``network_trips``' ``w_rows``)."""
    return int(network_trips(engine, layer, t)["w_rows"])


def _params(run: RunLayer, layer: Any, tch: int) -> np.ndarray:
    """The epilogue's parameters, a tile's in one burst: its biases (int8: then its requantising multipliers)."""
    n_o = -(-layer.K // tch)
    integer = run.quant is not None
    rows = [run.bias] + ([run.quant["mult"]] if integer else [])
    params = np.zeros((n_o, len(rows), tch), dtype=np.int32 if integer else np.float32)
    for j, row in enumerate(rows):
        padded_row = np.zeros(n_o * tch, dtype=params.dtype)
        padded_row[:len(row)] = row
        params[:, j, :] = padded_row.reshape(n_o, tch)
    return params.ravel()


def _lane_tiles(w: np.ndarray, layer: Any, t: Any, engine: Any) -> np.ndarray:
    """``w`` ([K, C, a, b]) padded to whole channel tiles, as (output-channel tile, output group, output lane,
    input-channel tile, input group, input lane, a, b)."""
    n_k, n_c = -(-layer.K // t.tk), -(-layer.C // t.tc)
    wp = np.zeros((n_k * t.tk, n_c * t.tc, *w.shape[2:]), dtype=w.dtype)
    wp[:w.shape[0], :w.shape[1]] = w
    kl, cl = engine.out_lanes, engine.in_lanes
    return wp.reshape(n_k, t.tk // kl, kl, n_c, t.tc // cl, cl, *w.shape[2:])


def _winograd_blocks(w: np.ndarray, layer: Any, t: Any, engine: Any) -> np.ndarray:
    """The Winograd engine's weights as its weight rows are taken: (output-channel tile, input-channel tile,
    output group, input group, element, output lane, input lane). A 3×3 layer's elements are the α² values of
    G g Gᵀ, transformed here (float32), or its 9 taps as they are where the engine transforms them itself
    (``EngineShape.w_transform``: int8); a 1×1 layer's, its one weight."""
    from hetero_dse.ops.winograd import transforms

    u = w
    if w.dtype == np.int8 and layer.R > 1 and not engine.w_transform:
        raise HeteroDSEError("an int8 Winograd engine takes its weights as taps and transforms them itself (a bug: "
                             "please report it)")
    if layer.R > 1 and not engine.w_transform:
        g = transforms(engine.tile, 3).arrays()[1]
        u = np.einsum("ai,kcij,bj->kcab", g, w.astype(np.float64), g).astype(np.float32)
    # (kt, ct, group, channel group, element's row, element's column, lane, lane)
    return np.ascontiguousarray(_lane_tiles(u, layer, t, engine).transpose(0, 3, 1, 4, 6, 7, 2, 5)).reshape(-1)


def _float_bits(v: float) -> int:
    return int(np.array([v], dtype=np.float32).view(np.int32)[0])


@dataclass
class Region:
    """A tensor in the arena: its image (``rows`` × ``cols`` pixels of ``channels``) inside a zero halo of
    ``halo`` pixels and a guard of ``bottom`` rows and ``right`` columns."""

    rows: int
    cols: int
    channels: int
    halo: int = 0
    bottom: int = 0
    right: int = 0
    start: int = 0  # its first word in the arena

    @property
    def pitch(self) -> int:
        return self.halo + self.cols + self.right

    def size(self, word: int) -> int:
        return (self.halo + self.rows + self.bottom) * self.pitch * self.channels // word

    def origin(self, word: int) -> int:
        """The word of pixel (0, 0)."""
        return self.start + (self.halo * self.pitch + self.halo) * self.channels // word

    def laid_out(self, image: np.ndarray) -> np.ndarray:
        """``image`` ([rows][cols][channels]) in the region, zeros around it."""
        out = np.zeros((self.halo + self.rows + self.bottom, self.pitch, self.channels), dtype=image.dtype)
        out[self.halo:self.halo + self.rows, self.halo:self.halo + self.cols] = image
        return out


def _reads(r: RunLayer) -> tuple[int, int, int]:
    """What a layer reads of its input past the image (``fpga_network_shapes.reads_past``)."""
    return reads_past(r.placed.layer, r.placed.tiles)


def lay_out(run: NetworkRun, design: NetworkDesign) -> dict[str, Any]:
    """The arena (inputs placed, every layer's region zero), the arena the run must leave (each layer's image
    torch's output), the weights and parameters, and the descriptor table."""
    block, word = design.block, design.word
    images: dict[str, np.ndarray] = {}  # tensor id -> its image [rows][cols][channels]
    for name, x in run.inputs.items():
        images[f"input:{name}"] = _nhwc(x, block)[0]
    sources = []
    for i, r in enumerate(run.layers):
        src = r.source
        if r.placed.im2col:
            s = r.placed.shape
            src = f"im2col:{i}"
            images[src] = _im2col(run.inputs[r.source.split(":", 1)[1]], s.R, s.S, s.stride, s.pad, block)
        sources.append(src)
        images[f"layer:{i}"] = _nhwc(r.reference, block)[0]
    for stack, members in run.stacks.items():  # a batch's tensors side by side: image j's features its pixel j
        images[stack] = np.concatenate([images[m].reshape(1, 1, -1) for m in members], axis=1)
    regions = {tid: Region(*image.shape) for tid, image in images.items()}
    flat = {sources[i] for i, r in enumerate(run.layers) if r.flatten is not None or sources[i] in run.stacks}
    flat |= {m for members in run.stacks.values() for m in members}
    for i, r in enumerate(run.layers):
        region = regions[sources[i]]
        halo, bottom, right = _reads(r)
        region.halo, region.bottom, region.right = (max(region.halo, halo), max(region.bottom, bottom),
                                                    max(region.right, right))
    for tid in flat:  # (a stack may have a guard past its last image, which a tile over the batch reads)
        if regions[tid].halo or (tid not in run.stacks and (regions[tid].bottom or regions[tid].right)):
            raise HeteroDSEError(f"{tid} is read flattened by a linear layer and, padded, by another layer: the "
                                 "network kernel keeps one layout for a tensor")
    arena_words = 0
    stacked = {m: stack for stack, members in run.stacks.items() for m in members}
    for tid, region in regions.items():
        if tid in run.stacks:  # laid out as its members are
            continue
        if tid in stacked and stacked[tid] in regions:
            first = run.stacks[stacked[tid]][0]
            if tid != first:  # placed with the stack's first member
                continue
            stack = regions[stacked[tid]]
            stack.start = arena_words
            for m in run.stacks[stacked[tid]]:
                regions[m].start, arena_words = arena_words, arena_words + regions[m].size(word)
            if arena_words - stack.start != stack.rows * stack.cols * stack.channels // word:
                raise HeteroDSEError(f"{stacked[tid]}'s images are not its pixels end to end (a bug: please report it)")
            arena_words = stack.start + stack.size(word)  # and its guard, zeros
            continue
        region.start, arena_words = arena_words, arena_words + region.size(word)
    ports = design.w_ports
    weights: list[list[np.ndarray]] = [[] for _ in range(ports)]  # each weight port's words
    params: list[np.ndarray] = []
    weight_words = param_words = 0
    table = np.zeros((len(run.layers), DESCRIPTOR_WORDS), dtype=np.int32)
    for i, r in enumerate(run.layers):
        layer, t = r.placed.layer, r.placed.tiles
        blocks, bias = _weight_blocks(r, design)
        for port, words in enumerate(_dealt(blocks, design.engines[layer.engine], layer, ports,
                                            _step_rows(design.engines[layer.engine], layer, t))):
            weights[port].append(words)
        w_off, weight_words = weight_words, weight_words + weights[0][-1].size // design.wword
        b_off, param_words = param_words, param_words + bias.size // design.pword
        params.append(bias)
        src, out = regions[sources[i]], regions[f"layer:{i}"]
        res = regions[r.residual] if r.residual else None
        if out.rows * out.cols * out.channels != layer.OH * layer.OW * layer.K:
            raise HeteroDSEError(f"layer {i} ({r.placed.shape.name}): torch's output has "
                                 f"{out.rows * out.cols * out.channels} elements as laid out, the kernel writes "
                                 f"{layer.OH * layer.OW * layer.K} (a bug: please report it)")
        values = {"engine": ENGINE_IDS[layer.engine], "C": layer.C, "K": layer.K, "H": layer.H, "W": layer.W,
                  "OH": layer.OH, "OW": layer.OW, "R": layer.R, "S": layer.S, "stride": layer.stride,
                  "pad": layer.pad, "tk": t.tk, "tc": t.tc, "th": t.th, "tw": t.tw, "in_off": src.origin(word),
                  "in_pitch": src.pitch, "w_off": w_off, "bias_off": b_off, "out_off": out.origin(word),
                  "out_pitch": out.pitch, "res_off": res.origin(word) if res else -1,
                  "res_pitch": res.pitch if res else 0}
        lo, hi, slope = r.activation
        values.update(lo=_float_bits(lo), hi=_float_bits(hi), slope=_float_bits(slope))
        q = r.quant or {}
        values.update({k: int(q.get(k, 0)) for k in ("shift", "res_mult", "res_shift", "slope_mult", "qlo", "qhi")})
        table[i, :len(FIELDS)] = [values[f] for f in FIELDS]
    dtype = np.int8 if design.dtype == "int8" else np.float32
    arena = np.zeros(arena_words * word, dtype=dtype)
    done = arena.copy()
    for tid, region in regions.items():
        if tid in run.stacks:  # its words are its members'
            continue
        laid = region.laid_out(images[tid].astype(dtype)).ravel()
        at = region.start * word
        done[at:at + laid.size] = laid
        if not tid.startswith("layer:"):
            arena[at:at + laid.size] = laid
    # the ports' words one after the other: port p's at p * weight_words (the test bench and host split them)
    return {"arena": arena, "expected": done, "weights": np.concatenate(sum(weights, [])).astype(dtype),
            "table": table,
            "params": np.concatenate(params), "arena_words": arena_words, "weight_words": weight_words,
            "param_words": param_words, "regions": regions}
