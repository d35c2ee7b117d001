"""``hetero_dse lint``, ``csim`` and ``replay``: check again what explore wrote — lint and C-simulate HLS
projects, rebuild and time saved CPU/GPU schedules."""

from __future__ import annotations

from pathlib import Path

import click

from hetero_dse.cli.app import cli, console, warn
from hetero_dse.errors import HeteroDSEError


def _projects(directory: Path) -> list[Path]:
    """The HLS projects of ``directory``: itself, or the <op>/<board>/hls projects of an explore output (and its sets
    of kernels linked into one xclbin, ``kernel_set``)."""
    from hetero_dse.hls.kernel_set import SET_FILE

    if (directory / "src" / "kernel.cpp").is_file() or (directory / SET_FILE).is_file():
        return [directory]
    _check_output_is_whole(directory)
    projects = sorted([*(p.parent.parent for p in directory.glob("**/hls/src/kernel.cpp")),
                       *(p.parent for p in directory.glob(f"**/{SET_FILE}"))])
    projects = [p for p in projects if not p.name.endswith(".partial")]
    if not projects:
        raise HeteroDSEError(f"no HLS project under {directory}: expected src/kernel.cpp, or <op>/<board>/hls "
                             "directories written by 'hetero_dse explore'")
    return projects


@cli.command("lint")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print [{project, ok, findings}] as JSON instead of text.")
def lint_command(paths: tuple[Path, ...], as_json: bool) -> None:
    """Hold the generated code of HLS projects to their design.json (PATHS: 'hls' projects or explore
    outputs): every pragma, trip count, II, dependence distance, partition, storage, operator binding and port
    word. Exit code 1 when any project has a finding."""
    import json

    from hetero_dse.hls.kernel_set import is_kernel_set, lint_kernel_set
    from hetero_dse.hls.lint import LintError, lint

    projects = [p for path in paths for p in _projects(path)]
    results = []
    for project in projects:
        try:  # a set of kernels linked into one xclbin: each one's lint and the set's own checks
            report = lint_kernel_set(project) if is_kernel_set(project) else lint(project)
            results.append({"project": str(project), "ok": report.ok, "findings": [str(f) for f in report.findings],
                            "pragmas_checked": report.pragmas_checked})
        except LintError as exc:
            results.append({"project": str(project), "ok": False, "findings": [], "error": str(exc)})
    if as_json:
        click.echo(json.dumps(results, indent=2))
    else:
        for r in results:
            if r.get("error"):
                console.print(f"ERROR {r['project']}: {r['error']}")
                continue
            console.print(f"{'PASS' if r['ok'] else 'FAIL'}  {r['project']}  ({r['pragmas_checked']} pragmas, "
                          f"{len(r['findings'])} finding{'s' if len(r['findings']) != 1 else ''})")
            for finding in r["findings"]:
                console.print(f"      {finding}")
    bad = [r["project"] for r in results if not r["ok"]]
    if bad:
        if as_json:
            raise SystemExit(1)
        raise HeteroDSEError(f"the generated code and design.json disagree (HLS lint) in {len(bad)} of "
                             f"{len(results)} project{'s' if len(results) != 1 else ''}: {', '.join(bad)}")


@cli.command("csim")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--dataflow", is_flag=True, help="run the layer pipeline's projects as the device does: each process a "
              "thread, each FIFO as deep as declared, a deadlock said (the other projects as before)")
