"""The tool's worker processes (builders, measurers): they leave the decisions to the process that started
them and never outlive it.

Each is a fresh process, as a crash or a hang of a measured kernel must not take the tool down, but not a fresh
interpreter: workers are forked from a fork server that imported what they need once (``worker_pool``). A spawned
worker spent about 3 s importing TVM before its first job, and a CPU search starts several a layer (the finalists,
ours against the library, torch's timing). The server itself never ran a job: it holds no TVM thread pool and no
CUDA context, which is what made forking the tool itself unsafe.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

__all__ = ["die_with_parent", "session_processes", "worker_init", "worker_pool"]

#: linux/prctl.h: the signal a process gets when its parent dies
PR_SET_PDEATHSIG = 1


def worker_pool(workers: int, preload: Sequence[str] = ()) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes forked from the fork server, which imports ``preload`` when it starts (the
    first pool of the tool's process; a later pool's list adds nothing). Each worker starts with this process's
    environment and import path as they are when the pool is made, as a spawned one would (the server's are those
    of its start)."""
    context = multiprocessing.get_context("forkserver")
    # the server dies with the tool before it imports anything (a kill -9 during its seconds of imports left it
    # and its workers running until they ended)
    context.set_forkserver_preload(["hetero_dse.fork_server", *preload])
    return ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=worker_init,
                               initargs=(dict(os.environ), list(sys.path)))


def worker_init(environ: dict[str, str] | None = None, path: Sequence[str] | None = None) -> None:
    """The initializer of every worker pool: the environment and import path of the process that made the pool
    (``environ``, ``path``: TVM sizes its thread pool from ``TVM_NUM_THREADS`` when it starts it); Ctrl-C is the
    parent's to handle (a worker waiting for a job would print a traceback of its own), and the worker is killed
    the moment its parent dies (a ``kill -9`` of the tool used to leave workers finishing a measurement for
    minutes, skewing the next run's). A forked worker's parent is the fork server, which exits when the tool
    does."""
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    if path is not None:
        sys.path[:] = list(path)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()


def die_with_parent() -> None:
    """Have the kernel kill this process the moment its parent dies (Linux's parent-death signal); exit now
    where the parent died before it was armed."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
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
