"""Measurement on another machine over TVM's RPC: candidates are built here and timed on a device registered
with an RPC tracker (``python -m tvm.exec.rpc_tracker``, then ``python -m tvm.exec.rpc_server --tracker
HOST:PORT --key KEY`` on the device's machine), or served by one RPC server directly when no key is given.

The timing runs in the same worker process as a local one (``gpu_cpu/measure.py``'s ``Measurer``): a lost
connection or a refused session raises there and is a failed trial, a hang is ended by its timeout, and the
kernel's result is checked against the reference before it is timed.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from hetero_dse.errors import HeteroDSEError

__all__ = ["Remote", "measure_remote_job"]


@dataclass(frozen=True)
class Remote:
    """Where the device is: the tracker's address and the device's key, or a server's address (key None)."""

    host: str
    port: int
    key: str | None = None
    session_timeout_s: float = 600.0  # how long one measuring session may hold the device
    probe_timeout_s: float = 5.0  # the first TCP connection, before TVM's client (which retries for a minute)

    @classmethod
    def parse(cls, address: str, key: str | None = None) -> Remote:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise HeteroDSEError(f"--rpc takes HOST:PORT (the tracker's, or a server's without --rpc-key), "
                                 f"got {address!r}")
        return cls(host, int(port), key or None)

    def __str__(self) -> str:
        return f"{self.key} via the tracker at {self.host}:{self.port}" if self.key else (
            f"the RPC server at {self.host}:{self.port}")

    def connect(self) -> Any:
        """A session on the device (a tracker's request waits for a free server with the key)."""
        from tvm import rpc

        if self.key:
            return rpc.connect_tracker(self.host, self.port).request(self.key,
                                                                     session_timeout=int(self.session_timeout_s))
        return rpc.connect(self.host, self.port, session_timeout=int(self.session_timeout_s))

    def check(self) -> None:
        """One sentence, before any search, when the tracker, a server with the key, or the server cannot be
        reached."""
        try:
            # TVM's tracker client retries a refused connection for about a minute, logging each try: a plain
            # connection first says at once that nothing listens there
            socket.create_connection((self.host, self.port), timeout=self.probe_timeout_s).close()
        except OSError as exc:
            raise HeteroDSEError(f"cannot reach {self}: nothing answers at {self.host}:{self.port} "
                                 f"({exc.strerror or exc})") from None
        try:
            if self.key:
                from tvm import rpc

                summary = rpc.connect_tracker(self.host, self.port).summary()
                keys = set(summary.get("queue_info", {}))
                if self.key not in keys:
                    known = ", ".join(sorted(keys)) or "none"
                    raise HeteroDSEError(f"no RPC server with key {self.key!r} is registered with the tracker at "
                                         f"{self.host}:{self.port} (keys there: {known})")
                return
            self.connect()
        except HeteroDSEError:
            raise
        except Exception as exc:  # noqa: BLE001 - a socket error, a refused session: one sentence
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise HeteroDSEError(f"cannot reach {self}: {first}") from None


def measure_remote_job(payload: tuple[Any, str], remote: Remote) -> float | dict[str, Any]:
    """Measurer side: the built module sent to the device, checked against the reference there and timed on
    the device's own timer."""
    from gpu_cpu.measure import check_and_time

    job, path = payload
    op = job.operator()
    session = remote.connect()
    session.upload(path)
    module = session.load_module(os.path.basename(path))
    dev = session.cuda(0) if job.target == "cuda" else session.cpu(0)
    try:
        return check_and_time(module, op, dev, job)
    finally:
        session.remove(os.path.basename(path))
