"""Each layer's tiles on an engine of the shared network kernel (``fpga_network_design``): every tile the explorer
tries, scored by the model of the kernel's loops (``fpga_network``), and the fastest of them that fits each size
of the engine's buffers, which is all the explorer takes of them. A search keeps these choices while it runs
(``keeping_choices``): the same layer on the same engine at the same timing recurs across the other engines' lanes,
the activations' words and the compute units' counts."""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from cost_models.fpga_network import EngineShape, NetLayer, Tiles, layer_cycles, network_trips
from cost_models.fpga_network_depths import compute_depth
from cost_models.fpga_network_tiles import tile_options
from cost_models.fpga_winograd import transform_depth, weight_transform_depth

__all__ = ["IN_ROWS", "OUT_ROWS", "SIZES", "W_ROWS", "Choices", "keeping_choices", "layer_choices", "pipeline_depths",
           "placed_cycles", "tile_table", "timing_key"]

#: rows each buffer may have (a BRAM18K is 512 deep at 32 bits: fewer rows waste its depth); the weights are no
#: buffer (a FIFO of rows), so any number of weight rows a step fits
IN_ROWS = (512, 1024, 2048, 4096, 8192)
W_ROWS = (1 << 30,)
OUT_ROWS = (256, 512, 1024, 2048, 4096)


@functools.cache
def pipeline_depths(engine: EngineShape, dtype: str, clock_mhz: float) -> dict[str, int]:
    """The depths of the engine's compute loop and (Winograd) transform loops, as ``layer_cycles`` takes them."""
    # an engine that transforms its weights does so as its PE loop takes a row: stages before the products; a box
    # read at latency 2 (``box_latency``) a stage more
    w_depth = weight_transform_depth(engine.tile) if engine.w_transform else 0
    box = engine.box_latency - 1
    return {"depth": compute_depth(dtype, clock_mhz, engine.lane_sums, engine.chain) + w_depth + box,
            "transform_depth": transform_depth(engine.tile, dtype, clock_mhz) if engine.tile else 0}


def _tile_grid(extents: tuple[int, int, int, int], lanes: tuple[int, int], patch: int, grid: bool
               ) -> dict[str, np.ndarray]:
    """Every tile (tk, tc, th, tw) of a layer of ``extents`` (K, C, OH, OW), as arrays (read only: shared, while a
    search runs, by every engine of these lanes); ``lanes``: the multiples its channel tiles take, output's and
    input's."""
    key = (extents, lanes, patch, grid)
    if _GRIDS is not None and key in _GRIDS:
        return _GRIDS[key]
    k, c, oh, ow = extents
    tk = tile_options(k, lanes[0]) if grid else [0]
    g = np.meshgrid(np.array(tk), np.array(tile_options(c, lanes[1])), np.array(tile_options(oh, multiple=patch)),
                    np.array(tile_options(ow, multiple=patch)), indexing="ij")
    t = {name: v.ravel() for name, v in zip(("tk", "tc", "th", "tw"), g, strict=True)}
    if not grid:
        t["tk"] = t["tc"]
    for v in t.values():
        v.setflags(write=False)
    if _GRIDS is not None:
        _GRIDS[key] = t
    return t


def _cycles(engine: EngineShape, layer: NetLayer, t: dict[str, np.ndarray], residual: bool, timing: dict[str, Any],
            clock_mhz: float) -> np.ndarray:
    """``layer_cycles`` of tiles ``t`` at ``timing`` (its clock ``clock_mhz``), the engine's pipeline as deep as
    its cores are at that clock."""
    return layer_cycles(engine, layer, t, residual=residual, **pipeline_depths(engine, timing["dtype"], clock_mhz),
                        **{k: v for k, v in timing.items() if k != "dtype"})


def tile_table(engine: EngineShape, layer: NetLayer, timing: dict[str, Any], residual: bool = False
               ) -> dict[str, np.ndarray]:
    """Every tile of ``layer`` on the engine's lanes: its cycles and the rows of each buffer it fills."""
    grid = engine.kind != "depthwise"
    # channel tiles are whole lane groups and whole words (a Winograd engine's word may hold several groups)
    lanes = (math.lcm(engine.out_lanes, engine.word) if grid else 0,
             math.lcm(engine.in_lanes if grid else engine.out_lanes, engine.word))
    m = engine.tile if engine.kind == "winograd" and layer.R > 1 else 1  # Winograd's tiles are whole patches
    t = _tile_grid((layer.K, layer.C, layer.OH, layer.OW), lanes, m, grid)
    rows = network_trips(engine, layer, Tiles(t["tk"], t["tc"], t["th"], t["tw"]))
    cycles = _cycles(engine, layer, t, residual, timing, timing["clock_hz"] / 1e6)
    return {**t, "cycles": cycles, **{k: rows.get(k, rows["out_rows"]) for k in ("in_rows", "w_rows", "out_rows",
                                                                                 "tile_rows")}}


