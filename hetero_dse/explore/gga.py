"""The guided genetic algorithm of seed 002 (§III-B, Algorithm 1): history-seeded, no random mutation.

A gene is a knob of the rearranged space (a CPU loop's split, an FPGA loop's (tile, unroll) pair, the
order…): changing one gene of a valid point changes one decision and keeps the others. Each generation:

1. the population is measured (the first one: the space's default points, which every explorer's first round
   measures, then the history's best-ranked points adapted to this space, :meth:`Prior.candidates`; the
   registry's ``_gga`` puts them together);
2. the genes that made the ``elites`` best individuals (the one gene each was created by, recorded in
   ``genes``) become **elite genes**;
3. ``population`` children, each by **guided crossover** (two parents drawn with probability proportional
   to their rank; the child is the first with one gene of the second) or by a **guided mutation**: an elite
   gene put into a parent, or an **expertise** mutation (an inner factor of a split set to 2 or 4, to one
   that divides the loop, or to another the space allows — on FPGA the low-waste padded tiles, the only
   ones a prime loop has; another value of a choice knob). No random mutation;
4. the next population is drawn from children and parents in proportion to performance, the best child
   always in.

Four additions to the paper's algorithm, each measured on the pruned layers of ``bench/history_tuners.py``:

* the best individual so far is kept beside the best child: proportional draws among near-equal
  performances otherwise lose it, and the GA forgets its own best;
* one individual per performance value: on a plateau of equally fast points, clones would take over;
* half the expertise moves that change a loop's innermost factor are followed by a **rebalance** that gives
  the change back on other loops (:meth:`_rebalance`);
* a child that breaks a rule of the space (over a limit, two unrolls on one buffer dimension) gets, half the
  time, one more expertise move to repair it, keeping the gene it is recorded with.

Children that were measured before are not proposed; they are drawn again.
"""

from __future__ import annotations

import numpy as np

from hetero_dse.errors import HeteroDSEError
from hetero_dse.space.rearrange import Knob

SMALL_FACTORS = (2, 4)


