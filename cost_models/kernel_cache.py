"""numba's on-disk cache of the FPGA model's kernels, dropped when a source they were compiled from changes.

numba keys a cached function on its own file's time stamp only. The kernel inlines helpers and compiles in
constants from several modules (``KERNEL_SOURCES``): after an edit to one of those, numba would go on serving
the machine code of the old formula, and the search, the report and the tests would all use it. A digest of
every source is kept beside the cache; when it differs, the cached kernels are removed before any is loaded.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["KERNEL_SOURCES", "cache_directories", "drop_stale"]

#: the modules whose code or constants end up in a cached kernel (tests/test_evaluate.py derives them from the
#: kernel's imports and checks this list holds them all)
KERNEL_SOURCES = ("fpga_kernel", "fpga_blocks", "fpga_costs", "fpga_pe_array", "fpga_layout", "fpga_clock",
                  "fpga_schedule")
STAMP = "fpga_kernel_sources.sha256"
PACKAGE = Path(__file__).parent


def cache_directories(package: Path = PACKAGE) -> list[Path]:
    """Where numba keeps this package's cached kernels: beside the sources, and under ``NUMBA_CACHE_DIR``
    where one is set (numba's first choice then)."""
    from numba.core import config

    return [package / "__pycache__"] + ([Path(config.CACHE_DIR)] if config.CACHE_DIR else [])


def drop_stale(package: Path = PACKAGE, caches: Sequence[Path] | None = None) -> bool:
    """Remove the cached kernels of ``package`` if their sources changed since they were cached; whether any
    were removed. Must run before a kernel is first called (numba loads its cache then)."""
    digest = hashlib.sha256()
    for name in KERNEL_SOURCES:
        source = package / f"{name}.py"
        digest.update(source.read_bytes() if source.is_file() else b"")
    value = digest.hexdigest()
    caches = cache_directories(package) if caches is None else list(caches)
    stamp = caches[0] / STAMP
    try:
        if stamp.read_text() == value:
            return False
    except OSError:
        pass
    removed = False
    try:
        for cache in caches:
            for f in cache.rglob("*.nb[ic]") if cache.is_dir() else ():
                if f.name.split(".")[0] in KERNEL_SOURCES:
                    f.unlink(missing_ok=True)
                    removed = True
        caches[0].mkdir(exist_ok=True)
        partial = stamp.with_name(f"{STAMP}.{os.getpid()}")  # two processes starting at once write it whole
        partial.write_text(value)
        os.replace(partial, stamp)
    except OSError:  # a read-only install: an install replaces every source at once
        return removed
    return removed
