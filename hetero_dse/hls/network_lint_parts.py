"""What the lint of a network project reads of the generated code, for every engine alike: a constant, a buffer's
declared rows, a vector's lanes, and a read process's pipelined loop."""

from __future__ import annotations

import re
from typing import Any

from hetero_dse.hls.cparse import CFile
from hetero_dse.hls.lint.record import LintReport

__all__ = ["check_pipelined", "constant", "typedef_rows", "vector_lanes"]


def constant(text: str, name: str) -> int | None:
    m = re.search(rf"static const int {name} = (\d+);", text)
    return int(m.group(1)) if m else None


def typedef_rows(text: str, name: str) -> list[int] | None:
    m = re.search(rf"typedef \w+ {name}((?:\[\d+\])+);", text)
    return [int(d) for d in re.findall(r"\d+", m.group(1))] if m else None


def vector_lanes(text: str, name: str) -> int | None:
    m = re.search(rf"typedef hls::vector<\w+, (\d+)> {name};", text)
    return int(m.group(1)) if m else None


def check_pipelined(k: CFile, fn_name: str, label: str, lanes_label: str, word: int | None, add: Any,
                    report: LintReport, name: str = "V") -> None:
    """A read process's loop pipelined at II 1, every loop inside it unrolled, and its word's lanes V (WV)."""
    fn = k.functions.get(fn_name)
    loop = fn.loop(label) if fn else None
    if loop is None:
        add("process", fn_name, f"no {label} loop")
        return
    ii = loop.pragma("PIPELINE")
    if ii is None or ii.int("ii") != 1:
        add("ii", fn_name, f"{label} is not pipelined at II 1 as the model charges")
    inner = [lp for lp in fn.loops if loop in lp.parents]
    lanes = fn.loop(lanes_label)
    got = lanes.trip_count({name: word or 0}) if lanes is not None else None
    if got != word or not all(lp.has("UNROLL") for lp in inner):
        add("unroll", fn_name, f"{label} moves {got} lanes a word, unrolled; a word is {word}")
    report.pragmas_checked += 1 + len(inner)
