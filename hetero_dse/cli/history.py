"""``hetero_dse history``: what the history database holds, moved between databases, trimmed."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.table import Table

from hetero_dse.atomic import atomic_open
from hetero_dse.cli.app import cli, console
from hetero_dse.errors import HeteroDSEError, storage_error

db_option = click.option("--db", metavar="PATH|URL",
                         help="History database: a SQLite file or a SQLAlchemy URL such as postgresql://host/db "
                              "(default: $HETERO_DSE_DB, else a file in your user data directory).")


def open_db(db: str | None, create: bool = True):
    """The history database ``--db`` names; ``create=False`` for commands that only read it."""
    from hetero_dse.history import HistoryDB

    return HistoryDB(db, create=create)


@cli.group()
def history() -> None:
    """The history of every measured point (answers repeated work instead of measuring again)."""


@history.command("list")
@db_option
def list_command(db: str | None) -> None:
    """Workloads with their record counts and best time."""
    store = open_db(db, create=False)
    rows = store.workloads()
    table = Table(title=f"History: {store.url}", title_justify="left")
    for col in ("id", "operator", "signature", "target", "records", "failed", "best ms"):
        table.add_column(col, justify="right" if col in ("id", "records", "failed", "best ms") else "left")
    for w in rows:
        best = w["best_seconds"]
        table.add_row(str(w["id"]), w["operator"], w["signature"], w["target"], str(w["records"]), str(w["failed"]),
                      "—" if best is None else f"{best * 1e3:.4g}")
    console.print(table if rows else f"History {store.url} holds no workload yet.")


@history.command("show")
@click.argument("workload_id", type=int)
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=1), help="Records to show.")
@db_option
def show_command(workload_id: int, top: int, db: str | None) -> None:
    """The fastest records of one workload (its id from 'history list')."""
    store = open_db(db, create=False)
    workload = store.workload(workload_id)
    versions = ", ".join(f"{k} {v}" for k, v in workload.versions.items())
    console.print(f"{workload.signature} on {workload.target} ({versions})")
    table = Table(title_justify="left")
    for col in ("ms", "source", "knobs / error"):
        table.add_column(col)
    for r in store.records(workload_id, limit=top):
        table.add_row("—" if r.seconds is None else f"{r.seconds * 1e3:.4g}", r.source,
                      r.error if r.error else r.point.dumps())
    console.print(table)


@history.command("export")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace FILE if it exists.")
@db_option
def export_command(file: Path, force: bool, db: str | None) -> None:
    """Every record as JSON lines (one record and its workload per line; '-' for stdout)."""
    store = open_db(db, create=False)
    if str(file) == "-":
        for line in store.export():
            sys.stdout.write(line + "\n")
        return
    if store.url == f"sqlite:///{file.expanduser().resolve()}":
        raise HeteroDSEError(f"{file} is the database being exported; give the export another file name")
    if file.exists() and not force:
        raise HeteroDSEError(f"{file} exists; add --force to replace it or choose another file name")
    count = 0
    try:
        with atomic_open(file) as out:  # whole or absent, never through a link, never onto a device
            for line in store.export():
                out.write(line + "\n")
                count += 1
    except OSError as exc:
        raise storage_error(exc) or HeteroDSEError(f"cannot write {file}: {exc.strerror or exc}") from None
    console.print(f"{count:,} records written to {file}")


@history.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@db_option
def import_command(file: Path, db: str | None) -> None:
    """Add the records of an exported JSON-lines file (points already there are kept as they are)."""
    if not file.is_file():
        raise HeteroDSEError(f"{file} is not a regular file; give a file written by 'hetero_dse history export'")
    store = open_db(db)
    try:
        with file.open(encoding="utf-8") as f:
            added, known = store.import_lines(_bounded_lines(f, file))
    except UnicodeDecodeError as exc:
        raise HeteroDSEError(f"{file} is not UTF-8 text (byte {exc.start}); give a file written by "
                             "'hetero_dse history export'") from None
    console.print(f"{added:,} records added, {known:,} already there")


@history.command("prune")
@click.option("--keep", required=True, type=click.IntRange(min=0), help="Fastest records kept per workload.")
@click.option("--drop-failed", is_flag=True, help="Delete failed records too (they stop a point being retried).")
@db_option
def prune_command(keep: int, drop_failed: bool, db: str | None) -> None:
    """Keep only the fastest records of every workload."""
    store = open_db(db)
    if keep == 0 and not drop_failed and not click.confirm("Delete every successful record?", default=False):
        raise HeteroDSEError("nothing deleted")
    console.print(f"{store.prune(keep, drop_failed):,} records deleted")


#: the longest line an export has (a record with its point and conditions is well under a kilobyte)
MAX_LINE_CHARS = 1_000_000


def _bounded_lines(f, file: Path):
    """The file's lines, one at a time and none longer than :data:`MAX_LINE_CHARS` (a file of zeros or one
    endless line is one sentence, not a process that reads until memory runs out)."""
    number = 0
    while True:
        line = f.readline(MAX_LINE_CHARS + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE_CHARS:
            raise HeteroDSEError(f"{file}: line {number} is longer than {MAX_LINE_CHARS:,} characters: not an "
                                 "export of hetero_dse's history")
        yield line
