"""``report.html``: the answer at a glance, one self-contained file (every plot a PNG embedded as a data URI),
rendered from ``report.json``'s content alone so that ``hetero_dse report DIR`` can render it again.

Plots (matplotlib, Agg): each operator's latency per device; a roofline per device with the chosen designs
and schedules on it; each search's convergence; the FPGA Pareto front (latency, DSP, BRAM18K); predicted
against synthesized where synthesis ran.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hetero_dse import __version__
from hetero_dse.crossdevice import across_markdown, system_markdown
from hetero_dse.units import fmt_seconds, fmt_speedup

__all__ = ["LEGACY_SECTIONS", "PLOTS", "Plot", "new_figure", "record_sections", "register_plot", "render_html"]

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:90%}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f0f0f0}figure{margin:1.5em 0}figcaption{color:#555;font-size:90%}img{max-width:100%}
.warn{background:#fff3cd;padding:.5em 1em;border-left:4px solid #e0a800}"""


def render_html(report: dict[str, Any]) -> str:
    """The page for ``report`` (report.json's content)."""
    rows = report.get("rows", [])
    title = "hetero_dse report" + (f": {report['model']['name']}" if report.get("model") else "")
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
             f"<p>{html.escape(report.get('generator', 'hetero_dse ' + __version__))}.</p>"]
    if not report.get("complete", True):
        parts.append("<p class='warn'><b>Incomplete</b>: the run was stopped early; what follows is what it had "
                     "found.</p>")
    for error in report.get("errors", []):
        parts.append(f"<p class='warn'><b>Failed</b>: {html.escape(error)}</p>")
    across = report.get("across", [])
    parts += _markdown_tables(across_markdown(across))
    if report.get("model"):
        parts += _markdown_tables(system_markdown(report["model"], report["model"]["devices"]))
    parts.append(_rows_table(rows))
    figures = []
    for plot in PLOTS.values():
        try:
            figures.append((plot.draw(report), plot.caption))
        except Exception as exc:  # a plugin's figure that fails costs that figure, never the report
            import matplotlib.pyplot as plt

            plt.close("all")
            parts.append(f"<p class='warn'><b>Figure {html.escape(plot.name)} not drawn</b>: "
                         f"{html.escape(type(exc).__name__)}: {html.escape(str(exc)[:300])}</p>")
    for fig, caption in figures:
        if fig is None:
            continue
        png = _png(fig)
        parts.append(f"<figure><img alt='{html.escape(caption)}' src='data:image/png;base64,"
                     f"{base64.b64encode(png).decode()}'><figcaption>{html.escape(caption)}</figcaption></figure>")
    if not any(e.get("synthesis") for e in report.get("explorations", [])):
        parts.append("<p>No synthesis results in this run: the FPGA figures are the model's predictions "
                     "(<code>hetero_dse synth</code> runs Vitis where it is installed).</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


@dataclass(frozen=True)
class Plot:
    """One figure of the page: ``draw(report)`` returns a matplotlib figure (:func:`new_figure`), or None where
    the report has nothing for it."""

    name: str
    draw: Callable[[dict[str, Any]], Any]
    caption: str


#: the page's figures, in order: a new plot is a function and one :func:`register_plot`
PLOTS: dict[str, Plot] = {}


def register_plot(name: str, draw: Callable[[dict[str, Any]], Any], caption: str) -> None:
    """Add a figure to every report page from now on (a name registered again is replaced)."""
    PLOTS[name] = Plot(name, draw, caption)


def _markdown_tables(lines: Sequence[str]) -> list[str]:
    """The cross-device and whole-model sections, written once as Markdown, as HTML: headings, paragraphs and
    pipe tables (the only Markdown they use)."""
    out: list[str] = []
    table: list[list[str]] = []

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]

    def inline(text: str) -> str:
        text = html.escape(text)
        while text.count("**") >= 2:
            text = text.replace("**", "<b>", 1).replace("**", "</b>", 1)
        return text

    def flush() -> None:
        if table:
            head, *body = table
            out.append("<table><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in r) + "</tr>" for r in body)
                       + "</table>")
            table.clear()

    for line in lines:
        if line.startswith("|"):
            if not set(line) <= set("|-: "):
                table.append(cells(line))
            continue
        flush()
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{inline(line.lstrip('#').strip())}</h{level}>")
        elif line.strip():
            out.append(f"<p>{inline(line)}</p>")
    flush()
    return out


