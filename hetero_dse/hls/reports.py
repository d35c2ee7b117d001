"""Reading what Vitis HLS (and Vivado HLS before it) reports about a synthesized design.

* ``csynth.xml`` / ``<module>_csynth.xml`` (``solution/syn/report/``): clock, latency, interval, every
  loop (trip count, II, depth, latency, nested loops) and resources with what the part has. The formats of
  Vivado HLS 2018–2019 and Vitis HLS 2020.1–2024.2 differ in ways this reader absorbs: ``<DSP48E>`` before
  ``<DSP>``; loops as elements named after the loop (older) or with a ``<Name>`` child (newer, also a
  ``name`` attribute); ``undef`` for what depends on data; ranges (``<range><min>/<max>``, ``10 ~ 20``);
  per-module reports beside the top's, or a ``<ModuleInformation>`` list inside it; sections some
  versions omit. A field the file does not have is ``None``, never an exception; a file that is not a
  report at all (or is cut short) is one :class:`ReportError` sentence.
* ``csynth.rpt``'s bind tables (which operator core and which storage each variable got);
* ``vitis_hls.log``: the pipelining results (target and final II, depth per loop), II violations and
  "limited memory ports" (the array named), and the burst/widening messages;
* ``<top>_cosim.rpt``: the latency co-simulation measured;
* ``export_impl.rpt`` (``impl/report/verilog/``, written by ``export_design -flow impl``): post-route
  utilisation and timing.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hetero_dse.errors import HeteroDSEError

__all__ = ["CosimReport", "ImplReport", "LogReport", "LoopReport", "ReportError", "SynthReport", "find_csynth",
           "read_bind_tables", "read_cosim", "read_csynth", "read_impl", "read_log", "read_solution"]

#: Our resource names and the tags the report versions use for them (first found wins).
RESOURCE_TAGS = {"dsp": ("DSP", "DSP48E"), "bram18k": ("BRAM_18K",), "uram": ("URAM",), "lut": ("LUT",),
                 "ff": ("FF",)}
#: Children of a loop element that are its figures, not nested loops.
_LOOP_FIELDS = {"Name", "TripCount", "Latency", "IterationLatency", "PipelineII", "PipelineDepth", "Slack",
                "PipelineType", "AchievedII", "TargetII", "InstanceList", "LatencyMin", "LatencyMax",
                "TripCountMin", "TripCountMax", "AbsoluteTimeLatency"}


class ReportError(HeteroDSEError):
    """A file that is not the report it should be, or cannot be read."""


# ----------------------------------------------------------------------------------------- values
def _range(text: str | None) -> tuple[int | None, int | None]:
    """``(min, max)`` of a figure: an integer, ``a ~ b``, or ``undef``/``-``/empty (None, None)."""
    if text is None:
        return None, None
    text = text.strip()
    m = re.fullmatch(r"(-?\d+)\s*~\s*(-?\d+)", text)
    if m:
        return int(m.group(1)), int(m.group(2))
    if re.fullmatch(r"-?\d+", text):
        return int(text), int(text)
    return None, None


def _figure(element: ET.Element | None) -> tuple[int | None, int | None]:
    """A figure element: its text, or a ``<range><min>..</min><max>..</max></range>`` child."""
    if element is None:
        return None, None
    rng = element.find("range")
    if rng is not None:
        lo, _ = _range(rng.findtext("min"))
        hi, _ = _range(rng.findtext("max"))
        return lo, hi
    return _range(element.text)


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------ loops
@dataclass
class LoopReport:
    """One loop as the report has it; ``None`` where the report says ``undef`` or has nothing."""

    name: str
    trip_count: int | None
    ii: int | None
    depth: int | None
    latency_cycles: int | None
    children: list[LoopReport] = field(default_factory=list)

    @property
    def label(self) -> str:
        """The loop's label without the ``.N``/``_N`` suffix Vitis adds to a label met twice."""
        return re.sub(r"\.\d+$", "", self.name)

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "trip_count": self.trip_count, "ii": self.ii, "depth": self.depth,
                "latency_cycles": self.latency_cycles, "children": [c.to_json() for c in self.children]}


def _loops(parent: ET.Element | None) -> list[LoopReport]:
    if parent is None:
        return []
    out = []
    for el in parent:
        figures = {c.tag for c in el} & {"TripCount", "Latency", "PipelineII", "PipelineDepth", "IterationLatency"}
        if el.tag in _LOOP_FIELDS or not figures:
            continue
        name = (el.findtext("Name") or el.get("name") or el.tag).strip()
        _, trips = _figure(el.find("TripCount"))
        if trips is None:
            _, trips = _range(el.findtext("TripCountMax"))
        _, latency = _figure(el.find("Latency"))
        if latency is None:
            _, latency = _range(el.findtext("LatencyMax"))
        ii, _ = _figure(el.find("PipelineII"))
        achieved, _ = _range(el.findtext("AchievedII"))
        depth, _ = _figure(el.find("PipelineDepth"))
        nested = [c for c in el if c.tag not in _LOOP_FIELDS]
        holder = ET.Element("nested")
        holder.extend(nested)
        out.append(LoopReport(name, trips, achieved if achieved is not None else ii, depth, latency,
                              _loops(holder)))
    return out


