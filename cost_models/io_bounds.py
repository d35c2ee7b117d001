"""I/O lower bounds: the least DDR traffic any schedule with ``S`` words on chip can move.

Direct convolution: Theorem 4.9 of the I/O lower-bound paper (``shared/seeds/001``),
``Q = Wk·Hk·Cin·Wout·Hout·Cout / (4·sqrt(2·R·S))`` words with ``R = Wk·Hk / μ²``, and its optimality
condition ``x·y = R·z`` for an ``x × y × z`` output tile (Eq. 13 and §4.2 of the same paper). Any other
operator gets the classic matrix-multiplication bound ``2·MACs / sqrt(S)`` (Hong & Kung; Smith et al.),
which is what the same paper's Theorem 4.6 reduces to for a product of two operands. Either bound is
raised to the compulsory traffic (every input read once, the output written once).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod, sqrt

from hetero_dse.analysis import Analysis
from hetero_dse.analysis.window import conv_window


@dataclass(frozen=True)
class IOBound:
    bytes: float
    kind: str  # "direct convolution (Theorem 4.9)", "matmul-style", or "compulsory"
    formula_bytes: float
    compulsory_bytes: float


def io_lower_bound(analysis: Analysis, onchip_words: float, word_bytes: int, compulsory_bytes: int) -> IOBound:
    """The larger of the operator's bound at ``onchip_words`` words of on-chip memory and the compulsory traffic."""
    macs = analysis.main.trip_count
    window = conv_window(analysis)
    if window is not None:
        words = macs / (4 * sqrt(2 * window.ratio * onchip_words))
        kind = "direct convolution (Theorem 4.9)"
    elif analysis.main.reduce:
        words = 2 * macs / sqrt(onchip_words)
        kind = "matmul-style 2·MACs/√S"
    else:
        words, kind = 0.0, "compulsory"
    formula = words * word_bytes
    if formula <= compulsory_bytes:
        return IOBound(float(compulsory_bytes), f"compulsory (above {kind})", formula, float(compulsory_bytes))
    return IOBound(formula, kind, formula, float(compulsory_bytes))


def compulsory_bytes(analysis: Analysis, input_bytes: int, output_bytes: int) -> int:
    """Every operator input read once and the output written once, at the given element sizes."""
    moved = sum(prod(shape) for _, shape, _ in analysis.inputs) * input_bytes
    return moved + prod(analysis.write.shape) * output_bytes
