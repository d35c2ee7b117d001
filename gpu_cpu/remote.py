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
import struct
import threading
from dataclasses import dataclass
from typing import Any

from hetero_dse.errors import HeteroDSEError

__all__ = ["Remote", "measure_remote_job"]

#: TVM's RPC handshake (``tvm/rpc/base.py``): a server answers a session with RPC_MAGIC (its success code), a
#: tracker echoes its own magic
RPC_MAGIC, RPC_TRACKER_MAGIC = 0xFF271, 0x2F271


@dataclass(frozen=True)
class Remote:
    """Where the device is: the tracker's address and the device's key, or a server's address (key None)."""

    host: str
    port: int
    key: str | None = None
    session_timeout_s: float = 600.0  # how long one measuring session may hold the device
    probe_timeout_s: float = 5.0  # the first TCP connection and TVM's handshake on it
    answer_timeout_s: float = 60.0  # the tracker's summary, or a session on the server, when checked

    @classmethod
    def parse(cls, address: str, key: str | None = None) -> Remote:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise HeteroDSEError(f"--rpc takes HOST:PORT (the tracker's, or a server's without --rpc-key), "
                                 f"got {address!r}")
        try:
            host.encode("idna")  # a name no resolver takes (a label over 63 characters) fails here, not deep in TVM
        except UnicodeError:
            raise HeteroDSEError(f"--rpc host {host[:80]!r}{'...' if len(host) > 80 else ''} is not a host name "
                                 "or address") from None
        if key is not None and (not key.strip() or any(c.isspace() for c in key) or len(key) > 200):
            raise HeteroDSEError(f"--rpc-key {key[:80]!r} is not a device key (one word, as the server registered)")
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
        # TVM's tracker client retries a refused connection for about a minute, and waits without a limit for a
        # peer that accepts and never answers: the handshake first, under a timeout, says either at once
        self._handshake()
        done: list[BaseException | None] = []
        worker = threading.Thread(target=lambda: done.append(self._check_session()), daemon=True)
        worker.start()
        worker.join(self.answer_timeout_s)
        if not done:  # the thread is left to the process's end: TVM's calls cannot be interrupted
            raise HeteroDSEError(f"{self} took the handshake but did not answer in {self.answer_timeout_s:.0f} s")
        if done[0] is not None:
            raise done[0]

    def _handshake(self) -> None:
        """TVM's first exchange with a tracker (its magic number back) or a server (a session's code back),
        on a socket of our own with a timeout on every call."""
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.probe_timeout_s)
        except OSError as exc:
            raise HeteroDSEError(f"cannot reach {self}: nothing answers at {self.host}:{self.port} "
                                 f"({exc.strerror or exc})") from None
        try:
            with sock:
                if self.key:
                    sock.sendall(struct.pack("<i", RPC_TRACKER_MAGIC))
                else:
                    header = b"client:"
                    sock.sendall(struct.pack("<ii", RPC_MAGIC, len(header)) + header)
                answer = b""
                while len(answer) < 4:
                    chunk = sock.recv(4 - len(answer))
                    if not chunk:
                        break
                    answer += chunk
        except TimeoutError:
            raise HeteroDSEError(f"{self.host}:{self.port} accepted the connection but did not answer TVM's "
                                 f"handshake in {self.probe_timeout_s:.0f} s: is a TVM RPC "
                                 f"{'tracker' if self.key else 'server'} listening there?") from None
        except OSError as exc:
            raise HeteroDSEError(f"cannot reach {self}: {exc.strerror or exc}") from None
        expected = RPC_TRACKER_MAGIC if self.key else RPC_MAGIC  # RPC_CODE_SUCCESS is RPC_MAGIC
        if len(answer) < 4 or struct.unpack("<i", answer)[0] != expected:
            raise HeteroDSEError(f"{self.host}:{self.port} is not a TVM RPC {'tracker' if self.key else 'server'} "
                                 "(it answered TVM's handshake with something else)")

    def _check_session(self) -> BaseException | None:
        try:
            if self.key:
                from tvm import rpc

                summary = rpc.connect_tracker(self.host, self.port).summary()
                keys = set(summary.get("queue_info", {}))
                if self.key not in keys:
                    known = ", ".join(sorted(keys)) or "none"
                    return HeteroDSEError(f"no RPC server with key {self.key!r} is registered with the tracker at "
                                          f"{self.host}:{self.port} (keys there: {known})")
                return None
            self.connect()
            return None
        except Exception as exc:  # noqa: BLE001 - a socket error, a refused session: one sentence
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return HeteroDSEError(f"cannot reach {self}: {first}")


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
