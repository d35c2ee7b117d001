"""Whether a timing's repeats agree on one figure, and timing again until they do.

A user saw torch's 256³ matmul timed at 32 ms where it runs in 0.4 ms, shown as a bare "12.10× lib": foreign
work held the cores for most of the library's repeats, too briefly or too early for the load measured around
the whole timing (``gpu_cpu.conditions``) to flag it. The repeats themselves say so: they fall in two clusters
far apart, or their median sits well above the fastest of them. Such a pair is timed again, ours and the
library's one right after the other, a bounded number of times; what is still unstable after that is kept
with its flag, and every place that prints the speedup says so (``hetero_dse.units.fmt_speedup``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["BIMODAL_GAP", "SLOW_SHARE", "SPREAD", "STABLE_ROUNDS", "instability", "retime_until_stable"]

#: neighbouring repeats (sorted) this many times apart belong to two clusters, not to one figure's noise: a
#: repeat that shared the cores with other work runs several times slower, not a few per cent
BIMODAL_GAP = 2.0
#: the share of the repeats the slow cluster must exceed to count: one of five or ten repeats hit by an
#: interrupt leaves the median where it was; two of five (or one of three) is a figure taken twice
SLOW_SHARE = 0.2
#: the median this many times the fastest repeat: most repeats ran slower than the figure can run, however
#: few were fast (the 32 ms-for-0.4 ms timing above: a small fast cluster, the median in the slow one)
SPREAD = 1.25
#: timings of the pair in all, the first included: each round starts fresh workers, so a few
STABLE_ROUNDS = 3

Result = TypeVar("Result")


def instability(repeats: Sequence[float]) -> str | None:
    """Why the per-run seconds of ``repeats`` are not one figure (a few words), or None where they agree or are
    too few to tell (fewer than three)."""
    times = sorted(float(x) for x in repeats if x is not None and math.isfinite(x) and x > 0)
    if len(times) < 3:
        return None
    median = statistics.median(times)
    # the widest gap between neighbours, as a ratio: where the repeats split if they split anywhere
    gap, split = max((times[i + 1] / times[i], i + 1) for i in range(len(times) - 1))
    slow = len(times) - split
    if gap >= BIMODAL_GAP and slow > SLOW_SHARE * len(times) and slow >= 2:  # one slow repeat is an outlier
        return f"bimodal: {slow} of {len(times)} repeats {times[-1] / times[0]:.1f}× the fastest"
    if median / times[0] > SPREAD:
        return f"spread: median {median / times[0]:.2f}× the fastest repeat"
    return None


def retime_until_stable(time_all: Callable[[], tuple[Result, ...]],
                        rounds: int = STABLE_ROUNDS) -> tuple[Result, ...]:
    """``time_all()`` (timings taken one right after the other: ours, then the library's) until none of them is
    unstable, at most ``rounds`` times; the last round's where every one was (their flags then say so). A
    timing is unstable where it has an ``unstable`` reason (``MeasureResult.unstable``); None is a timing that
    did not happen."""
    timed: tuple[Any, ...] = ()
    for _ in range(max(1, rounds)):
        timed = time_all()
        if not any(getattr(t, "unstable", None) for t in timed):
            break
    return timed
