"""``hetero_dse synth``: synthesize HLS projects with Vitis, and read what a synthesis reported."""

from __future__ import annotations

import json

import click
from rich.table import Table

from hetero_dse.cli.app import cli, console
from hetero_dse.hls.synth import JOB_TIMEOUT_S


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
      hetero_dse synth out/ --jobs 4                  every project of an explore output, 4 at a time
      hetero_dse synth out/ --scheduler tcp://host:8786 --steps csynth,impl
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
    head = Table(title=f"{r.top or '?'} on {r.part or '?'} ({r.tool} {r.tool_version or '?'})", show_header=False)
    head.add_column()
    head.add_column()
    head.add_row("clock", f"target {r.target_clock_ns} ns, estimated {r.estimated_clock_ns} ns")
    latency = _span(r.latency_cycles, "best", "worst")
    seconds = r.latency_seconds
    head.add_row("latency", f"{latency} cycles" + (f" = {seconds * 1e6:,.2f} µs at {clock} ns" if seconds else ""))
    worst_interval = r.interval_cycles.get("max")
    head.add_row("interval", f"{_span(r.interval_cycles, 'min', 'max')} cycles"
                 + (f" = {worst_interval * clock * 1e-3:,.2f} µs" if worst_interval is not None and clock else ""))
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


@synth.command("run")
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--steps", default="csynth", show_default=True, metavar="LIST",
              help="Comma-separated: csynth, cosim (co-simulation), impl (Vivado place and route).")
@click.option("--jobs", "-j", default=1, show_default=True, help="Local Dask workers (one synthesis each).")
@click.option("--scheduler", metavar="ADDRESS", help="An existing Dask scheduler (tcp://host:8786) instead.")
@click.option("--timeout", default=JOB_TIMEOUT_S, show_default=True, metavar="S",
              help="Wall-clock limit of one job's tool run, and again of reading what it wrote.")
@click.option("--db", metavar="URL|FILE", help="History database (default: $HETERO_DSE_DB or the user's).")
@click.option("--rerun", is_flag=True, help="Synthesize again designs the database has results for.")
@click.option("--strict", is_flag=True, help="Exit non-zero when a figure misses its prediction by more "
                                             "than --threshold (or an exact figure differs).")
