"""I/O lower bounds: the least DDR traffic any schedule with ``S`` words on chip can move.

Direct convolution: Theorem 4.9 of the I/O lower-bound paper (``shared/seeds/001``),
``Q = Wk·Hk·Cin·Wout·Hout·Cout / (4·sqrt(2·R·S))`` words with ``R = Wk·Hk / μ²``, and its optimality
condition ``x·y = R·z`` for an ``x × y × z`` output tile (Eq. 13 and §4.2 of the same paper). Any other
operator gets the classic matrix-multiplication bound ``2·MACs / sqrt(S)`` (Hong & Kung; Smith et al.),
which is what the same paper's Theorem 4.6 reduces to for a product of two operands. Either bound is
raised to the compulsory traffic (every input read once, the output written once).

Winograd's algorithm F(e×e, r×r) (§4.3 of the same paper): a composite of four steps (input transform,
element-wise product, channel sum, output transform). Its DAG has O(Wout·Hout·Cout·Cin·(e+r−1)⁴/e²)
vertices (Lemma 4.10), T(S) = O(2·(e+r−1)³/(e·r)·S·√S + 6·(e+r−1)²/(e·r)·S) (Lemma 4.11), and its bound
is Ω(Wout·Hout·Cout·Cin·(e+r−1)·r / (e·√S)) (Theorem 4.12). The §5.3 dataflow — the channel sums of
x·y·z/e² tiles held on chip in two (e+r−1)² arrays each, 2·(e+r−1)²/e²·x·y·z ≈ S/Np, and x·y = r²·z —
moves about 2·Hout·Wout·Cout·Cin·r·(e+r−1) / (e·√(S/Np)) + Hout·Wout·Cout words.
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


def winograd_vertices(out_w: int, out_h: int, out_c: int, in_c: int, e: int, r: int) -> float:
    """Lemma 4.10's order of the number of vertices of F(e×e, r×r)'s DAG (its constant is the paper's 1)."""
    return out_w * out_h * out_c * in_c * (e + r - 1) ** 4 / e ** 2


def winograd_t(onchip_words: float, e: int, r: int) -> float:
    """Lemma 4.11's T(S): the most vertices a segment with S red pebbles computes (the order's terms, the
    constants as written)."""
    alpha = e + r - 1
    return 2 * alpha ** 3 / (e * r) * onchip_words * sqrt(onchip_words) + 6 * alpha ** 2 / (e * r) * onchip_words


def winograd_lower_bound_words(out_w: int, out_h: int, out_c: int, in_c: int, e: int, r: int,
                               onchip_words: float) -> float:
    """Theorem 4.12's bound on the words any F(e×e, r×r) schedule moves with ``onchip_words`` on chip (its
    Ω taken with constant 1)."""
    return out_w * out_h * out_c * in_c * (e + r - 1) * r / (e * sqrt(onchip_words))


def winograd_dataflow_words(out_w: int, out_h: int, out_c: int, in_c: int, e: int, r: int, onchip_words: float,
                            processors: int = 1) -> float:
    """The words §5.3's near I/O-optimal dataflow moves: reads 2·Hout·Wout·Cout·Cin·r·(e+r−1)/(e·√(S/Np)),
    the output written once."""
    share = onchip_words / processors
    return 2 * out_h * out_w * out_c * in_c * r * (e + r - 1) / (e * sqrt(share)) + out_h * out_w * out_c


def winograd_optimal_tile(e: int, r: int, onchip_words: float, processors: int = 1) -> tuple[float, float]:
    """§5.3's tile: x·y·z with 2·(e+r−1)²/e²·x·y·z = S/Np and x·y = r²·z -> (x·y, z)."""
    volume = onchip_words / processors * e ** 2 / (2 * (e + r - 1) ** 2)
    z = sqrt(volume / r ** 2)
    return r ** 2 * z, z
