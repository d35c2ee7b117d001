"""One FPGA accelerator for a whole network, as the generated code builds it (issue 38): the shared network
kernel's engines (``hls_templates/network/``), their lanes and buffers chosen for the network, each layer's
tiles chosen for them, scored by ``cost_models/fpga_network.py``, the model of that kernel's loops.

The space is the hardware fixed at synthesis: the grid's output × input channel lanes, the depthwise engine's
channel lanes and the taps of a window row each multiplies a cycle (of the window's rows too: ``depthwise_taps``),
the Winograd engine's lanes and tile (a float
one's transforms on the fabric or on DSPs), the activations' word (the Winograd engine's may hold several of its
lane groups; one wider than the board's port spreads over two: ``arena_ports``), the rows of each engine's buffers,
and the weights' ports read at once (one to four: ZCU102's 128-bit HP ports starve a large grid).
For every candidate each layer takes its tiles of least time that fit the buffers; the network's latency at
batch 1 is the sum over its layers (each as often as the network runs it) at the one clock the design closes
at; the resources are counted once for the design and must fit the board. The lowest latency wins. The search is
exact but spares work a bound proves useless: lanes whose layers' PE loops alone (``compute_floor``) are slower
than a design it has are passed over, as is a candidate whose PE loops alone at the clock it closes at are, and a
layer's tiles on an engine are scored once a search (``fpga_network_choices``).

A layer whose input comes from the host with fewer channels than the grid's input lanes (a network's first
convolution on an RGB image) is run as a 1×1 convolution over its windows (the host lays the image out as
``[OH][OW][C·R·S]``, im2col): 3 channels on 64 lanes would waste 95 % of the array, 147 on 64 lanes 23 %.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from cost_models.fpga_costs import ARITHMETIC, axi_max_beats
from cost_models.fpga_network_algorithm import ALGORITHMS, LANES, winograd_layouts, winograd_tiles
from cost_models.fpga_network_choices import (IN_ROWS, OUT_ROWS, SIZES, W_ROWS, keeping_choices, layer_choices,
                                              placed_cycles, timing_key)
from cost_models.fpga_network_clock import achieved_mhz
from cost_models.fpga_network_depths import accumulation_distance
from cost_models.fpga_network import ENGINE_KINDS, EngineShape, Tiles, compute_floor
from cost_models.fpga_network_memory import fitting_weight_ports, memory_problem
from cost_models.fpga_network_placed import NetworkDesign, PlacedLayer
from cost_models.fpga_network_ports import (ARENA_PORTS, WEIGHT_PORTS, arena_ports, kernel_buffers, read_streams,
                                            unit_share, weight_bandwidth, weight_reads)
from cost_models.fpga_network_resources import engine_resources, kernel_base
from cost_models.fpga_network_shapes import depthwise_taps, padded
from cost_models.fpga_winograd import TILES
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import RESOURCE_KINDS, Board
from hetero_dse.model.layer_shape import LayerShape

__all__ = ["explore_network"]

#: lane choices that fit, the least floors first, whose fastest design bounds the rest (``_explore``): one may be a
#: poor design (its floor least, its memory the bound); a few give a bound that passes over most others
SEED_LANES = 3


def _timing(board: Board, dtype: str, clock_hz: float, word: int, bandwidth_share: float = 1.0) -> dict[str, Any]:
    m = board.memory
    return {"clock_hz": clock_hz, "elem_bytes": np.dtype(dtype).itemsize, "read_floor_ns": m.read_burst_ns,
            "write_floor_ns": m.write_burst_ns, "latency_ns": m.latency_ns,
            "port_gbps": m.sustained_gbps_per_channel * bandwidth_share, "channels": m.channels,
            "arena_ports": arena_ports(word * 8 * np.dtype(dtype).itemsize, m.port_bits)}


@keeping_choices
def explore_network(layers: Sequence[tuple[LayerShape, int]], board: Board, dtype: str = "float32",
                    clock_mhz: float | None = None, lanes: Sequence[int] | Mapping[str, Sequence[int]] = LANES,
                    algorithm: str = "auto", winograd_tile: int | None = None,
                    weight_ports: Sequence[int] = WEIGHT_PORTS, units: int = 1,
                    word: int | None = None, transform_cores: str | None = None, taps: int | None = None,
                    tap_rows: int | None = None) -> NetworkDesign:
    """The network kernel of least latency at batch 1 that fits ``board`` (see the module doc);
    ``units``: compute units of this design side by side, sharing the board's memory channels (``unit_share``);
    ``algorithm`` (``ALGORITHMS``): with ``auto`` both designs are explored, one whose 3×3 stride-1 layers run
    on a Winograd engine beside the grid and one without, and the faster kept; ``winograd_tile``: that engine's
    output tile m (F(m×m, 3×3)) instead of the best of those its data type offers (``fpga_winograd.TILES``);
    ``weight_ports``: how many weight ports each engine may read at once (each where its
    weight rows are an even number of port words); ``lanes``: the lanes a side each engine may take (one set for
    all, or a set a kind of engine); ``word``: the activations' word (elements a beat of the arena's one or two
    ports) instead of the best of those the engines' lanes and the board's ports allow; ``transform_cores``: a
    float Winograd engine's transforms on the ``fabric`` or on ``dsp`` cores instead of the better of both;
    ``taps``: the depthwise engine's taps of a window row a cycle instead of the better of one and the most its
    layers' widths share; ``tap_rows``: its window rows a cycle (each of ``taps``, a whole row's) instead of the
    better of one and the most its layers' heights share."""
    if not layers:
        raise HeteroDSEError("a network needs at least one layer to design an accelerator for")
    pool = next((shape for shape, _ in layers if shape.engine == "maxpool"), None)
    if pool is not None:
        raise HeteroDSEError(f"{pool.name}: the shared network kernel runs no max pool (the layer pipeline does); "
                             "its host would run it between the layers")
    if dtype not in ("float32", "int8"):
        raise HeteroDSEError(f"the network kernel is generated for float32 and int8, not {dtype}")
    if transform_cores not in (None, "fabric", "dsp"):
        raise HeteroDSEError(f"unknown transform cores {transform_cores!r}: the fabric's or dsp")
    if algorithm not in ALGORITHMS:
        raise HeteroDSEError(f"unknown algorithm {algorithm!r}: the network kernel offers {', '.join(ALGORITHMS)}")
    if not weight_ports or not set(weight_ports) <= set(WEIGHT_PORTS):
        raise HeteroDSEError(f"weight ports {tuple(weight_ports)}: the kernel reads 1 to {WEIGHT_PORTS[-1]} at once")
    port_elems = board.memory.port_bits // (8 * np.dtype(dtype).itemsize) * ARENA_PORTS[-1]
    if word is not None and (word < 1 or word & (word - 1) or word > port_elems):
        raise HeteroDSEError(f"a word of {word} activations: {ARENA_PORTS[-1]} of {board.name}'s "
                             f"{board.memory.port_bits}-bit ports carry a power of two of them up to {port_elems} in "
                             f"{dtype}")
    lanes = lanes if isinstance(lanes, Mapping) else dict.fromkeys(ENGINE_KINDS, tuple(lanes))
    tap_options = depthwise_taps([s for s, _ in layers], taps, tap_rows)
    # as many weight ports as split the weights into parts their banks hold (a large network on HBM's banks)
    weight_ports = fitting_weight_ports(layers, board, dtype, weight_ports, units)
    tiles = [winograd_tiles(s, dtype, min(min(v) for v in lanes.values())) for s, _ in layers]
    common = tuple(m for m in TILES.get(dtype, ()) if all(m in t for t in tiles if t) and winograd_tile in (None, m))
    if algorithm == "winograd" and not (any(tiles) and common):
        raise HeteroDSEError("no layer of this network runs on the Winograd engine in "
                             f"{dtype} (it takes 3×3 and 1×1 stride-1 convolutions and linear layers)")
    designs, idle = [], []  # idle: a design with a Winograd engine that no layer runs on (each faster on the grid)
    if algorithm != "direct" and any(tiles) and common:
        for variant in winograd_layouts(layers, tiles, algorithm):
            try:
                design = _explore(variant, board, dtype, clock_mhz, lanes, common, algorithm == "auto",
                                  weight_ports, units, word, transform_cores, tap_options)
            except HeteroDSEError as exc:
                if algorithm == "winograd":
                    raise HeteroDSEError(f"no network kernel with a Winograd engine fits "
                                         f"{board.name} in {dtype} ({exc}); the direct design may") from None
                continue
            # each layer keeps its own shape (a convolution, as torch has it); its NetLayer says the engine
            originals = {m: s for (m, _), (s, _) in zip(variant, layers, strict=True)}
            for p in design.layers:
                p.shape = originals[p.shape]
            used = algorithm == "winograd" or any(p.layer.engine == "winograd" for p in design.layers)
            (designs if used else idle).append(design)
    if algorithm != "winograd":
        try:
            designs.append(_explore(list(layers), board, dtype, clock_mhz, lanes, (),
                                    weight_ports=weight_ports, units=units, word=word, taps=tap_options))
        except HeteroDSEError:
            if not designs + idle:
                raise
    # the fastest whose buffers fit as its layout deals them (weight ports were offered where the tensors fit)
    candidates = sorted(designs or idle, key=lambda d: d.latency_s)
    for design in candidates:
        if memory_problem(design, units) is None:
            return design
    raise HeteroDSEError(memory_problem(candidates[0], units))


