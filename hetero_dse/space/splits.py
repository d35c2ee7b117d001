"""What the CPU and GPU schedule spaces share (FlexTensor §4.2, Figure 4a): every loop of the main node split
into divisible factors (a number of levels for spatial loops, another for reduce loops) and a few other knobs,
encoded as integer rows; rejection sampling, FlexTensor's rearranged directions, and the nearest schedule to
one of another shape. A space adds its rules (``violations``) and its draw (``_draw``); it is a value: what
it answers never changes after it is made."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache, cached_property

import numpy as np

from hetero_dse.analysis import Analysis
from hetero_dse.space.base import SpaceError, divisors
from hetero_dse.space.encoding import row_keys
from hetero_dse.space.point import Point
from hetero_dse.space.rearrange import Knob, Neighbourhood, nearest_factors, nearest_valid, random_neighbours

__all__ = ["SplitSpace", "factorizations"]


@cache
def factorizations(extent: int, parts: int) -> tuple[tuple[int, ...], ...]:
    """Every ordered way to write ``extent`` as a product of ``parts`` factors (divisible splits)."""
    if parts == 1:
        return ((extent,),)
    return tuple((d, *rest) for d in divisors(extent) for rest in factorizations(extent // d, parts - 1))


#: the fewest draws a vectorised space's rejection sampling judges before it returns short
MIN_VECTORISED_DRAWS = 131_072


class SplitSpace:
    """The splits of every loop of ``analysis``'s main node (``spatial_levels`` factors for a spatial loop,
    ``reduce_levels`` for a reduce loop) and the knobs ``choices`` (name -> values in encoding order)."""

    #: what the space is, for error messages ("the CPU space")
    kind = "schedule space"
    #: knobs a point may leave out, and the value that means (a point with that value leaves it out: a knob
    #: added to the space keeps the points made before it, and their history, as they were)
    optional: dict[str, object] = {}

    def __init__(self, analysis: Analysis, spatial_levels: int, reduce_levels: int,
                 choices: dict[str, tuple[object, ...]], split_loops: bool = True) -> None:
        self.analysis = analysis
        main = analysis.main
        # a template space (the tensor cores') has no splits of the operator's loops: its knobs are its own
        self.loops = main.loops if split_loops else ()
        self.loop_names = tuple(lp.name for lp in self.loops)
        self.num_spatial = len(main.spatial) if split_loops else 0
        self.levels = (spatial_levels, reduce_levels)
        self.splits = [factorizations(lp.extent, spatial_levels if lp.kind == "spatial" else reduce_levels)
                       for lp in self.loops]
        #: the knobs other than splits, each with its values in encoding order
        self.choices = dict(choices)
        self.knob_names = [f"split.{n}" for n in self.loop_names] + list(self.choices)
        self.cardinalities = np.array([len(s) for s in self.splits] + [len(v) for v in self.choices.values()],
                                      dtype=np.int64)

    def violations(self, point: Point) -> list[str]:
        """Why ``point`` is pruned from the space (empty: it is in)."""
        return []

    def default_point(self) -> Point | None:
        """The schedule an engineer would write first (None: the space has none)."""
        return None

    def _draw(self, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(0, self.cardinalities)

    def _where(self) -> str:
        return f"in the {self.kind}"

    @property
    def num_knobs(self) -> int:
        return len(self.cardinalities)

    @property
    def size(self) -> int:
        return int(np.prod(self.cardinalities.astype(object)))

    def decode(self, row: Sequence[int] | np.ndarray) -> Point:
        row = [int(x) for x in row]
        if len(row) != self.num_knobs or any(not 0 <= x < c for x, c in zip(row, self.cardinalities, strict=True)):
            raise SpaceError(f"encoded row {row} is not a point of the {self.kind}")
        knobs: dict[str, object] = {f"split.{n}": self.splits[i][row[i]] for i, n in enumerate(self.loop_names)}
        for j, (name, values) in enumerate(self.choices.items()):
            value = values[row[len(self.loops) + j]]
            if name not in self.optional or value != self.optional[name]:
                knobs[name] = value
        return Point(knobs)

    def encode(self, point: Point) -> np.ndarray:
        row = np.empty(self.num_knobs, dtype=np.int64)
        for i, name in enumerate(self.loop_names):
            value = tuple(point[f"split.{name}"]) if f"split.{name}" in point else None
            if value not in self.splits[i]:
                raise SpaceError(f"knob split.{name}={value} is not a factorisation of {self.loops[i].extent} into "
                                 f"{len(self.splits[i][0])} factors")
            row[i] = self.splits[i].index(value)
        for j, (name, values) in enumerate(self.choices.items()):
            value = point.get(name, self.optional.get(name))
            if value not in values:
                raise SpaceError(f"knob {name}={value} is not one of {list(values)}")
            row[len(self.loops) + j] = values.index(value)
        return row

    #: rejection sampling's draws per point asked for before it gives up
    draws_per_point = 200

    #: whether ``_valid_rows`` judges whole arrays of rows at once (a space whose rules are array arithmetic);
    #: otherwise every row is decoded into a point and its ``violations`` listed
    vectorised = False

    def _valid_rows(self, rows: np.ndarray) -> np.ndarray:
        """Whether each of ``rows`` (inside the cardinalities) obeys ``violations``: a bool per row."""
        return np.array([not self.violations(self.decode(r)) for r in rows], dtype=bool)

    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """``count`` points of the pruned space (rejection sampling), or fewer where its rules keep so small a
        share that the draws found fewer (ResNet-18's 7×7 layer in seed 001's GPU domain: about 0.06 % of the splits);
        a SpaceError only where they found none."""
        draws = self.draws_per_point * count
        if self.vectorised:  # blocks of draws judged at once: a pool of 2,000 from a domain of 0.3 % in ms
            found, total, done = [], 0, 0
            # short after its draws, a rare domain is drawn on to MIN_VECTORISED_DRAWS (milliseconds more)
            limit = max(draws, MIN_VECTORISED_DRAWS)
            while done < limit:
                end = draws if done < draws else limit
                block = rng.integers(0, self.cardinalities, size=(min(max(64 * count, 4096), end - done),
                                                                  self.num_knobs))
                done += len(block)
                found.append(block[self._valid_rows(block)])
                total += len(found[-1])
                if total >= count:
                    break
            if total:
                return np.concatenate(found)[:count]
            draws = done
        else:
            rows: list[np.ndarray] = []
            for _ in range(draws):
                row = self._draw(rng)
                if not self.violations(self.decode(row)):
                    rows.append(row)
                    if len(rows) == count:
                        break
            if rows:
                return np.array(rows)
        raise SpaceError(f"found no point of {self.analysis.operator} {self._where()} in {draws:,} draws")

    def valid(self, rows: np.ndarray) -> np.ndarray:
        rows = np.atleast_2d(rows)
        inside = ((rows >= 0) & (rows < self.cardinalities)).all(axis=1)
        ok = np.zeros(len(rows), dtype=bool)
        if inside.any():
            ok[inside] = self._valid_rows(rows[inside])
        return ok

    def keys(self, rows: np.ndarray) -> np.ndarray:
        """One integer per row, equal for equal rows."""
        return row_keys(rows, self.cardinalities)

    @cached_property
    def neighbourhood(self) -> Neighbourhood:
        """FlexTensor's rearranged directions: (i, j) moves on each split, ±1 on the other knobs."""
        knobs = [Knob.split(f"split.{n}", i, np.array(self.splits[i])) for i, n in enumerate(self.loop_names)]
        knobs += [Knob.choice(name, len(self.loops) + j, len(values)) for j, (name, values)
                  in enumerate(self.choices.items())]
        return Neighbourhood(knobs, self.cardinalities)

    def neighbours(self, rows: np.ndarray, rng: np.random.Generator, tries: int = 16) -> np.ndarray:
        """One random neighbour per row inside the pruned space, along the rearranged directions (the row
        itself when ``tries`` random directions all leave it)."""
        return random_neighbours(self, rows, rng, tries)

    # ------------------------------------------------------------------------------ other shapes' points
    @property
    def loop_extents(self) -> dict[str, int]:
        return {lp.name: int(lp.extent) for lp in self.loops}

    @staticmethod
    def parallelism(point: Point) -> dict[str, int]:
        """P(h, k) of seed 002's equation 3 for a schedule of any shape: each loop's tile below its outermost
        level (the work of one parallel iteration, or one thread block on a GPU)."""
        return {k.removeprefix("split."): int(np.prod(v[1:])) for k, v in point.items() if k.startswith("split.")}

    def adapt(self, point: Point) -> np.ndarray | None:
        """The schedule of this space nearest ``point``, a schedule of the same operator at other extents:
        each split's inner factors nearest in log scale among this loop's factorisations (re-factored to
        divide the new extent), the other knobs by value where this space has it (the nearest unroll step).
        None when no point of the pruned space is that near (see :func:`nearest_valid`)."""
        row = np.zeros(self.num_knobs, dtype=np.int64)
        for i, name in enumerate(self.loop_names):
            have = np.array(self.splits[i])
            wanted = tuple(point.get(f"split.{name}", ()))
            if len(wanted) == have.shape[1]:
                row[i] = nearest_factors(have, [max(int(f), 1) for f in wanted])
            else:  # a history from other split levels: the whole loop in its outermost level
                row[i] = 0 if have.shape[1] == 1 else int(np.argmax(have[:, 0]))
        for j, (name, values) in enumerate(self.choices.items()):
            value = point.get(name, self.optional.get(name))
            if value in values:
                row[len(self.loops) + j] = values.index(value)
            elif name == "unroll" and isinstance(value, int | float):
                row[len(self.loops) + j] = int(np.argmin([abs(v - value) for v in values]))
        return nearest_valid(self, row)
