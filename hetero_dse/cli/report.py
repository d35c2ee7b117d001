"""``hetero_dse report DIR...``: the cross-device answer rendered again from results already on disk — one run's
``report.json``, or several runs' (an FPGA sweep here, a CPU run there) merged into one report — without
exploring again."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from hetero_dse.atomic import atomic_directory, open_new, partial_path, refuse_special
from hetero_dse.cli.app import cli, console
from hetero_dse.errors import HeteroDSEError, storage_error


def read_report(directory: Path) -> dict[str, Any]:
    path = directory / "report.json"
    if not path.is_file():
        raise HeteroDSEError(f"{directory} holds no report.json: give the --out directory of a finished or "
                             "interrupted 'hetero_dse explore'")
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise HeteroDSEError(f"{path} is not a report hetero_dse wrote ({type(exc).__name__}); run explore "
                             "again to write it") from None
    if not isinstance(report, dict) or not isinstance(report.get("rows"), list):
        raise HeteroDSEError(f"{path} has no rows: it was written by an older hetero_dse; run explore again")
    return report


def merge(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """One report of several runs: their rows and records side by side, the cross-device table and a
    network's plan computed again over all of them."""
    from hetero_dse.crossdevice import across_devices, system_plan
    from hetero_dse.report_html import record_sections

    merged: dict[str, Any] = {"generator": reports[0].get("generator", "hetero_dse"),
                              "complete": all(r.get("complete", True) for r in reports),
                              "rows": [row for r in reports for row in r["rows"]],
                              "errors": [e for r in reports for e in r.get("errors", [])]}
    merged["sections"] = list(dict.fromkeys(key for r in reports for key in record_sections(r)))
    for key in merged["sections"]:
        merged[key] = [record for r in reports for record in r.get(key, [])]
    merged["across"] = across_devices(merged["rows"])
    models = [r["model"] for r in reports if r.get("model")]
    if models:
        names = {m["name"] for m in models}
        if len(names) > 1:
            raise HeteroDSEError(f"these runs explored different networks ({', '.join(sorted(names))}); merge the "
                                 "runs of one network")
        model = dict(models[0])
        if "layer_table" not in model:
            raise HeteroDSEError("a run's whole-model report was written by an older hetero_dse; run explore "
                                 "--model again")
        model["devices"] = system_plan(model, merged["rows"])
        merged["model"] = model
    return merged


def _write_together(target: Path, files: dict[str, str]) -> None:
    """``files`` in ``target``, all or none: a new directory is filled aside and renamed into place; in one
    that exists (a run's own), every file is written aside first and renamed into place only once all are."""
    if not target.exists():
        with atomic_directory(target) as partial:  # a full disk says the folder, never its .partial
            for name, text in files.items():
                (partial / name).write_text(text)
        return
    aside: dict[Path, Path] = {}
    try:
        for name, text in files.items():
            refuse_special(target / name)
            aside[target / name] = partial_path(target / name)
            with open_new(aside[target / name]) as f:
                f.write(text)
        for path, written in aside.items():  # renames: no space taken, all but never a half-written one
            os.replace(written, path)
    except OSError as exc:
        for written in aside.values():
            written.unlink(missing_ok=True)
        raise storage_error(exc, f"the report in {target}") or exc from None
    except BaseException:
        for written in aside.values():
            written.unlink(missing_ok=True)
        raise


@cli.command("report")
@click.argument("directories", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Where the merged report goes (default: the one DIRECTORY given; required for several).")
def report_command(directories: tuple[Path, ...], out: Path | None) -> None:
    """Render report.html (the cross-device table, the whole-model plan and the plots) again from the
    report.json of one or more explore runs, without exploring again.

    \b
    Examples:
      hetero_dse report hetero_dse_out
      hetero_dse report fpga_run cpu_run --out all_devices
    """
    from hetero_dse.crossdevice import across_markdown, plan_file
    from hetero_dse.report_html import render_html

    if len(directories) > 1 and out is None:
        raise HeteroDSEError("several runs merge into a new directory: give it with --out")
    target = out or directories[0]
    if len(directories) > 1 and any(target.resolve() == d.resolve() for d in directories):
        # the merge would replace that run's own report.json, and a second merge would count its rows twice
        raise HeteroDSEError(f"--out {target} is one of the runs being merged; merge into a new directory")
    if target.exists() and not target.is_dir():
        raise HeteroDSEError(f"--out {target} is a file; give a directory for the report")
    reports = [read_report(d) for d in directories]
    try:
        report = merge(reports)
        html = render_html(report)
        plan = plan_file(report["model"], report["model"]["devices"]) if report.get("model") else None
        rows = across_markdown(report["across"])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # a report.json edited by hand, cut short or from another version: say which, not where it broke
        raise HeteroDSEError(f"the report.json of {', '.join(map(str, directories))} is not one this hetero_dse "
                             f"can render ({type(exc).__name__}: {exc}); run explore again to write it") from None
    files = {"report.html": html}
    if len(directories) > 1:  # a single run's own report.json stays as explore wrote it
        files["report.json"] = json.dumps(report, indent=2) + "\n"
    if plan is not None:
        files["plan.json"] = json.dumps(plan, indent=2) + "\n"
    _write_together(target, files)
    written = [target / name for name in files]
    for line in rows:
        if line.startswith("|"):
            console.print(line, markup=False, highlight=False)
    for path in written:
        console.print(f"Wrote {path}", markup=False, highlight=False)
