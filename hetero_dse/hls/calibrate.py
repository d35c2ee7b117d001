"""Fit the FPGA model's constants to what Vitis synthesized (``hetero_dse calibrate``).

Each synthesized project gives one observation per figure: its ``design.json`` holds, for the design,
how many multiply and add cores the model charged, its ports, and the part of each figure that no
calibrated constant touches (``calibration_terms``); its ``synth.json`` holds what Vitis reported
(post-route where ``impl`` ran). The fits:

* DSP per data type: ``dsp = mul·dsp_mul + add·dsp_add``;
* LUT and FF: ``lut − lut_fixed = Σ_type (mul·lut_mul + add·lut_add) + lut_base + ports·lut_per_port``;
* the compute's pipeline stages besides its arithmetic: the median of reported depth − ``depth_fixed``;
* the add and multiply cores' latency: the median of csynth.rpt's bind op table, less the stage
  floating-point cores gain above ``DEEPER_CORES_ABOVE_MHZ``;
* ``fmax_derate``: the median of achieved clock / target clock, at most 1.

The linear fits minimise relative errors with a robust loss (``soft_l1``: one design Vitis treated
oddly does not drag the rest), held gently toward the sourced constants so that a constant the designs do
not tell apart (every design with as many adds as multiplies) stays where it was. The quality printed
is the mean absolute percentage error per figure before (the constants as they were), after (fitted on
all), and leave-one-out (each design predicted by a fit on the others: whether the fit generalises).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

from cost_models.calibration import ARITHMETIC_FIELDS, DEFAULT_FIXED, Calibration, check_constants
from cost_models.fpga_costs import ARITHMETIC, DEEPER_CORES_ABOVE_MHZ
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hls.synth import SYNTH_STATUSES

__all__ = ["Observation", "fit", "observations"]

#: How strongly a constant is held to its sourced value, against a relative error of one design.
PRIOR_WEIGHT = 1e-3


@dataclass
class Observation:
    project: str
    part: str
    tool_version: str
    terms: dict[str, Any]
    reported: dict[str, float | None]  # dsp, lut, ff, depth, achieved_mhz
    target_mhz: float


def observations(paths: list[str | Path]) -> list[Observation]:
    """Every synthesized project among ``paths`` (projects, or directories holding them)."""
    from hetero_dse.hls.synth import find_projects

    found = []
    for project in find_projects(paths):
        synth_path = project / "synth.json"
        if not synth_path.is_file():
            continue
        try:
            record = json.loads((project / "design.json").read_text())
            result = json.loads(synth_path.read_text())
        except (ValueError, RecursionError):
            raise HeteroDSEError(f"{project}: design.json or synth.json is not JSON") from None
        except OSError as exc:
            raise HeteroDSEError(f"{project}: cannot read its design.json or synth.json ({exc.strerror})") from None
        status = result.get("status") if isinstance(result, dict) else None
        if status not in SYNTH_STATUSES:
            raise HeteroDSEError(f"{project}: synth.json is not what hetero_dse wrote (its status is {status!r}); "
                                 "synthesize the project again")
        if status != "ok":
            continue
        try:
            observation = _observation(project, record, result)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            # a hand-edited file, or one of another version: which project, not where the fit broke
            raise HeteroDSEError(f"{project}: design.json or synth.json is not what hetero_dse wrote "
                                 f"({type(exc).__name__}: {exc}); synthesize the project again") from None
        if observation is not None:
            found.append(observation)
    return found


def _number(value: Any) -> float | None:
    """A reported figure: a finite number, 0 or more (a string, NaN, a negative count: not a figure)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _figure(values: Any, key: str, where: str, positive: bool = False) -> float | None:
    """``values[key]`` as a figure; None where the report leaves it out. A value that is there but is not a
    figure (a string, NaN, a negative count, a zero clock) is a synth.json someone edited: said, not skipped."""
    if values is None:
        return None
    if not isinstance(values, dict):
        raise ValueError(f"its {where} is {values!r}, not a table of figures")
    value = values.get(key)
    if value is None:
        return None
    number = _number(value)
    if number is None or (positive and number == 0):
        raise ValueError(f"its {where} {key} is {value!r}, not a figure")
    return number


