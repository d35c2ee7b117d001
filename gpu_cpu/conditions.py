"""The conditions a kernel is timed under: one timing at a time on this machine, and the load that other
processes put on it meanwhile.

Four searches timing at once on two cores reported 30-154x "speedups" over torch (review finding D4), and
those figures were then answered from the history for good. So every timing (our kernels and the library's)
holds a machine-wide lock (builds still run in parallel), and measures the CPU time the rest of the machine
used while it ran: a timing taken beside more than ``LOADED_CORES`` of foreign work is flagged, and the
history measures that point again instead of answering with it.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LOADED_CORES", "LOADED_ENV", "LOCK_ENV", "Conditions", "is_loaded", "loaded_cores", "lock_path", "timing"]

#: where the lock lives (one file for every user of the machine by default)
LOCK_ENV = "HETERO_DSE_MEASURE_LOCK"
#: foreign work, in cores busy on average, beyond which a timing is not trusted (an idle machine shows 0.0-0.05)
LOADED_CORES = 0.3
#: set to another number of cores (the test suite, which runs beside other work, sets it out of reach)
LOADED_ENV = "HETERO_DSE_LOADED_CORES"


def is_loaded(foreign_load: float | None) -> bool:
    """Whether a timing taken beside ``foreign_load`` cores of other work is not to be trusted."""
    return foreign_load is not None and foreign_load > loaded_cores()


def loaded_cores() -> float:
    """The foreign load, in cores, beyond which a timing is flagged (``$HETERO_DSE_LOADED_CORES`` or 0.3)."""
    try:
        return float(os.environ.get(LOADED_ENV) or LOADED_CORES)
    except ValueError:
        return LOADED_CORES


@dataclass
class Conditions:
    """What was true while a kernel was timed: the foreign load in cores (None where it cannot be read), and
    how long the timing waited for the machine."""

    foreign_load: float | None = None
    waited_s: float = 0.0

    @property
    def loaded(self) -> bool:
        return is_loaded(self.foreign_load)


def lock_path() -> Path:
    return Path(os.environ.get(LOCK_ENV) or Path(tempfile.gettempdir()) / "hetero_dse-measure.lock")


@contextmanager
def timing() -> Iterator[Conditions]:
    """Hold the machine's measurement lock for the block and record the foreign load during it."""
    conditions = Conditions()
    start = time.perf_counter()
    fd = _open_lock()
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        conditions.waited_s = time.perf_counter() - start
        busy, own, wall = _busy_seconds(), time.process_time(), time.perf_counter()
        try:
            yield conditions
        finally:
            elapsed = time.perf_counter() - wall
            after = _busy_seconds()
            if busy is not None and after is not None and elapsed > 0:
                foreign = (after - busy) - (time.process_time() - own)
                conditions.foreign_load = max(0.0, foreign / elapsed)
    finally:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _open_lock() -> int | None:
    """The lock file's descriptor (None where it cannot be made: timings then go unserialised)."""
    path = lock_path()
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        return None
    try:
        os.fchmod(fd, 0o666)  # another user's search must be able to take it too
    except OSError:
        pass
    return fd


def _busy_seconds() -> float | None:
    """CPU seconds the whole machine spent busy since boot (Linux /proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