#: every buffer size the explorer builds (input rows, weight rows, output rows), each a row
SIZES = np.array(list(itertools.product(IN_ROWS, W_ROWS, OUT_ROWS)))
#: the best tiles of a layer in each of ``SIZES`` on an engine, while one search runs (``keeping_choices``): the
#: same layer on the same engine and timing recurs across the other engines' lanes, the words and the compute
#: units' counts (half of ResNet-18's tables on ZCU102, three in five of MobileNet-V2's on vu9p); None outside a
#: search, so nothing is kept from one to the next
_CHOICES: dict[tuple[Any, ...], Choices] | None = None
#: every tile of a layer's extents on lanes of these multiples, and a placed layer's cycles at a design's clock
#: (``placed_cycles``), while one search runs (as ``_CHOICES``)
_GRIDS: dict[tuple[Any, ...], dict[str, np.ndarray]] | None = None
_CYCLES: dict[tuple[Any, ...], float] | None = None


@dataclass(frozen=True)
class Choices:
    """A layer's fastest tiles that fit each buffer size of ``SIZES`` (the first where no tile fits: ``fits`` is
    False there), their cycles, the rows they fill (input, weight, output, the Winograd output tile's) and the
    tiles (tk, tc, th, tw)."""

    fits: np.ndarray
    cycles: np.ndarray
    rows: np.ndarray
    tiles: np.ndarray


def timing_key(timing: dict[str, Any]) -> tuple[Any, ...]:
    """``timing`` as ``layer_choices`` keeps its choices by (its items, in order)."""
    return tuple(sorted(timing.items()))


def layer_choices(engine: EngineShape, layer: NetLayer, timing: dict[str, Any], residual: bool = False,
                  key: tuple[Any, ...] | None = None) -> Choices:
    """``tile_table`` reduced to the tiles the explorer can take: the fastest that fits each buffer size;
    ``key``: ``timing_key(timing)``, where the caller has it."""
    key = (engine, layer, key or timing_key(timing), residual)
    if _CHOICES is not None and key in _CHOICES:
        return _CHOICES[key]
    tab = tile_table(engine, layer, timing, residual)
    fits = ((tab["in_rows"] <= SIZES[:, :1]) & (tab["w_rows"] <= SIZES[:, 1:2])
            & (tab["out_rows"] <= SIZES[:, 2:]))
    j = np.argmin(np.where(fits, tab["cycles"], np.inf), axis=1)
    found = Choices(fits.any(axis=1), tab["cycles"][j],
                    np.stack([tab[r][j] for r in ("in_rows", "w_rows", "out_rows", "tile_rows")], axis=1),
                    np.stack([tab[k][j] for k in ("tk", "tc", "th", "tw")], axis=1))
    for v in (found.fits, found.cycles, found.rows, found.tiles):
        v.setflags(write=False)  # shared by every engine option that takes the layer, while the search runs
    if _CHOICES is not None:
        _CHOICES[key] = found
    return found


def placed_cycles(engine: EngineShape, layer: NetLayer, tiles: Tiles, residual: bool, timing: dict[str, Any],
                  clock_mhz: float, key: tuple[Any, ...] | None = None) -> float:
    """The cycles of ``layer`` in these tiles on the engine at ``timing``'s clock, ``clock_mhz`` (a design's, which
    it closes at): kept while a search runs, as ``layer_choices`` (a layer on an engine a candidate shares with
    others is the same at the same clock, and the clocks candidates close at are few); ``key``:
    ``timing_key(timing)``, where the caller has it."""
    key = (engine, layer, tiles, residual, key or timing_key(timing), clock_mhz)
    if _CYCLES is not None and key in _CYCLES:
        return _CYCLES[key]
    cycles = float(_cycles(engine, layer, {k: np.array([v]) for k, v in tiles.__dict__.items()}, residual, timing,
                           clock_mhz)[0])
    if _CYCLES is not None:
        _CYCLES[key] = cycles
    return cycles


@contextlib.contextmanager
def _choices_kept() -> Iterator[None]:
    """Keep each layer's choices while the search inside runs (the outermost, where searches nest)."""
    global _CHOICES, _GRIDS, _CYCLES
    if _CHOICES is not None:
        yield
        return
    _CHOICES, _GRIDS, _CYCLES = {}, {}, {}
    try:
        yield
    finally:
        _CHOICES = _GRIDS = _CYCLES = None


_Search = TypeVar("_Search", bound=Callable[..., Any])


def keeping_choices(search: _Search) -> _Search:
    """``search``, each layer's choices kept while it runs (``_CHOICES``) and dropped when it returns."""
    @functools.wraps(search)
    def kept(*args: Any, **kwargs: Any) -> Any:
        with _choices_kept():
            return search(*args, **kwargs)
    return kept  # type: ignore[return-value]


