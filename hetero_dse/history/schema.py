"""The history database's tables and how a database made by an earlier version is brought up to date (columns
added since, record keys independent of the knobs' order); made and migrated safely when several processes
open one new database at the same moment."""

from __future__ import annotations

import sqlite3
import time

import sqlalchemy as sa

from hetero_dse.history.records import point_key
from hetero_dse.space.point import Point

__all__ = ["create_tables", "meta", "metadata", "migrate", "records", "sqlite_pragmas", "syntheses", "workloads"]

metadata = sa.MetaData()
workloads = sa.Table(
    "workloads", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("key", sa.String(32), nullable=False, unique=True),
    sa.Column("operator", sa.String(200), nullable=False),
    sa.Column("signature", sa.Text, nullable=False),
    sa.Column("target", sa.Text, nullable=False),
    sa.Column("versions", sa.Text, nullable=False),
    sa.Column("spec", sa.Text, nullable=True),  # added after the first release: see _migrate
)
records = sa.Table(
    "records", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("workload_id", sa.Integer, sa.ForeignKey("workloads.id", ondelete="CASCADE"), nullable=False),
    sa.Column("point_key", sa.String(32), nullable=False),
    sa.Column("point", sa.Text, nullable=False),
    sa.Column("seconds", sa.Float, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("source", sa.String(50), nullable=False),
    sa.Column("timestamp", sa.Float, nullable=False),
    # how a time was taken (JSON: repeats, foreign load, loaded); added after the first release: see _migrate
    sa.Column("conditions", sa.Text, nullable=True),
    sa.UniqueConstraint("workload_id", "point_key", name="one_record_per_point"),
)


#: Facts about the database itself: ``point_keys`` = ``sorted`` once every record's key is independent of
#: the order of its point's knobs (databases from before are re-keyed when opened, see _migrate).
meta = sa.Table(
    "meta", metadata,
    sa.Column("name", sa.String(50), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)


#: FPGA synthesis runs: one row per design (operator, knobs), part, clock, tool version and steps. A team
#: sharing one database never synthesizes a design twice; a failed run is kept with its log tail and run
#: again on request.
syntheses = sa.Table(
    "syntheses", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("design_key", sa.String(32), nullable=False),
    sa.Column("part", sa.String(100), nullable=False),
    sa.Column("clock_mhz", sa.Float, nullable=False),
    sa.Column("tool_version", sa.String(50), nullable=False),
    sa.Column("steps", sa.String(100), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("result", sa.Text, nullable=False),
    sa.Column("timestamp", sa.Float, nullable=False),
    sa.UniqueConstraint("design_key", "part", "clock_mhz", "tool_version", "steps", name="one_synthesis_per_design"),
)


def create_tables(engine: sa.Engine, attempts: int = 3) -> None:
    """The tables, made once even when several processes open a new database at the same moment: ``IF NOT
    EXISTS`` in the statement itself where the database has it (SQLAlchemy's ``create_all`` checks, then creates,
    and another process may create a table in between: 'table meta already exists' with fourteen processes
    opening one new SQLite file). PostgreSQL can still collide on its catalog when two create one table at once
    (a unique violation): the next attempt finds the table made."""
    for attempt in range(attempts):
        try:
            if engine.dialect.name in IF_NOT_EXISTS:
                with engine.begin() as conn:
                    for table in metadata.sorted_tables:
                        conn.execute(sa.schema.CreateTable(table, if_not_exists=True))
            else:
                metadata.create_all(engine)
            return
        except (sa.exc.IntegrityError, sa.exc.ProgrammingError, sa.exc.OperationalError) as exc:
            raced = isinstance(exc, sa.exc.IntegrityError) or "already exists" in str(exc)
            if not raced or attempt == attempts - 1:
                raise


#: databases whose CREATE TABLE takes IF NOT EXISTS
IF_NOT_EXISTS = ("sqlite", "postgresql", "mysql", "mariadb")


def migrate(engine: sa.Engine) -> None:
    """Columns added since a database was created (create_tables makes missing tables, never missing columns),
    and record keys made independent of the knobs' order."""
    _add_column(engine, "workloads", "spec")
    _add_column(engine, "records", "conditions")
    _rekey_once(engine)


def _add_column(engine: sa.Engine, table: str, column: str) -> None:
    """``ALTER TABLE table ADD COLUMN column TEXT`` unless it is there (another process may add it first)."""
    if column in {c["name"] for c in sa.inspect(engine).get_columns(table)}:
        return
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN {column} TEXT"))
    except sa.exc.DBAPIError:
        if column not in {c["name"] for c in sa.inspect(engine).get_columns(table)}:
            raise


def _rekey(engine: sa.Engine) -> None:
    """Key every record by :func:`point_key` (knobs sorted) in one transaction, keeping the first record of a
    point stored twice under two knob orders (what importing an export did before); once per database."""
    with engine.begin() as conn:
        if conn.execute(sa.select(meta.c.value).where(meta.c.name == "point_keys")).scalar() == "sorted":
            return
        seen: set[tuple[int, str]] = set()
        doomed: list[int] = []
        changed: list[dict[str, object]] = []
        rows = conn.execute(sa.select(records.c.id, records.c.workload_id, records.c.point_key, records.c.point)
                            .order_by(records.c.id))
        for row in rows.mappings():
            key = point_key(Point.from_json(row["point"]))
            if (row["workload_id"], key) in seen:
                doomed.append(row["id"])
                continue
            seen.add((row["workload_id"], key))
            if key != row["point_key"]:
                changed.append({"row_id": row["id"], "new_key": key, "temporary": "~" + key[1:]})
        for start in range(0, len(doomed), 500):
            conn.execute(records.delete().where(records.c.id.in_(doomed[start:start + 500])))
        if changed:  # through a temporary key (not hex) first: a new key may be another record's old one
            conn.execute(records.update().where(records.c.id == sa.bindparam("row_id"))
                         .values(point_key=sa.bindparam("temporary")), changed)
            conn.execute(records.update().where(records.c.id == sa.bindparam("row_id"))
                         .values(point_key=sa.bindparam("new_key")), changed)
        conn.execute(meta.insert().values(name="point_keys", value="sorted"))


def _rekey_once(engine: sa.Engine) -> None:
    """:func:`_rekey`, where another process opening the same database may do it at the same moment."""
    try:
        _rekey(engine)
    except sa.exc.IntegrityError:  # the other process finished first; its keys are the same
        with engine.connect() as conn:
            if conn.execute(sa.select(meta.c.value).where(meta.c.name == "point_keys")).scalar() != "sorted":
                raise


def sqlite_pragmas(dbapi_connection, _record) -> None:
    # WAL: readers never block the writer and a crash mid-write leaves the file whole; a long busy timeout
    # lets concurrent explorations queue for the write lock instead of failing.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=60000")
    _to_wal(cursor)
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _to_wal(cursor, seconds: float = 60.0) -> None:
    """Put the database in WAL mode. The conversion needs the file to itself and SQLite does not run the busy
    handler for it, so processes opening a new file at once retry here; WAL is the file's own property, so
    once one of them has converted it the others find it done."""
    deadline, pause = time.monotonic() + seconds, 0.005
    while True:
        if cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
            return
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(2 * pause, 0.2)
