"""The small compiled functions the FPGA model is made of: how a read or write process moves a box in
port words (``plan_transfer``, also used by ``describe`` and the code generator through
``cost_models.transfer``), the cycles a run of those words takes (``run_cycles``), and what a buffer's banks
cost in storage (``storage_cost``). The batch kernel (``cost_models.fpga_kernel``) inlines them.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from cost_models.fpga_costs import (
    BRAM18K_CONFIGS,
    LUTRAM_MAX_BITS,
    LUTRAM_WORDS_PER_LUT_PAIR,
    URAM_DEPTH,
    URAM_WIDTH,
)
from cost_models.kernel_cache import drop_stale

__all__ = ["IMPL_BRAM", "IMPL_LUTRAM", "IMPL_NAMES", "IMPL_REGISTERS", "IMPL_URAM", "plan_transfer", "run_cycles",
           "storage_cost"]

_BRAM_WIDTHS = np.array([w for w, _ in BRAM18K_CONFIGS], dtype=np.float64)
_BRAM_DEPTHS = np.array([d for _, d in BRAM18K_CONFIGS], dtype=np.float64)

#: Storage kinds, as ``B_IMPL`` codes, and their names in design.json and the generated pragmas.
IMPL_REGISTERS, IMPL_LUTRAM, IMPL_BRAM, IMPL_URAM = 0, 1, 2, 3
IMPL_NAMES = {IMPL_REGISTERS: "registers", IMPL_LUTRAM: "lutram", IMPL_BRAM: "bram", IMPL_URAM: "uram"}

# the two cached kernels (plan_transfer here, evaluate_kernel importing it) cannot have been called yet
drop_stale()


@njit(cache=True, inline="always", error_model="numpy")
def _bram18k(words: float, bits: float, widths: np.ndarray, depths: np.ndarray) -> float:
    for i in range(len(widths)):
        if bits <= widths[i]:
            return math.ceil(words / depths[i])
    last = len(widths) - 1
    return math.ceil(words / depths[last]) * math.ceil(bits / widths[last])


@njit(cache=True, inline="always", error_model="numpy")
def plan_transfer(widths: np.ndarray, ddr_shape: np.ndarray, factors: np.ndarray, dims: int, word: float,
                  strides: np.ndarray, static: bool, offset: float, registers: bool):
    """How a read or write process moves a box in whole port words of ``word`` elements.

    Returns ``(q, lanes, packed, ii, iterations, rows, funnel, ok, static, sets)``: the dimensions inside ``q``
    are whole rows of the DDR tensor whose product ``packed`` divides the word, so they are unrolled; ``q`` is
    walked ``lanes = word / packed`` at a time (q = −1: the whole box is one such chunk); the dimensions outside
    ``q`` are ``rows`` contiguous runs in DDR, each taking ``iterations`` pipeline iterations of one word at
    ``ii`` cycles (one more iteration when the run does not start on a word boundary at compile time: the read
    then realigns through a funnel of two words). ``ok`` is False where an element of a word would land in a
    bank chosen at run time that differs between the word's lanes (``registers``: the buffer is registers
    throughout, where an index chosen at run time is a multiplexer, not a bank); ``static`` says whether every
    run starts at the same place in a word (``static`` as given, and every row stride a whole number of words).
    ``sets``: where dimension ``q`` is partitioned by a multiple ``sets`` of the lanes, lane ``l`` of word ``j``
    lands in bank ``(j mod sets)·lanes + l``: each word's lanes in banks of their own, the set picked by the
    word's index (the same for every lane; the code keeps one copy of the lanes a set, each naming its banks
    at compile time), so the run still moves a word an iteration at II 1 — one access a cycle, which Vitis
    bursts.
    """
    packed = 1.0
    q = dims - 1
    while q >= 0 and widths[q] == ddr_shape[q] and word % (packed * widths[q]) == 0:
        packed *= widths[q]
        q -= 1
    ok = True
    ii = 1.0
    for d in range(q + 1, dims):
        ii *= math.ceil(widths[d] / factors[d])
    sets = 1.0
    if q < 0:
        lanes, rows, words = 1.0, 1.0, 1.0
    else:
        lanes = word / packed
        w = widths[q]
        words = math.ceil(w / lanes)
        rows = 1.0
        for d in range(q):
            rows *= widths[d]
            if widths[d] > 1 and strides[d] % word != 0:
                static = False
    funnel = not (static and offset == 0)
    if q >= 0:
        # lane l of word j is element j·lanes + l of dimension q: its bank is fixed when the factor divides the
        # lanes (or the run is one word, or the whole word is one element of q, whose bank the run picks for
        # every lane alike); each bank then takes ii elements of the word. A factor that is a multiple of the
        # lanes puts each word's lanes in banks of their own, the set chosen by the word at run time
        if w > lanes and lanes > 1 and lanes % factors[q] != 0 and not registers:
            if factors[q] % lanes == 0 and not funnel:
                sets = factors[q] / lanes
            else:
                ok = False
        ii *= math.ceil(min(w, lanes) / factors[q])
    iterations = words + (1.0 if funnel else 0.0)
    return q, lanes, packed, ii, iterations, rows, funnel, ok, static, sets


@njit(cache=True, inline="always", error_model="numpy")
def run_cycles(iterations, wii, floor, max_beats):
    """Cycles one run of a read or write process takes: its pipeline's iterations (a word each) at the word
    II, or, where the run is short, its AXI bursts (each at least ``floor`` cycles: the round trip over the
    transactions in flight, or the memory's least time a transaction)."""
    full = math.floor(iterations / max_beats)
    rest = iterations - full * max_beats
    axi = full * max(max_beats, floor) + (max(rest, floor) if rest > 0 else 0.0)
    return max(iterations * wii, axi)


@njit(cache=True, inline="always", error_model="numpy")
def storage_cost(wpb: float, bits: float, uram_available: bool, res: np.ndarray, copies: float) -> int:
    """Add ``copies`` banks of ``wpb`` words x ``bits`` to ``res``; returns the storage kind."""
    if wpb <= 1:
        res[4] += copies * bits
        return IMPL_REGISTERS
    if wpb <= LUTRAM_MAX_BITS // int(bits):
        res[3] += copies * 2 * bits * math.ceil(wpb / LUTRAM_WORDS_PER_LUT_PAIR)
        return IMPL_LUTRAM
    if uram_available and wpb >= URAM_DEPTH:
        res[2] += copies * math.ceil(wpb / URAM_DEPTH) * math.ceil(bits / URAM_WIDTH)
        return IMPL_URAM
    res[1] += copies * _bram18k(wpb, bits, _BRAM_WIDTHS, _BRAM_DEPTHS)
    return IMPL_BRAM
