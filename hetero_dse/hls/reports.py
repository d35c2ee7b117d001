"""Reading what Vitis HLS (and Vivado HLS before it) reports about a synthesized design: ``csynth.xml``.

The top's ``csynth.xml`` and the ``<module>_csynth.xml`` beside it (``solution/syn/report/``): clock,
latency, interval, every loop (trip count, II, depth, latency, nested loops) and resources with what the
part has. The formats of Vivado HLS 2018–2019 and Vitis HLS 2020.1–2024.2 differ in ways this reader
absorbs: ``<DSP48E>`` before ``<DSP>``; loops as elements named after the loop (older) or with a ``<Name>``
child (newer, also a ``name`` attribute); ``undef`` for what depends on data; ranges
(``<range><min>/<max>``, ``10 ~ 20``); per-module reports beside the top's, or a ``<ModuleInformation>``
list inside it; sections some versions omit. A field the file does not have is ``None``, never an
exception; a file that is not a report at all (or is cut short) is one :class:`ReportError` sentence. The
tool's other reports (``csynth.rpt``, the log, co-simulation, implementation) are read by
``hetero_dse.hls.tool_reports``.
"""

from __future__ import annotations

import math
import re
import stat
import xml.etree.ElementTree as ET

import defusedxml.ElementTree as DefusedET
from defusedxml import DefusedXmlException
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hetero_dse.errors import HeteroDSEError

__all__ = ["LoopReport", "ReportError", "SynthReport", "figure_range", "find_csynth", "read_csynth", "read_solution",
           "report_file", "to_float"]

#: The largest report read (the top's csynth.xml of a large design is a few MB) and the deepest nesting (a
#: report nests loops in modules some ten levels deep)
MAX_REPORT_BYTES = 256 * 2**20
MAX_NESTING = 200
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
def figure_range(text: str | None) -> tuple[int | None, int | None]:
    """``(min, max)`` of a figure: an integer, ``a ~ b``, or ``undef``/``-``/empty (None, None)."""
    if text is None:
        return None, None
    text = text.strip()
    m = re.fullmatch(r"(\d{1,18})\s*~\s*(\d{1,18})", text)
    if m:
        return int(m.group(1)), int(m.group(2))
    if re.fullmatch(r"\d{1,18}", text):
        return int(text), int(text)
    return None, None  # a negative count or one of 19 digits and more is not a figure a tool reports


def _figure(element: ET.Element | None) -> tuple[int | None, int | None]:
    """A figure element: its text, or a ``<range><min>..</min><max>..</max></range>`` child."""
    if element is None:
        return None, None
    rng = element.find("range")
    if rng is not None:
        lo, _ = figure_range(rng.findtext("min"))
        hi, _ = figure_range(rng.findtext("max"))
        return lo, hi
    return figure_range(element.text)


def to_float(text: str | None) -> float | None:
    """A positive, finite number (a clock period, a time), else None."""
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) and value > 0 else None


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
            _, trips = figure_range(el.findtext("TripCountMax"))
        _, latency = _figure(el.find("Latency"))
        if latency is None:
            _, latency = figure_range(el.findtext("LatencyMax"))
        ii, _ = _figure(el.find("PipelineII"))
        achieved, _ = figure_range(el.findtext("AchievedII"))
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
    #: the modules of the design (``RTLDesignHierarchy``, Vitis 2022 and later): None where the report has none
    hierarchy: set[str] | None = None

    @property
    def tool(self) -> str:
        """The tool that wrote the report, as it calls itself: Vivado HLS before 2020.1, Vitis HLS since."""
        m = re.match(r"(\d{4})", self.tool_version or "")
        if m is None:
            return "Vitis HLS or Vivado HLS"
        return "Vivado HLS" if int(m.group(1)) < 2020 else "Vitis HLS"

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
        return {"tool": self.tool, "tool_version": self.tool_version, "part": self.part, "top": self.top,
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
                value, _ = figure_range(text)
                break
        if value is None:
            missing.append(f"{what}.{key}")
        out[key] = value
    return out


def _parse_profile(root: ET.Element, path: str, modules: bool = True) -> SynthReport:
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

    best, _ = figure_range(text(overall, "Best-caseLatency"))
    _, worst = figure_range(text(overall, "Worst-caseLatency"))
    imin, _ = figure_range(text(overall, "Interval-min"))
    _, imax = figure_range(text(overall, "Interval-max"))
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
        target_clock_ns=to_float(text(user, "TargetClockPeriod")),
        clock_uncertainty_ns=to_float(user.findtext("ClockUncertainty")) if user is not None else None,
        estimated_clock_ns=to_float(text(timing, "EstimatedClockPeriod")),
        latency_cycles={"best": best, "worst": worst},
        interval_cycles={"min": imin, "max": imax},
        resources=_resources(area.find("Resources") if area is not None else None, missing, "resources"),
        available=_resources(area.find("AvailableResources") if area is not None else None, [], "available"),
        loops=_loops(perf.find("SummaryOfLoopLatency")),
        port_bits=ports,
        missing=missing,
    )
    hierarchy = root.find("RTLDesignHierarchy")
    if hierarchy is not None:
        report.hierarchy = {(m.text or "").strip() for m in hierarchy.iter("ModuleName") if (m.text or "").strip()}
    if modules:
        # every <Module> of the file once, however deeply nested (a module's own are among them): parsing
        # each module's nested modules again would take time exponential in the nesting
        for module in root.iter("Module"):
            name = (module.findtext("Name") or "").strip()
            if name and name != report.top:
                report.modules[name] = _parse_profile(module, path, modules=False)
    return report


