"""A throwaway PostgreSQL server on loopback for the history database's tests (started once per session)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def postgres_server() -> Iterator[str | None]:
    """Yields a SQLAlchemy URL of a fresh server, or None where PostgreSQL or its driver is not installed.
    As root, the server runs as the ``postgres`` user (PostgreSQL refuses to run as root)."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        initdb = None
    if not initdb or not pg_ctl:
        yield None
        return
    root = tempfile.mkdtemp(prefix="hetero_dse_pg_")
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = os.path.join(root, "data"), _free_port()
    run = {"check": True, "capture_output": True, "timeout": 120}
    subprocess.run([*as_user, initdb, "-D", data, "-A", "trust", "-U", "hetero", "--no-sync"], **run)
    subprocess.run([*as_user, pg_ctl, "-D", data, "-w", "-l", os.path.join(root, "log"), "-o",
                    f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off", "start"], **run)
    try:
        yield f"postgresql+psycopg://hetero@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", data, "-m", "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)
