"""The figures of the shared network kernel (``hls_templates/network/kernel.cpp.j2``): every layer of a network
run, one after the other, on PE arrays fixed at synthesis, its loop bounds read at run time from a descriptor.

Unlike the single-layer model, which scores a kernel specialised to one shape, this one scores the code that
exists for the network: each process is one pipelined loop (II=1) whose trip count is a function of the layer
and its tiles, and those trip counts are exactly what the C-simulation of the kernel counts
(``network_trips`` is checked against it in the suite). Time is the trips, the DDR bursts each process issues
(runs of consecutive words: the tensors lie in a zero halo, so no access is conditional) and the DATAFLOW
overlap of the stages; resources are the arrays' operator cores and the buffers sized for the largest tile any
layer asks for.

Three engines:

- ``grid``: ``out_lanes`` output channels × ``in_lanes`` input channels of multiply-adds a cycle (each output
  lane sums its input lanes with an adder tree, then accumulates into its output tile). Convolutions, 1×1
  convolutions and linear layers (a 1×1 convolution on a 1×1 image) run on it.
- ``depthwise``: ``out_lanes`` channels, ``taps × tap_rows`` multiply-adds each a cycle (``taps`` of a window row,
  on consecutive pixels of the box, in each of ``tap_rows`` window rows: it lies in as many banks by column and by
  row).
- ``winograd``: F(m×m, 3×3) for 3×3 stride-1 convolutions (``cost_models/fpga_winograd.py``), and with
  ``pointwise`` 1×1 stride-1 ones, its α² grids on the α² pixels of an α×α block (no transform): the read process
  transforms each α×α input patch (α = m + 2) after the box arrives, a cycle a patch and channel group; the PE
  array multiplies ``α² × out_lanes × in_lanes`` a cycle (an output lane sums its input lanes for each of the α²
  elements, then accumulates) for one patch, against weights the host transformed ahead (float) or the engine
  transforms as the PE array takes a row (``w_transform``, int8: the port carries the 3×3 taps, 9/α² of the
  words, in 8 bits where a transformed weight takes 16); a process before the write turns each patch's sums into
  its m×m outputs, a patch row of m pixels a cycle (its output tile in m banks by pixel; a 1×1 layer's blocks a
  pixel a cycle). Per step its loops run output-channel groups, input-channel groups, then the tile's patches
  innermost (at least ``accumulation_distance``).

Activations are in DDR as ``[H][W][C padded to the network's channel block]`` inside a zero halo: the layout
every layer reads and writes, so no layer pays a relayout. Loop order per layer: output-channel tiles,
output-row tiles, output-column tiles, input-channel tiles (the sum is held on chip across them); within a
step, the compute loop runs output-channel groups, kernel taps, input-channel groups, then the tile's pixels
innermost, so that an output element recurs no sooner than ``accumulation_distance`` iterations (a tile of
fewer pixels idles up to that).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cost_models.fpga_costs import ARENA_LOOP_CYCLES, AXI_MAX_BURST_BYTES, RUNS_AHEAD
from cost_models.fpga_network_ports import weight_layout
from cost_models.fpga_network_shapes import EngineShape, NetLayer, Tiles

__all__ = ["ENGINE_KINDS", "DESCRIPTOR_WORDS", "EngineShape", "NetLayer", "Tiles", "compute_floor", "layer_cycles",
           "network_trips"]

ENGINE_KINDS = ("grid", "depthwise", "winograd")
#: int32 words of one layer's descriptor in the table the kernel reads (``kernel.h``'s layer_t)
DESCRIPTOR_WORDS = 32


def _steps(layer: NetLayer, t: dict[str, Any]) -> dict[str, Any]:
    """Tile counts and per-step trip counts; ``t`` holds arrays (or ints) tk, tc, th, tw."""
    tk, tc, th, tw = t["tk"], t["tc"], t["th"], t["tw"]
    grid = layer.engine != "depthwise"
    n_k = -(-layer.K // tk) if grid else 1
    n_c = -(-layer.C // tc)
    n_y, n_x = -(-layer.OH // th), -(-layer.OW // tw)
    box_h, box_w = (th - 1) * layer.stride + layer.R, (tw - 1) * layer.stride + layer.S
    # the box's runs: a box row where a step takes every channel (consecutive words), else a pixel's channels
    box_runs = np.where(tc == layer.C, box_h, box_h * box_w)
    return {"n_k": n_k, "n_c": n_c, "n_y": n_y, "n_x": n_x, "box_h": box_h, "box_w": box_w, "pixels": th * tw,
            "box_runs": box_runs}


def network_trips(engine: EngineShape, layer: NetLayer, tiles: Tiles, residual: bool = False) -> dict[str, int]:
    """Iterations of each process's pipelined loop over the whole layer, as the kernel runs them (and as the
    C-simulation counts them): ``read_in``, ``read_w``, ``compute``, ``write``, ``bias`` and the Winograd
    engine's ``transform_in`` and ``transform_out`` (0 on the others); the arena's runs requested (``in_runs``,
    ``out_runs`` and, where the epilogue adds a ``residual``, ``res_runs``: the bursts ``layer_cycles`` charges,
    which counts a tile past the map's end as a whole one); and the buffer rows the layer's tiles fill (the
    Winograd engine's ``in_rows`` a patch's transformed inputs, ``out_rows`` a patch's sums, and ``tile_rows`` the
    output tile a channel group's pixel a row, over all its banks)."""
    t = tiles.__dict__
    s = _steps(layer, t)
    rs = layer.R * layer.S
    transform_in = transform_out = 0
    if engine.kind == "winograd":
        side = engine.patch_side(layer)
        kg, cg = tiles.tk // engine.out_lanes, tiles.tc // engine.in_lanes
        patches = -(-tiles.th // side) * -(-tiles.tw // side)
        steps = s["n_k"] * s["n_y"] * s["n_x"] * s["n_c"]
        per_in = s["box_h"] * s["box_w"] * tiles.tc // engine.word
        per_w = engine.step_reads(layer, kg * cg)
        per_c = kg * cg * np.maximum(patches, engine.distance)
        out_tiles = s["n_k"] * s["n_y"] * s["n_x"]
        # the output transform a patch row or a block's pixel a cycle (a pointwise tile may end in part of a block)
        transform_in = steps * cg * patches
        transform_out = out_tiles * kg * patches * side ** 2 // engine.out_stores(layer)
        rows = {"in_rows": cg * patches, "w_rows": kg * cg, "out_rows": kg * patches, "tile_rows": kg * s["pixels"]}
    elif engine.kind == "grid":
        kg, cg = tiles.tk // engine.out_lanes, tiles.tc // engine.in_lanes
        steps = s["n_k"] * s["n_y"] * s["n_x"] * s["n_c"]
        per_in = s["box_h"] * s["box_w"] * cg * (engine.in_lanes // engine.word)
        per_w = kg * rs * cg * engine.row_reads(layer)
        per_c = kg * rs * cg * np.maximum(s["pixels"], engine.distance)
        out_tiles = s["n_k"] * s["n_y"] * s["n_x"]
        rows = {"in_rows": cg * s["box_h"] * s["box_w"], "w_rows": kg * rs * cg, "out_rows": kg * s["pixels"]}
    else:
        cg, taps = tiles.tc // engine.out_lanes, engine.tap_steps(layer)
        steps = s["n_c"] * s["n_y"] * s["n_x"]
        per_in = s["box_h"] * s["box_w"] * cg * (engine.out_lanes // engine.word)
        per_w = cg * taps * engine.row_reads(layer)
        per_c = cg * taps * np.maximum(s["pixels"], engine.distance)
        out_tiles = steps
        # the box's rows in each of its banks (by column, and by row where the engine takes several window rows)
        rows = {"in_rows": cg * engine.box_rows(s["box_h"], s["box_w"]), "w_rows": cg * taps,
                "out_rows": cg * s["pixels"]}
    # the epilogue's parameters, once for each output-channel tile
    dw = engine.kind == "depthwise"
    n_o = s["n_c"] if dw else s["n_k"]
    bias = n_o * (engine.params * (tiles.tc if dw else tiles.tk) // engine.p_word)
    # the write: only the pixels inside the image, every output channel once (a channel tile divides them)
    write = layer.OH * layer.OW * (layer.K // engine.word)
    # the runs: each step's box's; an output row of a tile (inside the image) where its tile takes every channel,
    # else a pixel's, for each output-channel tile; the residual's alike
    in_runs = steps * s["box_runs"]
    out_runs = layer.OH * np.where((tiles.tc if dw else tiles.tk) == layer.K, s["n_x"], n_o * layer.OW)
    in_runs, out_runs = (v.item() if v.ndim == 0 else v for v in (in_runs, out_runs))  # one tiling's: an int
    return {"steps": steps, "out_tiles": out_tiles, "read_in": steps * per_in,
            "read_w": steps * per_w, "compute": steps * per_c, "write": write, "bias": bias,
            "transform_in": transform_in, "transform_out": transform_out, "in_runs": in_runs, "out_runs": out_runs,
            "res_runs": out_runs if residual else 0 * out_runs, **rows}


def layer_cycles(engine: EngineShape, layer: NetLayer, t: dict[str, Any], *, clock_hz: float, elem_bytes: int,
                 read_floor_ns: float, write_floor_ns: float, latency_ns: float, port_gbps: float,
                 depth: int, residual: bool = False, transform_depth: int = 0, channels: int = 2,
                 arena_ports: int = 1) -> Any:
    """Cycles of the layer for tiles ``t`` (arrays broadcast together): per step the slowest of its two reads and
    its compute, the write of each tile beside the next tile's steps; plus the first box and the last write, each
    output-channel tile's parameters and the descriptor. A read process restarts its loop every step and pays a
    round trip; every transfer is runs of consecutive words (bursts, no faster than the bandwidth); the runs of the
    input box and of the output are a few in flight (``in_flight``); each of the arena's streams runs at its own
    port's rate, and their channel's bandwidth bounds the bytes they move over an output tile together (the
    one-operator model's bound on a channel); ``residual``:
    the layer's epilogue reads a word beside each output word. The Winograd engine's read process transforms the
    box's patches after the box arrives (``transform_depth``: that loop's pipeline), and its output transform, a
    patch row a cycle (a 1×1 layer's blocks a pixel), runs beside the write as a stage of its own. The weights
    come over the engine's ``w_ports`` on the board's ``channels`` memory channels as ``weight_banks`` places them
    (ports on one channel share it; the arena's channel bounds the words of those on it with its own streams').
    ``arena_ports``: the ports each arena stream spreads a word over, each a burst of its part of the run's words."""
    s = _steps(layer, t)
    r_floor, w_floor = (max(1.0, ns * 1e-9 * clock_hz) for ns in (read_floor_ns, write_floor_ns))

    def runs(n_runs: Any, words: Any, floor: float, word_bytes: int = engine.word * elem_bytes, ports: int = 1
             ) -> Any:
        """Cycles of ``n_runs`` runs of ``words`` words: a word a cycle, each burst (4 KB at most) at least the
        memory's floor, and no faster than a channel's bandwidth shared by ``ports`` streams."""
        bursts = np.ceil(words / (AXI_MAX_BURST_BYTES // word_bytes))
        per_cycle = port_gbps * 1e9 / clock_hz / word_bytes / ports  # words a cycle a stream gets
        return n_runs * np.maximum(np.maximum(words, bursts * floor), words / per_cycle)

    rs = layer.R * layer.S
    grid = engine.kind != "depthwise"
    wino = engine.kind == "winograd"
    lanes_in = engine.in_lanes if grid else engine.out_lanes
    cg = t["tc"] // lanes_in
    kg = t["tk"] // engine.out_lanes if grid else 1
    side = engine.patch_side(layer)
    patches = -(-t["th"] // side) * -(-t["tw"] // side)
    latency = latency_ns * 1e-9 * clock_hz  # a read's round trip: paid again where a process restarts its loop
    def in_flight(n_runs: Any, words: Any, floor: float, ports: int = 1, waits: int = 1) -> Any:
        """Runs in one loop at II 1, each requested ``RUNS_AHEAD - 1`` runs before it starts (``hls::burst_maxi``):
        the loop's own ``ARENA_LOOP_CYCLES`` and ``waits`` round trips (the first run's; the write's last responses
        and its residual's first run), then a run at its words (no faster than a stream's share of a channel shared
        by ``ports``, nor than the memory's floor a burst), or at a round trip over the runs before it, if longer."""
        bytes_, per_cycle = words * engine.word * elem_bytes, port_gbps * 1e9 / clock_hz / ports  # (bytes a cycle)
        bursts = np.ceil(bytes_ / arena_ports / AXI_MAX_BURST_BYTES)  # each port's, side by side
        run = np.maximum(np.maximum(words, bytes_ / per_cycle), bursts * floor)
        return ARENA_LOOP_CYCLES + waits * latency + n_runs * np.maximum(run, latency / (RUNS_AHEAD - 1))

    # the weights: a word from each weight port a cycle, the ports on one memory channel streaming together (they
    # share it); the arena's streams (the input box, the write and the residual beside it) each at its own port's
    # rate, their channel's bandwidth bounding their sum over a tile below (as the one-operator model bounds a
    # channel's bytes): a stream alone, the tail's write or the first box, gets the channel's whole bandwidth
    w_share, on_arena = weight_layout(engine.w_ports, channels)
    # the input box: a run a box row where the tile takes every channel (consecutive words), else a pixel
    whole = t["tc"] == layer.C
    box_runs = s["box_runs"]
    box_words = np.where(whole, s["box_w"] * layer.C // engine.word, t["tc"] // engine.word)
    read_in = in_flight(box_runs, box_words, r_floor)
    if wino:  # then the box's patches transformed, one a cycle and channel group
        read_in = read_in + cg * patches + transform_depth
        w_rows, slots = kg * cg, np.maximum(patches, engine.distance)  # a weight row's PE iterations: its slots
    else:
        w_rows = kg * rs * cg if grid else cg * engine.tap_steps(layer)
        slots = np.maximum(s["pixels"], engine.distance)
    w_words = engine.step_reads(layer, w_rows) * engine.w_ports  # rows padded to whole iterations, or end to end
    compute = w_rows * slots + depth
    read_w = runs(1, w_words / engine.w_ports, r_floor, engine.w_word * elem_bytes, w_share) + latency
    # the weight process starts a step's burst once the last's final row is in its FIFO of two: the PE array then
    # waits out the burst's round trip and a row's words past those two rows' slots (rows end to end: their mean)
    stall = np.maximum(0, latency + w_words / w_rows / engine.w_ports - 2 * slots)
    step = np.maximum(np.maximum(read_in, read_w), compute + stall)
    out_chan = t["tk"] if grid else t["tc"]
    # a whole tile's write, a word a cycle (the Winograd engine's from its output tile's banks, a word's rows in one
    # cycle): a run a tile row where the tile takes every channel, else a pixel; a residual read
    # beside each word, on the arena's memory channel too, the two sharing it (a tile past the image's end writes
    # less: not counted)
    out_whole = out_chan == layer.K
    o_runs = np.where(out_whole, t["th"], s["pixels"])
    o_words = np.where(out_whole, t["tw"] * layer.K // engine.word, out_chan // engine.word)
    streams = 2 if residual else 1  # the residual's word read beside each word written: always together
    write = in_flight(o_runs, o_words, w_floor, ports=streams, waits=1 + residual)
    # the Winograd engine's output transform: a patch row of a channel group a cycle (a 1×1 layer's blocks a
    # pixel), a stage beside the write
    transform_out = kg * patches * side ** 2 // engine.out_stores(layer) + transform_depth if wino else 0
    n_out = s["n_k"] * s["n_y"] * s["n_x"] if grid else s["n_c"] * s["n_y"] * s["n_x"]
    n_c = s["n_c"] if grid else 1
    n_o = s["n_k"] if grid else s["n_c"]
    # the epilogue's parameters: one burst for each output-channel tile, before its first tile's writes
    params = n_o * (runs(1, engine.params * out_chan // engine.p_word, r_floor, 4 * engine.p_word) + latency)
    descriptor = latency + DESCRIPTOR_WORDS
    # the arena's channel over an output tile: its steps' boxes (and the weights of the weight ports on it), its
    # write and residual, each byte once, at the channel's bandwidth
    reads = (n_c * box_runs * box_words * engine.word + on_arena * n_c * w_words * engine.w_word) * elem_bytes
    bw = port_gbps * 1e9 / clock_hz
    channel = (reads + streams * o_runs * o_words * engine.word * elem_bytes) / bw
    tile = np.maximum(np.maximum(n_c * step, channel), np.maximum(write, transform_out))
    # the first box (the weights wait for the PE array but two rows: a FIFO); then a tile's steps, the layer's last
    # with no box read beside (the tiles alike, the first stands for it), no sooner than its reads pass the channel;
    # each later tile at its slowest stage; the last tile's output transform and write
    first = np.maximum((n_c - 1) * step + np.maximum(read_w, compute + stall), reads / bw - read_in)
    return read_in + first + (n_out - 1) * tile + write + transform_out + params + descriptor


def compute_floor(engine: EngineShape, layer: NetLayer) -> int:
    """Cycles the layer takes on the engine whatever its tiles (``layer_cycles`` is never below them): its PE
    loop's iterations summed over every step, each weight row a slot a pixel (a Winograd patch) of the tile but
    at least the accumulation distance, with no fill, no wait on a read and no write. The explorer passes over
    lanes whose layers cannot beat a design it has by these alone."""
    o = -(-layer.C // engine.out_lanes)  # the depthwise engine's channel groups
    if engine.kind == "depthwise":
        return o * engine.tap_steps(layer) * max(layer.OH * layer.OW, engine.distance)
    rows = -(-layer.K // engine.out_lanes) * -(-layer.C // engine.in_lanes)  # the weight rows of a tap, all steps
    if engine.kind == "winograd":
        side = engine.patch_side(layer)
        return rows * max(-(-layer.OH // side) * -(-layer.OW // side), engine.distance)
    return rows * layer.R * layer.S * max(layer.OH * layer.OW, engine.distance)
