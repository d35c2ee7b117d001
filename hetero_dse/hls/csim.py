"""C-simulation of a generated project with g++: compile kernel + testbench, run, read the verdict.

Uses the real Vitis headers when ``$XILINX_HLS/include`` exists, the project's stand-ins in
``sim/include`` otherwise (they implement only what the generated code uses).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hetero_dse.errors import HeteroDSEError

COMPILE_TIMEOUT_S = 300
#: a C-simulation runs the operator once, scalar, at well over 10^8 operations a second with -O2 (a kernel that
#: loops forever is stopped after this much time per operation, never less than a minute)
RUN_FLOOR_S, RUN_OPS_PER_S = 60.0, 1e8


#: how much longer a C-simulation as the device runs it may take (a thread a process, each FIFO's handshakes)
DATAFLOW_SLOWER = 8


def run_timeout(project: Path) -> float:
    """Seconds the C-simulation of ``project`` may run: proportional to its operations (design.json)."""
    import json

    try:
        ops = float(json.loads((project / "design.json").read_text())["predicted"]["ops"])
    except (OSError, ValueError, KeyError, TypeError):
        return 600.0
    return max(RUN_FLOOR_S, ops / RUN_OPS_PER_S)


@dataclass(frozen=True)
class CsimResult:
    passed: bool
    elements: int
    mismatches: int
    max_abs_error: float
    headers: str  # "vitis" or "stand-in"
    output: str
    warnings: tuple[str, ...] = ()  # what the compiler warned about the generated code (-Wall -Wextra)


def find_compiler() -> str:
    for name in ("g++", "clang++"):
        path = shutil.which(name)
        if path:
            return path
    raise HeteroDSEError("C-simulation needs a C++ compiler: install g++ (e.g. 'sudo apt-get install g++') "
                         "or run 'bash scripts/bootstrap.sh'")


def _check_csim_memory(project: Path) -> None:
    """Refuse, in one sentence, a network project whose C-simulation would hold more blocks than the limit."""
    import json

    from hetero_dse.hls.network_project import MAX_CSIM_BYTES
    from hetero_dse.units import fmt_bytes

    try:
        held = int(json.loads((project / "design.json").read_text()).get("csim_bytes", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return
    if held > MAX_CSIM_BYTES:
        raise HeteroDSEError(f"C-simulation of {project} would hold {fmt_bytes(held)} of blocks at once (a "
                             "C-simulation runs a layer's processes one after the other, so its streams keep every "
                             f"block of the layer; limit {fmt_bytes(MAX_CSIM_BYTES)}): synthesise it, or C-simulate "
                             "a smaller input")


def csim(directory: str | Path, dataflow: bool = False) -> CsimResult:
    """Compile and run the testbench of the project in ``directory``. ``dataflow``: run each DATAFLOW region as the
    device does, each process a thread and each FIFO as deep as declared (the layer pipeline's; this project's
    ``hls_stream.h``, even where Vitis is installed): a FIFO too shallow deadlocks and is said so."""
    project = Path(directory)
    if not (project / "src" / "kernel.cpp").is_file() or not (project / "tb" / "tb.cpp").is_file():
        if project.with_name(project.name + ".partial").exists():
            raise HeteroDSEError(f"{project} was not finished (an interrupted run left {project.name}.partial); "
                                 "run explore again")
        raise HeteroDSEError(f"{project} is not a hetero_dse HLS project (no src/kernel.cpp and tb/tb.cpp); "
                             "give the 'hls' directory that explore wrote")
    if dataflow:
        from hetero_dse.hls.pipeline_lint import is_pipeline_project

        if not is_pipeline_project(project):  # its processes are calls, not threads: bounded streams would stall
            raise HeteroDSEError(f"{project} is not a layer pipeline's project: only those run as the device does "
                                 "(drop --dataflow)")
    _check_csim_memory(project)
    vitis = os.environ.get("XILINX_HLS")
    has_vitis = bool(vitis) and (Path(vitis) / "include").is_dir() and not dataflow
    include = Path(vitis) / "include" if has_vitis else project / "sim" / "include"
    headers = "vitis" if has_vitis else "stand-in"
    build = project / "sim" / "build"
    build.mkdir(parents=True, exist_ok=True)
    binary = build / ("csim_dataflow" if dataflow else "csim")
    # HLS pragmas are for Vitis and loop labels for its reports (nothing jumps to them); every other
    # warning of -Wall -Wextra is a defect of the generated code
    cmd = [find_compiler(), "-std=c++14", "-O2", "-Wall", "-Wextra", "-Wno-unknown-pragmas", "-Wno-unused-label",
           *(["-DHDSE_DATAFLOW_THREADS", "-pthread"] if dataflow else []), f"-I{include}",
           f"-I{project / 'src'}",
           str(project / "src" / "kernel.cpp"), str(project / "tb" / "tb.cpp"), "-o", str(binary)]
    try:
        compiled = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise HeteroDSEError(f"compiling {project} took more than {COMPILE_TIMEOUT_S} s") from None
    if compiled.returncode != 0:
        first = next((ln for ln in compiled.stderr.splitlines() if "error" in ln), compiled.stderr.strip()[:300])
        raise HeteroDSEError(f"C-simulation of {project} does not compile: {first}")
    limit = run_timeout(project) * (DATAFLOW_SLOWER if dataflow else 1)
    try:
        ran = subprocess.run([str(binary), str(project / "data")], capture_output=True, text=True,
                             timeout=limit, check=False)
    except subprocess.TimeoutExpired:
        raise HeteroDSEError(f"C-simulation of {project} ran for more than {limit:.0f} s (its operator takes "
                             "far less: a loop of the generated code does not end)") from None
    text = ran.stdout + ran.stderr
    # the test bench's verdict: its last such line (a network's bench prints one a layer before its total)
    m = ([*re.finditer(r"^elements=(\d+) mismatches=(\d+) max_abs_error=(\S+)", text, re.M)] or [None])[-1]
    if m is None:
        raise HeteroDSEError(f"C-simulation of {project} stopped before comparing (exit {ran.returncode}): "
                             f"{text.strip().splitlines()[-1] if text.strip() else 'no output'}")
    warnings = tuple(ln for ln in compiled.stderr.splitlines() if "warning:" in ln)
    return CsimResult(ran.returncode == 0 and "PASS" in text, int(m.group(1)), int(m.group(2)),
                      float(m.group(3)), headers, text, warnings)
