"""The tool's worker processes (builders, measurers): they leave the decisions to the process that started
them and never outlive it."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

__all__ = ["session_processes", "worker_init"]

#: linux/prctl.h: the signal a process gets when its parent dies
PR_SET_PDEATHSIG = 1


def worker_init() -> None:
    """The initializer of every worker pool: Ctrl-C is the parent's to handle (a worker waiting for a job
    would print a traceback of its own), and the worker is killed the moment its parent dies (a ``kill -9``
    of the tool used to leave workers finishing a measurement for minutes, skewing the next run's)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(1)


def session_processes(sid: int) -> list[int]:
    """The live processes of session ``sid`` (Linux /proc; a run started in a session of its own, with every
    worker it made): what is left of a run after it was killed."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after the name: state, ppid, pgrp, session
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found
