"""What the lint holds the code to: ``design.json`` read as the generated kernel's names, and the report.

A finding names the check, where in the kernel (``function:line``) and what the code and the design say.
Every ``#pragma HLS`` line a check verifies (or finds wrong) is marked on the report; a pragma no check
accounts for is itself a finding, so that a pragma the design does not call for cannot slip in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Any

from hetero_dse.hls.cexpr import identifier
from hetero_dse.hls.cparse import LintError, Pragma

__all__ = ["DesignRecord", "Finding", "LintReport", "LoopKnobs"]


@dataclass(frozen=True)
class Finding:
    check: str  # arithmetic | banks | bind_op | burst | dependence | inline | interface | ii | partition | ...
    where: str  # function:line
    message: str

    def __str__(self) -> str:
        return f"{self.where}: [{self.check}] {self.message}"


@dataclass
class LintReport:
    """What the lint found, and the figures it read from the code."""

    findings: list[Finding] = field(default_factory=list)
    mul_per_iteration: int = 0
    add_per_iteration: int = 0
    accesses_checked: int = 0
    pragmas_checked: int = 0
    #: lines of the pragmas some check has accounted for
    verified: set[int] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return not self.findings

    def add(self, check: str, where: str, message: str) -> None:
        finding = Finding(check, where, message)
        if finding not in self.findings:
            self.findings.append(finding)

    def mark(self, *pragmas: Pragma | None) -> None:
        for p in pragmas:
            if p is not None:
                self.verified.add(p.line)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "findings": [str(f) for f in self.findings],
                "counted": {"mul": self.mul_per_iteration, "add": self.add_per_iteration},
                "accesses_checked": self.accesses_checked, "pragmas_checked": self.pragmas_checked}


@dataclass(frozen=True)
class LoopKnobs:
    """One loop of the operator as the design tiles it."""

    name: str
    ident: str  # the C identifier the generator gives it (labels pe_<ident>, lane_<ident>, tile_<ident>)
    kind: str  # spatial | reduce
    trips: int  # tiles along the loop
    tile: int
    unroll: int

    @property
    def outer(self) -> int:
        """Pipeline iterations of the loop inside one tile."""
        return self.tile // self.unroll


class DesignRecord:
    """``design.json`` (its ``knobs``, ``predicted`` and ``expectations``) in the kernel's own names."""

    def __init__(self, record: dict[str, Any], source: str = "design.json") -> None:
        try:
            self.predicted: dict[str, Any] = record["predicted"]
            self.knobs: dict[str, Any] = record["knobs"]
            self.top: str = record["top"]
            self.expectations: dict[str, Any] = record.get("expectations") or {}
            missing = [k for k in ("units", "ii", "cores", "trips", "buffers", "accumulation_distance", "recurrence")
                       if k not in self.predicted]
        except (KeyError, TypeError):
            raise LintError(f"{source} is not a design record written by hetero_dse explore") from None
        if missing:
            raise LintError(f"{source} has no {', '.join(missing)}: it was written by an older hetero_dse; run "
                            "explore again to get a project the lint can check")
        names = [k.split(".", 1)[1] for k in self.knobs if k.startswith("tile.")]
        spatial = set(self.knobs.get("order") or [])
        trips = self.predicted["trips"]
        if len(trips) != len(names):
            raise LintError(f"{source}: {len(trips)} tile trip counts for {len(names)} loops")
        self.loops = []
        for name, n in zip(names, trips, strict=True):
            self.loops.append(LoopKnobs(name, identifier(name), "spatial" if name in spatial else "reduce",
                                        int(n), int(self.knobs[f"tile.{name}"]), int(self.knobs[f"unroll.{name}"])))
        by_name = {lp.name: lp for lp in self.loops}
        self.spatial = [by_name[n] for n in self.knobs.get("order") or []]
        self.reduce = [lp for lp in self.loops if lp.kind == "reduce"]
        self.buffers: list[dict[str, Any]] = self.predicted["buffers"]
        self.cores: dict[str, dict[str, str]] = self.predicted["cores"]

    # ------------------------------------------------------------------------------------ the names
    @property
    def reads(self) -> list[dict[str, Any]]:
        return self.buffers[:-1]

    @property
    def write(self) -> dict[str, Any]:
        return self.buffers[-1]

    def read_process(self, i: int) -> str:
        return f"read_buf{i}_{identifier(self.buffers[i]['tensor'])}"

    def stream(self, i: int) -> str:
        """The DATAFLOW channel of buffer ``i`` (the write's is ``out_s``)."""
        return "out_s" if i == len(self.buffers) - 1 else f"buf{i}_{identifier(self.buffers[i]['tensor'])}_s"

    def loop_by_ident(self, ident: str) -> LoopKnobs | None:
        return next((lp for lp in self.loops if lp.ident == ident), None)

    # ------------------------------------------------------------------------------ the compute
    @property
    def pipeline_nest(self) -> list[LoopKnobs]:
        """The compute's pipelined loops, outermost first: reduce loops outside spatial loops, each with more
        than one iteration inside a tile."""
        spatial = [lp for lp in self.loops if lp.kind == "spatial"]  # the operator's order, not the tiles'
        return [lp for lp in self.reduce + spatial if lp.outer > 1]

    @property
    def carried(self) -> bool:
        """Whether the accumulation's read-modify-write recurs inside the pipeline (a reduce loop in it)."""
        return bool(self.predicted.get("accumulate")) and any(lp.outer > 1 for lp in self.reduce)

    @property
    def pipeline_iterations(self) -> int:
        return prod(lp.outer for lp in self.pipeline_nest)

    @property
    def reduce_lanes(self) -> int:
        return prod(lp.unroll for lp in self.reduce)

    def partitions(self, i: int) -> set[tuple[int, str, int | None]]:
        """The ARRAY_PARTITION pragmas buffer ``i``'s channel must carry: (dim, type, factor)."""
        b = self.buffers[i]
        out = set()
        for d, (width, f) in enumerate(zip(b["shape"], b["partition"], strict=True)):
            if f > 1:
                out.add((d + 1, "complete", None) if f >= width else (d + 1, "cyclic", int(f)))
        return out
