"""What a synthesis run left in its project, read back: ``csynth.xml`` and the module reports, the Verilog
(pyverilog), the log, the co-simulation and the implementation reports.

Reading is bounded like the tool's run: the reports are data a tool wrote (or anyone planted), and a
report that takes the parsers longer than ``synth --timeout`` is a failed job, not a hung one. The reading
runs in a child process of its own session (``python -m hetero_dse.hls.readback PROJECT``, under
:mod:`hetero_dse.hls.supervise`, so kill -9 of ``synth`` does not leave it running), killed whole at the
limit; what it read comes back as one JSON object on its standard output.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from hetero_dse.hls.supervise import supervised

__all__ = ["read_back", "read_back_within"]


def read_back(project: Path) -> dict[str, Any]:
    """What the run left in ``prj/solution1``: each part that is missing or unreadable is said, not fatal."""
    from hetero_dse.hls.reports import ReportError, read_solution
    from hetero_dse.hls.tool_reports import read_bind_tables, read_cosim, read_impl, read_log
    from hetero_dse.hls.rtl import RtlError, read_rtl

    solution = project / "prj" / "solution1"
    out: dict[str, Any] = {}
    try:
        report = read_solution(solution)
    except ReportError as exc:
        return {"reason": f"no synthesis report: {exc}"}
    out["report"] = report.to_json()
    notes = []
    try:
        rtl = read_rtl(solution / "syn" / "verilog", report.top)
        out["rtl"] = {"port_bits": rtl.port_bits, "cores": rtl.cores, "memories": rtl.memories}
    except RtlError as exc:
        notes.append(f"RTL not read: {exc}")
    for log in (project / "vitis_hls.log", solution / "solution1.log", project / "synth.log"):
        if log.exists():
            try:
                parsed = read_log(log)
            except ReportError as exc:
                notes.append(str(exc))
                continue
            out["log"] = {"pipelines": parsed.pipelines, "port_limits": parsed.port_limits, "carried": parsed.carried,
                          "bursts": parsed.bursts, "widened": parsed.widened, "errors": parsed.errors}
            break
    rpt = solution / "syn" / "report" / "csynth.rpt"
    if rpt.exists():
        try:
            out["bind"] = read_bind_tables(rpt)
        except ReportError as exc:
            notes.append(str(exc))
    cosim = next(iter(sorted((solution / "sim" / "report").glob("*_cosim.rpt"))), None)
    if cosim is not None:
        try:
            c = read_cosim(cosim)
            out["cosim"] = {"status": c.status, "latency_cycles": c.latency_cycles}
        except ReportError as exc:
            notes.append(str(exc))
    impl = solution / "impl" / "report" / "verilog" / "export_impl.rpt"
    if impl.exists():
        try:
            i = read_impl(impl)
            out["impl"] = {"resources": i.resources, "achieved_clock_ns": i.achieved_clock_ns,
                           "target_clock_ns": i.target_clock_ns, "timing_met": i.timing_met}
        except ReportError as exc:
            notes.append(str(exc))
    if notes:
        out["notes"] = notes
    return out


def read_back_within(project: Path, limit_s: float) -> dict[str, Any]:
    """:func:`read_back` of ``project`` in a child process stopped after ``limit_s`` seconds: a part that
    cannot be read in time is the job's failure reason, one sentence."""
    proc = subprocess.Popen(supervised([sys.executable, "-m", "hetero_dse.hls.readback", str(project)]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"reason": f"reading the reports took longer than the {limit_s:.0f} s limit: not read"}
    if proc.returncode != 0:
        last = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        return {"reason": f"the reports could not be read ({last[0][:300]})"}
    return json.loads(out)


if __name__ == "__main__":
    # standard output carries the JSON alone: whatever the readers or the preprocessor they start print goes
    # to standard error (at the descriptor, so a child process's output too)
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    json.dump(read_back(Path(sys.argv[1])), answer)
    answer.close()
