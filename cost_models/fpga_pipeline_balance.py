"""How a layer pipeline's device is shared among its stages (``cost_models/fpga_pipeline.py``): DNNBuilder's
resource allocation, where FINN folds greedily. The pipeline takes an image every ``max(stage cycles)``, so for
an interval ``T`` each stage should take the cheapest lanes that finish its image within ``T``; the least ``T``
whose cheapest stages fit the device, scored at the clock that design closes at, is the design.

"Cheapest" weighs a stage's resources by the device's capacity for each; where one resource binds (the
UltraRAM that holds ResNet-18's weights on a VU9P, the DSPs elsewhere) the even weighing spends it too freely,
so each resource is also tried weighed eight times the others, and the best design of all kept.

A side's lanes are those of ``lane_ladder``: each count the fewest that takes one fold fewer than the last.
Powers of two alone leave a stage of 147 im2col channels at 5 folds of 32 or 3 of 64; 40 lanes take 4 and 52
take 3. Between two powers of two a balanced pipeline gives each stage the share of the device its work needs
(ResNet-18's 3 × 3 stages do equal work: with lanes in powers of two each has 512 or 1,024 multiply-adds a
cycle, and nothing between).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["TIE", "WEIGHING", "balance", "lane_ladder"]

#: how much more than the others one resource is weighed in the cheapest lanes' choice
WEIGHING = 8.0
#: two choices' images a second this close are as fast: the one of the slower interval is kept
TIE = 1e-9
#: above four lanes a count is a multiple of four: chains of four input lanes (``packed_chain``), output lanes
#: that pair for packing, and words that divide a port's
_GRAIN = 4


def lane_ladder(width: int, most: int) -> list[int]:
    """The lane counts for a side of ``width`` channels, up to ``most``: from one, each the fewest (a multiple of
    four above four) that takes fewer folds than the last; the first that takes one fold ends it."""
    out, lanes = [], 1
    while lanes <= most:
        out.append(lanes)
        folds = -(-width // lanes)
        if folds == 1:
            break
        fewer = -(-width // (folds - 1))
        lanes = fewer if fewer <= _GRAIN else -(-fewer // _GRAIN) * _GRAIN
    return out


def balance(times: Sequence[np.ndarray], costs: Sequence[np.ndarray], fixed: np.ndarray, caps: np.ndarray,
            bound: Callable[[float], float], score: Callable[[list[int], np.ndarray], Any]
            ) -> tuple[list[int], np.ndarray] | None:
    """The choice of one option a stage (stage ``i``'s options: cycles ``times[i]``, resources ``costs[i]``, one
    row an option) of the highest ``score`` (images a second of the choice and its total resources; or that and
    the choice it scored instead, with its resources) whose total with ``fixed`` fits ``caps``; ``bound(T)`` is
    no less than any score of an interval ``T``, so the intervals are tried from the least and the search ends
    where none left can win; of choices as fast (within ``TIE``), the slowest interval's: fewer lanes for as many
    images a second, an image's latency a little longer (its stages' fill). None where nothing fits."""
    order = [np.argsort(t, kind="stable") for t in times]
    sorted_t = [t[o] for t, o in zip(times, order, strict=True)]
    intervals = np.unique(np.concatenate(sorted_t))
    # an interval below some stage's fastest option is met by no choice
    intervals = intervals[intervals >= max(t[0] for t in sorted_t)]
    # for each interval, the option each stage can take (those of its options at most that slow)
    within = [np.searchsorted(t, intervals, side="right") - 1 for t in sorted_t]
    share = 1.0 / np.where(caps > 0, caps, np.inf)
    weighings = [np.ones(len(caps))] + [np.where(np.arange(len(caps)) == k, WEIGHING, 1.0)
                                        for k in range(len(caps)) if caps[k] > 0]
    picks, totals = [], []
    for weigh in weighings:
        chosen = []
        total = np.tile(fixed, (len(intervals), 1)).astype(float)
        for cost, o, w in zip(costs, order, within, strict=True):
            price = cost[o] @ (share * weigh)
            # the cheapest option at most as slow as each of this stage's options (the faster wins a tie)
            best = np.zeros(len(o), dtype=int)
            for j in range(1, len(o)):
                best[j] = j if price[j] < price[best[j - 1]] else best[j - 1]
            pick = o[best[w]]
            chosen.append(pick)
            total += cost[pick]
        picks.append(np.stack(chosen, axis=1))
        totals.append(total)
    found: tuple[list[int], np.ndarray] | None = None
    top, found_at = -np.inf, -1
    for n, interval in enumerate(intervals):
        if bound(float(interval)) < top * (1 - TIE):
            break
        for pick, total in zip(picks, totals, strict=True):
            if np.any(total[n] > caps):
                continue
            value = score(pick[n].tolist(), total[n])
            # a score may give the choice it scored instead (its lanes aligned across edges), with its resources
            value, chosen, spent = value if isinstance(value, tuple) else (value, pick[n].tolist(), total[n])
            # a tie goes to the slower interval: as many images a second (its image's transfer binds both) on fewer
            # lanes
            if value > top or (found_at < n and value > -np.inf and value >= top * (1 - TIE)):
                top, found, found_at = max(top, value), (chosen, spent), n
    return found
