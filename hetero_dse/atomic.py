"""Outputs that are whole or absent: a file written beside its place and renamed into it, a directory
filled as ``<name>.partial`` and renamed into place when complete. An interrupted run never leaves a file
cut short or a directory that looks finished."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_directory", "atomic_write_text"]


def atomic_write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


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
