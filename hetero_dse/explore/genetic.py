"""A plain genetic algorithm (Woodpecker-DL, seed 004, §4: the GA it searches schedules with), over the encoded
space of any target, as an ask/tell explorer.

Each generation after the first (the space's default points, their neighbours and random points, as every explorer's):

1. ``population`` children, each from two parents chosen by **tournament** (the best of ``tournament`` drawn at
   random from the population), by **uniform crossover per knob** (a knob is one decision of the rearranged
   space: a loop's whole split, an FPGA loop's tile and unroll, the order; each taken from either parent) with
   probability ``crossover``, else a copy of the first parent; then, with probability ``mutation``, one move to
   a neighbour along the space's directions (the moves the Q-method walks);
2. a child that breaks a rule of the space (a crossover of two valid points need not be valid) is drawn again,
   up to ``REDRAWS`` times, and is then a neighbour of its first parent, which always is valid; a child measured
   before is drawn again too;
3. the next population is the ``elite`` best of the last one (**elitism**: the best so far is never lost) and
   the best of the children, ``population`` in all.

Unlike the guided GA (``gga``, seed 002), nothing is taken from the history and mutations are random.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore.base import first_round

__all__ = ["GASettings", "GeneticAlgorithm"]

#: draws of a child before it falls back to a neighbour of its first parent
REDRAWS = 8


@dataclass(frozen=True)
class GASettings:
    """The GA's hyper-parameters, in one place (``--starts`` sets the population)."""

    population: int = 64
    elite: int = 4  # the best of a generation kept as they are
    tournament: int = 3  # individuals a parent is the best of
    crossover: float = 0.9  # a child by crossover, else a copy of its first parent
    mutation: float = 0.3  # a child moved to a neighbour afterwards


class GeneticAlgorithm:
    name = "ga"

    def __init__(self, space, seed: int = 0, settings: GASettings = GASettings()) -> None:
        if settings.population < 2:
            raise HeteroDSEError(f"the GA needs a population of at least 2, got {settings.population} (--starts)")
        self.space, self.settings = space, settings
        self.rng = np.random.default_rng(seed)
        self.elite = min(settings.elite, settings.population - 1)
        self.population = np.empty((0, space.num_knobs), dtype=np.int64)
        self.fitness = np.empty(0)  # the population's objective (lower is better)
        self.seen: set[int] = set()
        self.generation = 0

    def propose(self) -> np.ndarray | None:
        if self.generation == 0:
            rows = first_round(self.space, self.settings.population, self.rng)
        else:
            rows = self._children()
        if not len(rows):
            return None
        self.seen.update(self.space.keys(rows).tolist())
        return rows

    def observe(self, rows: np.ndarray, objective: np.ndarray) -> None:
        objective = np.where(np.isfinite(objective), objective, np.inf)
        order = np.argsort(self.fitness, kind="stable")[: self.elite]
        rows_all = np.concatenate([self.population[order], rows])
        fit_all = np.concatenate([self.fitness[order], objective])
        keep = np.argsort(fit_all, kind="stable")[: self.settings.population]
        self.population, self.fitness = rows_all[keep], fit_all[keep]
        self.generation += 1

    # ------------------------------------------------------------------------------------------ children
    def _parents(self, count: int) -> np.ndarray:
        """``count`` tournament winners: each the best of ``tournament`` individuals drawn at random."""
        k = min(self.settings.tournament, len(self.population))
        picks = self.rng.integers(0, len(self.population), size=(count, k))
        return self.population[picks[np.arange(count), np.argmin(self.fitness[picks], axis=1)]]

    def _children(self) -> np.ndarray:
        """A generation's children, drawn as arrays: the search loop scores thousands a second on a model."""
        s, space = self.settings, self.space
        out = np.empty((0, space.num_knobs), dtype=np.int64)
        keys: set[int] = set()
        for _ in range(4):  # rounds of draws; a converged population gets fresh points after them
            need = s.population - len(out)
            if need <= 0:
                break
            first = self._parents(2 * need)  # more than needed: some are dropped as seen before
            child = first.copy()
            pending = np.ones(len(child), dtype=bool)
            for _ in range(REDRAWS):  # a child that breaks a rule of the space is drawn again
                idx = np.flatnonzero(pending)
                if not len(idx):
                    break
                second = self._parents(len(idx))
                draw = first[idx].copy()
                cross = self.rng.random(len(idx)) < s.crossover
                take = (self.rng.random(draw.shape) < 0.5) & cross[:, None]  # uniform crossover per knob
                draw[take] = second[take]
                move = self.rng.random(len(idx)) < s.mutation
                if move.any():
                    draw[move] = space.neighbours(draw[move], self.rng)
                ok = space.valid(draw)
                child[idx[ok]] = draw[ok]
                pending[idx[ok]] = False
            if pending.any():  # a neighbour of a valid point is valid
                child[pending] = space.neighbours(first[pending], self.rng)
            out = np.concatenate([out, self._new(child, keys)])[: s.population]
        if len(out) < s.population:  # the population has converged: fresh points keep the search going
            out = np.concatenate([out, self._new(space.sample(s.population - len(out), self.rng), keys)])
        return out[: s.population]

    def _new(self, rows: np.ndarray, keys: set[int]) -> np.ndarray:
        """``rows`` less those proposed before and repeats, in order."""
        keep = []
        for i, key in enumerate(self.space.keys(rows).tolist()):
            if key not in self.seen and key not in keys:
                keys.add(key)
                keep.append(i)
        return rows[keep]
