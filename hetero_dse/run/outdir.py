"""The output directory of ``explore``: never two runs mixed, never an incomplete output that looks complete.

A run records itself in ``.hetero_dse-run.json`` before it writes anything: the command and the directories
it will write, ``complete`` false. Before that it removes what an earlier run of the tool wrote there (its
reports, and the directories its record or its report names), so an old ``complete`` report never sits
beside new projects. When the report is written whole and the run was not interrupted, the record says
``complete``. The same command after an interrupted or killed run goes on without ``--force`` (its
measurements come back from the history); another command needs ``--force``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hetero_dse.atomic import atomic_write_text, open_new, partial_path
from hetero_dse.errors import HeteroDSEError, storage_error

__all__ = ["RECORD", "abandon", "finish", "prepare", "read_state"]

RECORD = ".hetero_dse-run.json"
REPORTS = ("report.json", "report.md", "designs.csv")


def read_state(out: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The run record and the report of ``out`` (None where absent or unreadable)."""
    return _json(out / RECORD), _json(out / "report.json")


def prepare(out: Path, force: bool, command: Mapping[str, Any], directories: Sequence[str]) -> bool:
    """Make ``out`` ready for a run of ``command`` (its options, as JSON values) writing ``directories``
    (relative to ``out``); True when the run goes on from an interrupted run of the same command."""
    if out.exists() and not out.is_dir():
        raise HeteroDSEError(f"output path {out} is a file, not a directory; choose another with --out")
    record, report = read_state(out) if out.is_dir() else (None, None)
    resuming = record is not None and not record.get("complete") and record.get("command") == dict(command)
    if out.is_dir() and any(out.iterdir()) and not (force or resuming):
        if record is not None and not record.get("complete"):
            raise HeteroDSEError(f"output directory {out} holds an interrupted run with other options; rerun "
                                 "that command to finish it, or add --force to replace it")
        raise HeteroDSEError(f"output directory {out} is not empty; add --force to overwrite it or choose another "
                             "with --out")
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = partial_path(out / ".hetero_dse-write-test")
        open_new(probe).close()
        probe.unlink()
        earlier = set(directories) | set((record or {}).get("directories") or []) | _report_directories(report)
        for name in REPORTS:
            (out / name).unlink(missing_ok=True)
        for relative in sorted(earlier):
            _remove_inside(out, relative)
        atomic_write_text(out / RECORD, json.dumps({"command": dict(command), "directories": list(directories),
                                                    "complete": False, "started": time.time(),
                                                    "created": created}, indent=2) + "\n")
    except (OSError, HeteroDSEError) as exc:
        if created:  # a full disk: the directory this run made goes too, nothing of the run is left
            with contextlib.suppress(OSError):
                out.rmdir()
        if isinstance(exc, HeteroDSEError):
            raise
        raise storage_error(exc, f"output directory {out}") or HeteroDSEError(
            f"cannot write to output directory {out}: {exc.strerror or exc}") from None
    return resuming


def abandon(out: Path) -> None:
    """A run that ends in an error before writing anything leaves no record behind (nothing to go on from), nor
    the directory it made, where nothing else was written to it."""
    if not (out / "report.json").exists():
        record = _json(out / RECORD) or {}
        (out / RECORD).unlink(missing_ok=True)
        if record.get("created"):
            with contextlib.suppress(OSError):  # not empty: something is in it, and it stays
                out.rmdir()


def finish(out: Path, complete: bool) -> None:
    """Record whether the run ended complete (its report written whole, nothing interrupted)."""
    record = _json(out / RECORD) or {}
    atomic_write_text(out / RECORD, json.dumps({**record, "complete": complete, "finished": time.time()},
                                               indent=2) + "\n")


def _report_directories(report: dict[str, Any] | None) -> set[str]:
    """The directories an earlier report names (a report written before there were run records)."""
    found: set[str] = set()
    for row in (report or {}).get("rows") or []:
        if row.get("directory"):
            found.add(str(Path(row["directory"]).parent if row.get("kind") == "fpga" else row["directory"]))
    for e in (report or {}).get("explorations") or []:
        if e.get("project"):
            found.add(str(Path(e["project"]).parent))
    for key in ("cpu", "gpu"):
        for e in (report or {}).get(key) or []:
            if e.get("directory"):
                found.add(str(e["directory"]))
    return found


def _remove_inside(out: Path, relative: str) -> None:
    """Remove ``out/relative`` (and a ``.partial`` beside it), only where it lies inside ``out``."""
    root = out.resolve()
    for path in (out / relative, out / f"{relative}.partial"):
        resolved = path.resolve()
        if resolved == root or root not in resolved.parents:
            continue  # never outside --out, whatever an edited record says
        if resolved.is_dir() and not path.is_symlink():
            shutil.rmtree(resolved)
        elif path.exists() or path.is_symlink():
            path.unlink()


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