class GuidedGA:
    """Seed 002's GGA as an ask/tell explorer; ``candidates``: the first population's rows, best first
    (fewer than ``population``, or none, are topped up by expertise mutations or random points).
    ``balance``: the share of expertise moves followed by a rebalance; ``keep_best``: keep the best so far
    in the population (both 0/False: the paper's algorithm, as ``bench/gga_ablation.py`` runs it)."""

    name = "gga"

    def __init__(self, space, seed: int = 0, candidates: np.ndarray | None = None, population: int = 16,
                 elites: int = 8, crossover: float = 0.5, balance: float = 0.5, keep_best: bool = True) -> None:
        if population < 2:
            raise HeteroDSEError(f"the guided GA needs a population of at least 2, got {population} (--starts)")
        self.space = space
        self.hood = space.neighbourhood
        self.rng = np.random.default_rng(seed)
        self.size, self.elites, self.crossover, self.balance = population, elites, crossover, balance
        self.keep_best = keep_best  # False: the paper's selection, the best child only (for comparison)
        self.candidates = np.empty((0, space.num_knobs), dtype=np.int64) if candidates is None else candidates
        self.visited: set[int] = set()
        #: the gene (knob index, value id) each child was made by: Algorithm 1's ``Genes``
        self.genes: dict[int, tuple[int, int]] = {}
        #: knob index -> value ids that made elite individuals: ``EliteGenes``
        self.elite_genes: dict[int, set[int]] = {}
        self.population = np.empty((0, space.num_knobs), dtype=np.int64)
        self.fitness = np.empty(0)  # objective of the population (lower is better)
        self.generation = 0
        self._expert = [self._expert_values(k) for k in self.hood.knobs]

    # ------------------------------------------------------------------------------------------ ask
    def propose(self) -> np.ndarray | None:
        rows = self._first_population() if self.generation == 0 else self._offspring()
        return rows if len(rows) else None

    def _first_population(self) -> np.ndarray:
        rows = self._unvisited(self.candidates)[: self.size]
        tries = 0
        while len(rows) < self.size and tries < 20 * self.size:
            tries += 1
            if len(rows):  # an expertise mutation of a history point keeps most of what made it fast
                parent = rows[self.rng.integers(0, min(len(rows), self.elites))]
                child, _ = self._expertise(parent)
            else:
                child = self.space.sample(1, self.rng)[0]
            if child is not None and self._admit(child):
                rows = np.vstack([rows, child])
        for row in rows:
            self.visited.add(self._key(row))
        return rows

    def _offspring(self) -> np.ndarray:
        children: list[np.ndarray] = []
        for _ in range(50 * self.size):
            if len(children) == self.size:
                break
            if self.rng.random() < self.crossover and len(self.population) > 1:
                child, gene = self._crossover()
            elif self.elite_genes and self.rng.random() < 0.5:
                child, gene = self._elite_mutation(self._parent())
            else:
                child, gene = self._expertise(self._parent())
            if child is not None and not self._admit(child) and self.rng.random() < 0.5:
                # a change that breaks a rule (over a limit, a clash of unrolls) often needs a second one to
                # be valid: an expertise move on the child, its first gene still the one recorded
                child, _ = self._expertise(child)
            if child is not None and self._admit(child):
                key = self._key(child)
                self.visited.add(key)
                self.genes[key] = gene
                children.append(child)
        return np.array(children, dtype=np.int64).reshape(-1, self.space.num_knobs)

    # --------------------------------------------------------------------------------- operators
    def _rank_probabilities(self) -> np.ndarray:
        """The fitness of crossover: the rank, best highest (failed individuals never parents)."""
        ok = np.isfinite(self.fitness)
        ranks = np.empty(len(self.fitness))
        ranks[np.argsort(self.fitness, kind="stable")] = np.arange(len(self.fitness), 0, -1)
        weight = np.where(ok, ranks, 0.0)
        if weight.sum() == 0:
            weight = np.ones(len(self.fitness))
        return weight / weight.sum()

    def _parent(self) -> np.ndarray:
        return self.population[self.rng.choice(len(self.population), p=self._rank_probabilities())]

    def _crossover(self) -> tuple[np.ndarray | None, tuple[int, int]]:
        """Guided crossover: parents by rank; the first parent with one gene of the second, recorded."""
        a, b = self.rng.choice(len(self.population), size=2, replace=False, p=self._rank_probabilities())
        ids = self.hood.value_ids(self.population[[a, b]])
        differ = np.flatnonzero((ids[0] != ids[1]) & (ids[1] >= 0))
        if not len(differ):
            return None, (-1, -1)
        k = int(self.rng.choice(differ))
        return self._with(self.population[a], k, int(ids[1, k])), (k, int(ids[1, k]))

    def _elite_mutation(self, parent: np.ndarray) -> tuple[np.ndarray | None, tuple[int, int]]:
        """An elite gene put into ``parent``."""
        k = int(self.rng.choice(sorted(self.elite_genes)))
        v = int(self.rng.choice(sorted(self.elite_genes[k])))
        return self._with(parent, k, v), (k, v)

    def _expertise(self, parent: np.ndarray) -> tuple[np.ndarray | None, tuple[int, int]]:
        """An expert's move on one gene of ``parent``: an inner factor of a split set to 2 or 4, to a divisor of
        the loop, or to another factor the space allows (the rest of the split as near as can be), or another
        value of a choice knob."""
        movable = [k for k, knob in enumerate(self.hood.knobs) if len(knob.values) > 1]
        if not movable:
            return None, (-1, -1)
        k = int(self.rng.choice(movable))
        knob = self.hood.knobs[k]
        current = int(self.hood.value_ids(parent[None, :])[0, k])
        if knob.factors is None:
            others = [v for v in range(len(knob.values)) if v != current]
            v = int(self.rng.choice(others))
            return self._with(parent, k, v), (k, v)
        factors = knob.factors
        position = int(self.rng.integers(1, factors.shape[1])) if factors.shape[1] > 1 else 0
        # the new factor: 2 or 4, one that divides the loop, or any the space offers (on FPGA its padded tiles
        # are powers of two wasting little, the only tiles a prime loop has besides 1 and itself)
        pick = self.rng.integers(0, 3)
        pool = np.arange(len(factors))
        if pick == 0:
            pool = pool[np.isin(factors[:, position], SMALL_FACTORS)]
        elif pick == 1:
            pool = self._expert[k]
        pool = pool[pool != current]
        if not len(pool):
            return None, (-1, -1)
        wanted = int(self.rng.choice(np.unique(factors[pool, position])))
        pool = pool[factors[pool, position] == wanted]
        base = factors[max(current, 0)].astype(np.float64)
        gap = np.abs(np.log2(factors[pool].astype(np.float64)) - np.log2(base)).sum(axis=1)
        v = int(pool[np.argmin(gap)])
        child = self._with(parent, k, v)
        if self.rng.random() < self.balance:
            child = self._rebalance(child, k, factors[v, -1] / base[-1])
        return child, (k, v)

    def _rebalance(self, child: np.ndarray, k: int, ratio: float) -> np.ndarray:
        """The expert's follow-up: gene ``k``'s innermost factor (the FPGA unroll, the CPU/GPU register tile)
        changed by ``ratio``; other splits' innermost factors give back (or take up) as much, so the PE array
        or register tile keeps its size — parallelism moved from one loop to others. On a prime loop the
        useful unrolls are 1 and the loop itself, and taking one up fits the board only if other loops give
        their unrolls back: several genes at once, which one-gene moves never find."""
        if ratio == 1:
            return child
        ids = self.hood.value_ids(child[None, :])[0]
        others = [j for j, knob in enumerate(self.hood.knobs) if j != k and knob.factors is not None
                  and len(knob.values) > 1 and ids[j] >= 0]
        if ratio < 1:  # grown back by one loop
            if others:
                j = int(self.rng.choice(others))
                child = self._with(child, j, self._scaled(j, int(ids[j]), np.log2(1 / ratio), below=False))
            return child
        excess = np.log2(ratio)  # shrunk back by as many loops as it takes, in random order, never beyond
        for j in self.rng.permutation(others):
            if excess <= 1e-9:
                break
            inner = np.log2(self.hood.knobs[j].factors[ids[j], -1])
            if inner > 0:
                v = self._scaled(int(j), int(ids[j]), -excess, below=True)
                child = self._with(child, int(j), v)
                excess -= inner - np.log2(self.hood.knobs[j].factors[v, -1])
        return child

    def _scaled(self, j: int, current: int, log2_scale: float, below: bool) -> int:
        """The value of split ``j`` whose innermost factor is nearest ``2**log2_scale`` times that of value
        ``current`` (``below``: at most that), the rest of its factor list as near as can be."""
        factors = np.log2(self.hood.knobs[j].factors.astype(np.float64))
        wanted = factors[current, -1] + log2_scale
        miss = np.abs(factors[:, -1] - wanted)
        if below:
            miss = np.where(factors[:, -1] <= max(wanted, 0.0) + 1e-9, miss, np.inf)
        return int(np.argmin(1e3 * miss + np.abs(factors - factors[current]).sum(axis=1)))

    @staticmethod
    def _expert_values(knob: Knob) -> np.ndarray:
        """The values of a split whose factors divide the loop (no padded last tile), every value otherwise."""
        if knob.factors is None:
            return np.arange(len(knob.values))
        products = np.prod(knob.factors.astype(np.float64), axis=1)
        return np.flatnonzero(products == products.min())

    def _with(self, row: np.ndarray, k: int, v: int) -> np.ndarray:
        child = row.copy()
        knob = self.hood.knobs[k]
        child[list(knob.columns)] = knob.values[v]
        return child

    # ---------------------------------------------------------------------------------------- tell
    def observe(self, rows: np.ndarray, objective: np.ndarray) -> None:
        rows = np.atleast_2d(rows)
        objective = np.asarray(objective, dtype=np.float64)
        self._elect(rows, objective)
        if self.generation == 0 or not len(self.population):
            self.population, self.fitness = rows.copy(), objective.copy()
        else:
            self._select(rows, objective)
        self.generation += 1

    def _elect(self, rows: np.ndarray, objective: np.ndarray) -> None:
        """The genes of the top-``elites`` individuals of this generation and the population that bred it join
        the elite genes."""
        pool = np.concatenate([self.population, rows]) if len(self.population) else rows
        scores = np.concatenate([self.fitness, objective]) if len(self.population) else objective
        for i in np.argsort(scores, kind="stable")[: self.elites]:
            if not np.isfinite(scores[i]):
                break
            gene = self.genes.get(self._key(pool[i]))
            if gene is not None and gene[0] >= 0:
                self.elite_genes.setdefault(gene[0], set()).add(gene[1])

    def _select(self, children: np.ndarray, objective: np.ndarray) -> None:
        """The next population: the best child, then draws in proportion to performance (1/objective)."""
        pool = np.concatenate([children, self.population])
        scores = np.concatenate([objective, self.fitness])
        # one individual per performance: on a plateau of equally fast points (loops of one trip listed in
        # another order…) clones would otherwise take over the population and the search would stall
        _, first = np.unique(np.where(np.isfinite(scores), scores, -np.arange(len(scores)) - 1.0), return_index=True)
        keep = np.sort(first)
        is_child = keep < len(children)
        pool, scores = pool[keep], scores[keep]
        # the best child is inserted (Algorithm 1), and so is the best individual so far: proportional draws
        # among near-equal performances lose it often, and the GA then forgets its own best
        chosen = []
        if is_child.any():
            best_child = int(np.flatnonzero(is_child)[np.argmin(scores[is_child])])
            if np.isfinite(scores[best_child]):
                chosen.append(best_child)
        best = int(np.argmin(scores))
        if (self.keep_best or not chosen) and best not in chosen:  # (every child failed: the best parent)
            chosen.append(best)
        perf = np.where(np.isfinite(scores), 1.0 / np.where(np.isfinite(scores), scores, 1.0), 0.0)
        perf[chosen] = 0.0
        rest = np.flatnonzero(perf > 0)
        take = min(self.size - len(chosen), len(rest))
        if take:
            chosen += list(self.rng.choice(rest, size=take, replace=False, p=perf[rest] / perf[rest].sum()))
        self.population, self.fitness = pool[chosen], scores[chosen]

    # ------------------------------------------------------------------------------------- helpers
    def _key(self, row: np.ndarray) -> int:
        return int(self.space.keys(row[None, :])[0])

    def _admit(self, row: np.ndarray) -> bool:
        return self._key(row) not in self.visited and bool(self.space.valid(row[None, :])[0])

    def _unvisited(self, rows: np.ndarray) -> np.ndarray:
        keep = [r for r in rows if self._admit(r)]
        return np.array(keep, dtype=np.int64).reshape(-1, self.space.num_knobs)