@click.option("--threshold", default=0.25, show_default=True, help="Relative error --strict allows.")
def run_command(dirs: tuple[str, ...], steps: str, jobs: int, scheduler: str | None, timeout: float,
                db: str | None, rerun: bool, strict: bool, threshold: float) -> None:
    """Synthesize HLS projects (or every project of an explore output) with Vitis, on Dask."""
    import math
    import sys

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from hetero_dse.errors import HeteroDSEError
    from hetero_dse.hls.synth import (Outcome, SynthError, SynthJob, find_projects, find_tool, parse_steps, synthesize,
                                      validate_outcomes)
    from hetero_dse.hls.validate import worst_error
    from hetero_dse.history import HistoryDB

    steps_run = parse_steps(steps)
    if jobs < 1 or not (math.isfinite(timeout) and timeout > 0):
        raise HeteroDSEError(f"--jobs and --timeout must be positive numbers (got {jobs} and {timeout})")
    if not (math.isfinite(threshold) and threshold >= 0):
        raise HeteroDSEError(f"--threshold must be a relative error, 0 or more (such as 0.25), not {threshold}")
    networks: list = []
    projects = find_projects(dirs, networks)
    if networks:
        console.print(f"skipped {len(networks)} network kernel project(s), which `hetero_dse synth` does not read "
                      f"back (synthesise each with its own `make csynth`): {', '.join(map(str, networks))}")
    tool = find_tool()
    work, bad = [], []
    for p in projects:
        try:
            work.append(SynthJob.of(p, steps_run, timeout, tool))
        except SynthError as exc:  # that project's error, not the run's
            bad.append(Outcome(str(p), "failed", {"status": "failed", "reason": str(exc)}))
    store = HistoryDB(db)
    counts = {"done": 0, "running": 0, "failed": 0, "skipped": 0}
    with Progress(TextColumn("synthesis"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                  disable=not sys.stderr.isatty()) as progress:
        task = progress.add_task("", total=len(work))

        def event(kind: str, job, result) -> None:
            if kind == "started":
                counts["running"] += 1
            elif kind == "skipped":
                counts["skipped"] += 1
                progress.advance(task)
            else:
                counts["running"] -= 1
                counts["done" if result["status"] == "ok" else "failed"] += 1
                progress.advance(task)
            progress.update(task, description=f"{counts['done']} done, {counts['running']} running, "
                                              f"{counts['failed']} failed, {counts['skipped']} done before")

        outcomes = bad + synthesize(work, store=store, scheduler=scheduler, workers=jobs, rerun=rerun,
                                    on_event=event)
    store.close()
    failed = missed = busy = skipped = 0
    for summary in validate_outcomes(outcomes):
        project, check = summary["project"], summary["validation"]
        if summary["status"] == "busy":
            busy += 1
            console.print(f"{project}: left to the other run: {summary['reason']}")
            continue
        if check is None:
            failed += 1
            console.print(f"{project}: {summary['status']}: {summary['reason'] or summary['status']}")
            tail = summary["log_tail"]
            if tail:
                console.print("  " + "\n  ".join(tail.splitlines()[-5:]))
            continue
        skipped += summary["status"] == "skipped"
        console.print(fidelity_table(project, check, summary["status"] == "skipped"))
        if worst_error(check, threshold):
            missed += 1
    done = len(outcomes) - failed - busy - skipped
    # the count of those done before is said here too: the table titles that say it wrap with a long path
    console.print(f"{len(outcomes)} project{'s' if len(outcomes) != 1 else ''}: {done} synthesized, "
                  f"{skipped} done before, {failed} failed"
                  + (f", {busy} being synthesized by another run" if busy else "")
                  + (f", {missed} off {'its' if missed == 1 else 'their'} prediction by more than {threshold:.0%}"
                     if missed else ""))
    if failed or (strict and missed):
        raise SystemExit(1)


def fidelity_table(project: str, check: dict, skipped: bool) -> Table:
    table = Table(title=f"{project}: predicted against synthesized" + (" (done before)" if skipped else ""))
    for col in ("figure", "predicted", "reported", "error", "likely cause"):
        table.add_column(col, justify="left" if col in ("figure", "likely cause") else "right")

    def fmt(v) -> str:
        if v is None:
            return "–"
        if isinstance(v, float) and (abs(v) < 1e-3 and v != 0):
            return f"{v:.3g}"
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"

    for row in check["figures"]:
        err = row.get("error")
        table.add_row(row["figure"], fmt(row["predicted"]), fmt(row["reported"]),
                      "–" if err is None else f"{100 * err:+.1f} %", row.get("cause", ""))
    return table


@cli.command("calibrate")
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=str), metavar="FILE",
              help="Where to write the calibration (YAML), for explore --calibration.")
def calibrate_command(results: tuple[str, ...], output: str) -> None:
    """Fit the FPGA model's constants to synthesized projects (each with the synth.json 'synth' wrote).

    RESULTS are projects or directories holding them (explore outputs). Prints the mean absolute
    percentage error of each figure before, after and leave-one-out.
    """
    from hetero_dse.errors import HeteroDSEError
    from hetero_dse.hls.calibrate import fit, observations

    cal = fit(observations(list(results)))
    try:
        cal.dump(output)
    except OSError as exc:  # a full disk, a directory that is not there: nothing half-written is left
        raise HeteroDSEError(f"cannot write the calibration to {output}: {exc.strerror or exc}") from None
    table = Table(title=f"calibration of {cal.part} (Vitis {cal.tool_version}) from {cal.designs} designs")
    for col in ("figure", "MAPE before", "after", "leave-one-out"):
        table.add_column(col, justify="left" if col == "figure" else "right")

    def pct(v) -> str:
        return "–" if v is None else f"{v:.1f} %"

    for figure, q in cal.quality.items():
        table.add_row(figure.upper(), pct(q["mape_before"]), pct(q["mape_after"]), pct(q["mape_leave_one_out"]))
    console.print(table)
    console.print(f"calibrated: {', '.join(cal.calibrated) or 'nothing'}; written to {output}")
