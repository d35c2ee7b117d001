"""``hetero_dse synth``: synthesize HLS projects with Vitis, and read what a synthesis reported."""

from __future__ import annotations

import json

import click
from rich.table import Table

from hetero_dse.cli.main import cli, console


class _RunByDefault(click.Group):
    """``synth DIR...`` runs synthesis; ``synth report PATH`` reads a report: a first word that is not a
    subcommand is a directory to synthesize."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@cli.group(cls=_RunByDefault)
def synth() -> None:
    """Synthesize HLS projects with Vitis (synth DIR...), or read a synthesis report (synth report PATH).

    \b
      hetero_dse synth report prj/solution1           what csynth reported, as tables
      hetero_dse synth report csynth.xml --json       the same as one JSON object
    """


def _cycles(value: int | None) -> str:
    return "undef" if value is None else f"{value:,}"


def _span(values: dict, lo: str, hi: str) -> str:
    a, b = values.get(lo), values.get(hi)
    return _cycles(a) if a == b else f"{_cycles(a)} – {_cycles(b)}"


@synth.command("report")
@click.argument("path", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def report_command(path: str, as_json: bool) -> None:
    """What a synthesis reported: PATH is a csynth.xml, a solution or an HLS project (ours or anyone's)."""
    from hetero_dse.hls.reports import read_solution

    r = read_solution(path)
    if as_json:
        click.echo(json.dumps(r.to_json(), indent=2))
        return
    clock = r.estimated_clock_ns or r.target_clock_ns
    head = Table(title=f"{r.top or '?'} on {r.part or '?'} (Vitis HLS {r.tool_version or '?'})", show_header=False)
    head.add_column()
    head.add_column()
    head.add_row("clock", f"target {r.target_clock_ns} ns, estimated {r.estimated_clock_ns} ns")
    latency = _span(r.latency_cycles, "best", "worst")
    seconds = r.latency_seconds
    head.add_row("latency", f"{latency} cycles" + (f" = {seconds * 1e6:,.2f} µs at {clock} ns" if seconds else ""))
    head.add_row("interval", f"{_span(r.interval_cycles, 'min', 'max')} cycles")
    if r.port_bits:
        head.add_row("m_axi data", ", ".join(f"{k} {v} bits" for k, v in sorted(r.port_bits.items())))
    console.print(head)

    loops = Table(title="loops")
    for col in ("module", "loop", "trip count", "II", "depth", "latency"):
        loops.add_column(col, justify="left" if col in ("module", "loop") else "right")

    def add(module: str, lp, level: int) -> None:
        loops.add_row(module, "  " * level + lp.name, _cycles(lp.trip_count), _cycles(lp.ii), _cycles(lp.depth),
                      _cycles(lp.latency_cycles))
        for c in lp.children:
            add(module, c, level + 1)

    for lp in r.loops:
        add(r.top or "", lp, 0)
    for name, module in sorted(r.modules.items()):
        for lp in module.loops:
            add(name, lp, 0)
    if loops.row_count:
        console.print(loops)

    res = Table(title="resources")
    for col in ("", "used", "available", "share"):
        res.add_column(col, justify="right")
    for key in ("dsp", "bram18k", "uram", "lut", "ff"):
        used, cap = r.resources.get(key), r.available.get(key)
        share = f"{100 * used / cap:.1f} %" if used is not None and cap else "–"
        res.add_row(key.upper(), "–" if used is None else f"{used:,}", "–" if cap is None else f"{cap:,}", share)
    console.print(res)
    if r.missing:
        console.print(f"not in this report: {', '.join(r.missing)}")