def _rows_table(rows: Sequence[dict[str, Any]]) -> str:
    head = ["operator", "device", "latency", "basis", "GFLOPS", "% peak", "speedup over library", "output"]
    body = []
    for r in rows:
        operator = r["operator"] + (f" {r['shape']}" if r["shape"] else "")
        if r.get("algorithm"):  # where the target set more than one algorithm against each other
            operator += f" ({r['algorithm']})"
        body.append([operator, r["device"], fmt_seconds(r["seconds"]) if r["seconds"] else "—",
                     r["basis"], f"{r['gflops']:.1f}" if r["gflops"] is not None else "—",
                     f"{100 * r['peak_fraction']:.1f}" if r["peak_fraction"] is not None else "—",
                     fmt_speedup(r.get("speedup_over_library"), r.get("loaded", False), r.get("unstable", False)),
                     r["directory"] or f"not written: {r['why_unwritten']}"])
    return ("<h2>Best per operator and device</h2><table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in body)
            + "</table>")


def new_figure() -> tuple[Any, Any]:
    """A figure and its axes in the page's size (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(10, 4.2), dpi=90)


def _png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _per_operator(report: dict[str, Any]) -> Any:
    across = report.get("across", [])
    devices = list(dict.fromkeys(name for e in across for name in e["devices"]))
    if not across or not devices:
        return None
    fig, ax = new_figure()
    width = 0.8 / len(devices)
    for k, name in enumerate(devices):
        xs, ys, hatches = [], [], []
        for i, e in enumerate(across):
            d = e["devices"].get(name)
            if d and d["seconds"]:
                xs.append(i + k * width)
                ys.append(d["seconds"] * 1e3)
                hatches.append("//" if d["basis"] == "estimate" else "")
        bars = ax.bar(xs, ys, width, label=name)
        for bar, hatch in zip(bars, hatches, strict=True):
            bar.set_hatch(hatch)
    ax.set_yscale("log")
    ax.set_ylabel("latency (ms)")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(across))])
    ax.set_xticklabels([e["shape"] or e["operator"] for e in across], rotation=45, ha="right", fontsize=8)
    ax.legend(fontsize=8)
    return fig


def _roofline(report: dict[str, Any]) -> Any:
    rows = report.get("rows", [])
    points = [r for r in rows if r["gflops"] and r.get("intensity")]
    if not points:
        return None
    fig, ax = new_figure()
    devices = list(dict.fromkeys(r["device"] for r in points))
    roofs = {}
    for name in devices:
        mine = [r for r in points if r["device"] == name]
        peaks = [r["gflops"] / r["peak_fraction"] for r in mine if r["peak_fraction"]]
        bandwidth = next((r.get("bandwidth_gbps") for r in mine if r.get("bandwidth_gbps")), None)
        roofs[name] = (max(peaks) if peaks else None, bandwidth)
    # the x range shows every point and every ridge (where the memory roof meets the compute roof)
    ridges = [peak / bw for peak, bw in roofs.values() if peak and bw]
    lo = min([r["intensity"] for r in points] + ridges) / 4
    hi = max([r["intensity"] for r in points] + ridges) * 4
    xs = [lo * (hi / lo) ** (i / 64) for i in range(65)]
    for i, name in enumerate(devices):
        mine = [r for r in points if r["device"] == name]
        peak, bandwidth = roofs[name]
        if peak:
            ax.plot(xs, [min(peak, bandwidth * x) if bandwidth else peak for x in xs], color=f"C{i}", linewidth=1)
        ax.scatter([r["intensity"] for r in mine], [r["gflops"] for r in mine], color=f"C{i}", s=18,
                   label=name + (f" (peak {peak:,.0f} GFLOPS)" if peak else " (no peak known: no roof)"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / compulsory byte)")
    ax.set_ylabel("GFLOPS")
    ax.legend(fontsize=8)
    return fig


def record_sections(report: dict[str, Any]) -> list[str]:
    """The keys of report.json that hold the targets' records (each target's ``report_key``), as the report
    lists them; a report from before the list holds the three built-in ones."""
    sections = report.get("sections")
    return list(sections) if isinstance(sections, list) else list(LEGACY_SECTIONS)


#: the record lists of a report.json written before ``sections`` was
LEGACY_SECTIONS = ("explorations", "cpu", "gpu")


def _convergence(report: dict[str, Any]) -> Any:
    records = [r for key in record_sections(report) for r in report.get(key, []) if r.get("convergence")]
    if not records:
        return None
    fig, ax = new_figure()
    for r in records[:40]:  # a network's many layers: the first 40 keep the plot readable
        trace = r["convergence"]
        final = trace[-1][1]
        if not final or not math.isfinite(final):
            continue
        ns = [n for n, _ in trace] + [max(trace[-1][0], 1)]
        best = [b / final for _, b in trace] + [1.0]
        label = (r.get("shape") or r.get("operator", "")) + " " + str(r.get("board") or r.get("device") or "cpu")
        line = ax.step(ns, best, where="post", linewidth=1, label=label if len(records) <= 12 else None)
        ax.plot(ns[-1:], best[-1:], "o", color=line[0].get_color(), markersize=3)  # a search that found it at once
    ax.set_xscale("log")
    ax.set_xlabel("points evaluated")
    ax.set_ylabel("best so far / final best")
    if len(records) <= 12:
        ax.legend(fontsize=7)
    return fig


def _pareto(report: dict[str, Any]) -> Any:
    explorations = report.get("explorations", [])
    fronts = [e for e in explorations if e.get("pareto")]
    if not fronts:
        return None
    fig, ax = new_figure()
    scatter = None
    for i, e in enumerate(fronts[:20]):
        pts = [p for p in e["pareto"] if p.get("latency_s")]
        scatter = ax.scatter([p["dsp"] for p in pts], [p["latency_s"] * 1e3 for p in pts],
                             c=[p["bram18k"] for p in pts], cmap="viridis", marker="os^vD*"[i % 6], s=22,
                             label=f"{e.get('shape') or e['operator']} {e['board']}" if len(fronts) <= 12 else None)
    if scatter is not None:
        fig.colorbar(scatter, ax=ax, label="BRAM18K")
    ax.set_yscale("log")
    ax.set_xlabel("DSP")
    ax.set_ylabel("predicted latency (ms)")
    if len(fronts) <= 12:
        ax.legend(fontsize=7)
    return fig


def _synthesis(report: dict[str, Any]) -> Any:
    explorations = report.get("explorations", [])
    pairs = [(f["figure"], f["predicted"], f["reported"]) for e in explorations for s in e.get("synthesis") or []
             for f in s.get("figures") or [] if f.get("predicted") and f.get("reported")]
    if not pairs:
        return None
    fig, ax = new_figure()
    kinds = list(dict.fromkeys(name.split(",")[0] for name, _, _ in pairs))
    for k, kind in enumerate(kinds):
        mine = [(p, r) for name, p, r in pairs if name.split(",")[0] == kind]
        ax.scatter([p for p, _ in mine], [r for _, r in mine], s=18, color=f"C{k}", label=kind)
    lo = min(min(p, r) for _, p, r in pairs)
    hi = max(max(p, r) for _, p, r in pairs)
    ax.plot([lo, hi], [lo, hi], color="#888", linewidth=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted")
    ax.set_ylabel("synthesized")
    ax.legend(fontsize=7)
    return fig


register_plot("per_operator", _per_operator, "Each operator's best latency on each device (log scale; hatched: a "
              "roofline estimate, not a measurement).")
register_plot("roofline", _roofline, "Roofline per device: each chosen design or schedule at its arithmetic "
              "intensity (FLOPs per compulsory DDR byte); the line is the device's peak for that data type. A point "
              "above it is an algorithm that multiplies less than its FLOPs count (Winograd: its GFLOPS are "
              "direct convolution's).")
register_plot("convergence", _convergence, "Search convergence: the best objective found so far against points "
              "evaluated, relative to the search's final best.")
register_plot("pareto", _pareto, "FPGA Pareto front of each search: predicted latency against DSPs, coloured by "
              "BRAM18K.")
register_plot("synthesis", _synthesis, "Predicted against synthesized (Vitis HLS reports).")
