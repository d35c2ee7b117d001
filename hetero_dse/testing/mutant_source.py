"""The generated file a mutant is planted in, as every kind of defect reads and rewrites it.

A kind of defect (``pragma_mutants.py``, ``datapath_mutants.py``) is a generator over a :class:`SourceFile`
(the lines of ``src/kernel.cpp``, ``src/kernel.h`` or ``hls_config.tcl`` and the project's design record)
that yields each site it can break: the line, a description and the whole file with the defect in it. The
kinds find their sites with regular expressions on the text the templates write; the helpers here are the
ones several kinds share (the ``for`` header or function a line is in, the ``#pragma HLS`` lines of a name).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["CONFIG", "FOR_LOOP", "HEADER", "KERNEL", "Kind", "SourceFile", "kind_registry", "pragma_args",
           "pragma_lines"]

KERNEL, HEADER, CONFIG = "src/kernel.cpp", "src/kernel.h", "hls_config.tcl"


@dataclass
class SourceFile:
    """One file of a generated project, split into lines, with the design record it was generated from."""

    lines: list[str]
    record: dict[str, Any]
    file: str = KERNEL

    def with_lines(self, replaced: dict[int, str | None], inserted: dict[int, list[str]] | None = None) -> str:
        """The file with line ``i`` (0-based) replaced (None: removed) and lines inserted after others."""
        out = []
        for i, line in enumerate(self.lines):
            new = replaced.get(i, line)
            if new is not None:
                out.append(new)
            out.extend((inserted or {}).get(i, []))
        return "\n".join(out) + "\n"

    def loop_of(self, i: int) -> tuple[int, str, int] | None:
        """The ``for`` header the pragma on line ``i`` belongs to: (line, variable, literal bound)."""
        for j in range(i - 1, -1, -1):
            if "for (" in self.lines[j]:
                m = FOR_LOOP.search(self.lines[j])
                if m is None:  # a loop of another form (the adder tree's levels): its trips are not read here
                    return j, "", -1
                return j, m.group("var"), int(m.group("bound")) if m.group("bound").isdigit() else -1
        return None

    def function_of(self, i: int) -> str:
        for j in range(i, -1, -1):
            m = re.match(r"^(?:static |extern \"C\" )\S.*?(\w+)\(", self.lines[j])
            if m:
                return m.group(1)
        return ""


FOR_LOOP = re.compile(r"for \(int (?P<var>\w+) = 0; (?P=var) < (?P<bound>\w+); \+\+(?P=var)\)")
_PRAGMA = re.compile(r"#pragma HLS (\w+)(.*)$")

Kind = Callable[[SourceFile], Iterator[tuple[int, str, str]]]  # -> (line, description, new text)


def kind_registry(kinds: dict[str, Kind]) -> Callable[[str], Callable[[Kind], Kind]]:
    """A decorator ``@kind("name")`` that enters a kind into ``kinds`` under its name, in the order written."""

    def kind(name: str) -> Callable[[Kind], Kind]:
        def register(fn: Kind) -> Kind:
            kinds[name] = fn
            return fn

        return register

    return kind


def pragma_lines(src: SourceFile, name: str) -> Iterator[tuple[int, str, re.Match]]:
    for i, line in enumerate(src.lines):
        m = _PRAGMA.search(line)
        if m and m.group(1) == name:
            yield i, line, m


def pragma_args(rest: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
