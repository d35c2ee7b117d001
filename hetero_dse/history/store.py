"""The history database: a SQLite file by default, any SQLAlchemy URL (``postgresql://…``) for a shared one.

Workloads and records live in two tables; a record is unique per (workload, point), so a point measured
once is never stored — or measured — twice. Every write is its own transaction, committed before the
search goes on: a run killed at any moment keeps everything it measured. SQLite runs in WAL mode with a
generous busy timeout, so several explorations can write to one file at once.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, OperationalError

from hetero_dse.errors import HeteroDSEError
from hetero_dse.history.checks import check_record, check_spec
from hetero_dse.history.records import Record, Workload, point_key
from hetero_dse.history.schema import create_tables, migrate, records, sqlite_pragmas, syntheses, workloads
from hetero_dse.space.point import OPTIONAL_KNOBS, Point

ENV = "HETERO_DSE_DB"

def default_url() -> str:
    """``$HETERO_DSE_DB`` if set, else a SQLite file in the user's data directory."""
    if os.environ.get(ENV):
        return os.environ[ENV]
    import platformdirs

    return str(Path(platformdirs.user_data_dir("hetero_dse")) / "history.sqlite")


def as_url(db: str) -> str:
    """A SQLAlchemy URL from a URL or a plain file path."""
    return db if "://" in db else f"sqlite:///{Path(db).expanduser().resolve()}"


