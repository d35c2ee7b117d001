"""Outputs that are whole or absent: a file written beside its place and renamed into it, a directory
filled as ``<name>.partial`` and renamed into place when complete. An interrupted run never leaves a file
cut short or a directory that looks finished."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_directory", "atomic_write_text"]


def atomic_write_text(path: str | Path, text: str) -> None:
    """``text`` in ``path``, whole or not at all. Writers racing for one path (processes filling one cache)
    each rename a file of their own, the last rename winning."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_directory(directory: str | Path) -> Iterator[Path]:
    """Yields ``<directory>.partial`` to fill; renamed to ``directory`` (replacing an earlier one) only when
    the block completes, and removed when it does not."""
    directory = Path(directory)
    partial = directory.with_name(directory.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        yield partial
        if directory.exists():
            shutil.rmtree(directory)
        partial.rename(directory)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
