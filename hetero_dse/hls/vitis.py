"""Vitis HLS as this project finds and runs it: the launcher (``vitis-run`` from 2023.2 on, ``vitis_hls``
before) on PATH or under ``$XILINX_HLS``/``$XILINX_VITIS``, the version it reports, and the steps a job may
run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hetero_dse.errors import HeteroDSEError

__all__ = ["STEPS", "SynthError", "SynthTool", "find_tool", "parse_steps"]

#: What a user may ask for, in the order the flow runs them; cosim and impl need csynth in the same run.
STEPS = ("csynth", "cosim", "impl")


class SynthError(HeteroDSEError):
    """Synthesis cannot start: no tool, no project, no scheduler."""


@dataclass(frozen=True)
class SynthTool:
    """The launcher found and the tool version it reports."""

    path: str
    kind: str  # "vitis-run" or "vitis_hls"
    version: str

    def command(self, script: str = "run_hls.tcl") -> list[str]:
        if self.kind == "vitis-run":
            return [self.path, "--mode", "hls", "--tcl", script]
        return [self.path, "-f", script]


def find_tool(env: dict[str, str] | None = None) -> SynthTool:
    """``vitis-run`` or ``vitis_hls`` on PATH, else under ``$XILINX_HLS/bin`` or ``$XILINX_VITIS/bin``."""
    env = dict(os.environ if env is None else env)
    search = [env.get("PATH", "")]
    for var in ("XILINX_HLS", "XILINX_VITIS"):
        if env.get(var):
            search.append(str(Path(env[var]) / "bin"))
    path = os.pathsep.join(search)
    for kind in ("vitis-run", "vitis_hls"):
        found = shutil.which(kind, path=path)
        if found:
            return SynthTool(found, kind, _version(found, kind))
    raise SynthError("Vitis HLS was not found: put vitis_hls (or vitis-run, 2023.2 and later) on PATH, or set "
                     "XILINX_HLS or XILINX_VITIS to the installation (source its settings64.sh)")


def _version(path: str, kind: str) -> str:
    try:
        out = subprocess.run([path, "--version" if kind == "vitis-run" else "-version"], capture_output=True,
                             text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    m = re.search(r"v(\d{4}\.\d(?:\.\d)?)", out)
    return m.group(1) if m else "unknown"


def parse_steps(text: str) -> tuple[str, ...]:
    """``csynth,cosim`` -> the steps to run, in flow order, csynth always among them."""
    asked = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in asked if s not in STEPS]
    if unknown:
        raise SynthError(f"unknown step {unknown[0]!r}: choose among {', '.join(STEPS)}")
    return tuple(s for s in STEPS if s in asked or s == "csynth")