class HistoryDB:
    """Workloads and their records, in the database at ``db`` (a SQLAlchemy URL or a SQLite file path)."""

    def __init__(self, db: str | None = None, *, create: bool = True) -> None:
        """``create=False`` (commands that only read): a SQLite file that does not exist is an error, and
        neither it nor its directory is made."""
        url = as_url(db or default_url())
        self.url = url
        if url.startswith("sqlite:///"):
            path = Path(url.removeprefix("sqlite:///"))
            if not create and not path.is_file():
                raise HeteroDSEError(f"there is no history database at {path}; check --db (or $HETERO_DSE_DB), "
                                     "or run a search to start one")
            if path.is_file() and not _is_sqlite(path):
                raise HeteroDSEError(f"{path} is not a SQLite database; give --db a history database (or a new "
                                     "file name to start one)")
        try:
            if url.startswith("sqlite:///"):
                Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
                self.engine = sa.create_engine(url, connect_args={"timeout": 60})
                sa.event.listen(self.engine, "connect", sqlite_pragmas)
            else:
                self.engine = sa.create_engine(url, pool_pre_ping=True)
            create_tables(self.engine)
            migrate(self.engine)
        except (OperationalError, OSError, sa.exc.DatabaseError) as exc:
            reason = " ".join(str(getattr(exc, "orig", exc)).split())  # drivers' messages span lines
            raise HeteroDSEError(f"cannot open the history database {db or url}: {reason}") from None
        except (sa.exc.NoSuchModuleError, sa.exc.ArgumentError, ImportError) as exc:
            raise HeteroDSEError(f"cannot use {url!r} as the history database ({exc}); give a SQLite file path or "
                                 "a URL such as postgresql://user@host/db with its driver installed") from None

    def close(self) -> None:
        self.engine.dispose()

    # ------------------------------------------------------------------------------------- syntheses
    def synthesis(self, design_key: str, part: str, clock_mhz: float, tool_version: str,
                  steps: str) -> dict | None:
        """The stored synthesis of a design (``{"status", "result", "timestamp"}``), or None."""
        s = syntheses.c
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(s.status, s.result, s.timestamp).where(
                s.design_key == design_key, s.part == part, s.clock_mhz == clock_mhz,
                s.tool_version == tool_version, s.steps == steps)).mappings().first()
        return None if row is None else {"status": row["status"], "result": json.loads(row["result"]),
                                         "timestamp": row["timestamp"]}

    def add_synthesis(self, design_key: str, part: str, clock_mhz: float, tool_version: str, steps: str,
                      status: str, result: dict) -> None:
        """Store a synthesis run, replacing an earlier one of the same design, part, clock, tool and steps
        (a failed run done again)."""

        s = syntheses.c
        key = (s.design_key == design_key, s.part == part, s.clock_mhz == clock_mhz,
               s.tool_version == tool_version, s.steps == steps)
        values = {"design_key": design_key, "part": part, "clock_mhz": clock_mhz, "tool_version": tool_version,
                  "steps": steps, "status": status, "result": json.dumps(result, sort_keys=True),
                  "timestamp": time.time()}
        with self.engine.begin() as conn:
            conn.execute(syntheses.delete().where(*key))
            conn.execute(syntheses.insert().values(**values))

    # ------------------------------------------------------------------------------------- workloads
    def workload_id(self, workload: Workload) -> int:
        """The workload's id, adding it if it is new (safe when several writers add it at once)."""
        with self.engine.begin() as conn:
            return _workload_id(conn, workload)

    def workloads(self) -> list[dict]:
        """Every workload with its record count, failures and best seconds."""
        r = records.c
        stats = (sa.select(r.workload_id, sa.func.count().label("records"),
                           sa.func.sum(sa.case((r.error.is_not(None), 1), else_=0)).label("failed"),
                           sa.func.min(r.seconds).label("best_seconds"))
                 .group_by(r.workload_id).subquery())
        query = (sa.select(workloads, stats.c.records, stats.c.failed, stats.c.best_seconds)
                 .outerjoin(stats, stats.c.workload_id == workloads.c.id).order_by(workloads.c.id))
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [{"id": row["id"], "operator": row["operator"], "signature": row["signature"], "target": row["target"],
                 "versions": json.loads(row["versions"]), "records": int(row["records"] or 0),
                 "failed": int(row["failed"] or 0), "best_seconds": row["best_seconds"]} for row in rows]

    def workload(self, workload_id: int) -> Workload:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(workloads).where(workloads.c.id == workload_id)).mappings().first()
        if row is None:
            raise HeteroDSEError(f"no workload {workload_id} in the history database {self.url}; see "
                                 "'hetero_dse history list'")
        return _workload(row)

    def related(self, workload: Workload, per_workload: int = 256) -> list[tuple[Workload, list[Record]]]:
        """Workloads of the same operator on the same target with the same loops (any extents, any tool
        versions; ``workload`` itself included), each with its ``per_workload`` fastest successful records:
        what the history-based tuners learn from."""
        loops = set(workload.extents)
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(workloads).where(workloads.c.operator == workload.operator,
                                                           workloads.c.target == workload.target)
                                .order_by(workloads.c.id)).mappings().all()
        out = []
        for row in rows:
            other = _workload(row)
            if not loops or set(other.extents) != loops:
                continue
            found = [r for r in self.records(row["id"], limit=per_workload) if r.ok]
            if found:
                out.append((other, found))
        return out

    # --------------------------------------------------------------------------------------- records
    def add(self, workload_id: int, record: Record) -> bool:
        """Store ``record``, committed before returning; False if the point was already there (kept as it was,
        unless it was timed under foreign load and ``record`` was not: then ``record`` replaces it)."""
        try:
            with self.engine.begin() as conn:
                conn.execute(records.insert().values(workload_id=workload_id, **_row(record)))
            return True
        except IntegrityError:
            if record.loaded or not record.ok:
                return False
            with self.engine.begin() as conn:
                old = conn.execute(sa.select(records.c.id, records.c.conditions).where(
                    records.c.workload_id == workload_id, records.c.point_key == record.point_key)).first()
                if old is None or not json.loads(old.conditions or "{}").get("loaded"):
                    return False
                conn.execute(records.update().where(records.c.id == old.id).values(**_row(record)))
            return True

    def add_many(self, workload_id: int, batch: Iterable[Record]) -> int:
        """Store the records of ``batch`` not stored yet, in one transaction; how many were new."""
        batch = list(batch)
        if not batch:
            return 0
        with self.engine.begin() as conn:
            return _add_many(conn, workload_id, batch)

    def records(self, workload_id: int, *, best_first: bool = True, limit: int | None = None) -> list[Record]:
        r = records.c
        query = sa.select(records).where(r.workload_id == workload_id)
        if best_first:  # failures last
            query = query.order_by(r.seconds.is_(None), r.seconds, r.id)
        else:
            query = query.order_by(r.id)
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [_record(row) for row in rows]

    def lookup(self, workload_id: int, points: Iterable[Point]) -> dict[str, Record]:
        """The stored records of ``points`` (by point key); points never evaluated are absent."""
        keys = [point_key(p) for p in points]
        if not keys:
            return {}
        found: dict[str, Record] = {}
        with self.engine.connect() as conn:
            for start in range(0, len(keys), 500):  # stay under every driver's parameter limit
                rows = conn.execute(sa.select(records).where(records.c.workload_id == workload_id,
                                                             records.c.point_key.in_(keys[start:start + 500])))
                found.update({row["point_key"]: _record(row) for row in rows.mappings()})
        return found

    def count(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(records)).scalar())

    def prune(self, keep: int, drop_failed: bool = False) -> int:
        """Keep the ``keep`` fastest records of every workload (and failures, unless ``drop_failed``); returns
        how many were deleted."""
        r = records.c
        rank = sa.func.row_number().over(partition_by=r.workload_id, order_by=(r.seconds, r.id)).label("rank")
        ranked = sa.select(r.id, rank).where(r.seconds.is_not(None)).subquery()
        doomed = sa.select(ranked.c.id).where(ranked.c.rank > keep)
        with self.engine.begin() as conn:
            deleted = conn.execute(records.delete().where(r.id.in_(doomed))).rowcount
            if drop_failed:
                deleted += conn.execute(records.delete().where(r.seconds.is_(None))).rowcount
        return int(deleted)

    # ------------------------------------------------------------------------------- JSON lines
    def export(self) -> Iterator[str]:
        """One JSON line per record, with its workload."""
        for w in self.workloads():
            workload = self.workload(w["id"]).to_json()
            for record in self.records(w["id"], best_first=False):
                yield json.dumps({"workload": workload, "record": record.to_json()}, sort_keys=True)

    def import_lines(self, lines: Iterable[str], source: str = "import") -> tuple[int, int]:
        """Add the records of exported JSON lines in one transaction; (added, already there). Every line is
        read and checked first (:func:`check_record`): a bad one raises with its number and reason and
        nothing is added."""
        parsed: list[tuple[Workload, Record]] = []
        bad: list[str] = []
        read: list[tuple[int, Workload, Record]] = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                read.append((number, Workload.from_json(data["workload"]), Record.from_json(data["record"])))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
                bad.append(f"line {number}: not a record exported by hetero_dse ({exc})")
        # a line is checked against the loops this database knows for its workload (they win over the line's
        # own), and its knobs against those of the workload's other records (a space has one set of knobs)
        known = self._known_workloads({w.key for _, w, _ in read})
        for number, workload, record in read:
            spec, knobs = known.get(workload.key, ({}, None))
            problem = check_spec(workload.spec)
            if problem is None and spec and workload.spec and workload.spec != spec:
                problem = "its workload's loops are not those this database holds for it"
            if problem is None:
                try:
                    problem = check_record(replace(workload, spec=spec) if spec else workload, record)
                except (TypeError, ValueError, AttributeError, OverflowError) as exc:
                    problem = f"not a record exported by hetero_dse ({type(exc).__name__}: {exc})"
            if problem is None:  # a knob a point may leave out (OPTIONAL_KNOBS) is not counted either way
                names = tuple(sorted(k for k in record.point if k not in OPTIONAL_KNOBS))
                if knobs is None:  # the first record of a workload new to this database sets its knobs
                    knobs = names
                    known[workload.key] = (spec or workload.spec, knobs)
                if names != knobs:
                    problem = (f"its knobs ({', '.join(names)}) are not those of the workload's other records "
                               f"({', '.join(knobs)})")
            if problem:
                bad.append(f"line {number}: {problem}")
                continue
            parsed.append((workload, record))
        if bad:
            more = f" (and {len(bad) - 1} more bad line{'s' if len(bad) > 2 else ''})" if len(bad) > 1 else ""
            raise HeteroDSEError(f"nothing imported: {bad[0]}{more}")
        added = 0
        with self.engine.begin() as conn:
            ids: dict[str, int] = {}
            by_workload: dict[int, list[Record]] = {}
            for workload, record in parsed:
                if workload.key not in ids:
                    ids[workload.key] = _workload_id(conn, workload)
                by_workload.setdefault(ids[workload.key], []).append(record)
            for workload_id, batch in by_workload.items():
                added += _add_many(conn, workload_id, batch)
        return added, len(parsed) - added

    def _known_workloads(self, keys: set[str]) -> dict[str, tuple[dict[str, Any], tuple[str, ...] | None]]:
        """For each workload of ``keys`` this database has: its spec, and the knob names of one of its records
        (None: it has none)."""
        found: dict[str, tuple[dict[str, Any], tuple[str, ...] | None]] = {}
        ordered = sorted(keys)
        with self.engine.connect() as conn:
            for start in range(0, len(ordered), 500):
                rows = conn.execute(sa.select(workloads.c.id, workloads.c.key, workloads.c.spec)
                                    .where(workloads.c.key.in_(ordered[start:start + 500]))).all()
                for row in rows:
                    point = conn.execute(sa.select(records.c.point).where(records.c.workload_id == row.id)
                                         .limit(1)).scalar()
                    found[row.key] = (json.loads(row.spec) if row.spec else {},
                                      tuple(sorted(k for k in json.loads(point) if k not in OPTIONAL_KNOBS)) if point
                                      else None)
        return found


