"""TEST DOUBLE of Vitis HLS's ``vitis_hls`` for the synthesis tests: no synthesis runs here.

Run as ``vitis_hls -f run_hls.tcl`` in a hetero_dse HLS project, it writes the files a real Vitis HLS 2023.2
run leaves in ``prj/solution1`` — ``csynth.xml`` with its module hierarchy and a ``<module>_csynth.xml`` per
module (a pipelined loop nest that is not its function's whole body in a ``<function>_Pipeline_<labels>``
module of its own), ``csynth.rpt``'s bind tables, the Verilog with one core module an operator, the log's
pipelining, II-violation and burst messages, and with the steps asked (``HDSE_STEPS``) the co-simulation and
implementation reports — all derived from the project's **code** (``src/kernel.cpp``, ``project.tcl``) by
``hls_design``/``hls_schedule``, never from design.json's predictions: a defect in the code or an error in
the model shows as a mismatch when the result is validated.

``FAKE_VITIS_MODE`` makes it misbehave: ``crash`` (exit 1), ``hang`` (sleep), ``garbage`` (a report cut short),
``killworker`` (kills the process that started it: the Dask worker), ``forkhang`` (starts a child that
sleeps, then hangs); ``FAKE_VITIS_MODE_FOR=<operator>``
limits that to one operator's projects. ``FAKE_VITIS_SCALE`` multiplies the LUT and FF it reports.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

VERSION = "2023.2"
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: Whole-device resources of the parts hetero_dse's boards use (shared/notes/fpga.md).
PARTS = {
    "xcvu9p-flgb2104-2-i": (4320, 6840, 2364480, 1182240, 960),
    "xcu200-fsgd2104-2-e": (4320, 6840, 2364480, 1182240, 960),
    "xcu250-figd2104-2L-e": (5376, 12288, 3456000, 1728000, 1280),
    "xcu280-fsvh2892-2L-e": (4032, 9024, 2607360, 1303680, 960),
    "xczu9eg-ffvb1156-2-e": (1824, 2520, 548160, 274080, 0), "xczu7ev-ffvc1156-2-e": (624, 1728, 460800, 230400, 96),
    "xc7z020clg400-1": (280, 220, 106400, 53200, 0), "xck26-sfvc784-2lv-c": (288, 1248, 234240, 117120, 64),
}


class _Tee:
    """The real tool writes its log to vitis_hls.log and to standard output alike."""

    def __init__(self, path: str) -> None:
        self.file = open(path, "w")  # noqa: SIM115 - held for the run

    def write(self, text: str) -> None:
        self.file.write(text)
        sys.stdout.write(text)

    def flush(self) -> None:
        self.file.flush()
        sys.stdout.flush()


def _xml(tag: str, content: str) -> str:
    return f"<{tag}>{content}</{tag}>"


def _resources(r: dict[str, int]) -> str:
    return "".join(_xml(k, str(v)) for k, v in (("BRAM_18K", r.get("bram18k", 0)), ("DSP", r.get("dsp", 0)),
                                                ("FF", r.get("ff", 0)), ("LUT", r.get("lut", 0)),
                                                ("URAM", r.get("uram", 0))))


def _module_resources(design, name: str) -> dict[str, int]:
    """A module's own resources with its children's (instances counted)."""
    out = {"dsp": 0, "lut": 0, "ff": 0, "bram18k": 0, "uram": 0}

    def add(m: str, n: int) -> None:
        module = design.modules[m]
        for core in module.cores:
            dsp, lut, ff, _ = core.figures(design.clock_mhz)
            out["dsp"] += n * dsp
            out["lut"] += n * lut
            out["ff"] += n * ff
        out["lut"] += n * module.lut
        out["ff"] += n * module.ff
        for child, k in module.children.items():
            add(child, n * k)

    add(name, 1)
    return out


def _loop_xml(loop, with_name: bool) -> str:
    violation = "<IssueType>II Violation</IssueType>" if loop.ii > loop.target_ii else ""
    return (f"<{loop.name}>" + (_xml("Name", loop.name) if with_name else "")
            + f"<TripCount>{loop.trip_count}</TripCount><Latency>{loop.latency}</Latency>"
            + f"<IterationLatency>{loop.depth}</IterationLatency><PipelineII>{loop.ii}</PipelineII>"
            + f"<PipelineDepth>{loop.depth}</PipelineDepth><PipelineType>yes</PipelineType>{violation}"
            + f"<InstanceList/></{loop.name}>")


def _module_xml(design, name: str, clock_ns: float, with_name: bool) -> str:
    m = design.modules[name]
    loops = "".join(_loop_xml(lp, with_name) for lp in m.loops)
    return (f"<PerformanceEstimates><SummaryOfTimingAnalysis><unit>ns</unit><EstimatedClockPeriod>"
            f"{clock_ns * 0.9:.3f}</EstimatedClockPeriod></SummaryOfTimingAnalysis><SummaryOfOverallLatency>"
            f"<Best-caseLatency>{m.latency}</Best-caseLatency><Average-caseLatency>{m.latency}</Average-caseLatency>"
            f"<Worst-caseLatency>{m.latency}</Worst-caseLatency><Interval-min>{m.latency + 1}</Interval-min>"
            f"<Interval-max>{m.latency + 1}</Interval-max></SummaryOfOverallLatency>"
            f"<SummaryOfLoopLatency>{loops}</SummaryOfLoopLatency></PerformanceEstimates>"
            f"<AreaEstimates><Resources>{_resources(_module_resources(design, name))}</Resources></AreaEstimates>")


def _hierarchy(design, name: str) -> str:
    return f"<ModuleName>{name}</ModuleName>{_instances(design, name) or '<InstancesList/>'}"


def _instances(design, name: str) -> str:
    m = design.modules[name]
    inner = "".join(f"<Instance><InstName>grp_{child}_fu_{i}</InstName><ModuleName>{child}</ModuleName>"
                    f"{_instances(design, child)}</Instance>" for i, child in enumerate(m.children))
    return f"<InstancesList>{inner}</InstancesList>" if inner else ""


def write_reports(design, steps: list[str], scale: float, garbage: bool) -> None:
    top = design.top
    clock_ns = design.clock_ns
    totals = design.totals()
    totals["lut"] = round(totals["lut"] * scale)
    totals["ff"] = round(totals["ff"] * scale)
    bram, dsp, ff, lut, uram = PARTS.get(design.part, (0, 0, 0, 0, 0))
    available = {"bram18k": bram, "dsp": dsp, "ff": ff, "lut": lut, "uram": uram}
    solution = Path("prj") / "solution1"
    report_dir = solution / "syn" / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    ports = "".join(f"<RtlPorts><name>m_axi_{p['bundle']}_RDATA</name><Object>{p['bundle']}</Object>"
                    f"<IOProtocol>m_axi</IOProtocol><Bits>{p['bits']}</Bits></RtlPorts>" for p in design.ports.values())
    modules = "".join(f"<Module>{_xml('Name', name)}{_module_xml(design, name, clock_ns, True)}</Module>"
                      for name in design.modules if name != top)
    latency = design.latency
    top_xml = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><profile><ReportVersion><Version>{VERSION}</Version>"
               f"</ReportVersion><UserAssignments><unit>ns</unit><Part>{design.part}</Part><TopModelName>{top}"
               f"</TopModelName><TargetClockPeriod>{clock_ns:.2f}</TargetClockPeriod><ClockUncertainty>"
               f"{clock_ns * 0.27:.2f}</ClockUncertainty><FlowTarget>vitis</FlowTarget></UserAssignments>"
               f"<PerformanceEstimates><PipelineType>dataflow</PipelineType><SummaryOfTimingAnalysis><unit>ns</unit>"
               f"<EstimatedClockPeriod>{clock_ns * 0.9:.3f}</EstimatedClockPeriod></SummaryOfTimingAnalysis>"
               f"<SummaryOfOverallLatency><unit>clock cycles</unit><Best-caseLatency>{latency}</Best-caseLatency>"
               f"<Average-caseLatency>{latency}</Average-caseLatency><Worst-caseLatency>{latency}"
               f"</Worst-caseLatency><Interval-min>{latency + 1}</Interval-min><Interval-max>{latency + 1}"
               f"</Interval-max></SummaryOfOverallLatency></PerformanceEstimates><AreaEstimates><Resources>"
               f"{_resources(totals)}</Resources><AvailableResources>{_resources(available)}</AvailableResources>"
               f"</AreaEstimates><InterfaceSummary>{ports}</InterfaceSummary><RTLDesignHierarchy><TopModule>"
               f"{_hierarchy(design, top)}</TopModule></RTLDesignHierarchy><ModuleInformation>{modules}"
               f"</ModuleInformation></profile>\n")
    if garbage:
        top_xml = top_xml[: len(top_xml) // 2]
    (report_dir / "csynth.xml").write_text(top_xml)
    for name in design.modules:
        if name == top:
            continue
        (report_dir / f"{name}_csynth.xml").write_text(
            f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><profile><ReportVersion><Version>{VERSION}</Version>"
            f"</ReportVersion><UserAssignments><unit>ns</unit><Part>{design.part}</Part><TopModelName>{name}"
            f"</TopModelName><TargetClockPeriod>{clock_ns:.2f}</TargetClockPeriod></UserAssignments>"
            f"{_module_xml(design, name, clock_ns, False)}</profile>\n")
    # csynth.rpt: the bind tables, one row an operator (of each module, as the real report lists them)
    op_rows, store_rows = [], []
    for m in design.modules.values():
        for i, core in enumerate(m.cores):
            core_dsp, _, _, lat = core.figures(design.clock_mhz)
            rtl = core.rtl_name(design.clock_mhz)
            op_rows.append(f"|   {(rtl or core.op + '_ln')}_U{i} | {core_dsp or '-'} | {'yes' if core.bound else ''} | "
                           f"{core.variable or core.op} | {core.op} | {core.impl} | {lat} |")
    for mem in design.memories:
        if mem["impl"] == "registers":
            continue
        store_rows.append(f"|   {mem['variable']}_U | ram_s2p | pipo | {mem['bram18k'] or '-'} | {mem['uram'] or '-'} "
                          f"| yes | {mem['variable']} | {mem['impl']} | 1 | {mem['bits']}, {mem['words']}, "
                          f"{mem['banks']} |")
    (report_dir / "csynth.rpt").write_text(
        "== Bind Op Report\n+---+\n| Name | DSP | Pragma | Variable | Op | Impl | Latency |\n+---+\n"
        + "\n".join(op_rows) + "\n+---+\n\n== Bind Storage Report\n+---+\n| Name | Usage | Type | BRAM | URAM | "
        "Pragma | Variable | Impl | Latency | Bitwidth, Depth, Banks |\n+---+\n" + "\n".join(store_rows) + "\n+---+\n")
    _write_verilog(design, solution / "syn" / "verilog")
    if "cosim" in steps:
        sim = solution / "sim" / "report"
        sim.mkdir(parents=True, exist_ok=True)
        status = "Fail" if design.unsafe else "Pass"
        (sim / f"{top}_cosim.rpt").write_text(
            "| RTL | Status | min | avg | max | min | avg | max | total |\n"
            f"| Verilog | {status} | {latency} | {latency} | {latency} | NA | NA | NA | {latency} |\n")
    if "impl" in steps:
        impl = solution / "impl" / "report" / "verilog"
        impl.mkdir(parents=True, exist_ok=True)
        (impl / "export_impl.rpt").write_text(
            "#=== Post-Implementation Resource usage ===\n"
            f"LUT: {totals['lut']}\nFF: {totals['ff']}\nDSP: {totals['dsp']}\nBRAM: {totals['bram18k']}\n"
            f"URAM: {totals['uram']}\n#=== Final timing ===\nCP required: {clock_ns:.3f}\n"
            f"CP achieved post-implementation: {clock_ns * 1.05:.3f}\nTiming not met\n")


def _write_verilog(design, verilog: Path) -> None:
    """The top with its m_axi data ports, and a module per module: its children and one instance a core."""
    verilog.mkdir(parents=True, exist_ok=True)
    top = design.top
    decls = "".join(f"input [{p['bits'] - 1}:0] m_axi_{p['bundle']}_RDATA;\n" for p in design.ports.values())
    port_list = ", ".join(["ap_clk", *(f"m_axi_{p['bundle']}_RDATA" for p in design.ports.values())])
    for name, m in design.modules.items():
        lines = []
        for child, n in m.children.items():
            lines += [f"{top}_{child} grp_{child}_{i} (.ap_clk(ap_clk));" for i in range(n)]
        for i, core in enumerate(m.cores):
            rtl = core.rtl_name(design.clock_mhz)
            if rtl:
                lines.append(f"{top}_{rtl} {core.op}_U{i} (.clk(ap_clk));")
        module = top if name == top else f"{top}_{name}"
        head = f"module {module} ({port_list});\ninput ap_clk;\n{decls}" if name == top else \
            f"module {module} (ap_clk);\ninput ap_clk;\n"
        (verilog / f"{module}.v").write_text(head + "\n".join(lines) + "\nendmodule\n")


def _worker() -> int:
    """The process that started this job: the parent, or the parent of the supervisor between them."""
    parent = os.getppid()
    try:
        with open(f"/proc/{parent}/cmdline", "rb") as f:
            supervised = b"hetero_dse.hls.supervise" in f.read()
        if supervised:
            with open(f"/proc/{parent}/stat") as f:
                return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        pass
    return parent


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] in ("-version", "--version"):
        print(f"Vitis HLS - High-Level Synthesis from C, C++ and OpenCL v{VERSION} (64-bit) [test double]")
        return 0
    mode = os.environ.get("FAKE_VITIS_MODE", "")
    only = os.environ.get("FAKE_VITIS_MODE_FOR")  # misbehave for this operator's projects only
    if only and json.loads(Path("design.json").read_text()).get("operator") != only:
        mode = ""
    steps = os.environ.get("HDSE_STEPS", "csim csynth cosim export").split()
    log = _Tee("vitis_hls.log")
    log.write(f"INFO: [HLS 200-10] test double of vitis_hls {VERSION}, steps {' '.join(steps)}\n")
    log.flush()
    if mode == "crash":
        log.write("ERROR: [HLS 200-70] the test double crashed as asked\n")
        log.flush()
        return 1
    if mode == "forkhang":  # a launcher's child left running, then the tool hangs
        import subprocess

        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        Path("fake_child.pid").write_text(str(child.pid))
        mode = "hang"
    if mode == "hang":
        Path("fake.pid").write_text(str(os.getpid()))
        time.sleep(3600)
    if mode == "killworker":
        os.kill(_worker(), 9)  # the Dask worker running this job
        return 1
    from hls_design import build

    design = build(Path("."))
    for line in design.log:
        log.write(line + "\n")
    write_reports(design, steps, float(os.environ.get("FAKE_VITIS_SCALE", "1.0")), mode == "garbage")
    if design.unsafe and "cosim" in steps:
        for line in design.unsafe:
            log.write(f"ERROR: [COSIM 212-101] the RTL's output differs from the C test bench: {line}\n")
    log.write("INFO: [HLS 200-112] Total elapsed time: 0 seconds (test double)\n")
    log.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
