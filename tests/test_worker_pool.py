"""The tool's worker pools (``hetero_dse.process.worker_pool``): fresh processes forked from a server that
imported what they need once, each with the environment and import path of the process that made its pool."""

from __future__ import annotations

import os
import sys

from hetero_dse.process import worker_pool


def _what_the_worker_sees(name: str) -> tuple[str | None, bool, list[str], int]:
    return os.environ.get(name), "tvm" in sys.modules, list(sys.path), os.getpid()


def test_a_worker_has_the_pool_makers_environment_and_path_and_tvm_already_imported(monkeypatch, tmp_path):
    # a first pool starts the server with this environment; a later one must not see the server's
    with worker_pool(1, ("tvm",)) as pool:
        assert pool.submit(_what_the_worker_sees, "HDSE_TEST_WORKER_ENV").result(timeout=120)[0] is None
    monkeypatch.setenv("HDSE_TEST_WORKER_ENV", "set after the server started")
    monkeypatch.syspath_prepend(str(tmp_path))
    with worker_pool(1, ("tvm",)) as pool:
        value, preloaded, path, pid = pool.submit(_what_the_worker_sees, "HDSE_TEST_WORKER_ENV").result(timeout=60)
    assert value == "set after the server started"
    assert path[0] == str(tmp_path)
    assert preloaded, "the worker imported TVM itself: it was not forked from the preloading server"
    assert pid != os.getpid()


def test_each_pool_is_a_fresh_process():
    pids = set()
    for _ in range(2):
        with worker_pool(1, ("tvm",)) as pool:
            pids.add(pool.submit(_what_the_worker_sees, "HOME").result(timeout=120)[3])
    assert len(pids) == 2