def _workload_id(conn: sa.Connection, workload: Workload) -> int:
    found = conn.execute(sa.select(workloads.c.id).where(workloads.c.key == workload.key)).scalar()
    if found is not None:
        if workload.spec:  # a workload stored by an older version, or imported from a line without it, has none
            conn.execute(workloads.update().where(workloads.c.id == found,
                                                  sa.or_(workloads.c.spec.is_(None), workloads.c.spec == "{}"))
                         .values(spec=json.dumps(workload.spec, sort_keys=True)))
        return int(found)
    try:
        with conn.begin_nested():
            return int(conn.execute(workloads.insert().values(
                key=workload.key, operator=workload.operator, signature=workload.signature,
                target=workload.target, versions=json.dumps(workload.versions, sort_keys=True),
                spec=json.dumps(workload.spec, sort_keys=True),
            )).inserted_primary_key[0])
    except IntegrityError:  # another writer added it between the select and the insert
        return int(conn.execute(sa.select(workloads.c.id).where(workloads.c.key == workload.key)).scalar())


def _add_many(conn: sa.Connection, workload_id: int, batch: list[Record]) -> int:
    have = set()
    keys = [r.point_key for r in batch]
    for start in range(0, len(keys), 500):
        have.update(conn.execute(sa.select(records.c.point_key).where(
            records.c.workload_id == workload_id, records.c.point_key.in_(keys[start:start + 500]))).scalars())
    new = {r.point_key: r for r in batch if r.point_key not in have}
    if new:
        conn.execute(records.insert(), [
            {"workload_id": workload_id, **_row(r)} for r in new.values()])
    return len(new)


