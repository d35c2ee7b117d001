"""Defects put into a generated HLS project on purpose, one at a time, to test the checks that should catch
them (the HLS lint, the stand-in synthesis, validation).

Each *kind* is a defect an engineer or a drifting template could put into ``src/kernel.cpp`` or
``src/kernel.h`` while ``design.json`` stays as it was: a pragma removed or weakened (a partial UNROLL, a
partition of fewer banks, a PIPELINE dropped or at a higher II, a DEPENDENCE gone or with a longer
distance, an operator bound to another core, a memory of another kind, the PE inlined), a loop that runs
fewer times, an operator added, the accumulation moved back into the PE, a bank chosen at run time, a DDR
access made conditional or strided, a port word of another width. Every mutant still compiles, and every
one changes what Vitis would build or what the design computes: kinds that would be equivalent (an UNROLL
removed inside a pipeline, which Vitis unrolls anyway; a BIND_OP removed where Vitis's default is the same
core; a DEPENDENCE distance shortened where the II does not change) are not generated.

``mutants(project)`` lists every mutant of every kind at every site; :func:`apply` writes one into a copy.
The kinds themselves are in ``pragma_mutants.py`` and ``datapath_mutants.py``, the file they read in
``mutant_source.py``.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from hetero_dse.testing.datapath_mutants import DATAPATH_KINDS
from hetero_dse.testing.mutant_source import CONFIG, HEADER, KERNEL, Kind, SourceFile
from hetero_dse.testing.pragma_mutants import PRAGMA_KINDS

__all__ = ["KINDS", "Mutant", "apply", "mutants"]

#: every kind of defect by name, the directives' first: the order ``mutants`` lists them in
KINDS: dict[str, Kind] = {**PRAGMA_KINDS, **DATAPATH_KINDS}


@dataclass(frozen=True)
class Mutant:
    kind: str
    file: str  # relative to the project
    line: int  # 1-based, in the file as generated
    description: str
    text: str  # the whole mutated file

    def __str__(self) -> str:
        return f"{self.kind} ({self.file}:{self.line}): {self.description}"


def mutants(project: str | Path, kinds: list[str] | None = None) -> list[Mutant]:
    """Every mutant of ``kinds`` (all by default) of one project, in a stable order."""
    project = Path(project)
    record = json.loads((project / "design.json").read_text())
    out = []
    for file in (KERNEL, HEADER, CONFIG):
        if not (project / file).is_file():
            continue
        src = SourceFile((project / file).read_text().splitlines(), record, file)
        for kind in kinds or KINDS:
            for line, description, text in KINDS[kind](src):
                out.append(Mutant(kind, file, line + 1, description, text))
    return out


def apply(project: str | Path, mutant: Mutant, into: str | Path) -> Path:
    """A copy of ``project`` in ``into`` with ``mutant`` written into it."""
    into = Path(into)
    if into.exists():
        shutil.rmtree(into)
    shutil.copytree(project, into, ignore=shutil.ignore_patterns("data", "prj", "sim_build"))
    (into / mutant.file).write_text(mutant.text)
    return into
