"""One FPGA accelerator for a whole network, as the generated code builds it (issue 38): the shared network
kernel's engines (``hls_templates/network/``), their lanes and buffers chosen for the network, each layer's
tiles chosen for them, scored by ``cost_models/fpga_network.py``, the model of that kernel's loops.

The space is the hardware fixed at synthesis: the grid's output × input channel lanes, the depthwise engine's
channel lanes, and the rows of each engine's two buffers (input and output; the weights are a FIFO of rows).
For every candidate each layer takes its tiles of least time that fit the buffers; the network's latency at
batch 1 is the sum over its layers (each as often as the network runs it) at the one clock the design closes
at; the resources are counted once for the design and must fit the board. The lowest latency wins.

A layer whose input comes from the host with fewer channels than the grid's input lanes (a network's first
convolution on an RGB image) is run as a 1×1 convolution over its windows (the host lays the image out as
``[OH][OW][C·R·S]``, im2col): 3 channels on 64 lanes would waste 95 % of the array, 147 on 64 lanes 23 %.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from cost_models.fpga import slr_resources
from cost_models.fpga_blocks import IMPL_NAMES, storage_cost
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
from cost_models.fpga_network import (
    EngineShape,
    NetLayer,
    Tiles,
    accumulation_distance,
    compute_depth,
    layer_cycles,
    network_trips,
    tile_options,
)
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import RESOURCE_KINDS, Board
from hetero_dse.model.layer_shape import LayerShape

__all__ = ["LANES", "NetworkDesign", "PlacedLayer", "design_clock_mhz", "engine_resources", "engine_storage",
           "explore_network", "explore_throughput", "kernel_base", "padded"]

#: lanes each side of an engine may take (powers of two: channels pad to few of them)
LANES = (4, 8, 16, 32, 64)
#: rows each buffer may have (a BRAM18K is 512 deep at 32 bits: fewer rows waste its depth); the weights are no
#: buffer (a FIFO of rows), so any number of weight rows a step fits
IN_ROWS = (512, 1024, 2048, 4096, 8192)
W_ROWS = (1 << 30,)
OUT_ROWS = (256, 512, 1024, 2048, 4096)
#: the m_axi ports of the kernel: the table, activations in, residual, out, weights, biases
PORTS = 6


def padded(shape: LayerShape, block: int, in_lanes: int) -> tuple[NetLayer, bool]:
    """``shape`` as the kernel runs it for a channel ``block``: (the layer, whether the host gives it im2col)."""
    pad = lambda n: -(-n // block) * block  # noqa: E731
    if shape.engine == "grid" and shape.from_host and shape.C < in_lanes and shape.R * shape.S > 1:
        oh = (shape.H + 2 * shape.pad - shape.R) // shape.stride + 1
        ow = (shape.W + 2 * shape.pad - shape.S) // shape.stride + 1
        return NetLayer("grid", pad(shape.C * shape.R * shape.S), pad(shape.K), oh, ow, 1, 1), True
    k = pad(shape.K) if shape.engine == "grid" else pad(shape.C)
    c = shape.pixels_in * pad(shape.C // shape.pixels_in)  # each pixel's channels padded, as the layout keeps them
    return NetLayer(shape.engine, c, k, shape.H, shape.W, shape.R, shape.S, shape.stride, shape.pad), False


@dataclass
class PlacedLayer:
    shape: LayerShape
    count: int
    layer: NetLayer  # as the kernel runs it
    im2col: bool
    tiles: Tiles
    cycles: float

    def to_json(self, clock_hz: float) -> dict[str, Any]:
        return {"layer": self.shape.name, "count": self.count, "engine": self.layer.engine,
                "shape": self.layer.__dict__, "im2col": self.im2col, "tiles": self.tiles.__dict__,
                "cycles": self.cycles, "latency_s": self.cycles / clock_hz}


@dataclass
class NetworkDesign:
    """The network's accelerator: its engines, each layer's tiles and cycles, resources, the one clock."""

    board: Board
    dtype: str
    block: int  # channels of every activation padded to this
    word: int  # elements a DDR word
    engines: dict[str, EngineShape]
    layers: list[PlacedLayer]
    resources: dict[str, float]
    clock_mhz: float  # the target
    achieved_mhz: float
    candidates: int = 0
    timing: dict[str, Any] = field(default_factory=dict)
    #: kernels of this design side by side on the device (seed 000's pipelines), each on its own image
    compute_units: int = 1

    @property
    def latency_s(self) -> float:
        return sum(p.count * p.cycles for p in self.layers) / (self.achieved_mhz * 1e6)

    @property
    def wword(self) -> int:
        """Elements a word of the weights' port (every engine's the same: one port)."""
        return next(iter(self.engines.values())).w_word

    @property
    def pword(self) -> int:
        return next(iter(self.engines.values())).p_word

    @property
    def macs(self) -> int:
        return sum(p.count * p.shape.macs for p in self.layers)

    @property
    def utilisation(self) -> dict[str, float]:
        return {k: self.resources[k] / self.board.cap(k) if self.board.cap(k) else 0.0 for k in RESOURCE_KINDS}

    def trips(self) -> list[dict[str, int]]:
        return [network_trips(self.engines[p.layer.engine], p.layer, p.tiles) for p in self.layers]

    def to_json(self) -> dict[str, Any]:
        hz = self.achieved_mhz * 1e6
        sides = {"grid": ("output-channel", "input-channel"), "depthwise": ("channel",)}
        engines = [{"kind": kind, "lanes": dict(zip(sides[kind], (e.out_lanes, e.in_lanes), strict=False)),
                    "buffer_rows": {"input": e.in_rows, "weights": e.w_rows, "output": e.out_rows},
                    "accumulation_distance": e.distance, "params": e.params, "packed": e.packed,
                    "storage": engine_storage(e, self.dtype, self.board.cap("uram") > 0)}
                   for kind, e in self.engines.items()]
        macs_peak = sum(e.out_lanes * e.in_lanes for e in self.engines.values())
        return {"board": self.board.name, "dtype": self.dtype, "block": self.block, "word": self.word,
                "wword": self.wword, "pword": self.pword,
                "engines": engines, "clock_mhz": self.clock_mhz, "achieved_mhz": self.achieved_mhz,
                "latency_s": self.latency_s, "fps": self.compute_units / self.latency_s,
                "compute_units": self.compute_units, "gops": 2 * self.macs * self.compute_units / self.latency_s / 1e9,
                "peak_gops": 2 * macs_peak * hz / 1e9, "resources": self.resources, "utilisation": self.utilisation,
                "candidates": self.candidates, "layers": [p.to_json(hz) for p in self.layers],
                "basis": "the model of the generated network kernel (cost_models/fpga_network.py): the trip counts of "
                         "its loops, which its C-simulation counts, the DDR bursts each process issues and the "
                         "DATAFLOW overlap of its stages"}


def _timing(board: Board, dtype: str, clock_hz: float, word: int, bandwidth_share: float = 1.0) -> dict[str, Any]:
    m = board.memory
    return {"clock_hz": clock_hz, "elem_bytes": np.dtype(dtype).itemsize, "read_floor_ns": m.read_burst_ns,
            "write_floor_ns": m.write_burst_ns, "latency_ns": m.latency_ns,
            "port_gbps": m.sustained_gbps_per_channel * bandwidth_share}


#: 32-bit multiplies of run-time values an engine's processes make a cycle (addresses, buffer rows, the output
#: word's place): Vitis builds each from DSP48E2s, about three for 32 × 32 bits (*estimate*)
ADDRESS_MULTIPLIES, DSP_PER_ADDRESS_MULTIPLY = 14, 3


def engine_storage(engine: EngineShape, dtype: str, uram: bool) -> dict[str, str]:
    """Where each of the engine's two buffers lives (``bram``, ``uram``, ``lutram``): what the model charges and
    the code binds (BIND_STORAGE), from one decision. A row is one wide word (its lanes side by side)."""
    bits, acc_bits = 8.0 * np.dtype(dtype).itemsize, 32.0
    lanes_in = engine.in_lanes if engine.kind == "grid" else engine.out_lanes
    scratch = np.zeros(len(RESOURCE_KINDS))
    kinds = {}
    for name, rows, width in (("in", engine.in_rows, lanes_in * bits), ("out", engine.out_rows,
                                                                         engine.out_lanes * acc_bits)):
        kind = storage_cost(float(rows), width, uram, scratch, 2.0)
        kinds[name] = IMPL_NAMES[kind] if IMPL_NAMES[kind] != "registers" else "lutram"
    return kinds


def engine_resources(engine: EngineShape, dtype: str, uram: bool) -> np.ndarray:
    """One engine in ``RESOURCE_KINDS`` order: its multipliers and adders (the grid's adder trees and
    accumulators), its two buffers (two blocks each, a row one wide word), the weight rows in registers (the row
    in use, the two the FIFO holds, the one being gathered), the shift registers that gather and scatter a
    row V lanes a cycle, the run-time address arithmetic, and the epilogue of its write process."""
    a = ARITHMETIC[dtype]
    res = np.zeros(len(RESOURCE_KINDS))
    lut, ff, dsp = (RESOURCE_KINDS.index(k) for k in ("lut", "ff", "dsp"))
    macs = engine.out_lanes * engine.in_lanes
    adds = macs  # a tree of in_lanes - 1 adders and one accumulation a lane
    # packed: two int8 products of neighbouring output lanes in one DSP48E2 (27 x 18), split by fabric logic
    muls = macs / 2 if engine.packed else macs
    res[dsp] += muls * a.dsp_mul + adds * a.dsp_add
    res[lut] += muls * a.lut_mul + adds * a.lut_add + (macs / 2 * 40 if engine.packed else 0)
    res[ff] += macs * a.ff_mul + adds * a.ff_add
    bits, acc_bits = 8.0 * np.dtype(dtype).itemsize, 32.0
    lanes_in = engine.in_lanes if engine.kind == "grid" else engine.out_lanes
    storage_cost(float(engine.in_rows), lanes_in * bits, uram, res, 2.0)
    storage_cost(float(engine.out_rows), engine.out_lanes * acc_bits, uram, res, 2.0)
    w_bits = macs * bits if engine.kind == "grid" else engine.out_lanes * bits
    # the weight row in use and the one being gathered in registers; the FIFO's two rows in LUTs (SRLs)
    res[ff] += 2 * w_bits + lanes_in * bits + engine.out_lanes * acc_bits
    res[lut] += 2 * w_bits + (w_bits + lanes_in * bits + engine.out_lanes * acc_bits) / 2  # 2:1 muxes, two a LUT6
    res[dsp] += ADDRESS_MULTIPLIES * DSP_PER_ADDRESS_MULTIPLY
    # the epilogue, built twice (the write loop with a residual and the one without), a lane each
    if a.floating:  # the bias add, the slope's multiply, the clamp's compares; the residual's add in one copy
        res[dsp] += engine.word * (2 * (a.dsp_add + a.dsp_mul) + a.dsp_add)
        res[lut] += engine.word * (2 * (a.lut_add + a.lut_mul + 2 * acc_bits) + a.lut_add)
    else:  # the requantising and the slope's 32 x 16 multiplies (2 DSPs each), the residual's 8 x 16 (1)
        res[dsp] += engine.word * (2 * 4 + 1)
        res[lut] += engine.word * 2 * (3 * acc_bits + 2 * acc_bits)
    return res


def _tile_table(engine: EngineShape, layer: NetLayer, timing: dict[str, Any], residual: bool = False
                ) -> dict[str, np.ndarray]:
    """Every tile of ``layer`` on the engine's lanes: its cycles and the rows of each buffer it fills."""
    grid = engine.kind == "grid"
    tk = tile_options(layer.K, engine.out_lanes) if grid else [0]
    tc = tile_options(layer.C, engine.in_lanes if grid else engine.out_lanes)
    g = np.meshgrid(np.array(tk), np.array(tc), np.array(tile_options(layer.OH)), np.array(tile_options(layer.OW)),
                    indexing="ij")
    t = {k: v.ravel() for k, v in zip(("tk", "tc", "th", "tw"), g, strict=True)}
    if not grid:
        t["tk"] = t["tc"]
    rows = network_trips(engine, layer, Tiles(t["tk"], t["tc"], t["th"], t["tw"]))
    depth = compute_depth(timing["dtype"], timing["clock_hz"] / 1e6, engine.in_lanes)
    cycles = layer_cycles(engine, layer, t, depth=depth, residual=residual,
                          **{k: v for k, v in timing.items() if k != "dtype"})
    return {**t, "cycles": cycles, "in_rows": rows["in_rows"], "w_rows": rows["w_rows"], "out_rows": rows["out_rows"]}