def _workload(row) -> Workload:
    spec = row.get("spec")
    return Workload(row["operator"], row["signature"], row["target"], json.loads(row["versions"]),
                    json.loads(spec) if spec else {})


def _is_sqlite(path: Path) -> bool:
    """Whether ``path`` is a SQLite database (its header), or an empty file SQLite will make one of."""
    try:
        with path.open("rb") as f:
            head = f.read(16)
    except OSError:
        return True  # the open below says why it cannot be read
    return head == b"SQLite format 3\x00" or head == b""


def _record(row) -> Record:
    conditions = row.get("conditions")
    return Record(Point.from_json(row["point"]), row["seconds"], row["error"], row["source"], row["timestamp"],
                  json.loads(conditions) if conditions else None)


def _row(record: Record) -> dict[str, object]:
    """The columns of ``record`` (its workload aside)."""
    return {"point_key": record.point_key, "point": record.point.dumps(), "seconds": record.seconds,
            "error": record.error, "source": record.source[:50], "timestamp": record.timestamp,
            "conditions": json.dumps(record.conditions, sort_keys=True) if record.conditions else None}


class WorkloadHistory:
    """One workload's records, as a search uses them: answers for points evaluated before, and every new
    result stored the moment it exists."""

    def __init__(self, db: HistoryDB, workload: Workload, source: str = "") -> None:
        self.db, self.workload, self.source = db, workload, source
        self.id = db.workload_id(workload)

    def known(self, points: Iterable[Point]) -> dict[str, Record]:
        return self.db.lookup(self.id, points)

    def add(self, point: Point, seconds: float | None, error: str | None,
            conditions: dict | None = None) -> None:
        self.db.add(self.id, Record(point, seconds, error, self.source, conditions=conditions))
