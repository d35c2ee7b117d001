"""Shared fixtures: running the CLI in-process and writing throwaway op.py and board files."""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

# The CPU space is pruned for the host's vector width (AVX-512 or AVX2): the suite schedules for 256-bit
# vectors on every x86-64 host, so that it answers the same everywhere; the tests about the width fix it
# themselves and run for both. Set before any module of the project is imported (workers inherit it).
os.environ["HETERO_DSE_VECTOR_BITS"] = "256"
# The suite runs beside other work on shared machines: a measurement it takes is never flagged as loaded
# (which would make the history answer nothing), except in the test of that flag, which sets its own limit.
os.environ["HETERO_DSE_LOADED_CORES"] = "1e9"
# TVM's wmma intrinsics are kept in a cache of the session's own (made once, by the first tensor-core schedule,
# read by the rest and by the workers), never the user's. pytest-xdist's workers share their controller's (each
# of its own made them again, some 10 s of one core a worker): the controller makes it, its workers inherit it
# with its environment (marked as the suite's), and whoever made it removes it. A worker that did not inherit one
# (a gateway of another environment) makes its own.
_CACHE_MARK = "HETERO_DSE_TEST_CACHE"
_OWN_CACHE = not (os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(_CACHE_MARK)
                  and os.environ.get(_CACHE_MARK) == os.environ.get("HETERO_DSE_CACHE"))
if _OWN_CACHE:
    os.environ["HETERO_DSE_CACHE"] = os.environ[_CACHE_MARK] = tempfile.mkdtemp(prefix="hetero_dse_test_cache_")

REPO = Path(__file__).resolve().parent.parent


def pytest_unconfigure(config):
    if _OWN_CACHE:  # the controller after its workers, or a worker that made its own
        shutil.rmtree(os.environ["HETERO_DSE_CACHE"], ignore_errors=True)


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture(scope="session")
def postgres_url():
    """A PostgreSQL server of the test session's own (None where PostgreSQL is not installed)."""
    from postgres import postgres_server

    with postgres_server() as url:
        yield url


@pytest.fixture(autouse=True)
def private_history(tmp_path_factory, monkeypatch):
    """Every test writes its measurements to a history database of its own, never the user's."""
    monkeypatch.setenv("HETERO_DSE_DB", str(tmp_path_factory.mktemp("history") / "history.sqlite"))


@pytest.fixture
def cli(capsys):
    """Run ``hetero_dse ARGS`` through the real entry point (exit code, stdout, stderr)."""
    from hetero_dse.cli.main import main

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def write(tmp_path):
    """Write a dedented text file under tmp_path and return its path."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return _write
