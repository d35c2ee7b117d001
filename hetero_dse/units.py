"""Engineering notation for the figures a person reads: seconds, operations per second, bytes."""

from __future__ import annotations

import math


def si(value: float, unit: str = "") -> str:
    """``3.7e9`` -> ``3.70 G``: engineering notation for FLOPs and bytes."""
    for factor, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.2f} {prefix}{unit}"
    return f"{value:g} {unit}".rstrip()


def fmt_seconds(seconds: float | None, digits: int = 3) -> str:
    """``4.87 ms``: ``digits`` significant digits in the unit that keeps the number from 1 to 999."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= factor:
            return f"{seconds / factor:.{digits}g} {unit}"
    return f"{seconds / 1e-9:.{digits}g} ns"


def fmt_speedup(speedup: float | None, loaded: bool = False, unstable: bool = False) -> str:
    """``2.31×``; ``2.31× UNDER LOAD`` where either timing was taken while other work loaded the machine (a
    second search at once gave 89.66× and 10.21× for one kernel), ``2.31× (unstable timing)`` where either's
    repeats still disagreed after timing again (torch's 256³ matmul caught at 32 ms for 0.4 ms gave a bare
    12.10×): ratios a person should not act on."""
    if not speedup or not math.isfinite(speedup):
        return "—"
    return f"{speedup:.2f}×" + speedup_flags(loaded, unstable)


def speedup_flags(loaded: bool = False, unstable: bool = False) -> str:
    """What ``fmt_speedup`` puts after a ratio a person should not act on (empty for one they can)."""
    return (" UNDER LOAD" if loaded else "") + (" (unstable timing)" if unstable else "")


def fmt_ops(per_second: float) -> str:
    """Operations per second as GOPS (FLOPs for floats, integer ops otherwise)."""
    return f"{per_second / 1e9:.1f} GOPS"


def fmt_bytes(n: float) -> str:
    return si(n, "B")
