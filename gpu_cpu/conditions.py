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
import math
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hetero_dse.errors import HeteroDSEError

__all__ = ["LOADED_CORES", "LOADED_ENV", "LOCK_ENV", "Conditions", "ConditionsError", "is_loaded", "loaded_cores",
           "lock_path", "timing"]

#: where the lock lives (by default a file in a directory of the user's own: a lock every user could write
#: would let one user's symlink turn another's open into a write through it)
LOCK_ENV = "HETERO_DSE_MEASURE_LOCK"
#: foreign work, in cores busy on average, beyond which a timing is not trusted (an idle machine shows 0.0-0.05)
LOADED_CORES = 0.3
#: set to another number of cores (the test suite, which runs beside other work, sets it out of reach)
LOADED_ENV = "HETERO_DSE_LOADED_CORES"


def is_loaded(foreign_load: float | None) -> bool:
    """Whether a timing taken beside ``foreign_load`` cores of other work is not to be trusted."""
    return foreign_load is not None and foreign_load > loaded_cores()


class ConditionsError(HeteroDSEError):
    """A setting of the measurement conditions that cannot be used, in one sentence."""


def loaded_cores() -> float:
    """The foreign load, in cores, beyond which a timing is flagged (``$HETERO_DSE_LOADED_CORES`` or 0.3)."""
    text = os.environ.get(LOADED_ENV)
    if not text:
        return LOADED_CORES
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        # NaN would compare False against every load and silently drop the UNDER LOAD flag
        raise ConditionsError(f"${LOADED_ENV} must be a number of cores, 0 or more (such as 0.3), not {text!r}")
    return value


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
    """``$HETERO_DSE_MEASURE_LOCK``, else ``measure.lock`` in ``$XDG_RUNTIME_DIR/hetero_dse`` or in
    ``<tmp>/hetero_dse-<uid>``: directories only this user can write."""
    if os.environ.get(LOCK_ENV):
        return Path(os.environ[LOCK_ENV])
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) / "hetero_dse" if runtime else Path(tempfile.gettempdir()) / f"hetero_dse-{os.getuid()}"
    return base / "measure.lock"


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
    """The lock file's descriptor (None where it cannot be made safely: timings then go unserialised).

    Never through a symlink (``O_NOFOLLOW``), never a file another user owns, never changing a mode: a
    symlink planted at the lock's path cannot make the open write or chmod the file it points to."""
    path = lock_path()
    if not os.environ.get(LOCK_ENV) and not _own_directory(path.parent):
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        os.close(fd)
        return None
    return fd


def _own_directory(directory: Path) -> bool:
    """``directory`` exists (made here, mode 0700, where it did not), is a real directory, is this user's and
    no one else can write it."""
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(directory)
    except OSError:
        return False
    return (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
            and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _busy_seconds() -> float | None:
    """CPU seconds the whole machine spent busy since boot (Linux /proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
