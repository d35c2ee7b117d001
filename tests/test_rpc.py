"""Measurement over TVM's RPC (issue 22), on loopback: a tracker and a CPU server started here on 127.0.0.1,
candidates built in this process's workers and checked and timed by the server; an unreachable tracker, an
unknown key and a server gone mid-run are one sentence or a failed trial, never a hang."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from functools import partial

import pytest

from hetero_dse.errors import HeteroDSEError

KEY = "hdse-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise TimeoutError("the RPC tracker or server did not come up")


@pytest.fixture(scope="module")
def tracker():
    """A tracker and one CPU server registered with it under KEY, both on 127.0.0.1. Each runs its server in a
    child of its own (TVM's popen worker), so each is started in a process group of its own and the whole group
    is killed: killing the parent alone left both children listening after the suite."""
    from tvm import rpc

    port, server_port = free_port(), free_port()
    processes = [subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port",
                                   str(port), "--port-end", str(port + 1), "--silent"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)]
    try:
        def tracker_up():
            try:
                rpc.connect_tracker("127.0.0.1", port).summary()
                return True
            except Exception:  # noqa: BLE001 - not listening yet
                return False

        wait_for(tracker_up)
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "tvm.exec.rpc_server", "--tracker", f"127.0.0.1:{port}", "--key", KEY, "--host",
             "127.0.0.1", "--port", str(server_port), "--port-end", str(server_port + 1), "--silent"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        wait_for(lambda: KEY in rpc.connect_tracker("127.0.0.1", port).summary().get("queue_info", {}))
        yield f"127.0.0.1:{port}"
    finally:
        for process in processes:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_cpu_schedules_are_measured_on_the_device_registered_with_the_tracker(cli, tmp_path, tracker):
    out = tmp_path / "out"
    r = cli("explore", "--op", "gemm", "--shape", "small:s1", "--target", "cpu", "--trials", "3", "--rpc", tracker,
            "--rpc-key", KEY, "--no-history", "--out", out)
    assert r.code == 0, r.err
    report = json.loads((out / "report.json").read_text())
    (row,) = [x for x in report["rows"] if x["kind"] == "cpu"]
    assert f"over RPC ({KEY} via the tracker at {tracker})" in row["device"]
    assert row["basis"] == "measured" and row["seconds"] > 0 and row["evaluations"] == 3 and row["failures"] == 0
    assert row["library_seconds"] is None and row["check"] == "pass"
    assert "torch does not run through RPC" in (out / "report.md").read_text()


def test_an_unknown_key_or_an_unreachable_tracker_is_one_sentence(cli, tmp_path, tracker):
    r = cli("explore", "--op", "gemm", "--target", "cpu", "--rpc", tracker, "--rpc-key", "nope", "--no-history",
            "--out", tmp_path / "a")
    assert r.code == 1 and f"no RPC server with key 'nope' is registered with the tracker at {tracker} (keys " \
        f"there: {KEY})" in r.err
    r = cli("explore", "--op", "gemm", "--target", "cpu", "--rpc", f"127.0.0.1:{free_port()}", "--rpc-key", KEY,
            "--no-history", "--out", tmp_path / "b")
    assert r.code == 1 and "cannot reach" in r.err and "nothing answers at 127.0.0.1" in r.err
    assert "Traceback" not in r.err and "retry" not in r.err  # not TVM's minute of retries, each logged
    r = cli("explore", "--op", "gemm", "--target", "cpu", "--rpc", "nowhere", "--no-history", "--out", tmp_path / "c")
    assert r.code == 1 and "--rpc takes HOST:PORT" in r.err
    r = cli("explore", "--op", "gemm", "--target", "cpu", "--rpc-key", KEY, "--no-history", "--out", tmp_path / "d")
    assert r.code == 1 and "give the tracker's address with --rpc" in r.err


def test_a_device_gone_mid_run_is_a_failed_trial(tracker):
    """The server's address without the tracker: a session refused there fails the trial, and the search goes on."""
    from gpu_cpu.measure import MeasureJob
    from gpu_cpu.pipeline import Pipeline
    from gpu_cpu.remote import Remote, measure_remote_job
    from hetero_dse.analysis import analyze
    from hetero_dse.ops import get_builtin
    from hetero_dse.space.cpu import CpuSpace

    op = get_builtin("gemm").instantiate(shape="small:s1")
    point = CpuSpace(analyze(op), vector_bits=256).default_point()
    gone = Remote("127.0.0.1", free_port())  # nothing listens there any more
    with pytest.raises(HeteroDSEError, match="cannot reach the RPC server at 127.0.0.1"):
        gone.check()
    with Pipeline(timeout_s=30, measure=partial(measure_remote_job, remote=gone)) as pipeline:
        (result,) = pipeline.evaluate([MeasureJob.of(op, "builtin", point.to_json())])
    assert not result.ok and result.error