# ------------------------------------------------------------------------------------- csynth.xml
@dataclass
class SynthReport:
    """A ``csynth.xml`` (the top's or a module's). Fields the report does not have are ``None``."""

    path: str
    tool_version: str | None
    part: str | None
    top: str | None
    target_clock_ns: float | None
    clock_uncertainty_ns: float | None
    estimated_clock_ns: float | None
    latency_cycles: dict[str, int | None]
    interval_cycles: dict[str, int | None]
    resources: dict[str, int | None]
    available: dict[str, int | None]
    loops: list[LoopReport]
    #: m_axi data width per bundle (bits), from the interface summary where the report has one
    port_bits: dict[str, int]
    modules: dict[str, SynthReport] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    @property
    def latency_seconds(self) -> float | None:
        worst = self.latency_cycles.get("worst")
        clock = self.estimated_clock_ns or self.target_clock_ns
        return worst * clock * 1e-9 if worst is not None and clock else None

    def all_loops(self) -> list[tuple[str, LoopReport]]:
        """Every loop of the top and its modules, with the module it belongs to."""
        found = [(self.top or "", lp) for root in self.loops for lp in root.walk()]
        for name, module in self.modules.items():
            found += [(name, lp) for root in module.loops for lp in root.walk()]
        return found

    def to_json(self) -> dict[str, Any]:
        return {"tool_version": self.tool_version, "part": self.part, "top": self.top,
                "target_clock_ns": self.target_clock_ns, "estimated_clock_ns": self.estimated_clock_ns,
                "latency_cycles": self.latency_cycles, "interval_cycles": self.interval_cycles,
                "resources": self.resources, "available": self.available,
                "loops": [lp.to_json() for lp in self.loops], "port_bits": self.port_bits,
                "modules": {k: {"latency_cycles": m.latency_cycles, "interval_cycles": m.interval_cycles,
                                "resources": m.resources, "loops": [lp.to_json() for lp in m.loops]}
                            for k, m in self.modules.items()},
                "missing": self.missing}


def _resources(parent: ET.Element | None, missing: list[str], what: str) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for key, tags in RESOURCE_TAGS.items():
        value = None
        for tag in tags:
            text = parent.findtext(tag) if parent is not None else None
            if text is not None:
                value, _ = _range(text)
                break
        if value is None:
            missing.append(f"{what}.{key}")
        out[key] = value
    return out


def _parse_profile(root: ET.Element, path: str) -> SynthReport:
    missing: list[str] = []
    user = root.find("UserAssignments")
    perf = root.find("PerformanceEstimates")
    if perf is None:
        # the module entries of newer reports have no <profile> wrapper around their figures
        perf = root
    timing = perf.find("SummaryOfTimingAnalysis")
    overall = perf.find("SummaryOfOverallLatency")
    area = root.find("AreaEstimates")

    def text(parent: ET.Element | None, tag: str) -> str | None:
        value = parent.findtext(tag) if parent is not None else None
        if value is None:
            missing.append(tag)
        return value.strip() if value is not None else None

    best, _ = _range(text(overall, "Best-caseLatency"))
    _, worst = _range(text(overall, "Worst-caseLatency"))
    imin, _ = _range(text(overall, "Interval-min"))
    _, imax = _range(text(overall, "Interval-max"))
    ports: dict[str, int] = {}
    for rtl in root.iter("RtlPorts"):
        name, bits = rtl.findtext("name") or "", rtl.findtext("Bits")
        m = re.fullmatch(r"m_axi_(\w+)_(RDATA|WDATA)", name.strip())
        if m and bits is not None and bits.strip().isdigit():
            ports[m.group(1)] = max(ports.get(m.group(1), 0), int(bits))
    report = SynthReport(
        path=path,
        tool_version=(root.findtext("ReportVersion/Version") or "").strip() or None,
        part=(user.findtext("Part") or "").strip() or None if user is not None else None,
        top=((user.findtext("TopModelName") if user is not None else None) or root.findtext("Name") or "").strip()
        or None,
        target_clock_ns=_float(text(user, "TargetClockPeriod")),
        clock_uncertainty_ns=_float(user.findtext("ClockUncertainty")) if user is not None else None,
        estimated_clock_ns=_float(text(timing, "EstimatedClockPeriod")),
        latency_cycles={"best": best, "worst": worst},
        interval_cycles={"min": imin, "max": imax},
        resources=_resources(area.find("Resources") if area is not None else None, missing, "resources"),
        available=_resources(area.find("AvailableResources") if area is not None else None, [], "available"),
        loops=_loops(perf.find("SummaryOfLoopLatency")),
        port_bits=ports,
        missing=missing,
    )
    for module in root.iter("Module"):
        name = (module.findtext("Name") or "").strip()
        if name and name != report.top:
            report.modules[name] = _parse_profile(module, path)
    return report


