"""Lanes that agree across a layer pipeline's edges (``cost_models/fpga_pipeline.py``). The balance gives each
stage its cheapest lanes for an interval on its own; where a stage's input lanes then differ from its
producer's output lanes, a regroup process stands between them (its register, its multiplexers, its FIFO:
``cost_models/fpga_pipeline_streams.py``). A stage may have another option that meets the interval and reads
its producer's words as they come: ``align`` takes it where that spends less of the device, the regroup it
saves counted, so that a design the regroups push past the device may fit."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from cost_models.fpga_network import NetLayer
from cost_models.fpga_pipeline_streams import in_lanes_of

__all__ = ["align"]


def align(pick: list[int], options: Sequence[Sequence[tuple[int, int]]], times: Sequence[np.ndarray],
          costs: Sequence[np.ndarray], layers: Sequence[NetLayer], spend: Callable[[list[int]], float]
          ) -> list[int]:
    """``pick`` (an option a stage) with, stage by stage, each stage whose input lanes differ from its
    producer's output lanes moved to the option of the producer's lanes that meets the pick's interval and
    lowers ``spend`` (the device's share the whole pick takes, its regroups counted) the most, if one does."""
    interval = max(t[k] for t, k in zip(times, pick, strict=True))
    pick, current = list(pick), spend(list(pick))
    for i in range(1, len(pick)):
        lanes = options[i - 1][pick[i - 1]][1]
        if in_lanes_of(layers[i], *options[i][pick[i]]) == lanes:
            continue
        best = None
        for k, (p, q) in enumerate(options[i]):
            if in_lanes_of(layers[i], p, q) == lanes and times[i][k] <= interval:
                trial = pick[:i] + [k] + pick[i + 1:]
                value = spend(trial)
                if value < current and (best is None or value < best[0]):
                    best = (value, k)
        if best is not None:
            current, pick[i] = best
    return pick