#: an engine worth building: the cycles of its layers, the engine, each layer's index and placement, its resources
_Option = tuple[float, EngineShape, list[tuple[int, PlacedLayer]], np.ndarray]


def _explore(layers: list[tuple[LayerShape, int]], board: Board, dtype: str, clock_mhz: float | None,
             lanes: Mapping[str, Sequence[int]], wino_tiles: tuple[int, ...], choose: bool = False,
             weight_ports: Sequence[int] = WEIGHT_PORTS, units: int = 1, word: int | None = None,
             transform_cores: str | None = None, taps: Sequence[tuple[int, int]] = ((1, 1),)) -> NetworkDesign:
    """The design of least latency with an engine for each kind of layer in ``layers`` (a Winograd engine of
    the ``wino_tiles`` for those moved to it); ``choose``: each of those runs on the grid where that is faster;
    ``word``: the activations' word where the engines allow it (else each they allow); ``transform_cores``: a
    float Winograd engine's transforms on the ``fabric`` or on ``dsp`` cores (None: both tried); ``taps``: the
    depthwise engine's taps of a row a cycle and window rows to try."""
    clock = float(clock_mhz or board.default_clock_mhz)
    hz, uram = clock * 1e6, board.cap("uram") > 0
    itemsize = np.dtype(dtype).itemsize
    port_elems = board.memory.port_bits // (8 * itemsize)
    param_elems = min(16, board.memory.port_bits // 32)  # 32-bit parameters a word of the parameters' port
    params, pack = (2, True) if dtype == "int8" else (1, False)
    kinds = sorted({s.engine for s, _ in layers}, key=ENGINE_KINDS.index)
    # the Winograd engine's pointwise mode, where it takes a 1×1 layer (or the image's, as im2col)
    point = any(s.engine == "winograd" and (s.R * s.S == 1 or s.from_host) for s, _ in layers)
    distance = accumulation_distance(dtype, clock)
    caps = np.array([board.cap(k) for k in RESOURCE_KINDS], dtype=float)
    beats = axi_max_beats(board.memory.port_bits // 8)  # the bursts the project's hls_config.tcl allows its ports
    fixed = kernel_base(kernel_buffers(8, 8, 32, 1, beats))  # the narrowest: an engine alone beside
    tried = 0
    # (output lanes, input lanes, Winograd tile, a float engine's transforms on DSPs: tried where it is float,
    # the depthwise engine's taps of a row and window rows a cycle)
    pairs = {k: list(itertools.product(v, v)) for k, v in lanes.items()}
    floating = ARITHMETIC[dtype].floating
    cores = {"fabric": (False,), "dsp": (True,), None: (False, True)}[transform_cores] if floating else (False,)
    lane_sets = {"grid": [(o, i, 0, False, (1, 1)) for o, i in pairs["grid"]],
                 "depthwise": [(c, 1, 0, False, u) for c in lanes["depthwise"] for u in taps],
                 "winograd": [(o, i, m, d, (1, 1)) for o, i in pairs["winograd"] for m in wino_tiles for d in cores]}
    cache: dict[tuple[Any, ...], list[_Option]] = {}

    def probe_of(kind: str, out_l: int, in_l: int, tile: int, word: tuple[int, int, int], w_ports: int = 1,
                 transform_dsp: bool = False, taps: tuple[int, int] = (1, 1)) -> EngineShape:
        """The engine with these lanes and words, its buffers at their fewest rows: two int8 products a DSP on the
        grid, an int8 Winograd engine transforming its weights itself, its pointwise mode where a layer needs it."""
        return EngineShape(kind, out_l, in_l, word[0], IN_ROWS[0], W_ROWS[0], OUT_ROWS[0], distance, params,
                           pack and kind == "grid" and out_l % 2 == 0, word[1], word[2], tile,
                           kind == "winograd" and dtype == "int8", kind == "winograd" and point,
                           w_ports=w_ports, transform_dsp=transform_dsp, taps=taps[0], tap_rows=taps[1])

    def engine_options(kind: str, out_l: int, in_l: int, tile: int, transform_dsp: bool, taps: tuple[int, int],
                       block: int,
                       word: tuple[int, int, int], timing: dict[str, Any], w_ports: int = 1) -> list[_Option]:
        """The engine's buffer sizes worth building with these lanes: each layer's best tiles in them, the
        buffers shrunk to what some layer fills, none slower and larger than another (cached: the lanes of
        the other engine change only the channel block)."""
        nonlocal tried
        key = (kind, out_l, in_l, tile, transform_dsp, taps, block, word, w_ports, timing["port_gbps"])
        if key in cache:
            return cache[key]
        probe = probe_of(kind, out_l, in_l, tile, word, w_ports, transform_dsp, taps)
        found: dict[EngineShape, _Option] = {}
        if not np.any(engine_resources(probe, dtype, uram) + fixed > caps):  # the arrays alone must fit
            # choosing, the grid takes the Winograd engine's layers too, and each such layer runs where it is faster
            mine = [(i, padded(replace(s, engine=kind), block, in_l)) for i, (s, _) in enumerate(layers)
                    if s.engine == kind or (choose and kind == "grid" and s.engine == "winograd")]
            tkey = timing_key(timing)
            tables = [(i, net, im2col, layer_choices(probe, net, timing, layers[i][0].residual, tkey))
                      for i, (net, im2col) in mine]
            # every buffer size at once: each layer's fastest tiles that fit it, its cycles, the rows they fill
            tried += len(SIZES)
            ok, total, fill = np.ones(len(SIZES), dtype=bool), np.zeros(len(SIZES)), 0
            for i, _, _, ch in tables:
                ok &= ch.fits
                total = total + layers[i][1] * ch.cycles
                fill = np.maximum(fill, ch.rows)
            for c in np.flatnonzero(ok):
                # rows no layer fills are not built: the buffers shrink to the most any layer uses
                used = [int(v) for v in fill[c]]
                engine = replace(probe, in_rows=used[0], w_rows=used[1], out_rows=used[2],
                                 tile_rows=used[3] if kind == "winograd" else 0)
                if engine not in found:
                    placed = [(i, PlacedLayer(layers[i][0], layers[i][1], net, im2col,
                                              Tiles(*(int(v) for v in ch.tiles[c])), float(ch.cycles[c])))
                              for i, net, im2col, ch in tables]
                    found[engine] = (float(total[c]), engine, placed, engine_resources(engine, dtype, uram))
        options = sorted(found.values(), key=lambda o: o[0])
        # keep an option only where it needs less of some resource than every faster one
        kept: list[_Option] = []
        for o in options:
            if all(np.any(o[3] < k[3]) for k in kept):
                kept.append(o)
        cache[key] = kept
        return kept

    def alone(kind: str, choice: tuple[int, int, int, bool, tuple[int, int]]) -> bool:
        """Whether the engine's arrays alone fit (its buffers at their fewest rows): no other choice helps one that
        does not."""
        o, i, m, d, u = choice
        probe = probe_of(kind, o, i, m, (min(v for v in (o, i) if v > 1), 1, 1), transform_dsp=d, taps=u)
        return not np.any(engine_resources(probe, dtype, uram) + fixed > caps)

    lane_sets = {k: [v for v in lane_sets[k] if alone(k, v)] for k in kinds}
    over_ports = False

    def gather(by_kind: dict[str, tuple[Any, ...]], first: int) -> list[tuple[Any, ...]]:
        """Every combination of these lanes' engines that fits (each word and weight ports), indexed from
        ``first``: its cycles at the target clock first."""
        nonlocal over_ports
        found: list[tuple[Any, ...]] = []
        # the activations' word no wider than the grid's and depthwise engine's lanes (a port's, or two: one wider
        # than the port spreads over two); the Winograd engine's may hold several of its lane groups (its box banked
        # by them): each power of two from the narrowest lanes to the widest word is tried (VGG-16 on vu9p int8 is
        # fastest with two of its 16-lane groups a word, neither one nor four). The weights' a lane grid, a power of
        # two (a depthwise row of 3 taps a lane in such words, its last padded)
        narrowest = {k: min(v for v in pair[:2] if v > 1) for k, pair in by_kind.items()}
        widest = min([port_elems * ARENA_PORTS[-1], *(v for k, v in narrowest.items() if k != "winograd")])
        words = [1 << b for b in range(min([port_elems, *narrowest.values()]).bit_length() - 1,
                                       widest.bit_length())]  # (arena_ports: one wider than a port takes two)
        if word is not None:
            words = [word] if word <= widest else []
        wword = min(port_elems, min(1 << (o * i * math.prod(u)).bit_length() - 1 for o, i, _, _, u in by_kind.values()))
        # ports past those that bring the most weight words a cycle (over crowded channels) are not tried
        brings = {wp: weight_bandwidth(wp, board.memory.channels, board.memory.sustained_gbps_per_channel * 1e9
                                       * unit_share(board.memory.channels, units, wp) / hz / (wword * itemsize))
                  for wp in weight_ports}
        useful = [wp for wp in weight_ports if all(brings[wp] > brings[q] for q in weight_ports if q < wp)]
        for act_word, wp in itertools.product(words, useful):
            a_ports = arena_ports(8 * itemsize * act_word, board.memory.port_bits)
            if board.memory.axi_ports and units * read_streams(a_ports, wp) > board.memory.axi_ports:
                over_ports = True  # a Zynq's HP ports, each stream of each unit its own (the model's word a cycle)
                continue
            block = max(max(max(v[:2]) for v in by_kind.values()), act_word)  # channels: widest lanes, whole words
            pword = min(param_elems, act_word)
            share = unit_share(board.memory.channels, units, wp)
            timing = {"dtype": dtype, **_timing(board, dtype, hz, act_word, share)}
            # each engine reads the fewest of the wp ports that bring its rows as fast as all would (a Winograd
            # engine's rows are 9 or α² lane grids, one in its pointwise mode); fewer than wp: tried already
            probes = {k: probe_of(k, o, i, m, (act_word, wword, pword), taps=u)
                      for k, (o, i, m, _, u) in by_kind.items()}
            ports = {k: weight_reads(e.out_lanes * e.lane_sums, wword, wp, (1,) if k != "winograd" else
                                     (e.row_grids(3), *(e.row_grids(1),) * e.pointwise),
                                     (e.row_grids(3),) if k == "winograd" else ()) for k, e in probes.items()}
            if max(ports.values()) != wp:
                continue
            options = [engine_options(kind, *by_kind[kind], block, (act_word, wword, pword), timing, ports[kind])
                       for kind in kinds]
            base = kernel_base(kernel_buffers(8 * itemsize * act_word, 8 * itemsize * wword, 32 * pword, wp, beats,
                                              a_ports))
            found += _combinations(options, base, caps, block, act_word, timing, first + len(found))
        return found

    def floor(by_kind: dict[str, tuple[Any, ...]]) -> float:
        """Cycles no design of these lanes can beat: each layer's ``compute_floor`` on the fastest engine that may
        take it, its channels unpadded (a block only pads them further)."""
        least: dict[int, float] = {}
        for kind, (o, i, m, d, u) in by_kind.items():
            probe = probe_of(kind, o, i, m, (1, 1, 1), transform_dsp=d, taps=u)
            for n, (s, count) in enumerate(layers):
                if s.engine == kind or (choose and kind == "grid" and s.engine == "winograd"):
                    cycles = count * compute_floor(probe, padded(replace(s, engine=kind), 1, i)[0])
                    least[n] = min(least.get(n, math.inf), cycles)
        return sum(least.values())

    def fastest(found: list[tuple[Any, ...]], best: NetworkDesign | None) -> NetworkDesign | None:
        """The design of least latency among ``found`` (in their order, the first where several tie) and
        ``best``."""
        for cycles, _, block, act_word, combo, chosen, res, timing in sorted(found, key=lambda c: c[:2]):
            if best is not None and cycles / hz >= best.latency_s:  # the clock only falls from the target: no later
                break  # candidate, slower at the target, can be faster
            engines = {k: c[1] for k, c in zip(kinds, combo, strict=True)}
            achieved = achieved_mhz(board, clock, engines, res)
            if best is not None:  # its PE loops alone at the clock it closes at (a design over SLRs: far below)
                least = sum(p.count * compute_floor(engines[p.layer.engine], p.layer) for p in chosen.values())
                if least / (achieved * 1e6) >= best.latency_s:
                    continue
            design = _design(board, dtype, block, act_word, engines, list(chosen.values()), res, clock, achieved,
                             timing)
            if best is None or design.latency_s < best.latency_s:
                best = design
        return best

    # the lanes whose floors are least first, for a design to bound the others by (``SEED_LANES`` that fit), then
    # every lane choice in turn but those whose floor at the target clock is past that design's latency: none of
    # them can be faster (a design's latency is its cycles at a clock no faster than the target)
    choices = [dict(zip(kinds, c, strict=True)) for c in itertools.product(*(lane_sets[k] for k in kinds))]
    floors = [floor(c) for c in choices]
    seed: NetworkDesign | None = None
    seeds: set[int] = set()  # (scored whatever their floors: the bound never takes its own design away)
    for n in sorted(range(len(choices)), key=floors.__getitem__):
        if len(seeds) == SEED_LANES or seed is not None and floors[n] / hz > seed.latency_s:
            break
        if found := gather(choices[n], 0):
            seeds.add(n)
            seed = fastest(found, seed)
    candidates: list[tuple[Any, ...]] = []
    passed = 0
    for n, (by_kind, least) in enumerate(zip(choices, floors, strict=True)):
        if seed is None or n in seeds or least / hz <= seed.latency_s:
            candidates += gather(by_kind, len(candidates))
        else:
            passed += 1
    # (the seed's own, should the break in ``fastest`` have stopped short of it: that break takes a design's
    # latency to be no less than its cycles at the target clock, and a float engine's cores are a stage shallower
    # where the clock falls past ``DEEPER_CORES_ABOVE_MHZ``)
    best = fastest(candidates, None)
    if seed is not None and (best is None or seed.latency_s < best.latency_s):
        best = seed
    if best is None:
        sides, forced = [v for k in kinds for v in lanes[k]], (f" and a word of {word} activations" if word else "")
        if min(weight_ports) > 1:  # no engine's row register takes so many words a cycle (or none fits)
            forced += f" reading {' or '.join(map(str, weight_ports))} weight ports at once"
        streams = "its read streams" if units == 1 else (
            f"the read streams of {units} compute units, {read_streams(1, 1)} or more each,")
        forced += f" ({streams} on {board.memory.axi_ports} AXI ports at most)" if over_ports else ""
        raise HeteroDSEError(f"no network kernel of {min(sides)}–{max(sides)} lanes a side{forced} fits {board.name} "
                             "with every layer on it")
    best.candidates, best.passed_over = tried, passed
    best.layers.sort(key=lambda p: [s for s, _ in layers].index(p.shape))
    return best


def _combinations(options: list[list[_Option]], fixed: np.ndarray, caps: np.ndarray, block: int, word: int,
                  timing: dict[str, Any], first: int) -> list[tuple[Any, ...]]:
    """Every combination of the engines' options that fits with the kernel's ``fixed`` part: its cycles at the
    target clock, an index from ``first`` (ties keep the order found), and what ``_design`` takes of it."""
    found = []
    for combo in itertools.product(*options):
        res = fixed + sum(c[3] for c in combo)
        if np.any(res > caps):
            continue
        chosen: dict[int, PlacedLayer] = {}  # each layer on its fastest engine (one, unless choosing)
        for c in combo:
            for i, p in c[2]:
                if i not in chosen or p.cycles < chosen[i].cycles:
                    chosen[i] = p
        cycles = sum(p.count * p.cycles for p in chosen.values())
        found.append((cycles, first + len(found), block, word, combo, chosen, res, timing))
    return found


def _design(board: Board, dtype: str, block: int, word: int, engines: dict[str, EngineShape],
            placed: list[PlacedLayer], res: np.ndarray, clock: float, achieved: float, timing: dict[str, Any]
            ) -> NetworkDesign:
    """The design at the clock it closes at, ``achieved`` (``achieved_mhz``: derated by the input broadcast's
    fan-out and the SLRs it spans); each layer's cycles again at that clock (DDR floors are times)."""
    again = {**timing, "clock_hz": achieved * 1e6}
    layers, tkey = [], timing_key(again)
    for p in placed:
        cycles = placed_cycles(engines[p.layer.engine], p.layer, p.tiles, p.shape.residual, again, achieved, tkey)
        layers.append(PlacedLayer(p.shape, p.count, p.layer, p.im2col, p.tiles, cycles))
    return NetworkDesign(board, dtype, block, word, engines, layers,
                         {k: float(v) for k, v in zip(RESOURCE_KINDS, res, strict=True)}, clock, achieved,
                         timing=timing)