def read_csynth(path: str | Path) -> SynthReport:
    """One ``csynth.xml`` file."""
    path = Path(path)
    try:
        root = ET.parse(path).getroot()
    except FileNotFoundError:
        raise ReportError(f"{path} does not exist") from None
    except ET.ParseError as exc:
        raise ReportError(f"{path} is not a complete XML report ({exc}): was the synthesis interrupted?") from None
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}") from None
    if root.find("PerformanceEstimates") is None and root.find("AreaEstimates") is None:
        raise ReportError(f"{path} is not a synthesis report (no PerformanceEstimates or AreaEstimates)")
    return _parse_profile(root, str(path))


def find_csynth(path: str | Path) -> Path:
    """The top's ``csynth.xml`` of ``path``: the file itself, a ``syn/report`` directory, a solution, or an
    HLS project (the first solution that has one)."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise ReportError(f"{path} does not exist")
    for pattern in ("csynth.xml", "syn/report/csynth.xml", "*/syn/report/csynth.xml", "*/*/syn/report/csynth.xml"):
        found = sorted(path.glob(pattern))
        if found:
            return found[0]
    raise ReportError(f"{path} has no csynth.xml (looked in syn/report of every solution): run csynth first")


def read_solution(path: str | Path) -> SynthReport:
    """The top's report of a solution directory (or anything :func:`find_csynth` takes), with the
    per-module reports beside it read into ``modules``."""
    top_file = find_csynth(path)
    report = read_csynth(top_file)
    for other in sorted(top_file.parent.glob("*_csynth.xml")):
        try:
            module = read_csynth(other)
        except ReportError:
            continue  # a module report cut short does not hide the others
        name = module.top or other.name.removesuffix("_csynth.xml")
        if name != report.top:
            report.modules.setdefault(name, module)
    return report


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
        text = Path(path).read_text(errors="replace")
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


_PIPELINE = re.compile(r"Pipelining result\s*:\s*Target II\s*=\s*(\w+),\s*Final II\s*=\s*(\w+),\s*Depth\s*=\s*(\d+)"
                       r"(?:,\s*loop\s*'([^']+)')?")
_PORTS = re.compile(r"II Violation in module '([^']+)'\s*\(loop '([^']+)'\).*limited memory ports.*?array '([^']+)'")
_BURST = re.compile(r"[Bb]urst (?:read|write)s? of (?:length (\d+)|variable length) and bit width (\d+)"
                    r"(?: in loop '([^']+)')?(?:.*?bundle '([^']+)')?")
_WIDEN = re.compile(r"[Ww]idening.*?'([^']+)'.*?(\d+) bits")


def read_log(path: str | Path) -> LogReport:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}") from None
    report = LogReport([], [], [], [], [])
    for line in text.splitlines():
        if m := _PIPELINE.search(line):
            report.pipelines.append({"loop": m.group(4), "target_ii": _range(m.group(1))[0],
                                     "final_ii": _range(m.group(2))[0], "depth": int(m.group(3))})
        if m := _PORTS.search(line):
            report.port_limits.append({"module": m.group(1), "loop": m.group(2), "array": m.group(3)})
        if m := _BURST.search(line):
            report.bursts.append({"length": int(m.group(1)) if m.group(1) else None, "bits": int(m.group(2)),
                                  "loop": m.group(3), "bundle": m.group(4)})
        if m := _WIDEN.search(line):
            report.widened.append({"variable": m.group(1), "bits": int(m.group(2))})
        if line.startswith("ERROR:"):
            report.errors.append(line.strip())
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
        text = Path(path).read_text(errors="replace")
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}") from None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 8 and cells[0].lower() in ("verilog", "vhdl") and cells[1] not in ("", "NA"):
            nums = [_range(c)[0] for c in cells[2:8]]
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
        text = Path(path).read_text(errors="replace")
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}") from None
    values: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"\s*([A-Za-z][A-Za-z0-9 _-]*?)\s*:\s*(\S+)\s*$", line)
        if m:
            values.setdefault(m.group(1).strip(), m.group(2))
    resources = {k: _range(values.get(tag))[0] for k, tag in _IMPL_KEYS.items()}
    achieved = _float(values.get("CP achieved post-implementation"))
    if all(v is None for v in resources.values()) and achieved is None:
        raise ReportError(f"{path} has no post-implementation resources or timing")
    met = None
    if "Timing met" in text:
        met = True
    elif "Timing not met" in text or "timing not met" in text.lower():
        met = False
    return ImplReport(resources, _float(values.get("CP required")), achieved, met)
