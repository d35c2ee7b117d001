"""The cross-platform report: ``report.json`` (everything), ``report.md`` (for people), ``designs.csv`` (for pandas).

Each file is written to a temporary name and renamed, so a report on disk is always whole; a run that
was interrupted says so in the report itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hetero_dse import __version__
from hetero_dse.atomic import atomic_write_text
from hetero_dse.hardware.board import RESOURCE_KINDS
from hetero_dse.fpga_flow import Exploration
from hetero_dse.units import fmt_bytes, fmt_seconds


def design_row(e: Exploration, rank: int, point: Any, d: dict[str, Any]) -> dict[str, Any]:
    """One flat row per design: knobs and predicted figures."""
    row: dict[str, Any] = {
        "operator": e.op.name, "shape": e.op.shape_name or "", "board": e.board.name, "rank": rank,
        "dtype": point["dtype"], "clock_mhz": point["clock_mhz"], "latency_s": d["latency_s"], "gops": d["gops"],
        "roofline": d["roofline"], "bound": d["bound"], "pe": d["pe"], "ii": d["ii"], "tiles": d["tiles"],
        "traffic_bytes": d["traffic_bytes"], "io_lower_bound_bytes": d["io_lower_bound_bytes"],
        "traffic_over_bound": d["traffic_over_bound"], "io_bound_kind": d["io_bound_kind"],
    }
    for k in RESOURCE_KINDS:
        row[k] = d["resources"][k]
        row[f"{k}_util"] = d["utilisation"][k]
    for k, v in point.items():
        if k.startswith(("tile.", "unroll.")):
            row[k] = v
    row["order"] = " ".join(point["order"])
    return row


def exploration_record(e: Exploration, csim: dict[str, Any] | None, project: str | None,
                       unwritten: str | None = None) -> dict[str, Any]:
    r = e.result
    return {
        "operator": e.op.name, "shape": e.op.shape_name, "signature": e.op.signature(), "board": e.board.name,
        "search": {"explorer": r.explorer, "evaluations": r.evaluations, "wall_s": r.wall_s,
                   "interrupted": r.interrupted, "space_size": e.space.size,
                   "pruned_size_bound": e.space.pruned_size()},
        "best": {"knobs": e.best[0].to_json(), **e.best[1]} if e.designs else None,
        "top": [{"knobs": p.to_json(), **d} for p, d in e.designs],
        "pareto": [{"knobs": p.to_json(), "latency_s": d["latency_s"], "dsp": d["resources"]["dsp"],
                    "bram18k": d["resources"]["bram18k"]} for p, d in e.pareto],
        "project": project,
        "project_unwritten": None if unwritten is None else f"not written: {unwritten}",
        "csim": csim,
        "calibration": e.model.calibration.to_json() if e.model.calibration else None,
    }


def write_reports(out: Path, explorations: Sequence[Exploration], projects: dict[int, str],
                  csims: dict[int, dict[str, Any]], interrupted: bool,
                  cpu: Sequence[dict[str, Any]] = (), gpu: Sequence[dict[str, Any]] = (),
                  unwritten: dict[int, str] | None = None,
                  synthesis: dict[int, list[dict[str, Any]]] | None = None) -> list[Path]:
    """Write report.json, report.md and designs.csv under ``out``; returns their paths. ``unwritten`` says
    why an exploration's best design has no HLS project; ``synthesis``: its synthesized designs against
    their predictions (``explore --synth``)."""
    unwritten = unwritten or {}
    synthesis = synthesis or {}
    records = [{**exploration_record(e, csims.get(i), projects.get(i), unwritten.get(i)),
                **({"synthesis": synthesis[i]} if i in synthesis else {})}
               for i, e in enumerate(explorations)]
    report = {"generator": f"hetero_dse {__version__}", "complete": not interrupted, "explorations": records,
              "cpu": list(cpu), "gpu": list(gpu)}
    rows = [design_row(e, rank, p, d) for e in explorations for rank, (p, d) in enumerate(e.designs, start=1)]
    paths = [out / "report.json", out / "report.md", out / "designs.csv"]
    atomic_write_text(paths[0], json.dumps(report, indent=2) + "\n")
    atomic_write_text(paths[1], markdown(explorations, projects, csims, interrupted, unwritten)
                  + synthesis_markdown(explorations, synthesis) + cpu_markdown(cpu) + gpu_markdown(gpu))
    atomic_write_text(paths[2], pd.DataFrame(rows).to_csv(index=False))
    return paths


def markdown(explorations: Sequence[Exploration], projects: dict[int, str], csims: dict[int, dict[str, Any]],
             interrupted: bool, unwritten: dict[int, str] | None = None) -> str:
    lines = [f"# hetero_dse report ({__version__})", ""]
    if interrupted:
        lines += ["**Interrupted**: the search was stopped early; the designs below are the best found before "
                  "the stop.", ""]
    if not explorations:
        return "\n".join(lines)
    lines += ["## Best design per operator and board (FPGA, analytical model)", "",
              "| operator | shape | board | dtype | MHz | latency | GOPS | % DSP roofline | bound by | DSP | BRAM18K | "
              "URAM | LUT | DDR traffic | / I/O bound | csim |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, e in enumerate(explorations):
        if not e.designs:
            lines.append(f"| {e.op.name} | {e.op.shape_name or ''} | {e.board.name} | — | — | no feasible design "
                         "found before the stop | | | | | | | | | | |")
            continue
        p, d = e.best
        res, util = d["resources"], d["utilisation"]
        cs = csims.get(i)
        csim_text = "—" if cs is None else \
            ("pass" if cs["passed"] else "FAIL") + f" (max err {cs['max_abs_error']:.2g})"
        lines.append(
            f"| {e.op.name} | {e.op.shape_name or ''} | {e.board.name} | {p['dtype']} | {p['clock_mhz']:g} | "
            f"{fmt_seconds(d['latency_s'])} | {d['gops']:.1f} | {100 * d['roofline']:.1f} | {d['bound']} | "
            f"{res['dsp']:,.0f} ({100 * util['dsp']:.0f} %) | {res['bram18k']:,.0f} ({100 * util['bram18k']:.0f} %) | "
            f"{res['uram']:,.0f} | {res['lut']:,.0f} ({100 * util['lut']:.0f} %) | {fmt_bytes(d['traffic_bytes'])} | "
            f"{d['traffic_over_bound']:.2f}× | {csim_text} |")
    lines += ["", "Percentages of resources are of the board's usable caps. The I/O bound is seed 001's "
              "Theorem 4.9 for direct convolutions and a matmul-style bound otherwise (raised to the compulsory "
              "traffic); the kind used is in report.json.", ""]
    for i, e in enumerate(explorations):
        if not e.designs:
            continue
        r = e.result
        lines += [f"## {e.op.signature()} on {e.board.name}", "",
                  f"Search: {r.explorer}, {r.evaluations:,} designs scored in {r.wall_s:.2f} s"
                  f"{' (interrupted)' if r.interrupted else ''}; HLS project: "
                  + (f"`{projects[i]}`." if i in projects else
                     f"not written{': ' + unwritten[i] if unwritten and i in unwritten else ''}."),
                  *_calibration_line(e),
                  "", "| rank | latency | GOPS | bound | PE | II | DSP | BRAM18K | tiles | unrolled | order |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for rank, (p, d) in enumerate(e.designs, start=1):
            tiles = " ".join(f"{k[5:]}={v}" for k, v in p.items() if k.startswith("tile."))
            unrolled = " ".join(f"{k[7:]}×{v}" for k, v in p.items() if k.startswith("unroll.") and v > 1)
            lines.append(f"| {rank} | {fmt_seconds(d['latency_s'])} | {d['gops']:.1f} | {d['bound']} | {d['pe']} | "
                         f"{d['ii']} | {d['resources']['dsp']:,.0f} | {d['resources']['bram18k']:,.0f} | {tiles} | "
                         f"{unrolled or '—'} | {' '.join(p['order'])} |")
        lines += ["", f"Pareto front (latency vs DSP vs BRAM18K): {len(e.pareto)} designs.", "",
                  "| latency | DSP | BRAM18K |", "|---|---|---|"]
        for _, d in e.pareto[:20]:
            lines.append(f"| {fmt_seconds(d['latency_s'])} | {d['resources']['dsp']:,.0f} | "
                         f"{d['resources']['bram18k']:,.0f} |")
        if len(e.pareto) > 20:
            lines.append(f"| … {len(e.pareto) - 20} more in report.json | | |")
        lines.append("")
    return "\n".join(lines)


#: The figures of the synthesis table in report.md (the whole list is in each validation.json).
_SYNTH_FIGURES = ("latency (cycles)", "compute II", "DSP", "LUT", "FF", "BRAM18K")


def synthesis_markdown(explorations: Sequence[Exploration], synthesis: dict[int, list[dict[str, Any]]]) -> str:
    if not synthesis:
        return ""
    lines = ["", "## Predicted against synthesized (Vitis HLS)", "",
             "Error = (reported − predicted) / predicted; every figure and its likely cause are in each project's "
             "validation.json.", "",
             "| operator | board | rank | status | " + " | ".join(_SYNTH_FIGURES) + " |",
             "|---" * (4 + len(_SYNTH_FIGURES)) + "|"]
    for i, rows in sorted(synthesis.items()):
        e = explorations[i]
        for row in rows:
            figures = {f["figure"].split(",")[0].replace(" (post-route)", ""): f for f in row.get("figures") or []}
            cells = []
            for name in _SYNTH_FIGURES:
                f = figures.get(name)
                if f is None or f.get("error") is None:
                    cells.append("—")
                else:
                    cells.append(f"{f['predicted']:,.0f} → {f['reported']:,.0f} ({100 * f['error']:+.0f} %)")
            status = row["status"] if row["status"] != "skipped" else "ok (done before)"
            if row.get("reason"):
                status += f": {row['reason']}"
            lines.append(f"| {e.op.title} | {e.board.name} | {row['rank']} | {status} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _calibration_line(e: Exploration) -> list[str]:
    cal = e.model.calibration
    if cal is None:
        return ["", "Model: the sourced constants of cost_models/fpga_costs.py (not calibrated)."]
    return ["", f"Model calibrated for {cal.part} with Vitis {cal.tool_version} from {cal.designs} synthesized "
                f"designs: {', '.join(cal.calibrated)}."]


def _trials(record: dict[str, Any]) -> str:
    """Trials, the explorer that chose them and how many the history answered: ``32 (q, 7 from history)``."""
    notes = [record["explorer"]] if record.get("explorer") else []
    if record.get("answered_from_history"):
        notes.append(f"{record['answered_from_history']} from history")
    return f"{record['trials']} ({', '.join(notes)})" if notes else str(record["trials"])


def cpu_markdown(cpu: Sequence[dict[str, Any]]) -> str:
    """The CPU section of report.md (empty when no CPU exploration ran)."""
    if not cpu:
        return ""
    lines = ["", "## Best CPU schedule per operator (measured on this CPU, against torch in the same run)", "",
             "| operator | shape | trials | failed | best | GFLOPS | torch GFLOPS | speedup | tuning | module |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in cpu:
        best, gflops, torch, speedup = _figures(r)
        cells = [r["operator"], r["shape"] or "", _trials(r), str(r["failures"]), best, gflops, torch, speedup,
                 f"{r['wall_s']:.1f} s", f"`{r['directory'] or 'not written'}`"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Target: `{cpu[0]['target']}`. Each schedule was built, checked against the reference and timed "
              "in a worker process; failures are counted, with their messages in report.json.", ""]
    return "\n".join(lines)


def gpu_markdown(gpu: Sequence[dict[str, Any]]) -> str:
    """The GPU section of report.md: measured rows against torch on the device, or roofline estimates."""
    if not gpu:
        return ""
    lines = ["", "## Best GPU schedule per operator", "",
             "| operator | shape | device | trials | best | GFLOPS | kind | bound | torch GFLOPS | speedup | code |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in gpu:
        best, gflops, torch, speedup = _figures(r)
        kind = "**estimate** (roofline)" if r["estimate"] else "measured"
        cells = [r["operator"], r["shape"] or "", r["device"], _trials(r), best, gflops, kind,
                 (r["best"] or {}).get("bound", "—"), torch, speedup, f"`{r['directory'] or 'not written'}`"]
        lines.append("| " + " | ".join(cells) + " |")
    if any(r["estimate"] for r in gpu):
        lines += ["", "Estimates: no GPU on this machine. The time is the roofline model of the named device "
                  "(`cost_models/gpu_roofline.py`: FP32 peak with issue, lane and FMA-latency losses; DRAM, L2 and "
                  "shared-memory traffic), not a measurement; the CUDA source was generated and compiled by nvcc "
                  "but not run, and no library baseline was taken."]
    return "\n".join(lines + [""])


def _figures(r: dict[str, Any]) -> tuple[str, str, str, str]:
    """Best time, its GFLOPS, torch's GFLOPS and the speedup of a CPU or GPU record, as table cells."""
    best, torch, speedup = r["best"], r["torch"], r["speedup_over_torch"]
    return (fmt_seconds(best["seconds"]) if best else "—", f"{best['gflops']:.1f}" if best else "—",
            f"{torch['gflops']:.1f}" if torch else "—", f"{speedup:.2f}×" if speedup else "—")
