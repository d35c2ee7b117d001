"""A calibration of the FPGA model: the constants of ``fpga_costs.py`` fitted to designs a Vitis version
synthesized for one part (``hetero_dse calibrate``), applied by ``FpgaModel(space.tables, calibration=...)``.

What it may set: per data type the DSP, LUT and FF of one multiply and one add, and their latencies (at
or below the clock where floating-point cores get one stage deeper); the LUT and FF of the
kernel's base and of each port; the pipeline stages of the compute besides its arithmetic; and the
share of the target clock the designs achieve (``fmax_derate``, at most 1: a design that closes timing
at 90 % of its target runs 10 % slower than the target says). Everything else keeps its sourced value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cost_models.fpga_costs import (
    ARITHMETIC,
    COMPUTE_OVERHEAD_CYCLES,
    FF_BASE,
    FF_PER_PORT,
    LUT_BASE,
    LUT_PER_PORT,
    ArithmeticCost,
)
from hetero_dse.atomic import atomic_write_text
from hetero_dse.errors import HeteroDSEError
from hetero_dse.yamlfile import YamlFileError, load_yaml

__all__ = ["ARITHMETIC_FIELDS", "DEFAULT_FIXED", "PLAUSIBLE", "Calibration", "CalibrationError", "check_constants"]

#: The per-data-type constants a calibration may set.
ARITHMETIC_FIELDS = ("dsp_mul", "dsp_add", "lut_mul", "lut_add", "ff_mul", "ff_add", "mul_latency", "add_latency")
#: The design-wide constants, in the order the kernel takes them (``fpga_kernel.F_*``).
DEFAULT_FIXED = {"lut_base": float(LUT_BASE), "lut_per_port": float(LUT_PER_PORT), "ff_base": float(FF_BASE),
                 "ff_per_port": float(FF_PER_PORT), "compute_overhead_cycles": float(COMPUTE_OVERHEAD_CYCLES)}


#: What each constant can be: a fit that gives a value outside these is a broken fit or a hand-edited file
#: (the largest sourced figures are a double-precision multiply's 11 DSPs, a kernel's base of some 10^4 LUTs)
PLAUSIBLE = {"dsp_mul": (0, 16), "dsp_add": (0, 16), "lut_mul": (0, 5000), "lut_add": (0, 5000),
             "ff_mul": (0, 5000), "ff_add": (0, 5000), "mul_latency": (0, 64), "add_latency": (0, 64),
             "lut_base": (0, 500_000), "lut_per_port": (0, 100_000), "ff_base": (0, 500_000),
             "ff_per_port": (0, 100_000), "compute_overhead_cycles": (0, 1000)}


def _check_value(path: str | Path, name: str, value: float) -> float:
    low, high = PLAUSIBLE[name]
    if not (math.isfinite(value) and low <= value <= high):
        raise CalibrationError(f"{path}: {name} is {value}, which no design has ({low} to {high}); recalibrate "
                               "with hetero_dse calibrate")
    return value


def check_constants(where: str | Path, arithmetic: dict[str, dict[str, float]], fixed: dict[str, float],
                    fmax_derate: float) -> None:
    """Every constant finite and in its plausible range (:data:`PLAUSIBLE`), or :class:`CalibrationError`."""
    for values in arithmetic.values():
        for name, value in values.items():
            _check_value(where, name, value)
    for name, value in fixed.items():
        _check_value(where, name, value)
    if not (math.isfinite(fmax_derate) and 0.05 <= fmax_derate <= 1):
        raise CalibrationError(f"{where}: fmax_derate is the share of the target clock designs achieve, between "
                               f"0.05 and 1, not {fmax_derate}")


class CalibrationError(HeteroDSEError):
    """A calibration file that cannot be used."""


@dataclass(frozen=True)
class Calibration:
    part: str
    tool_version: str
    designs: int
    arithmetic: dict[str, dict[str, float]] = field(default_factory=dict)
    fixed: dict[str, float] = field(default_factory=dict)
    fmax_derate: float = 1.0
    quality: dict[str, Any] = field(default_factory=dict)

    @property
    def calibrated(self) -> list[str]:
        """The constants this calibration sets, by name (``float32.lut_mul``, ``lut_base``…)."""
        names = [f"{dt}.{k}" for dt, values in sorted(self.arithmetic.items()) for k in sorted(values)]
        names += sorted(self.fixed)
        if self.fmax_derate != 1.0:
            names.append("fmax_derate")
        return names

    def cost(self, dtype: str) -> ArithmeticCost:
        return replace(ARITHMETIC[dtype], **self.arithmetic.get(dtype, {}))

    def fixed_values(self) -> list[float]:
        return [float(self.fixed.get(k, v)) for k, v in DEFAULT_FIXED.items()]

    def check_part(self, part: str, tool_version: str | None = None) -> None:
        """Refuse a calibration of another part (or, when known, another tool version), naming both."""
        if part != self.part:
            raise CalibrationError(f"the calibration is for part {self.part} (Vitis {self.tool_version}); this "
                                   f"board's part is {part}: calibrate with designs synthesized for {part}")
        if tool_version and tool_version != self.tool_version:
            raise CalibrationError(f"the calibration is for Vitis {self.tool_version}; the Vitis found here is "
                                   f"{tool_version}: calibrate with designs it synthesized")

    def to_json(self) -> dict[str, Any]:
        return {"part": self.part, "tool_version": self.tool_version, "designs": self.designs,
                "arithmetic": self.arithmetic, "fixed": self.fixed, "fmax_derate": self.fmax_derate,
                "quality": self.quality}

    def dump(self, path: str | Path) -> None:
        import yaml

        atomic_write_text(path, "# hetero_dse calibration of the FPGA model (hetero_dse calibrate); use it with "
                                "explore --calibration\n" + yaml.safe_dump(self.to_json(), sort_keys=False))

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        try:
            data = load_yaml(path)
        except YamlFileError as exc:
            if exc.problem is None:
                raise CalibrationError(f"the calibration {path} {exc.reason}") from None
            where = f" (line {exc.line}, column {exc.column})" if exc.line is not None else ""
            raise CalibrationError(f"{path} is not YAML{where}: is it a file hetero_dse calibrate wrote?") from None
        try:
            arithmetic = {str(dt): {k: float(v) for k, v in values.items()}
                          for dt, values in (data.get("arithmetic") or {}).items()}
            for dt, values in arithmetic.items():
                if dt not in ARITHMETIC:
                    raise CalibrationError(f"{path} calibrates data type {dt}, which the model does not know")
                bad = set(values) - set(ARITHMETIC_FIELDS)
                if bad:
                    raise CalibrationError(f"{path}: {dt} has unknown constants {', '.join(sorted(bad))}")
            fixed = {str(k): float(v) for k, v in (data.get("fixed") or {}).items()}
            unknown = set(fixed) - set(DEFAULT_FIXED)
            if unknown:
                raise CalibrationError(f"{path} has unknown constants {', '.join(sorted(unknown))}")
            derate = float(data.get("fmax_derate", 1.0))
            check_constants(path, arithmetic, fixed, derate)
            return cls(str(data["part"]), str(data["tool_version"]), int(data["designs"]), arithmetic, fixed, derate,
                       dict(data.get("quality") or {}))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CalibrationError(f"{path} is not a calibration written by hetero_dse calibrate ({exc})") from None
