"""Rich tables for the terminal: operators, analyses and boards."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from hetero_dse.analysis import Analysis
from hetero_dse.hardware.board import RESOURCE_KINDS, Board
from hetero_dse.operator import Operator, OperatorDef
from hetero_dse.ops import ABBREVIATIONS
from hetero_dse.report import ROW_COLUMNS, row_cells
from hetero_dse.targets.base import Row
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


def analysis_header(a: Analysis, shape_name: str | None, op: Operator | None = None) -> Text:
    title = Text(a.operator, style="bold")
    if shape_name:
        title.append(f"  {shape_name}", style="cyan")
    title.append(f"\n{a.signature}\n", style="dim")
    if op is not None:
        title.append("tensors: " + " · ".join(f"{t['name']} {t['shape']} {t['dtype']} ({t['role']})"
                                              for t in tensors_json(op)) + "\n")
        if op.epilogue:
            extras = [t["name"] for t in tensors_json(op) if t["role"] == "epilogue input"]
            title.append(f"epilogue: {' + '.join(op.epilogue)}, element-wise after {a.main.name}'s reduction"
                         + (f", reading {', '.join(extras)}" if extras else "") + "\n")
    title.append(f"FLOPs {si(a.flops)} · compulsory traffic {si(a.compulsory_bytes, 'B')} · "
                 f"intensity {a.arithmetic_intensity:.1f} FLOP/B · #sl/#rl {a.num_spatial_loops}/"
                 f"{a.num_reduce_loops} · #node {len(a.nodes)}")
    return title


def tensors_json(op: Operator) -> list[dict[str, str]]:
    """The operator's tensors in order, each with its shape, dtype and role: the reduction's inputs, the
    epilogue's inputs (a bias, a residual), the output."""
    main = len(op.inputs) - op.epilogue_inputs
    return [{"name": t.op.name, "shape": "x".join(str(int(d)) for d in t.shape), "dtype": str(t.dtype),
             "role": "output" if t is op.output else "input" if i < main else "epilogue input"}
            for i, t in enumerate([*op.inputs, op.output])]


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
    table.caption = ("usable: share of DSP/BRAM18K/URAM/LUT/FF a design may take, of what the platform's shell "
                     "leaves kernels where the board file gives it ('boards NAME': the budget); MHz: default clock")
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
        left = b.kernel_resources(r)
        shell = f" ({left:,} left by the shell)" if left != b.resources[r] else ""
        table.add_row(r, f"{b.resources[r]:,}{shell} × {b.usable[r]:.0%} usable = {b.cap(r):,}")
    for m in b.memories:
        table.add_row("memory", f"{m.kind}: {m.channels} × {m.bandwidth_gbps_per_channel:g} GB/s = "
                                f"{m.bandwidth_gbps:g} GB/s" + (f", {m.capacity_gib:g} GiB" if m.capacity_gib else ""))
    for key, source in b.sources.items():
        table.add_row(f"source: {key}", source)
    return table


def rows_table(rows: list[Row]) -> Table:
    """The best of every (operator, device), whatever the device: the report's table of rows."""
    estimated = any(row.basis == "estimate" for row in rows)
    table = Table(title="Best per operator and device" + (" (GPU ESTIMATES: roofline model, no GPU here)"
                                                          if estimated else ""), title_justify="left")
    numeric = {"latency", "GFLOPS", "% peak", "library GFLOPS", "speedup"}
    for col in ROW_COLUMNS:
        table.add_column(col, justify="right" if col in numeric else "left", overflow="fold")
    for row in rows:
        cells: list[str | Text] = list(row_cells(row))
        if row.basis == "estimate":
            cells[3] = Text("estimate", style="yellow")
        if row.check == "FAIL":
            cells[11] = Text("FAIL", style="red")
        table.add_row(*cells)
    return table
