"""How well the history fits a new workload (seed 002, §III, equations 1–3), and its points as candidates.

* **match score** (eq. 1): for each split knob k — here each loop of the main node, whose extent is the
  product of the knob's factors — the share of the history extent's factors that divide the input's
  extent too, averaged over the knobs. 1 when every loop has the same extent; the threshold on it chooses
  between the guided GA (history fits) and transfer learning (it does not).
* **utilisation** (eq. 3): how much of a history schedule's parallelism P(h, k) along each loop the
  input's extent keeps busy: a loop of e iterations over tiles of P wastes the padding of its last tile
  (e > P) or the part of the tile it does not reach (e ≤ P).
* **filtering metric** (eq. 2): m(h, i) = Th(h) · γ(h, i) · s(h, i)^ω, which ranks the history's points as
  the guided GA's first population: fast, still efficient at the new extents, from a similar workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from math import ceil

import numpy as np

from hetero_dse.history.records import Record, Workload
from hetero_dse.space.base import adapt_points
from hetero_dse.space.point import Point

#: the paper's ω: how much more the match counts than the throughput (it found 2 "preferable in practice")
OMEGA = 2.0
#: match score from which the history is close enough for the guided GA (``auto``); below it, transfer
#: learning. A conv layer whose channel counts change from 64 to 96 scores 0.96; to a prime, 0.75.
MATCH_THRESHOLD = 0.8


@cache
def factors(n: int) -> frozenset[int]:
    """The factor list of equation 1: every divisor of ``n``."""
    n = int(n)
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return frozenset(small + [n // d for d in small])


def match_score(history: Mapping[str, int], inp: Mapping[str, int]) -> float:
    """Equation 1 over the input's loops (a loop the history lacks adds nothing)."""
    if not inp:
        return 0.0
    total = 0.0
    for loop, extent in inp.items():
        if loop in history:
            theirs = factors(history[loop])
            total += len(theirs & factors(extent)) / len(theirs)
    return total / len(inp)


def utilisation(parallelism: Mapping[str, int], inp: Mapping[str, int]) -> float:
    """Equation 3: the product over the input's loops of the share of P(h, k) its extent keeps busy."""
    gamma = 1.0
    for loop, extent in inp.items():
        p = max(int(parallelism.get(loop, 1)), 1)
        gamma *= extent / (ceil(extent / p) * p) if extent > p else extent / p
    return gamma


def filter_metric(throughput: float, gamma: float, match: float, omega: float = OMEGA) -> float:
    """Equation 2."""
    return throughput * gamma * match**omega


@dataclass(frozen=True)
class Prior:
    """What the history holds for a workload: the records of related workloads (same operator, target and
    loops; see :meth:`HistoryDB.related`), with the extents of the workload being tuned."""

    extents: dict[str, int]
    related: tuple[tuple[Workload, tuple[Record, ...]], ...] = ()

    @classmethod
    def load(cls, db, workload: Workload, per_workload: int = 256) -> Prior:
        """What ``db`` holds of related workloads, ``workload`` itself left out: its own points are answered
        from the history point by point, and a rerun of an interrupted search must choose and seed its
        explorer as the first run did, so that it goes on where it stopped (review finding D15)."""
        related = db.related(workload, per_workload)
        return cls(workload.extents, tuple((w, tuple(r)) for w, r in related if w.key != workload.key))

    def __len__(self) -> int:
        return sum(len(records) for _, records in self.related)

    def match(self) -> float:
        """The best match score of a related workload (0 without history)."""
        return max((match_score(w.extents, self.extents) for w, _ in self.related), default=0.0)

    def ranked(self, space, omega: float = OMEGA) -> list[tuple[float, Point]]:
        """Every history point with its metric m(h, i), best first. Th(h) is the throughput in FLOP/s where
        the workload's FLOPs are known (1/seconds otherwise)."""
        out = []
        for workload, records in self.related:
            s = match_score(workload.extents, self.extents)
            work = workload.flops or 1.0
            for r in records:
                gamma = utilisation(space.parallelism(r.point), self.extents)
                out.append((filter_metric(work / r.seconds, gamma, s, omega), r.point))
        out.sort(key=lambda item: -item[0])
        return out

    def candidates(self, space, count: int, omega: float = OMEGA) -> np.ndarray:
        """Up to ``count`` distinct rows of ``space``: the best-ranked history points adapted to it."""
        return adapt_points(space, (point for _, point in self.ranked(space, omega)), count)

    def training_set(self, space) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The history as transfer learning's training data: rows adapted to ``space``, the extents of the
        workload each came from (``(rows, loops)`` in the space's loop order), and each record's performance
        relative to the best of its workload (1 for the best)."""
        rows, extents, perf = [], [], []
        names = list(space.loop_extents)
        for workload, records in self.related:
            best = min(r.seconds for r in records)
            for r in records:
                row = space.adapt(r.point)
                if row is not None:
                    rows.append(row)
                    extents.append([workload.extents.get(n, 1) for n in names])
                    perf.append(best / r.seconds)
        return (np.array(rows, dtype=np.int64).reshape(-1, space.num_knobs),
                np.array(extents, dtype=np.float64).reshape(-1, len(names)), np.array(perf))