def explore_network(layers: Sequence[tuple[LayerShape, int]], board: Board, dtype: str = "float32",
                    clock_mhz: float | None = None, lanes: Sequence[int] = LANES,
                    bandwidth_share: float = 1.0) -> NetworkDesign:
    """The network kernel of least latency at batch 1 that fits ``board`` (see the module doc);
    ``bandwidth_share``: of a memory channel's bandwidth each port gets (several compute units on too few)."""
    if not layers:
        raise HeteroDSEError("a network needs at least one layer to design an accelerator for")
    if dtype not in ("float32", "int8"):
        raise HeteroDSEError(f"the network kernel is generated for float32 and int8, not {dtype}")
    clock = float(clock_mhz or board.default_clock_mhz)
    hz = clock * 1e6
    uram = board.cap("uram") > 0
    port_elems = board.memory.port_bits // (8 * np.dtype(dtype).itemsize)
    param_elems = min(16, board.memory.port_bits // 32)  # 32-bit parameters a word of the parameters' port
    params, pack = (2, True) if dtype == "int8" else (1, False)
    kinds = sorted({s.engine for s, _ in layers}, key=["grid", "depthwise"].index)
    distance = accumulation_distance(dtype, clock)
    caps = np.array([board.cap(k) for k in RESOURCE_KINDS], dtype=float)
    fixed = kernel_base(PORTS)
    best: NetworkDesign | None = None
    tried = 0
    lane_sets = {"grid": list(itertools.product(lanes, lanes)), "depthwise": [(c, 1) for c in lanes]}
    cache: dict[tuple[Any, ...], list[tuple[float, EngineShape, list[PlacedLayer], np.ndarray]]] = {}

    def engine_options(kind: str, out_l: int, in_l: int, block: int, word: tuple[int, int, int],
                       timing: dict[str, Any]) -> list[tuple[float, EngineShape, list[PlacedLayer], np.ndarray]]:
        """The engine's buffer sizes worth building with these lanes: each layer's best tiles in them, the
        buffers shrunk to what some layer fills, none slower and larger than another (cached: the lanes of
        the other engine change only the channel block)."""
        nonlocal tried
        key = (kind, out_l, in_l, block, word)
        if key in cache:
            return cache[key]
        packed = pack and kind == "grid" and out_l % 2 == 0
        probe = EngineShape(kind, out_l, in_l, word[0], IN_ROWS[0], W_ROWS[0], OUT_ROWS[0], distance, params, packed,
                            word[1], word[2])
        found: dict[EngineShape, tuple[float, EngineShape, list[PlacedLayer], np.ndarray]] = {}
        if not np.any(engine_resources(probe, dtype, uram) + fixed > caps):  # the arrays alone must fit
            mine = [(i, padded(s, block, in_l)) for i, (s, _) in enumerate(layers) if s.engine == kind]
            tables = [(i, net, im2col, _tile_table(probe, net, timing, layers[i][0].residual))
                      for i, (net, im2col) in mine]
            for rows in itertools.product(IN_ROWS, W_ROWS, OUT_ROWS):
                tried += 1
                placed, total = [], 0.0
                for i, net, im2col, tab in tables:
                    fits = (tab["in_rows"] <= rows[0]) & (tab["w_rows"] <= rows[1]) & (tab["out_rows"] <= rows[2])
                    if not fits.any():
                        break
                    j = int(np.argmin(np.where(fits, tab["cycles"], np.inf)))
                    tiles = Tiles(*(int(tab[k][j]) for k in ("tk", "tc", "th", "tw")))
                    placed.append(PlacedLayer(layers[i][0], layers[i][1], net, im2col, tiles, float(tab["cycles"][j])))
                    total += layers[i][1] * float(tab["cycles"][j])
                else:
                    # rows no layer fills are not built: the buffers shrink to the most any layer uses
                    used = [max(int(network_trips(probe, p.layer, p.tiles)[r]) for p in placed)
                            for r in ("in_rows", "w_rows", "out_rows")]
                    engine = EngineShape(kind, out_l, in_l, word[0], *used, distance, params, packed, word[1], word[2])
                    found.setdefault(engine, (total, engine, placed, engine_resources(engine, dtype, uram)))
        options = sorted(found.values(), key=lambda o: o[0])
        # keep an option only where it needs less of some resource than every faster one
        kept: list[tuple[float, EngineShape, list[PlacedLayer], np.ndarray]] = []
        for o in options:
            if all(np.any(o[3] < k[3]) for k in kept):
                kept.append(o)
        cache[key] = kept
        return kept

    for lane_choice in itertools.product(*(lane_sets[k] for k in kinds)):
        by_kind = dict(zip(kinds, lane_choice, strict=True))
        block = max(max(v) for v in by_kind.values())
        # the activations' word no wider than any engine's lanes; the weights' as wide as a lane grid allows
        word = min(port_elems, min(min(v for v in pair if v > 1) for pair in by_kind.values()))
        wword = min(port_elems, min(o * i for o, i in by_kind.values()))
        pword = min(param_elems, word)
        timing = {"dtype": dtype, **_timing(board, dtype, hz, word, bandwidth_share)}
        options = [engine_options(kind, *by_kind[kind], block, (word, wword, pword), timing) for kind in kinds]
        for combo in itertools.product(*options):
            res = fixed + sum(c[3] for c in combo)
            if np.any(res > caps):
                continue
            cycles = sum(c[0] for c in combo)
            if best is not None and cycles / hz >= best.latency_s:  # the clock only falls from the target
                continue
            design = _design(board, dtype, block, word, {k: c[1] for k, c in zip(kinds, combo, strict=True)},
                             [p for c in combo for p in c[2]], res, clock, timing)
            if best is None or design.latency_s < best.latency_s:
                best = design
    if best is None:
        raise HeteroDSEError(f"no network kernel of {min(lanes)}–{max(lanes)} lanes a side fits {board.name} with "
                             "every layer on it")
    best.candidates = tried
    best.layers.sort(key=lambda p: [s for s, _ in layers].index(p.shape))
    return best


def kernel_base(ports: int) -> np.ndarray:
    """What a whole-network kernel takes before its engines, in ``RESOURCE_KINDS`` order: its control and
    AXI-Lite interface, and an m_axi adapter for each of its ``ports``."""
    base = np.zeros(len(RESOURCE_KINDS))
    base[RESOURCE_KINDS.index("lut")] = LUT_BASE + ports * LUT_PER_PORT
    base[RESOURCE_KINDS.index("ff")] = FF_BASE + ports * FF_PER_PORT
    return base


def design_clock_mhz(board: Board, clock_mhz: float, res: np.ndarray, fanout: float) -> float:
    """The clock (MHz) a whole-network design of resources ``res`` closes at for a target ``clock_mhz``:
    derated by its widest broadcast (``fanout`` lanes an element reaches) and the SLRs it spans."""
    eff, _ = achieved_clock(clock_mhz * 1e6, res, slr_resources(board), float(fanout), 1.0, FANOUT_NS_PER_DOUBLING,
                            FANOUT_FREE, SLR_DERATE[2], SLR_DERATE[3])
    return float(eff) / 1e6


def _design(board: Board, dtype: str, block: int, word: int, engines: dict[str, EngineShape],
            placed: list[PlacedLayer], res: np.ndarray, clock: float, timing: dict[str, Any]) -> NetworkDesign:
    """The design at the clock it closes at: derated by the input broadcast's fan-out (an input element goes
    to every output lane) and the SLRs it spans; each layer's cycles again at that clock (DDR floors are
    times)."""
    achieved = design_clock_mhz(board, clock, res, max(e.out_lanes for e in engines.values()))
    again = {**timing, "clock_hz": achieved * 1e6}
    layers = []
    for p in placed:
        engine = engines[p.layer.engine]
        depth = compute_depth(dtype, achieved, engine.in_lanes)
        t = {k: np.array([v]) for k, v in p.tiles.__dict__.items()}
        cycles = float(layer_cycles(engine, p.layer, t, depth=depth, residual=p.shape.residual,
                                    **{k: v for k, v in again.items() if k != "dtype"})[0])
        layers.append(PlacedLayer(p.shape, p.count, p.layer, p.im2col, p.tiles, cycles))
    return NetworkDesign(board, dtype, block, word, engines, layers,
                         {k: float(v) for k, v in zip(RESOURCE_KINDS, res, strict=True)}, clock, achieved,
                         timing=timing)


#: at most this many compute units are tried (each takes an even share of the device)
MAX_COMPUTE_UNITS = 8


def explore_throughput(layers: Sequence[tuple[LayerShape, int]], board: Board, dtype: str = "float32",
                       clock_mhz: float | None = None, lanes: Sequence[int] = LANES) -> NetworkDesign:
    """The design of most images a second at batch > 1: ``n`` compute units, each a network kernel explored for
    ``1/n`` of the device's resources, each with its own two memory channels (its arena, its weights) where the
    board has them, sharing them where it has not (each port then gets ``channels / 2n`` of a channel). ``n``
    goes up while the throughput rises: a design whose units no longer fit is where it stops."""
    best: NetworkDesign | None = None
    channels = board.memory.channels
    for n in range(1, MAX_COMPUTE_UNITS + 1):
        share = {k: v / n for k, v in board.usable.items()}
        try:
            design = explore_network(layers, replace(board, usable=share), dtype, clock_mhz, lanes,
                                     bandwidth_share=min(1.0, channels / (2.0 * n)))
        except HeteroDSEError:
            break
        design.board, design.compute_units = board, n
        design.resources = {k: v * n for k, v in design.resources.items()}
        if best is not None and n / design.latency_s <= best.compute_units / best.latency_s:
            break
        best = design
    if best is None:
        raise HeteroDSEError(f"no network kernel fits {board.name}")
    return best
