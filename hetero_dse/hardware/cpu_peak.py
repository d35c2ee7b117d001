"""The host CPU's FP32 peak, the compute roof of its roofline and the denominator of its "% peak":
cores × clock × FP32 lanes of one FMA unit × 2 (a fused multiply-add is two FLOPs) × FMA units per core.

The lanes come from the ISA in /proc/cpuinfo's flags: AVX-512 (``avx512f``) 16, AVX2 with FMA3 8. Zen 4 (AMD
family 25) is the exception: it runs AVX-512 on 256-bit units, two passes per instruction, so 8. The FMA units
per core are not in cpuinfo: two is the assumption (Intel server cores since Haswell, AMD since Zen 2); a core
with one 512-bit unit (Intel client AVX-512 parts, some Xeon Bronze and Silver) has half the peak, so
``HETERO_DSE_CPU_FMA_UNITS`` overrides it. The clock is cpufreq's maximum where the kernel exposes it, else
cpuinfo's "cpu MHz" (a VM's nominal clock; on a host without cpufreq it can be below a turbo clock).
A CPU without AVX2 and FMA, or not x86, has no peak known here: its roofline keeps the compute roof out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.host import host_cores

__all__ = ["CPUINFO", "FMA_UNITS", "FMA_UNITS_ENV", "MAX_FREQ", "CpuPeak", "cpu_peak", "host_cpu_peak"]

#: FMA units per core where nothing says otherwise: two on recent Intel and AMD server cores
FMA_UNITS = 2
#: the environment variable that gives the FMA units per core of a CPU that has another number
FMA_UNITS_ENV = "HETERO_DSE_CPU_FMA_UNITS"
CPUINFO = Path("/proc/cpuinfo")
MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
_ZEN4_FAMILY = 25  # AMD family 19h: Zen 3 (no AVX-512) and Zen 4 (AVX-512 on 256-bit units)


@dataclass(frozen=True)
class CpuPeak:
    """A CPU's FP32 peak and what it was computed from."""

    cores: int
    clock_ghz: float
    isa: str
    lanes: int  # FP32 lanes of one FMA unit
    fma_units: int  # per core
    clock_source: str

    @property
    def gflops(self) -> float:
        return self.cores * self.clock_ghz * self.lanes * 2 * self.fma_units

    def describe(self) -> str:
        return (f"FP32 peak {self.gflops:,.0f} GFLOPS = {self.cores} cores × {self.clock_ghz:.2f} GHz "
                f"({self.clock_source}) × {self.lanes} {self.isa} lanes × 2 (FMA) × {self.fma_units} FMA units "
                f"per core (set {FMA_UNITS_ENV} if the CPU has another number)")


def _first_processor(cpuinfo: str) -> dict[str, str]:
    """The fields of the first processor in /proc/cpuinfo's text (every processor of a host has the same ISA)."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def _lanes(fields: dict[str, str]) -> tuple[str, int] | None:
    flags = set(fields.get("flags", "").split())
    if "avx512f" in flags:
        amd_zen4 = fields.get("vendor_id") == "AuthenticAMD" and fields.get("cpu family") == str(_ZEN4_FAMILY)
        return ("AVX-512 (256-bit units)", 8) if amd_zen4 else ("AVX-512", 16)
    if {"avx2", "fma"} <= flags:
        return "AVX2", 8
    return None


def cpu_peak(cpuinfo: str, cores: int, max_freq_khz: str | None = None, fma_units: int | None = None) -> CpuPeak | None:
    """The FP32 peak of ``cores`` cores of the CPU that ``cpuinfo`` (/proc/cpuinfo's text) describes, clocked at
    ``max_freq_khz`` (cpufreq's ``cpuinfo_max_freq``) where given, else at cpuinfo's "cpu MHz"; None where the
    ISA or the clock is not known."""
    fields = _first_processor(cpuinfo)
    isa = _lanes(fields)
    if isa is None:
        return None
    if max_freq_khz and max_freq_khz.strip().isdigit() and int(max_freq_khz) > 0:
        clock_ghz, source = int(max_freq_khz) / 1e6, "cpufreq maximum"
    else:
        try:
            clock_ghz, source = float(fields["cpu MHz"]) / 1e3, "cpuinfo's cpu MHz"
        except (KeyError, ValueError):
            return None
        if clock_ghz <= 0:
            return None
    return CpuPeak(cores, clock_ghz, isa[0], isa[1], FMA_UNITS if fma_units is None else fma_units, source)


def _fma_units_from_environment() -> int | None:
    text = os.environ.get(FMA_UNITS_ENV)
    if text is None:
        return None
    if not text.strip().isdigit() or int(text) < 1:
        raise HeteroDSEError(f"{FMA_UNITS_ENV}={text!r}: give the FMA units per core as a positive whole number")
    return int(text)


def host_cpu_peak(cpuinfo_path: Path = CPUINFO, max_freq_path: Path = MAX_FREQ) -> CpuPeak | None:
    """This machine's FP32 peak over the cores this process may use (the cores TVM and torch are given), read
    afresh each time so that a change of ``HETERO_DSE_CPU_FMA_UNITS`` counts."""
    try:
        cpuinfo = cpuinfo_path.read_text()
    except OSError:  # not Linux
        return None
    try:
        max_freq = max_freq_path.read_text()
    except OSError:  # no cpufreq (most VMs)
        max_freq = None
    return cpu_peak(cpuinfo, host_cores(), max_freq, _fma_units_from_environment())
