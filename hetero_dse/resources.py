"""Where the packaged data lives: ``boards/`` and ``hls_templates/``.

In a wheel they are installed as ``hetero_dse/_data/<name>``; in a source checkout (editable install)
they sit at the repository root beside the package.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the directory holding the packaged data set ``name`` (``boards`` or ``hls_templates``)."""
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"packaged data directory {name!r} is missing from this installation")
