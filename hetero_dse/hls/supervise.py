"""``python -m hetero_dse.hls.supervise -- TOOL ARGS...``: run a synthesis tool so that nothing it starts
outlives the run.

Vitis is a tree of processes (a launcher, the tool, its children). The Dask worker that runs a job may be
killed outright (kill -9 of ``synth``, a worker lost), and a parent-death signal reaches only the process it
was set on, never its children. This supervisor sits between the worker and the tool:

* it asks Linux for SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), and checks the parent is still
  there once that is set (the parent may have died in between);
* it becomes a *child subreaper* (``PR_SET_CHILD_SUBREAPER``), so a process of the tool's that is orphaned
  (a launcher's child) is reparented to it, not to PID 1, and stays within its reach;
* the tool runs in the supervisor's process group (the caller starts it in a session of its own);
* on SIGTERM, SIGINT or SIGHUP, and when the tool exits, it ends every process of its group and every
  process reparented to it: SIGTERM, a grace period, then SIGKILL.

Its exit code is the tool's, or 128 + the signal that ended the run.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: how long the tool's processes get to end after SIGTERM before SIGKILL
GRACE_S = 5.0


def supervised(command: list[str]) -> list[str]:
    """``command`` run under this supervisor (start it in a session of its own): sent SIGTERM when the
    process that started it is gone (a ``preexec_fn`` would not be safe in a Dask worker's threads), it then
    ends every process of the command's tree, orphans reparented to it included."""
    return [sys.executable, "-m", "hetero_dse.hls.supervise", "--", *command]


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux: the caller's process-group kill is what remains
        return False


def _tree() -> set[int]:
    """The processes of the tool's tree still alive: those of this process group and those whose parent is this
    process (reparented here as orphans), this process aside."""
    me, group = os.getpid(), os.getpgid(0)
    found = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and (int(fields[1]) == me or int(fields[2]) == group):
            found.add(int(entry))
    return found


def _end_everything(tool: subprocess.Popen) -> None:
    """SIGTERM to every process of the tool's tree, a grace period, then SIGKILL; reap them all."""
    for sig, grace in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 2.0)):
        for pid in _tree():
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            _reap()
            if tool.poll() is not None and not _tree():
                return
            time.sleep(0.05)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m hetero_dse.hls.supervise -- TOOL ARGS...", file=sys.stderr)
        return 2
    parent = os.getppid()
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    stopped: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        stopped.append(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    if os.getppid() != parent:  # the parent died before the death signal was set
        return 128 + signal.SIGTERM
    try:
        tool = subprocess.Popen(argv)
    except OSError as exc:
        print(f"cannot start {argv[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    while tool.poll() is None and not stopped:
        time.sleep(0.1)
    code = tool.returncode
    _end_everything(tool)
    if stopped:
        return 128 + stopped[0]
    return code if code is not None and code >= 0 else 128 + (-(code or 0))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