def csim_command(directory: Path, dataflow: bool) -> None:
    """C-simulate generated HLS projects with g++ (DIRECTORY: one 'hls' project or an explore output)."""
    from hetero_dse.hls.csim import csim as run_csim_on
    from hetero_dse.hls.lint import lint
    from hetero_dse.hls.pipeline_lint import is_pipeline_project

    from hetero_dse.hls.kernel_set import set_kernels

    projects = [kernel for p in _projects(directory) for kernel in (set_kernels(p) or [p])]  # a set: each kernel
    failed, lint_failed = [], []
    for project in projects:
        with console.status(f"C-simulating {project}"):
            result = run_csim_on(project, dataflow=dataflow and is_pipeline_project(project))
            checked = lint(project)
        trips = _trip_problems(project, result.output)
        verdict = "PASS" if result.passed else "FAIL"
        console.print(f"{verdict}  {project}  elements={result.elements:,} mismatches={result.mismatches:,} "
                      f"max_abs_error={result.max_abs_error:.3g} (headers: {result.headers})")
        console.print(f"{'PASS' if checked.ok else 'FAIL'}  HLS lint: {checked.pragmas_checked} pragmas held to "
                      f"design.json, {checked.mul_per_iteration} multiplies and {checked.add_per_iteration} adds per "
                      f"pipeline iteration, {checked.accesses_checked} buffer accesses checked for compile-time banks")
        for finding in checked.findings:
            console.print(f"      {finding}")
        for warning in result.warnings:
            console.print(f"      g++: {warning}")
        if trips is not None:
            console.print(f"{'FAIL' if trips else 'PASS'}  trip counts of every process against the model's")
            for problem in trips:
                console.print(f"      {problem}")
        if not result.passed or trips:
            failed.append(str(project))
        if not checked.ok:
            lint_failed.append(str(project))
    if failed:
        raise HeteroDSEError(f"C-simulation failed for {', '.join(failed)}")
    if lint_failed:
        raise HeteroDSEError(f"the generated code and design.json disagree (HLS lint) in {', '.join(lint_failed)}")




def _trip_problems(project: Path, output: str) -> list[str] | None:
    """A network project's trip counts against the model's (None: a single-layer project, which the lint's
    static trip counts cover)."""
    from hetero_dse.hls.network_lint import is_network_project
    from hetero_dse.hls.network_project import check_trips
    from hetero_dse.hls.pipeline_lint import is_pipeline_project
    from hetero_dse.hls.pipeline_project import check_pipeline_trips

    if is_pipeline_project(project):
        return check_pipeline_trips(project, output)
    return check_trips(project, output) if is_network_project(project) else None


def _check_output_is_whole(directory: Path) -> None:
    """Refuse an explore output whose run never wrote its report; warn about one whose report says it is
    incomplete, naming what has no project (``csim`` passing there says nothing of the rest)."""
    from hetero_dse.run.outdir import read_state

    record, report = read_state(directory)
    if record is not None and report is None:
        raise HeteroDSEError(f"{directory} has no report.json: the run writing it was stopped before the end, so "
                             "its projects may be missing or from another run; rerun the same explore command to "
                             "finish it")
    if report is not None and not report.get("complete", True):
        missing = [f"{e['operator']}{' ' + e['shape'] if e.get('shape') else ''} on {e['board']}"
                   for e in report.get("explorations") or [] if not e.get("project")]
        what = f"without a project: {', '.join(missing)}" if missing else "its search was cut short"
        warn(f"{directory} is the output of an interrupted run (report.json: complete false); {what}")


@cli.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
def replay(directory: Path) -> None:
    """Rebuild, check and time the schedule saved in DIRECTORY (an explore output's <op>/cpu or <op>/gpu;
    without a GPU, a GPU schedule is rebuilt and its CUDA compared with the kernel.cu written)."""
    from hetero_dse.targets.replay import replay as run_replay

    result = run_replay(directory)
    if result["seconds"] is None:
        if not result["cuda_source_identical"]:
            raise HeteroDSEError(f"{directory}: the schedule rebuilds to CUDA that differs from its kernel.cu")
        console.print(f"{directory}: rebuilt; the CUDA source is identical to kernel.cu (no GPU here to time it)"
                      + _recorded_note(result))
        return
    console.print(f"{directory}: {result['seconds'] * 1e3:.3f} ms, {result['gflops']:.1f} GFLOPS"
                  + _recorded_note(result) + "; result checked")


def _recorded_note(result: dict) -> str:
    recorded = result["recorded_seconds"]
    if not recorded:
        return ""
    note = ", a roofline estimate" if result["recorded_is_estimate"] else ""
    if result.get("other_codegen"):
        note += f", by {result['other_codegen']}"
    return f" (recorded {recorded * 1e3:.3f} ms{note})"
