"""The report of a run: ``report.json`` (everything), ``report.md`` (for people), ``designs.csv`` (for pandas).

One row per (operator, device) whatever the device (``targets.base.Row``), then each target's own section.
Each file is written to a temporary name and renamed, so a report on disk is always whole; a run that was
interrupted says so in the report itself.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hetero_dse import __version__
from hetero_dse.atomic import atomic_write_text
from hetero_dse.crossdevice import across_devices, across_markdown, plan_file, system_markdown, system_plan
from hetero_dse.report_html import LEGACY_SECTIONS, render_html
from hetero_dse.targets.base import Outcome, Row, Written
from hetero_dse.units import fmt_seconds, fmt_speedup

__all__ = ["ROW_COLUMNS", "row_cells", "write_reports"]

#: the columns of the one table of rows, in report.md and on the terminal
ROW_COLUMNS = ("operator", "device", "latency", "basis", "GFLOPS", "% peak", "bound", "library GFLOPS", "speedup",
               "search", "output", "check", "design")


def row_cells(row: Row) -> list[str]:
    """One row's cells under ``ROW_COLUMNS``."""
    operator = row.operator + (f" {row.shape}" if row.shape else "")
    if row.seconds is None:
        why = "interrupted before a result" if row.interrupted else "no result"
        return [operator, row.device, "—", row.basis, "—", "—", "—", "—", "—", _search(row), row.why_unwritten or why,
                row.check, row.detail]
    library = row.library_seconds
    gflops = f"{row.gflops:.1f}" if row.gflops is not None else "—"
    library_gflops = "—" if not library or not row.gflops else f"{row.gflops * row.seconds / library:.1f}"
    return [operator, row.device, fmt_seconds(row.seconds), row.basis, gflops,
            f"{100 * row.peak_fraction:.1f}" if row.peak_fraction is not None else "—", row.bound or "—",
            library_gflops, fmt_speedup(row.speedup, row.loaded, row.unstable), _search(row),
            row.directory or f"not written: {row.why_unwritten}", row.check, row.detail]


def _search(row: Row) -> str:
    """``sa, 30,000 in 2.1 s`` / ``tl, 32 (7 from history, 2 failed) in 41.0 s``."""
    notes = [f"{n} {what}" for n, what in ((row.answered, "from history"), (row.failures, "failed")) if n]
    return (f"{row.explorer}, {row.evaluations:,}" + (f" ({', '.join(notes)})" if notes else "")
            + f" in {row.wall_s:.1f} s" + (" (interrupted)" if row.interrupted else ""))


def write_reports(out: Path, results: Sequence[tuple[Outcome, Written | None]], interrupted: bool,
                  synthesis: dict[int, list[dict[str, Any]]] | None = None,
                  errors: Sequence[str] = (), graph: Any = None, fusions: Sequence[dict[str, Any]] = (),
                  networks: Sequence[dict[str, Any]] = (), executed: dict[str, dict[str, Any]] | None = None
                  ) -> list[Path]:
    """Write report.json, report.md and designs.csv under ``out``; returns their paths. ``results``: each
    outcome with what its target wrote for it (None: nothing yet); ``synthesis``: by index in ``results``, its
    synthesized designs against their predictions (``explore --synth``); ``errors``: the searches that ended
    in an error, one sentence each; ``graph``: the network whose layers the operators are (``--model``);
    ``fusions``: its back-to-back pairs on each GPU (``GpuTarget.back_to_back``); ``networks``: one design for
    the whole network per device that makes one (``FpgaTarget.network``); ``executed``: by device, the plan run as
    one network against torch eager (``CpuTarget.execute_plan``)."""
    synthesis = synthesis or {}
    rows = [o.target.row(o, w) for o, w in results]
    report: dict[str, Any] = {"generator": f"hetero_dse {__version__}", "complete": not interrupted,
                              "rows": [{**r.to_json(), **_roofline_figures(o)} for r, (o, _) in zip(rows, results,
                                                                                                  strict=True)],
                              "errors": list(errors),
                              # every section a reader expects, those of this run's targets after the built-ins
                              "sections": list(dict.fromkeys([*LEGACY_SECTIONS,
                                                              *(o.target.report_key for o, _ in results)]))}
    for key in report["sections"]:
        report[key] = []
    for i, (o, w) in enumerate(results):
        record = o.target.record(o, w)
        record["convergence"] = [[n, best] for n, best in o.loop.convergence if math.isfinite(best)]
        if i in synthesis:
            record["synthesis"] = synthesis[i]
        report[o.target.report_key].append(record)
    report["across"] = across_devices(report["rows"])
    if graph is not None:
        report["model"] = whole_model(graph, report["rows"], fusions, networks, executed)
    designs = [row for o, _ in results for row in o.target.csv_rows(o)]
    paths = [out / "report.json", out / "report.md", out / "designs.csv", out / "report.html"]
    atomic_write_text(paths[0], json.dumps(report, indent=2) + "\n")
    errors_md = "".join(f"\n**Failed**: {e}\n" for e in errors)
    model_md = "\n".join(["", *system_markdown(report["model"], report["model"]["devices"])]) if graph else ""
    across_md = "\n".join(["", *across_markdown(report["across"])])
    atomic_write_text(paths[1], markdown(results, rows, interrupted) + across_md + model_md + errors_md
                      + synthesis_markdown([o for o, _ in results], synthesis))
    atomic_write_text(paths[2], pd.DataFrame(designs).to_csv(index=False))
    atomic_write_text(paths[3], render_html(report))
    if graph is not None:
        paths.append(out / "plan.json")
        atomic_write_text(paths[-1], json.dumps(plan_file(report["model"], report["model"]["devices"]), indent=2)
                          + "\n")
    return paths


