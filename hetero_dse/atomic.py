"""Outputs that are whole or absent: a file written beside its place and renamed into it, a directory
filled as ``<name>.partial`` and renamed into place when complete. An interrupted run never leaves a file
cut short or a directory that looks finished.

And outputs that are the files meant: nothing here writes through a symlink it did not make. A new file is
created exclusively (``O_EXCL | O_NOFOLLOW``, a link planted at its name removed first, never followed); a
rename replaces a link at the destination, never the file it points to."""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from hetero_dse.errors import storage_error

__all__ = ["atomic_directory", "atomic_open", "atomic_write_text", "open_new", "partial_path", "refuse_special"]


def open_new(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> IO[Any]:
    """``path`` opened for writing as a new file of this process's own: whatever was at the name (a file of an
    earlier run, or a symlink someone planted) is unlinked, never followed, and the file is created with
    ``O_EXCL | O_NOFOLLOW``, so a link raced in meanwhile fails the open instead of being written through."""
    path = Path(path)
    if os.path.islink(path) or path.is_file():
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    return os.fdopen(fd, mode, encoding=None if "b" in mode else encoding)


def refuse_special(path: str | Path) -> None:
    """Raise when a rename onto ``path`` would replace a device, a FIFO or a directory (as root, ``/dev/full``
    itself): an output is a regular file or nothing yet (a link at the name is replaced, never followed)."""
    if not os.path.islink(path) and os.path.exists(path) and not os.path.isfile(path):
        raise OSError(errno.EEXIST, "it is not a regular file (a device, a pipe or a directory)", str(path))


def partial_path(path: str | Path) -> Path:
    """A name beside ``path`` for its unfinished contents, unique to this call."""
    path = Path(path)
    return path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.partial")


@contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """A new file to fill, in ``path`` whole or not at all: written beside it (:func:`partial_path`, never
    through a link) and renamed into place when the block completes, removed when it does not. Writers racing
    for one path (processes filling one cache) each rename a file of their own, the last rename winning. A
    full or read-only storage is an :class:`~hetero_dse.errors.OutputError` naming ``path``."""
    path = Path(path)
    refuse_special(path)
    tmp = partial_path(path)
    try:
        with open_new(tmp, mode, encoding) as f:
            yield f
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        said = storage_error(exc, str(path))
        if said is None:
            raise
        raise said from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """``text`` in ``path``, whole or not at all (:func:`atomic_open`)."""
    with atomic_open(path) as f:
        f.write(text)


@contextmanager
def atomic_directory(directory: str | Path) -> Iterator[Path]:
    """Yields ``<directory>.partial`` to fill; renamed to ``directory`` (replacing an earlier one) only when
    the block completes, and removed when it does not."""
    directory = Path(directory)
    partial = directory.with_name(directory.name + ".partial")
    if os.path.islink(partial):
        partial.unlink()  # a link is removed, never followed into (rmtree refuses one)
    shutil.rmtree(partial, ignore_errors=True)
    try:
        partial.mkdir(parents=True)
        yield partial
        if os.path.islink(directory):
            directory.unlink()
        elif directory.exists():
            shutil.rmtree(directory)
        partial.rename(directory)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        said = storage_error(exc, f"{directory} (the output folder; nothing of it was kept)")
        if said is None:
            raise
        raise said from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