def _observation(project: Path, record: dict[str, Any], result: dict[str, Any]) -> Observation | None:
    from hetero_dse.hls.validate import find_loop, module_report

    terms = record.get("predicted", {}).get("calibration_terms")
    if terms is None:
        raise HeteroDSEError(f"{project}/design.json has no calibration terms: it was written by an older "
                             "hetero_dse; explore again and synthesize the new project")
    if not isinstance(terms, dict) or terms.get("dtype") not in ARITHMETIC:
        raise ValueError("its calibration terms name no data type the model knows")
    for key in ("mul_units", "add_units", "ports", "depth_fixed"):
        if _number(terms.get(key)) is None:
            raise ValueError(f"calibration term {key} is {terms.get(key)!r}")
    report = result.get("report")
    if not isinstance(report, dict) or not isinstance(report.get("resources"), dict):
        raise ValueError("its synthesis report has no resources")
    impl = result.get("impl") or {}
    post = impl.get("resources") if isinstance(impl, dict) else impl
    res = {}
    for k in ("dsp", "lut", "ff"):
        after = _figure(post, k, "implementation's resources")
        res[k] = after if after is not None else _figure(report["resources"], k, "resources")
    compute = next((lp for lp in (record.get("expectations") or {}).get("loops", [])
                    if lp["process"] == "compute_tile"), None)
    loop = find_loop(module_report(report, "compute_tile"), compute["labels"]) if compute else None
    achieved_ns = (_figure(impl, "achieved_clock_ns", "implementation's", positive=True)
                   or _figure(report, "estimated_clock_ns", "report's", positive=True))
    latencies = _core_latencies((result.get("bind") or {}).get("ops") or [])
    target = _number(float(record["knobs"]["clock_mhz"]))
    if not target:
        raise ValueError(f"its clock is {record['knobs']['clock_mhz']!r} MHz")
    return Observation(
        str(project), str(record.get("part") or record.get("board", "")), str(result.get("tool_version")), terms,
        {**res, "depth": _figure(loop, "depth", "compute loop's") if loop else None,
         "achieved_mhz": 1000.0 / achieved_ns if achieved_ns else None, **latencies}, target)


#: Operator names of the bind op table, by the model's operator.
_ADDS, _MULS = {"fadd", "dadd", "hadd", "add", "faddfsub"}, {"fmul", "dmul", "hmul", "mul"}


def _core_latencies(ops: list[dict[str, str]]) -> dict[str, float]:
    """The median latency of the add and multiply cores in csynth.rpt's bind op table."""
    out = {}
    for key, names in (("add_latency", _ADDS), ("mul_latency", _MULS)):
        values = [int(row["Latency"]) for row in ops
                  if row.get("Op") in names and str(row.get("Latency", "")).strip().isdigit()]
        if values:
            out[key] = float(median(values))
    return out


def _linear(rows: list[tuple[dict[str, float], float]], names: list[str], prior: dict[str, float]) -> dict[str, float]:
    """Robust relative least squares of ``observed ≈ Σ coef·value`` over ``rows`` (features by name),
    held toward ``prior``."""
    from scipy.optimize import least_squares

    x = np.array([[f.get(n, 0.0) for n in names] for f, _ in rows])
    y = np.array([obs for _, obs in rows])
    p0 = np.array([prior[n] for n in names])
    scale = np.maximum(np.abs(p0), 1.0)
    seen = (x != 0).any(axis=0)

    def residuals(c: np.ndarray) -> np.ndarray:
        fit = (x @ c - y) / np.maximum(np.abs(y), 1.0)
        hold = np.sqrt(PRIOR_WEIGHT) * (c - p0) / scale
        return np.concatenate([fit, hold])

    solution = least_squares(residuals, p0, loss="soft_l1", f_scale=0.1, bounds=(0, np.inf))
    return {n: float(v) for n, v, s in zip(names, solution.x, seen, strict=True) if s}


def _features(o: Observation, figure: str) -> dict[str, float]:
    t = o.terms
    dt = t["dtype"]
    if figure == "dsp":
        return {f"{dt}.dsp_mul": t["mul_units"], f"{dt}.dsp_add": t["add_units"]}
    return {f"{dt}.{figure}_mul": t["mul_units"], f"{dt}.{figure}_add": t["add_units"], f"{figure}_base": 1.0,
            f"{figure}_per_port": t["ports"]}


def _target(o: Observation, figure: str) -> float | None:
    reported = o.reported.get(figure)
    if reported is None:
        return None
    return reported - (o.terms.get(f"{figure}_fixed", 0.0) if figure != "dsp" else 0.0)


