"""How a convolution-like operator slides its window over an input: a fact about the operator's loops
and accesses (which reduce loop rides on which spatial loop, at what stride), used by the FPGA space (the
window loops it never splits, seed 001's optimality condition) and by the I/O lower bound (Theorem 4.9)."""

from __future__ import annotations

from dataclasses import dataclass

from hetero_dse.analysis import Analysis

__all__ = ["ConvWindow", "conv_window"]


@dataclass(frozen=True)
class ConvWindow:
    """How a convolution-like main node slides its window: what Theorem 4.9 needs."""

    window_loops: tuple[str, ...]   # reduce loops added to a spatial loop in an input index (rx, ry)
    output_loops: tuple[str, ...]   # spatial loops sliding over the input (i, j): the x and y of the tile
    channel_loops: tuple[str, ...]  # spatial loops absent from that input (output channels): the z of the tile
    ratio: float                    # R = window size / stride² (per sliding dimension)


def conv_window(analysis: Analysis) -> ConvWindow | None:
    """The sliding window of a convolution-like operator, or None when no input index mixes loop kinds.

    An input index ``μ·i + d·rx`` (a spatial loop plus a reduce loop) is a sliding window of stride μ
    over ``rx``'s extent; R multiplies ``extent(rx)/μ`` over such dimensions (the 2-D theorem applied
    per dimension, which is how it extends to 1-D and 3-D windows; the paper proves the 2-D case).
    """
    spatial = {lp.name: lp for lp in analysis.main.spatial}
    reduce = {lp.name: lp for lp in analysis.main.reduce}
    for access in analysis.reads:
        window, sliding, ratio = [], [], 1.0
        for index in access.indices:
            s = [(n, c) for n, c in index.terms if n in spatial]
            r = [(n, c) for n, c in index.terms if n in reduce]
            if len(s) == 1 and len(r) == 1:
                (sn, stride), (rn, _) = s[0], r[0]
                window.append(rn)
                sliding.append(sn)
                ratio *= reduce[rn].extent / abs(stride)
        if window:
            used = {n for index in access.indices for n in index.loops}
            channels = tuple(n for n in spatial if n not in used and spatial[n].extent > 1)
            return ConvWindow(tuple(window), tuple(sliding), channels, ratio)
    return None
