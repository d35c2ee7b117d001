"""Rich tables for the terminal: operators, analyses and boards."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from hetero_dse.analysis import Analysis
from hetero_dse.hardware.board import RESOURCE_KINDS, Board
from hetero_dse.operator import OperatorDef
from hetero_dse.ops import ABBREVIATIONS
from hetero_dse.units import si


def ops_table(definitions: list[OperatorDef]) -> Table:
    abbrev = {v: k.upper() for k, v in ABBREVIATIONS.items()}
    table = Table(title="Built-in operators", title_justify="left")
    for col in ("operator", "abbr.", "description", "parameters (defaults)", "shape sets"):
        table.add_column(col, overflow="fold")
    for d in definitions:
        params = " ".join(f"{k}={v}" for k, v in d.defaults().items())
        sets = ", ".join(f"{n} ({len(s.shapes)})" for n, s in d.shape_sets.items())
        table.add_row(d.name, abbrev.get(d.name, ""), d.description, params, sets)
    return table


def operator_detail(d: OperatorDef) -> Table:
    table = Table(title=f"{d.name}: {d.description}", title_justify="left")
    for col in ("parameter", "default", "allowed", "meaning"):
        table.add_column(col, overflow="fold")
    for name, p in d.params.items():
        allowed = ", ".join(p.choices) if p.choices else (f">= {p.minimum}" if p.minimum is not None else "any")
        table.add_row(name, str(p.default), allowed, p.help)
    for set_name, shape_set in d.shape_sets.items():
        table.add_section()
        for shape_name, values in shape_set.shapes.items():
            table.add_row(f"{set_name}:{shape_name}", "", "", " ".join(f"{k}={v}" for k, v in values.items()))
    return table


def analysis_header(a: Analysis, shape_name: str | None) -> Text:
    title = Text(a.operator, style="bold")
    if shape_name:
        title.append(f"  {shape_name}", style="cyan")
    title.append(f"\n{a.signature}\n", style="dim")
    title.append(f"FLOPs {si(a.flops)} · compulsory traffic {si(a.compulsory_bytes, 'B')} · "
                 f"intensity {a.arithmetic_intensity:.1f} FLOP/B · #sl/#rl {a.num_spatial_loops}/"
                 f"{a.num_reduce_loops} · #node {len(a.nodes)}")
    return title


def nodes_table(a: Analysis) -> Table:
    table = Table(title="mini-graph (producers first)", title_justify="left")
    for col in ("node", "#sl", "#rl", "spatial trip counts", "reduce trip counts", "loop order", "#in", "#out",
                "#cs", "body"):
        table.add_column(col, overflow="fold")
    for n in a.nodes:
        name = f"{n.name} (main)" if n is a.main else n.name
        table.add_row(name, str(len(n.spatial)), str(len(n.reduce)),
                      " ".join(f"{lp.name}={lp.extent}" for lp in n.spatial),
                      " ".join(f"{lp.name}={lp.extent}" for lp in n.reduce) or "-",
                      " ".join(lp.name for lp in n.loops), str(len(n.inputs)), "1", str(len(n.consumers)), n.body)
    return table


def accesses_table(a: Analysis) -> Table:
    tile = a.full_tile()
    table = Table(title=f"accesses of {a.main.name} (footprint over the whole iteration space)", title_justify="left")
    for col in ("tensor", "access", "role", "dtype", "elements", "bytes"):
        table.add_column(col, overflow="fold", justify="right" if col in ("elements", "bytes") else "left")
    for acc in (*a.reads, a.write):
        role = "write" if acc is a.write else ("read · input" if acc.from_input else "read · producer")
        fp = acc.footprint(tile)
        table.add_row(acc.tensor, str(acc), role, acc.dtype, f"{fp:,}", si(fp * acc.bytes_per_element, "B"))
    return table


def boards_table(boards: list[Board]) -> Table:
    table = Table(title="FPGA boards ('hetero_dse boards NAME' for details and sources)", title_justify="left")
    for col in ("board", "part", "MHz", "DSP", "BRAM18K", "URAM", "LUT", "FF", "usable", "memory"):
        table.add_column(col, justify="right" if col in ("DSP", "BRAM18K", "URAM", "LUT", "FF") else "left")
    for b in boards:
        counts = [f"{b.resources[r]:,}" for r in RESOURCE_KINDS]
        usable = "/".join(f"{b.usable[r]:.0%}".rstrip("%") for r in RESOURCE_KINDS) + " %"
        memory = " + ".join(f"{m.channels}×{m.kind} {m.bandwidth_gbps_per_channel:g} GB/s" for m in b.memories)
        table.add_row(b.name, b.part, f"{b.default_clock_mhz:g}", *counts, usable, memory)
    table.caption = "usable: share of DSP/BRAM18K/URAM/LUT/FF a design may take; MHz: default kernel clock"
    return table


def board_detail(b: Board) -> Table:
    table = Table(title=f"{b.name}: {b.description}", title_justify="left", show_header=False)
    table.add_column("field")
    table.add_column("value", overflow="fold")
    table.add_row("file", str(b.path))
    table.add_row("part", b.part)
    table.add_row("platform", b.platform or "- (Vivado flow)")
    table.add_row("clock", f"{b.default_clock_mhz:g} MHz default, {b.max_clock_mhz:g} MHz max")
    for r in RESOURCE_KINDS:
        table.add_row(r, f"{b.resources[r]:,} × {b.usable[r]:.0%} usable = {b.cap(r):,}")
    for m in b.memories:
        table.add_row("memory", f"{m.kind}: {m.channels} × {m.bandwidth_gbps_per_channel:g} GB/s = "
                                f"{m.bandwidth_gbps:g} GB/s" + (f", {m.capacity_gib:g} GiB" if m.capacity_gib else ""))
    for key, source in b.sources.items():
        table.add_row(f"source: {key}", source)
    return table


def explorations_table(explorations: list, csims: dict) -> Table:
    """The best design of every (operator, board): what bounds it and what it uses."""
    from hetero_dse.units import fmt_seconds

    table = Table(title="Best FPGA designs (analytical model)", title_justify="left")
    for col in ("operator", "board", "dtype", "latency", "GOPS", "% roofline", "bound", "PE", "II", "DSP", "BRAM18K",
                "traffic/bound", "csim"):
        table.add_column(col, justify="right" if col not in ("operator", "board", "bound", "dtype") else "left")
    for i, e in enumerate(explorations):
        label = e.op.title
        if not e.designs:
            table.add_row(label, e.board.name, "—", "interrupted before a feasible design", *[""] * 9)
            continue
        p, d = e.best
        c = csims.get(i)
        table.add_row(label, e.board.name, p["dtype"], fmt_seconds(d["latency_s"]), f"{d['gops']:.1f}",
                      f"{100 * d['roofline']:.1f}", d["bound"], str(d["pe"]), str(d["ii"]),
                      f"{d['resources']['dsp']:,.0f} ({100 * d['utilisation']['dsp']:.0f}%)",
                      f"{d['resources']['bram18k']:,.0f} ({100 * d['utilisation']['bram18k']:.0f}%)",
                      f"{d['traffic_over_bound']:.2f}x",
                      "—" if c is None else ("pass" if c["passed"] else "FAIL"))
    return table


def cpu_table(records: list[dict]) -> Table:
    """The best measured CPU schedule of every operator against torch on the same CPU."""
    table = Table(title="Best CPU schedules (measured)", title_justify="left")
    for col in ("operator", "trials", "failed", "best ms", "GFLOPS", "torch GFLOPS", "speedup", "tuning s"):
        table.add_column(col, justify="left" if col == "operator" else "right")
    for r in records:
        best, torch = r["best"], r["torch"]
        table.add_row(r["operator"] + (f" {r['shape']}" if r["shape"] else ""), str(r["trials"]), str(r["failures"]),
                      f"{best['seconds'] * 1e3:.3f}" if best else "—", f"{best['gflops']:.1f}" if best else "—",
                      f"{torch['gflops']:.1f}" if torch else "—",
                      f"{r['speedup_over_torch']:.2f}x" if r["speedup_over_torch"] else "—", f"{r['wall_s']:.1f}")
    return table


def gpu_table(records: list[dict]) -> Table:
    """The best GPU schedule of every operator: measured against torch, or a labelled roofline estimate."""
    estimated = any(r["estimate"] for r in records)
    table = Table(title="Best GPU schedules" + (" (ESTIMATES: roofline model, no GPU here)" if estimated else
                                                " (measured)"), title_justify="left")
    for col in ("operator", "device", "trials", "best ms", "GFLOPS", "kind", "bound", "torch GFLOPS", "speedup"):
        table.add_column(col, justify="left" if col in ("operator", "device", "kind") else "right")
    for r in records:
        best, torch = r["best"], r["torch"]
        table.add_row(r["operator"] + (f" {r['shape']}" if r["shape"] else ""), r["device"], str(r["trials"]),
                      f"{best['seconds'] * 1e3:.3f}" if best else "—", f"{best['gflops']:.1f}" if best else "—",
                      "estimate" if r["estimate"] else "measured", (best or {}).get("bound", "—"),
                      f"{torch['gflops']:.1f}" if torch else "—",
                      f"{r['speedup_over_torch']:.2f}x" if r["speedup_over_torch"] else "—")
    return table
