"""numba's on-disk cache of the FPGA model's kernels, dropped when a source they were compiled from changes.

numba keys a cached function on its own file's time stamp only. The kernel inlines helpers and compiles in
constants from several modules (``KERNEL_SOURCES``): after an edit to one of those, numba would go on serving
the machine code of the old formula, and the search, the report and the tests would all use it. A digest of
every source is kept beside the cache; when it differs, the cached kernels are removed before any is loaded.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["KERNEL_SOURCES", "drop_stale"]

#: the modules whose code or constants end up in a cached kernel
KERNEL_SOURCES = ("fpga_kernel", "fpga_blocks", "fpga_costs", "fpga_pe_array", "fpga_layout", "fpga_clock",
                  "fpga_schedule")
STAMP = "fpga_kernel_sources.sha256"


def drop_stale(package: Path = Path(__file__).parent) -> bool:
    """Remove the cached kernels under ``package/__pycache__`` if their sources changed since they were cached;
    whether any were removed. Must run before a kernel is first called (numba loads its cache then)."""
    digest = hashlib.sha256()
    for name in KERNEL_SOURCES:
        source = package / f"{name}.py"
        digest.update(source.read_bytes() if source.is_file() else b"")
    cache, value = package / "__pycache__", digest.hexdigest()
    stamp = cache / STAMP
    try:
        if stamp.read_text() == value:
            return False
    except OSError:
        pass
    try:
        stale = [f for f in cache.glob("*.nb[ic]") if f.name.split(".")[0] in KERNEL_SOURCES]
        for f in stale:
            f.unlink(missing_ok=True)
        cache.mkdir(exist_ok=True)
        stamp.write_text(value)
    except OSError:  # a read-only install: numba caches elsewhere, and an install replaces every source at once
        return False
    return bool(stale)
