"""What a record of the history can be: the checks every imported line passes, whatever fields it omits (a
time in a plausible range, a time or an error, a plausible timestamp, knobs of the workload's loops, values a
knob can hold, text without control or direction-override characters)."""

from __future__ import annotations

import math
import re
import time
from math import prod
from typing import Any

from hetero_dse.history.records import Record, Workload

__all__ = ["EARLIEST_TIMESTAMP", "MAX_KNOBS", "MAX_SECONDS", "MAX_TEXT", "MIN_SECONDS", "PEAK_FLOPS", "check_knobs",
           "check_record", "check_spec"]

#: no device runs faster than this (the fastest GPUs' tensor cores reach about 2 PFLOP/s dense FP8); a record
#: that claims more is a wrong measurement or a forged line
PEAK_FLOPS = 1e16


#: the range a time (or a model's objective) of one run can have: below a nanosecond nothing is measured, above
#: four months nothing is waited for
MIN_SECONDS, MAX_SECONDS = 1e-10, 1e7
#: timestamps from this project's first year to a day ahead of this machine's clock
EARLIEST_TIMESTAMP = 1577836800.0  # 2020-01-01
#: the most knobs a point has (the largest space has a few dozen) and the longest text a record carries
MAX_KNOBS, MAX_TEXT = 256, 10_000
#: characters no record's text has: controls (but tab and newline) and the bidirectional overrides that make
#: text read differently from what it holds
_BAD_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


def check_spec(spec: Any) -> str | None:
    """Why ``spec`` cannot be a workload's (None: it can, or it is empty): its loops a table of names to
    positive extents, its FLOPs a positive number."""
    if not spec:
        return None
    if not isinstance(spec, dict):
        return f"its workload's spec {spec!r} is not a table"
    loops, flops = spec.get("loops") or {}, spec.get("flops")
    if not isinstance(loops, dict) or len(loops) > MAX_KNOBS or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and 0 < v < 2**62
            for k, v in loops.items()):
        return f"its workload's loops {loops!r} are not names with positive extents"
    if flops is not None and (isinstance(flops, bool) or not isinstance(flops, int | float)
                              or not math.isfinite(flops) or flops <= 0):
        return f"its workload's FLOPs {flops!r} are not a positive number"
    return None


def check_record(workload: Workload, record: Record) -> str | None:
    """Why ``record`` cannot be a result of ``workload`` (None: it can), whatever fields the line leaves out:
    a time that is not a positive finite number in a plausible range, both a time and an error, a failure
    without its error, an implausible timestamp, an empty point or one of too many knobs, text with control
    or direction-override characters, knobs outside the workload's loops, or a time faster than any device's
    peak."""
    problem = _check_text(workload, record) or _check_values(record)
    if problem:
        return problem
    stamp = record.timestamp
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not math.isfinite(stamp) \
            or not EARLIEST_TIMESTAMP <= stamp <= time.time() + 86400:
        return f"its timestamp {stamp!r} is not a time between 2020 and now"
    if not len(record.point):
        return "its point has no knob"
    if len(record.point) > MAX_KNOBS:
        return f"its point has {len(record.point):,} knobs; a space has at most {MAX_KNOBS}"
    seconds = record.seconds
    if seconds is None:
        if not record.error:
            return "a record without a time must carry the error that stopped it"
        return check_knobs(workload, record)
    if record.error is not None:
        return "it has both a time and an error; a record is one or the other"
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return f"its time {seconds!r} is not a number"
    if not math.isfinite(seconds) or seconds <= 0:
        return f"its time {seconds!r} is not a positive finite number of seconds"
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        return f"its time {seconds!r} s is outside what a run can take ({MIN_SECONDS:g} to {MAX_SECONDS:g} s)"
    if not len(record.point):
        return "its point has no knob"
    problem = check_knobs(workload, record)
    if problem:
        return problem
    if workload.flops and workload.flops / seconds > PEAK_FLOPS:
        return (f"{workload.flops / seconds / 1e15:,.0f} PFLOP/s for {workload.operator} is faster than any "
                "device runs")
    return None


def _check_values(record: Record) -> str | None:
    """A knob's value is what a space's knob can hold: a finite number, a truth value, a name, or a short
    list of numbers (a loop's split factors)."""
    for name, value in record.point.items():
        values = value if isinstance(value, tuple) else (value,)
        if len(values) > MAX_KNOBS:
            return f"knob {name} has {len(values):,} values"
        for v in values:
            if not isinstance(v, int | float | str | bool | None) or isinstance(v, float) and not math.isfinite(v):
                return f"knob {name}={v!r} is not a value a knob can hold"
    return None


def _check_text(workload: Workload, record: Record) -> str | None:
    texts = [("its operator", workload.operator), ("its signature", workload.signature),
             ("its target", workload.target), ("its source", record.source), ("its error", record.error)]
    texts += [(f"knob {name!r}", name) for name in record.point]
    texts += [(f"knob {name}", value) for name, value in record.point.items() if isinstance(value, str)]
    for what, text in texts:
        if text is None:
            continue
        if not isinstance(text, str):
            return f"{what} is not text"
        if len(text) > MAX_TEXT:
            return f"{what} is {len(text):,} characters long"
        bad = _BAD_CHARS.search(text)
        if bad:
            return f"{what} holds the control character U+{ord(bad.group(0)):04X}"
    return None


def check_knobs(workload: Workload, record: Record) -> str | None:
    """Why ``record``'s knobs cannot be a point of ``workload``'s space, as far as its loops (``spec``) tell
    (None: they can, or the workload carries no loops): a split or tile of a loop it does not have, splits
    whose factors do not make the loop's extent, a tile longer than its loop or an unroll that does not
    divide its tile, an unroll step a CPU/GPU space does not have, a block that is neither 0 nor 1."""
    from hetero_dse.space.cpu import UNROLL_STEPS

    extents = workload.extents
    if not extents:
        return None
    knobs = record.point
    for name, value in knobs.items():
        kind, _, loop = name.partition(".")
        if loop:
            if kind in ("split", "tile", "unroll") and loop not in extents:
                return f"knob {name}: the workload has no loop {loop} (its loops: {', '.join(extents)})"
            if kind == "split":
                factors = value if isinstance(value, tuple) else ()
                if not factors or not all(isinstance(f, int) and f > 0 for f in factors) \
                        or prod(factors) != extents[loop]:
                    return f"knob {name}={value!r} does not split loop {loop} of {extents[loop]} iterations"
            elif kind == "tile" and not (isinstance(value, int) and 1 <= value <= extents[loop]):
                return f"knob {name}={value!r} is not a tile of loop {loop} (1 to {extents[loop]})"
            elif kind == "unroll":
                tile = knobs.get(f"tile.{loop}")
                if not isinstance(value, int) or value < 1 or (isinstance(tile, int) and tile % value):
                    return f"knob {name}={value!r} does not divide its tile ({tile})"
        elif name == "unroll" and value not in UNROLL_STEPS:
            return f"knob unroll={value!r} is not one of {', '.join(map(str, UNROLL_STEPS))}"
        elif name == "vector" and value not in extents:
            return f"knob vector={value!r} is not a loop of the workload"
        elif name == "block" and (isinstance(value, bool) or value not in (0, 1)):
            return f"knob block={value!r} is not one of 0, 1"
    return None