def _roofline_figures(o: Outcome) -> dict[str, Any]:
    """Where the row sits on its device's roofline: FLOPs per compulsory byte, and the device's memory
    bandwidth where the target knows it (a target without one, the CPU, gets the compute roof alone)."""
    from hetero_dse.analysis import analyze

    return {"intensity": analyze(o.op).arithmetic_intensity,
            "bandwidth_gbps": getattr(o.target, "bandwidth_gbps", None)}


def markdown(results: Sequence[tuple[Outcome, Written | None]], rows: Sequence[Row], interrupted: bool) -> str:
    lines = [f"# hetero_dse report ({__version__})", ""]
    if interrupted:
        lines += ["**Interrupted**: the search was stopped early; the results below are the best found before "
                  "the stop.", ""]
    if not rows:
        return "\n".join(lines)
    lines += ["## Best per operator and device", "", "| " + " | ".join(ROW_COLUMNS) + " |",
              "|" + "---|" * len(ROW_COLUMNS)]
    for r in rows:
        cells = row_cells(r)
        if r.basis == "estimate":  # never mistaken for a measurement
            cells[3] = "**estimate** (roofline)"
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines += ["", "basis: *measured* on this machine; *model*: the FPGA analytical model's prediction; *estimate*: "
              "a roofline model where the device is absent. % peak: of the FPGA's DSP roofline, of the GPU's peak "
              "for the row's arithmetic (FP32, or its tensor cores' for float16, bfloat16 and int8), or of the CPU's "
              "FP32 peak from its ISA, cores and clock (its footnote). Speedup: over the library call (torch) timed on "
              "the same device in the same run."]
    footnotes: list[str] = []
    for o, _ in results:
        note = o.target.footnote()
        if note not in footnotes:
            footnotes.append(note)
    lines += ["", *[line for note in footnotes for line in (note, "")]]
    for o, w in results:
        lines += o.target.markdown(o, w)
    return "\n".join(lines)


#: The figures of the synthesis table in report.md (the whole list is in each validation.json).
_SYNTH_FIGURES = ("latency (cycles)", "compute II", "DSP", "LUT", "FF", "BRAM18K")


def synthesis_markdown(outcomes: Sequence[Outcome], synthesis: dict[int, list[dict[str, Any]]]) -> str:
    if not synthesis:
        return ""
    lines = ["", "## Predicted against synthesized (Vitis HLS)", "",
             "Error = (reported − predicted) / predicted; every figure and its likely cause are in each project's "
             "validation.json.", "",
             "| operator | board | rank | status | " + " | ".join(_SYNTH_FIGURES) + " |",
             "|---" * (4 + len(_SYNTH_FIGURES)) + "|"]
    for i, rows in sorted(synthesis.items()):
        e = outcomes[i]
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
            lines.append(f"| {e.op.title} | {e.target.device} | {row['rank']} | {status} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def network_plan(results: Sequence[tuple[Outcome, Written | None]], graph: Any,
                 fusions: Sequence[dict[str, Any]] = (), networks: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """plan.json's content as the reports will give it before the plan is run as one network."""
    rows = [{**o.target.row(o, w).to_json(), **_roofline_figures(o)} for o, w in results]
    model = whole_model(graph, rows, fusions, networks)
    return plan_file(model, model["devices"])


def whole_model(graph: Any, rows: Sequence[dict[str, Any]], fusions: Sequence[dict[str, Any]] = (),
                networks: Sequence[dict[str, Any]] = (), executed: dict[str, dict[str, Any]] | None = None
                ) -> dict[str, Any]:
    """The network's layers, its back-to-back pairs on each GPU, one design for the whole network where a device
    makes one, the plan run as one network where it was (``executed``, by device), and per device the
    system-level plan (``crossdevice.system_plan``)."""
    model = {"name": graph.name, "input_shape": list(graph.input_shape), "distinct_layers": len(graph.layers),
             "layers": sum(layer.count for layer in graph.layers), "mapped_flops": graph.mapped_flops,
             "unmapped": [{"op": u.op, "count": u.count, "torch_s": u.torch_seconds} for u in graph.unmapped],
             "unmapped_torch_s": graph.unmapped_torch_seconds, "torch_eager_s": graph.torch_seconds,
             "layer_table": [{"label": f"{graph.label}:L{i}", "operator": layer.op, "params": layer.params,
                              "count": layer.count, "epilogue": list(layer.epilogue), "flops": layer.flops}
                             for i, layer in enumerate(graph.layers, 1)],
             "b2b": list(fusions), "networks": list(networks), "executed": dict(executed or {})}
    model["devices"] = system_plan(model, rows)
    return model
