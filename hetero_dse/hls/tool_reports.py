"""The tool's other reports: ``csynth.rpt``'s bind tables (which operator core and which storage each
variable got), ``vitis_hls.log`` (the pipelining results, II violations with "limited memory ports" and the
array named, burst and widening messages), ``<top>_cosim.rpt`` (the latency co-simulation measured) and
``export_impl.rpt`` (``impl/report/verilog/``, written by ``export_design -flow impl``: post-route
utilisation and timing). Each file that cannot be read is one :class:`ReportError` sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hetero_dse.hls.reports import ReportError, figure_range, report_file, to_float

__all__ = ["CosimReport", "ImplReport", "LogReport", "read_bind_tables", "read_cosim", "read_impl", "read_log"]


# ----------------------------------------------------------------------------------- csynth.rpt
def _tables(text: str, heading: str) -> list[dict[str, str]]:
    """The rows of the first ``|``-table after a line containing ``heading``, as dicts by column name."""
    at = text.find(heading)
    if at < 0:
        return []
    header: list[str] | None = None
    rows = []
    for line in text[at:].splitlines()[1:]:
        line = line.strip()
        if not line:
            if header is not None and rows:
                break
            continue
        if line.startswith("+-") or line.startswith("+="):
            continue
        if not line.startswith("|"):
            if header is not None:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if not rows and not cells[0]:
            # a header cell broken over two lines
            header = [f"{h} {c}".strip() for h, c in zip(header, cells, strict=False)]
            continue
        rows.append(dict(zip(header, cells, strict=False)))
    return rows


def read_bind_tables(path: str | Path) -> dict[str, list[dict[str, str]]]:
    """``csynth.rpt``'s Bind Op and Bind Storage tables (Vitis 2021.2 and later), by table; empty lists
    where the report has none."""
    try:
        text = report_file(path).read_text(errors="replace")
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}") from None
    return {"ops": _tables(text, "Bind Op Report"), "storage": _tables(text, "Bind Storage Report")}


# --------------------------------------------------------------------------------------- the log
@dataclass
class LogReport:
    """What ``vitis_hls.log`` says about pipelining, memory ports and bursts."""

    pipelines: list[dict[str, Any]]  # loop, target_ii, final_ii, depth
    port_limits: list[dict[str, str]]  # module, loop, array: an II raised by limited memory ports
    bursts: list[dict[str, Any]]  # loop, bundle, length (None: variable), bits
    widened: list[dict[str, Any]]  # variable, bits
    errors: list[str]
    #: module, loop, array, distance: an II raised by a loop-carried dependence (HLS 200-880)
    carried: list[dict[str, Any]] = field(default_factory=list)


_PIPELINE = re.compile(r"Pipelining result\s*:\s*Target II\s*=\s*(\w+),\s*Final II\s*=\s*(\w+),\s*Depth\s*=\s*(\d+)"
                       r"(?:,\s*loop\s*'([^']+)')?")
_CARRIED = re.compile(r"II Violation in module '([^']+)'\s*\(loop '([^']+)'\).*carried dependence constraint"
                      r"(?:\s*\(II = \d+, distance = (\d+))?.*?array '([^']+)'")
_PORTS = re.compile(r"II Violation in module '([^']+)'\s*\(loop '([^']+)'\).*limited memory ports.*?array '([^']+)'")
_BURST = re.compile(r"[Bb]urst (?:read|write)s? of (?:length (\d+)|variable length) and bit width (\d+)"
                    r"(?: in loop '([^']+)')?(?:.*?bundle '([^']+)')?")
_WIDEN = re.compile(r"[Ww]idening.*?'([^']+)'.*?(\d+) bits")


#: the most entries of each kind kept from a log, and the longest line read: a log of hundreds of MB keeps
#: what a validation needs, not its size
LOG_ENTRIES = 2000
LOG_LINE_CHARS = 2000


def read_log(path: str | Path) -> LogReport:
    report = LogReport([], [], [], [], [])

    def add(entries: list, entry: Any) -> None:
        if len(entries) < LOG_ENTRIES:
            entries.append(entry)

    try:
        with open(report_file(path), errors="replace") as f:
            for line in f:
                line = line[:LOG_LINE_CHARS]
                if m := _PIPELINE.search(line):
                    add(report.pipelines, {"loop": m.group(4), "target_ii": figure_range(m.group(1))[0],
                                           "final_ii": figure_range(m.group(2))[0], "depth": int(m.group(3))})
                if m := _PORTS.search(line):
                    add(report.port_limits, {"module": m.group(1), "loop": m.group(2), "array": m.group(3)})
                if m := _CARRIED.search(line):
                    add(report.carried, {"module": m.group(1), "loop": m.group(2), "array": m.group(4),
                                         "distance": int(m.group(3)) if m.group(3) else None})
                if m := _BURST.search(line):
                    add(report.bursts, {"length": int(m.group(1)) if m.group(1) else None, "bits": int(m.group(2)),
                                        "loop": m.group(3), "bundle": m.group(4)})
                if m := _WIDEN.search(line):
                    add(report.widened, {"variable": m.group(1), "bits": int(m.group(2))})
                if line.startswith("ERROR:"):
                    add(report.errors, line.strip())
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}") from None
    return report


# ------------------------------------------------------------------------------------- cosim
@dataclass
class CosimReport:
    status: str | None
    latency_cycles: dict[str, int | None]
    interval_cycles: dict[str, int | None]


def read_cosim(path: str | Path) -> CosimReport:
    """``<top>_cosim.rpt``: the row of the RTL that ran (``| Verilog | Pass | min | avg | max | min | avg | max |``)."""
    try:
        text = report_file(path).read_text(errors="replace")
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}") from None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 8 and cells[0].lower() in ("verilog", "vhdl") and cells[1] not in ("", "NA"):
            nums = [figure_range(c)[0] for c in cells[2:8]]
            return CosimReport(cells[1], {"min": nums[0], "avg": nums[1], "max": nums[2]},
                               {"min": nums[3], "avg": nums[4], "max": nums[5]})
    raise ReportError(f"{path} has no co-simulation result row (| Verilog | Pass | ... |)")


# -------------------------------------------------------------------------------------- impl
@dataclass
class ImplReport:
    resources: dict[str, int | None]
    target_clock_ns: float | None
    achieved_clock_ns: float | None
    timing_met: bool | None

    @property
    def fmax_mhz(self) -> float | None:
        return 1000.0 / self.achieved_clock_ns if self.achieved_clock_ns else None


_IMPL_KEYS = {"dsp": "DSP", "bram18k": "BRAM", "uram": "URAM", "lut": "LUT", "ff": "FF"}


def read_impl(path: str | Path) -> ImplReport:
    """``export_impl.rpt`` (``export_design -flow impl``): post-route resources and the achieved clock."""
    try:
        text = report_file(path).read_text(errors="replace")
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}") from None
    values: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"\s*([A-Za-z][A-Za-z0-9 _-]*?)\s*:\s*(\S+)\s*$", line)
        if m:
            values.setdefault(m.group(1).strip(), m.group(2))
    resources = {k: figure_range(values.get(tag))[0] for k, tag in _IMPL_KEYS.items()}
    achieved = to_float(values.get("CP achieved post-implementation"))
    if all(v is None for v in resources.values()) and achieved is None:
        raise ReportError(f"{path} has no post-implementation resources or timing")
    met = None
    if "Timing met" in text:
        met = True
    elif "Timing not met" in text or "timing not met" in text.lower():
        met = False
    return ImplReport(resources, to_float(values.get("CP required")), achieved, met)
