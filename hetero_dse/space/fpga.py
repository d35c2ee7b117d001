"""The FPGA design space of an operator, generated from its analysis (FlexTensor Table 2, §4.2, Figure 4c).

The accelerator is always the three-stage read/compute/write pipeline over tiles of the main node's
loops (a fixed decision for FPGA, FlexTensor §4.2). Its knobs:

* ``tile.<loop>``: the buffer knob, the tile extent of every loop. Divisors of the extent (divisible
  splits), plus powers of two whose last tile wastes at most ``padding_waste`` of the loop (the padding
  rule: the last tile is zero-filled on read and clipped on write, so prime extents such as 7 or 13 still
  get tiles). Small window loops (a reduce loop of at most ``window_limit`` iterations sliding with a
  spatial loop, e.g. a 3×3 kernel) are never split.
* ``unroll.<loop>``: the PE array. A divisor of the loop's tile; #PE is the product. At most
  ``max_unrolled_loops`` loops are unrolled and no two unrolled loops index the same dimension of a
  buffer, so every PE reads its own bank of a cyclically partitioned buffer (the partition knob follows
  from the unroll: factor and dimension per buffer are derived, not searched). Every bank a PE reads
  must be fixed at compile time: where a dimension is partitioned by ``c·u`` for its unrolled loop, every
  other loop that moves along it inside the tile must step by a multiple of that factor. A sliding window
  (``i + rx`` with ``i`` unrolled and ``rx`` walked by the pipeline) would pick banks at run time, which
  Vitis answers with muxes and a higher II ("limited memory ports"). An input whose only unrolled
  dimension slides so is partitioned completely along it and read whole into registers each iteration,
  each lane picking its element there (a register window); any other sliding access is not in the space.
  The write process moves whole port words, so the innermost output tile is a whole number of words or
  the whole extent: a word two tiles shared would be written by both.
* ``order``: the order of the spatial tile loops (reduce tile loops are always innermost, so an output
  tile stays on chip until it is complete). It decides which input tiles are reused between tiles.
* ``dtype`` and ``clock_mhz``: chosen by the user (one or several values each).

The initiation interval is not a knob: it is the lowest the compute loop nest allows (see
``cost_models.fpga``), and the generated code asks for exactly that.

Points are encoded as integer rows (one column per knob, the index of the value) so that the model can
score millions of them at once with numpy.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from functools import cached_property
from math import prod

import numpy as np

from hetero_dse.analysis.window import conv_window
from hetero_dse.analysis import Access, Analysis, Loop, dtype_bytes
from hetero_dse.hardware.board import Board
from hetero_dse.ops._common import accumulator
from hetero_dse.space.base import SpaceError, divisors
from hetero_dse.space.encoding import row_keys
from hetero_dse.space.fpga_knobs import AccessGeometry, SpaceOptions, fixed_lane_tiles, tile_candidates
from hetero_dse.space.fpga_tables import FpgaTables, padded_table
from hetero_dse.space.point import Point
from hetero_dse.space.rearrange import Knob, Neighbourhood, nearest_factors, nearest_valid, random_neighbours

__all__ = ["FpgaSpace", "SpaceError", "SpaceOptions", "divisors", "tile_candidates"]


class FpgaSpace:
    """Every three-stage accelerator for one operator on one board (see the module docstring)."""

    def __init__(self, analysis: Analysis, board: Board, dtypes: Sequence[str], clocks_mhz: Sequence[float],
                 options: SpaceOptions | None = None) -> None:
        if not dtypes:
            raise SpaceError("the FPGA space needs at least one data type")
        if not clocks_mhz:
            raise SpaceError("the FPGA space needs at least one clock target")
        self.analysis = analysis
        self.board = board
        self.options = options or SpaceOptions()
        self.dtypes = tuple(dtypes)
        self.clocks_mhz = tuple(float(c) for c in clocks_mhz)
        main = analysis.main
        self.loops: tuple[Loop, ...] = main.loops
        self.loop_names = tuple(lp.name for lp in self.loops)
        self.extents = np.array([lp.extent for lp in self.loops], dtype=np.int64)
        self.is_reduce = np.array([lp.kind == "reduce" for lp in self.loops])
        self.num_spatial = len(main.spatial)
        self.window = conv_window(analysis)

        self.reads = tuple(self._geometry(a) for a in analysis.reads)
        self.write = self._geometry(analysis.write)

        window_loops = set(self.window.window_loops) if self.window else set()
        pe = dict(self.options.pe)
        if unknown := set(pe) - set(self.loop_names):
            raise SpaceError(f"the PE array unrolls {', '.join(sorted(unknown))}, which {analysis.main.name} "
                             f"does not have (its loops: {', '.join(self.loop_names)})")
        self.tile_values: list[np.ndarray] = []
        self.unroll_values: list[np.ndarray] = []
        for lp in self.loops:
            if lp.name in pe:
                tiles = fixed_lane_tiles(lp.extent, pe[lp.name], self.options.padding_waste)
            elif lp.name in window_loops and lp.extent <= self.options.window_limit:
                tiles = [lp.extent]
            else:
                tiles = tile_candidates(lp.extent, self.options.padding_waste)
            self.tile_values.append(np.array(tiles, dtype=np.int64))
            unrolls = [pe[lp.name]] if lp.name in pe else [1] if pe else sorted({d for t in tiles for d in divisors(t)})
            self.unroll_values.append(np.array(unrolls, dtype=np.int64))

        # Orders permute only the spatial loops that can have more than one tile; the others keep their place.
        movable = [i for i in range(self.num_spatial) if self.extents[i] > 1]
        self.orders: list[tuple[str, ...]] = []
        positions = []
        for perm in itertools.permutations(movable):
            seq = list(range(self.num_spatial))
            for slot, loop in zip(movable, perm, strict=True):
                seq[slot] = loop
            self.orders.append(tuple(self.loop_names[i] for i in seq))
            pos = np.empty(len(self.loops), dtype=np.int64)
            pos[seq] = np.arange(self.num_spatial)
            pos[self.num_spatial:] = np.arange(self.num_spatial, len(self.loops))
            positions.append(pos)
        self.order_positions = np.array(positions, dtype=np.int64)  # (orders, loops): tile-loop level of each loop

        n = len(self.loops)
        self.knob_names = ([f"tile.{x}" for x in self.loop_names] + [f"unroll.{x}" for x in self.loop_names]
                           + ["order", "dtype", "clock_mhz"])
        self.cardinalities = np.array([len(v) for v in self.tile_values] + [len(v) for v in self.unroll_values]
                                      + [len(self.orders), len(self.dtypes), len(self.clocks_mhz)], dtype=np.int64)
        self.col_tile = slice(0, n)
        self.col_unroll = slice(n, 2 * n)
        self.col_order, self.col_dtype, self.col_clock = 2 * n, 2 * n + 1, 2 * n + 2
        # For the one-unrolled-loop-per-buffer-dimension rule: which loops index each buffer dimension.
        self._dim_masks = [(g.coef != 0).astype(np.int64) for g in (*self.reads, self.write)]
        # The output's elements per port word, per data type, and the loop of its innermost dimension.
        self._out_word = np.array([board.memory.port_bits // (8 * dtype_bytes(accumulator(d))) for d in self.dtypes])
        self._out_inner = self.loop_names.index(self.write.access.indices[-1].loops[0])
        inner_tiles = self.tile_values[self._out_inner]
        self._out_whole = [np.flatnonzero((inner_tiles % w == 0) | (inner_tiles >= self.extents[self._out_inner]))
                           for w in self._out_word]

    @cached_property
    def tables(self) -> FpgaTables:
        """The space as the value tables a cost model scores rows from."""
        return FpgaTables(self.analysis, self.board, self.dtypes, self.clocks_mhz, self.loop_names, self.num_spatial,
                          self.extents, padded_table(self.tile_values), padded_table(self.unroll_values),
                          self.order_positions, self.reads, self.write)

    # ----------------------------------------------------------------------------------------- geometry
    def _geometry(self, access: Access) -> AccessGeometry:
        coef = np.zeros((len(access.indices), len(self.loops)), dtype=np.int64)
        for d, index in enumerate(access.indices):
            for name, c in index.terms:
                coef[d, self.loop_names.index(name)] = c
        return AccessGeometry(access, coef, access.shape, (coef != 0).any(axis=0))

    # ------------------------------------------------------------------------------------------ decoding
    @property
    def num_knobs(self) -> int:
        return len(self.cardinalities)

    @property
    def size(self) -> int:
        """Points in the cartesian product of the knobs (before the validity rules)."""
        return int(prod(int(c) for c in self.cardinalities))

    def keys(self, rows: np.ndarray) -> np.ndarray:
        """One integer per row, equal for equal rows."""
        return row_keys(rows, self.cardinalities)

    def tiles(self, rows: np.ndarray) -> np.ndarray:
        return np.stack([self.tile_values[i][rows[:, i]] for i in range(len(self.loops))], axis=1)

    def unrolls(self, rows: np.ndarray) -> np.ndarray:
        n = len(self.loops)
        return np.stack([self.unroll_values[i][rows[:, n + i]] for i in range(n)], axis=1)

    def valid(self, rows: np.ndarray) -> np.ndarray:
        """Which encoded rows obey the space's rules (unroll divides tile, unroll limits, pruning)."""
        rows = np.atleast_2d(rows)
        in_range = ((rows >= 0) & (rows < self.cardinalities)).all(axis=1)
        rows = np.where(in_range[:, None], rows, 0)
        t, u = self.tiles(rows), self.unrolls(rows)
        ok = in_range & (t % u == 0).all(axis=1)
        unrolled = (u > 1).astype(np.int64)
        ok &= unrolled.sum(axis=1) <= self.options.max_unrolled_loops
        for mask in self._dim_masks:
            ok &= ((unrolled @ mask.T) <= 1).all(axis=1)
        ok &= self._static_banks(t, u)
        ok &= self._whole_output_words(t, rows)
        if self.options.io_optimal and self.window is not None:
            ok &= self._io_optimal(t)
        return ok

    def _static_banks(self, t: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Whether every PE's bank of every buffer is known at compile time (see the module docstring).

        Along a dimension indexed ``Σ c_l·l``, cyclically partitioned by ``f = min(c·u, width)`` for its
        unrolled loop, lane ``l_u`` reads bank ``(c·l_u + Σ c_l'·l'_local) mod f``: fixed when every other
        loop ``l'`` that moves inside the tile (tile > 1) has ``c_l'`` a multiple of ``f``. Otherwise (a
        sliding window) an input whose only unrolled dimension this is reads it whole into registers each
        iteration (see ``cost_models.fpga_pe_array.partition_box``); any other buffer is refused.
        """
        ok = np.ones(len(t), dtype=bool)
        unrolled = u > 1
        for g in (*self.reads, self.write):
            coef = np.abs(g.coef)
            # buffers with one unrolled dimension may window it
            unrolled_dims = (unrolled[:, None, :] & (coef[None, :, :] != 0)).any(axis=2).sum(axis=1)
            may_window = (unrolled_dims <= 1) if g is not self.write else np.zeros(len(t), dtype=bool)
            for d in range(coef.shape[0]):
                loops = np.flatnonzero(coef[d])
                if len(loops) < 2:
                    continue
                width = 1 + ((t[:, loops] - 1) * coef[d, loops]).sum(axis=1)
                factor = np.prod(np.where(u[:, loops] > 1, coef[d, loops] * u[:, loops], 1), axis=1)
                factor = np.minimum(factor, width)
                static = np.ones(len(t), dtype=bool)
                for lp in loops:
                    moves = (u[:, lp] == 1) & (t[:, lp] > 1)
                    static &= ~moves | (coef[d, lp] % factor == 0)
                ok &= static | may_window
        return ok

    def _whole_output_words(self, t: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Whether every output tile starts on a port word: the write process writes whole words, and a
        word shared by two tiles would be written by both (see ``cost_models.transfer``)."""
        lp = self._out_inner
        word = self._out_word[rows[:, self.col_dtype]]
        return (t[:, lp] % word == 0) | (t[:, lp] >= self.extents[lp])

    def _io_optimal(self, t: np.ndarray) -> np.ndarray:
        """Seed 001's optimality condition x·y = R·z (within a factor ``io_slack``) for the output tile."""
        w = self.window
        xy = np.prod(t[:, [self.loop_names.index(x) for x in w.output_loops]], axis=1)
        z = np.prod(t[:, [self.loop_names.index(x) for x in w.channel_loops]], axis=1) if w.channel_loops else 1
        ratio = xy / (w.ratio * z)
        return (ratio <= self.options.io_slack) & (ratio >= 1 / self.options.io_slack)

    def decode(self, row: Sequence[int] | np.ndarray) -> Point:
        row = np.asarray(row, dtype=np.int64)
        if not self.valid(row[None, :])[0]:
            raise SpaceError(f"encoded row {row.tolist()} is not a valid point of the space")
        n = len(self.loops)
        knobs: dict[str, object] = {}
        for i, name in enumerate(self.loop_names):
            knobs[f"tile.{name}"] = int(self.tile_values[i][row[i]])
        for i, name in enumerate(self.loop_names):
            knobs[f"unroll.{name}"] = int(self.unroll_values[i][row[n + i]])
        knobs["order"] = self.orders[row[self.col_order]]
        knobs["dtype"] = self.dtypes[row[self.col_dtype]]
        knobs["clock_mhz"] = self.clocks_mhz[row[self.col_clock]]
        return Point(knobs)

    def encode(self, point: Point) -> np.ndarray:
        """The row of ``point``; a point outside the space raises :class:`SpaceError` naming the knob."""
        row = np.empty(self.num_knobs, dtype=np.int64)
        n = len(self.loops)

        def index_of(knob: str, values: Sequence[object]) -> int:
            try:
                value = point[knob]
            except KeyError:
                raise SpaceError(f"the point has no knob {knob!r}") from None
            for i, v in enumerate(values):
                if v == value:
                    return i
            raise SpaceError(f"knob {knob}={value!r} is not one of its values {list(values)}")

        for i, name in enumerate(self.loop_names):
            row[i] = index_of(f"tile.{name}", self.tile_values[i].tolist())
            row[n + i] = index_of(f"unroll.{name}", self.unroll_values[i].tolist())
        row[self.col_order] = index_of("order", self.orders)
        row[self.col_dtype] = index_of("dtype", self.dtypes)
        row[self.col_clock] = index_of("clock_mhz", self.clocks_mhz)
        if not self.valid(row[None, :])[0]:
            raise SpaceError(f"{point} breaks a rule of the space (unroll must divide tile, at most "
                             f"{self.options.max_unrolled_loops} unrolled loops, one per buffer dimension, every "
                             "bank a PE reads fixed at compile time)")
        return row

    # ----------------------------------------------------------------------------------------- walking
    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """``count`` valid rows: each loop's (tile, unroll) pair drawn uniformly among those whose unroll
        divides the tile (the innermost output tile among those that start every tile on a port word for
        the row's data type), the other knobs uniformly; combinations that break a rule are drawn again."""
        n = len(self.loops)
        out: list[np.ndarray] = []
        have = 0
        for _ in range(1000):
            m = max(count * 2, 64)
            rows = np.empty((m, self.num_knobs), dtype=np.int64)
            for col in (self.col_order, self.col_dtype, self.col_clock):
                rows[:, col] = rng.integers(0, self.cardinalities[col], size=m)
            for i, pairs in enumerate(self.loop_pairs):
                pick = pairs[rng.integers(0, len(pairs), size=m)]
                rows[:, i], rows[:, n + i] = pick[:, 0], pick[:, 1]
            for di, pairs in enumerate(self._out_whole_pairs):
                of_type = np.flatnonzero(rows[:, self.col_dtype] == di)
                if len(pairs) and len(of_type):
                    pick = pairs[rng.integers(0, len(pairs), size=len(of_type))]
                    rows[of_type, self._out_inner], rows[of_type, n + self._out_inner] = pick[:, 0], pick[:, 1]
            keep = rows[self.valid(rows)]
            out.append(keep)
            have += len(keep)
            if have >= count:
                break
        rows = np.concatenate(out)[:count] if out else np.empty((0, self.num_knobs), dtype=np.int64)
        if len(rows) == 0:
            raise SpaceError("could not draw a valid point: the space's rules leave it empty")
        return rows

    @cached_property
    def _out_whole_pairs(self) -> list[np.ndarray]:
        """Per data type, the (tile, unroll) pairs of the innermost output loop whose tile is whole words."""
        pairs = self.loop_pairs[self._out_inner]
        return [pairs[np.isin(pairs[:, 0], allowed)] for allowed in self._out_whole]

    def enumerate(self, chunk: int = 1 << 16) -> Iterator[np.ndarray]:
        """Every valid row, in chunks. Loops' (tile, unroll) pairs are enumerated valid-first."""
        n = len(self.loops)
        pairs = self.loop_pairs
        counts = [len(p) for p in pairs] + [len(self.orders), len(self.dtypes), len(self.clocks_mhz)]
        total = prod(counts)
        for start in range(0, total, chunk):
            flat = np.arange(start, min(total, start + chunk), dtype=np.int64)
            idx = np.unravel_index(flat, counts)
            rows = np.empty((len(flat), self.num_knobs), dtype=np.int64)
            for i in range(n):
                rows[:, i] = pairs[i][idx[i], 0]
                rows[:, n + i] = pairs[i][idx[i], 1]
            rows[:, self.col_order] = idx[n]
            rows[:, self.col_dtype] = idx[n + 1]
            rows[:, self.col_clock] = idx[n + 2]
            yield rows[self.valid(rows)]

    def pruned_size(self) -> int:
        """Upper bound of the valid points: the product of valid (tile, unroll) pairs and the other knobs."""
        total = len(self.orders) * len(self.dtypes) * len(self.clocks_mhz)
        for pairs in self.loop_pairs:
            total *= len(pairs)
        return total

    @cached_property
    def loop_pairs(self) -> list[np.ndarray]:
        """Per loop, the (tile index, unroll index) pairs where the unroll divides the tile: its valid values."""
        return [np.array([(a, b) for a in range(len(t)) for b in range(len(u)) if t[a] % u[b] == 0],
                         dtype=np.int64).reshape(-1, 2)
                for t, u in zip(self.tile_values, self.unroll_values, strict=True)]

    @cached_property
    def neighbourhood(self) -> Neighbourhood:
        """FlexTensor's rearranged directions: each loop's (tile, unroll) pair is one split
        ``[trips, tile/unroll, unroll]``; order, data type and clock move ±1."""
        n = len(self.loops)
        knobs = []
        for i, (name, pairs) in enumerate(zip(self.loop_names, self.loop_pairs, strict=True)):
            tile, unroll = self.tile_values[i][pairs[:, 0]], self.unroll_values[i][pairs[:, 1]]
            factors = np.stack([-(-self.extents[i] // tile), tile // unroll, unroll], axis=1)
            knobs.append(Knob(f"tile.{name}", (i, n + i), pairs, factors))
        for name, col in (("order", self.col_order), ("dtype", self.col_dtype), ("clock_mhz", self.col_clock)):
            knobs.append(Knob.choice(name, col, int(self.cardinalities[col])))
        return Neighbourhood(knobs, self.cardinalities)

    def neighbours(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One random valid neighbour per row along the rearranged directions (the row itself where random
        directions lead nowhere)."""
        return random_neighbours(self, rows, rng, tries=8)

    # ------------------------------------------------------------------------------ other shapes' points
    @property
    def loop_extents(self) -> dict[str, int]:
        return {name: int(e) for name, e in zip(self.loop_names, self.extents, strict=True)}

    @staticmethod
    def parallelism(point: Point) -> dict[str, int]:
        """P(h, k) of seed 002's equation 3 for a design of any shape: the tile of each loop, the work one
        pass of the pipeline does along it (a loop shorter than its tile leaves the rest idle)."""
        return {k.removeprefix("tile."): int(v) for k, v in point.items() if k.startswith("tile.")}

    def default_point(self) -> Point | None:
        return None  # the model scores thousands of designs a millisecond: no hand-written first design needed

    def adapt(self, point: Point) -> np.ndarray | None:
        """The design of this space nearest ``point``, a design of the same operator at other extents: each
        loop's (tile, unroll) pair nearest in log scale among the valid pairs (a tile longer than the new
        loop is clipped to it), the same order, data type and clock where this space has them. None when no
        valid design is that near (see :func:`nearest_valid`)."""
        row = np.zeros(self.num_knobs, dtype=np.int64)
        n = len(self.loops)
        for i, name in enumerate(self.loop_names):
            pairs = self.loop_pairs[i]
            tile = int(point.get(f"tile.{name}", self.extents[i]))
            unroll = int(point.get(f"unroll.{name}", 1))
            have = np.stack([self.tile_values[i][pairs[:, 0]], self.unroll_values[i][pairs[:, 1]]], axis=1)
            best = nearest_factors(np.column_stack([np.ones(len(have)), have]), [1, max(tile, 1), max(unroll, 1)])
            row[i], row[n + i] = pairs[best]
        order = tuple(point.get("order", ()))
        row[self.col_order] = self.orders.index(order) if order in self.orders else 0
        row[self.col_dtype] = self.dtypes.index(point["dtype"]) if point.get("dtype") in self.dtypes else 0
        clock = float(point.get("clock_mhz", self.clocks_mhz[0]))
        row[self.col_clock] = int(np.argmin([abs(c - clock) for c in self.clocks_mhz]))
        return nearest_valid(self, row)