def report_file(path: str | Path) -> Path:
    """``path``, checked to be a report one can read: a regular file (a named pipe planted at a report's name
    would block its reader forever, a device would never end) of a report's size."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ReportError(f"{path} does not exist") from None
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ReportError(f"{path} is not a regular file (a pipe, a device or a folder): not read")
    if info.st_size > MAX_REPORT_BYTES:
        raise ReportError(f"{path} is {info.st_size / 2**20:,.0f} MB, more than a synthesis report's "
                          f"{MAX_REPORT_BYTES / 2**20:,.0f} MB: not a report to read")
    return path


def read_csynth(path: str | Path) -> SynthReport:
    """One ``csynth.xml`` file."""
    path = report_file(path)
    try:
        # as data: a DTD, an entity or an external reference is refused, never resolved (defusedxml)
        root = DefusedET.parse(path, forbid_dtd=True).getroot()
    except FileNotFoundError:
        raise ReportError(f"{path} does not exist") from None
    except DefusedXmlException as exc:
        raise ReportError(f"{path} declares a DTD or entities ({type(exc).__name__}), which a synthesis report "
                          "does not: not read") from None
    except ET.ParseError as exc:
        raise ReportError(f"{path} is not a complete XML report ({exc}): was the synthesis interrupted?") from None
    except (LookupError, ValueError) as exc:  # an encoding Python does not know, a malformed declaration
        raise ReportError(f"{path} cannot be decoded as XML ({exc})") from None
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}") from None
    if _depth(root) > MAX_NESTING:
        raise ReportError(f"{path} nests its elements more than {MAX_NESTING} deep, which no synthesis report "
                          "does: not read")
    if root.find("PerformanceEstimates") is None and root.find("AreaEstimates") is None:
        raise ReportError(f"{path} is not a synthesis report (no PerformanceEstimates or AreaEstimates)")
    return _parse_profile(root, str(path))


def _depth(root: ET.Element) -> int:
    """How deeply ``root``'s elements nest (iteratively: a deep file must not exhaust the stack)."""
    deepest, stack = 0, [(root, 1)]
    while stack:
        element, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_NESTING:
            break
        stack.extend((child, depth + 1) for child in element)
    return deepest


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


def _unprefixed(module: str, top: str | None) -> str:
    """A module's name without the ``<top>_`` prefix some flows give it in one report and not another."""
    return module.removeprefix(f"{top}_") if top else module


def read_solution(path: str | Path) -> SynthReport:
    """The top's report of a solution directory (or anything :func:`find_csynth` takes), with the
    per-module reports beside it read into ``modules``: those of the modules in the top's hierarchy where the
    report has one (Vitis 2022 and later), every one beside it otherwise. A module's own report (any file
    but ``csynth.xml``) is read alone."""
    top_file = find_csynth(path)
    report = read_csynth(top_file)
    if top_file.name != "csynth.xml":
        return report  # one module's own report: the files beside it are other modules', not its
    for other in sorted(top_file.parent.glob("*_csynth.xml")):
        try:
            module = read_csynth(other)
        except ReportError:
            continue  # a module report cut short does not hide the others
        name = module.top or other.name.removesuffix("_csynth.xml")
        if report.hierarchy is not None and _unprefixed(name, report.top) not in {
                _unprefixed(m, report.top) for m in report.hierarchy}:
            continue  # a report of another design left in the folder (the top's hierarchy does not have it)
        if name != report.top:
            report.modules.setdefault(name, module)
    return report