def _fit_all(obs: list[Observation]) -> dict[str, float]:
    """Every constant the observations determine, by name."""
    prior: dict[str, float] = {}
    for o in obs:
        c = o.terms["constants"]
        dt = o.terms["dtype"]
        prior.update({f"{dt}.{k}": c[k] for k in ARITHMETIC_FIELDS})
        prior.update({k: c[k] for k in DEFAULT_FIXED})
    fitted: dict[str, float] = {}
    for figure in ("dsp", "lut", "ff"):
        rows = [(_features(o, figure), y) for o in obs if (y := _target(o, figure)) is not None]
        if len(rows) >= 2:
            names = sorted({n for f, _ in rows for n in f})
            fitted.update(_linear(rows, names, prior))
    depths = [o.reported["depth"] - o.terms["depth_fixed"] for o in obs if o.reported.get("depth") is not None]
    if depths:
        fitted["compute_overhead_cycles"] = float(max(0, round(median(depths))))
    # the cores' latency at or below DEEPER_CORES_ABOVE_MHZ (floating-point cores are a stage deeper above)
    for key in ("add_latency", "mul_latency"):
        by_type: dict[str, list[float]] = {}
        for o in obs:
            if o.reported.get(key) is not None:
                deeper = 1.0 if ARITHMETIC[o.terms["dtype"]].floating and o.target_mhz > DEEPER_CORES_ABOVE_MHZ else 0.0
                by_type.setdefault(o.terms["dtype"], []).append(o.reported[key] - deeper)
        for dt, values in by_type.items():
            fitted[f"{dt}.{key}"] = float(max(1, round(median(values))))
    ratios = [min(1.0, o.reported["achieved_mhz"] / o.target_mhz) for o in obs if o.reported.get("achieved_mhz")]
    if ratios:
        fitted["fmax_derate"] = float(median(ratios))
    return fitted


def _predict(o: Observation, figure: str, constants: dict[str, float]) -> float | None:
    c = {**{f"{o.terms['dtype']}.{k}": v for k, v in o.terms["constants"].items() if k in ARITHMETIC_FIELDS},
         **{k: v for k, v in o.terms["constants"].items() if k in DEFAULT_FIXED}, **constants}
    if figure == "depth":
        return o.terms["depth_fixed"] + c["compute_overhead_cycles"]
    value = sum(c[n] * v for n, v in _features(o, figure).items())
    return value + (o.terms.get(f"{figure}_fixed", 0.0) if figure != "dsp" else 0.0)


def _mape(obs: list[Observation], figure: str, constants_of) -> float | None:
    errors = []
    for i, o in enumerate(obs):
        reported = o.reported.get(figure)
        if reported:
            errors.append(abs(_predict(o, figure, constants_of(i)) - reported) / abs(reported))
    return 100.0 * float(np.mean(errors)) if errors else None


def fit(obs: list[Observation]) -> Calibration:
    """The calibration the observations give, with its quality (MAPE before, after, leave-one-out)."""
    if not obs:
        raise HeteroDSEError("no synthesized project to calibrate from: run 'hetero_dse synth' on the projects "
                             "first (their synth.json must say ok)")
    parts = sorted({o.part for o in obs})
    tools = sorted({o.tool_version for o in obs})
    if len(parts) > 1 or len(tools) > 1:
        raise HeteroDSEError(f"calibrate one part and tool version at a time: the projects were synthesized for "
                             f"{', '.join(parts)} with Vitis {', '.join(tools)}")
    fitted = _fit_all(obs)
    loo = [_fit_all(obs[:i] + obs[i + 1:]) for i in range(len(obs))] if len(obs) > 2 else None
    quality = {}
    for figure in ("dsp", "lut", "ff", "depth"):
        before = _mape(obs, figure, lambda _i: {})
        if before is None:
            continue
        quality[figure] = {"mape_before": before, "mape_after": _mape(obs, figure, lambda _i: fitted),
                           "mape_leave_one_out": _mape(obs, figure, lambda i: loo[i]) if loo else None}
    arithmetic: dict[str, dict[str, float]] = {}
    fixed: dict[str, float] = {}
    for name, value in fitted.items():
        if "." in name:
            dt, key = name.split(".", 1)
            arithmetic.setdefault(dt, {})[key] = value
        elif name in DEFAULT_FIXED:
            fixed[name] = value
    derate = fitted.get("fmax_derate", 1.0)
    # the designs' figures may still be absurd (a report with a negative count): no such fit is written
    check_constants("the fit of these designs", arithmetic, fixed, derate)
    return Calibration(parts[0], tools[0], len(obs), arithmetic, fixed, derate, quality)
