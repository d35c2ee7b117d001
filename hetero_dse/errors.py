"""The one family of errors a user is meant to read.

Anything raised as a :class:`HeteroDSEError` is bad input or an unmet precondition: the CLI prints its
message as one sentence and exits non-zero. Anything else is a bug and keeps its traceback (under --debug).
"""

from __future__ import annotations


class HeteroDSEError(Exception):
    """Bad input or an unmet precondition, worded for the user."""


class OperatorError(HeteroDSEError):
    """An op.py that cannot be loaded, or an operator that does not build."""


class ShapeError(HeteroDSEError):
    """A shape parameter that is missing, unknown, non-integer or out of range."""


class AnalysisError(HeteroDSEError):
    """An operator the static analysis cannot describe (a non-affine or data-dependent access)."""


class BoardError(HeteroDSEError):
    """A board name that is unknown, or a board file that is unreadable or does not match the schema."""


class OutputError(HeteroDSEError, OSError):
    """An output that could not be written (a full disk, a quota, a read-only file system), said with its path;
    what was written of it is removed, so nothing half-written is left looking whole. Still an ``OSError`` (its
    ``errno`` kept): a caller that makes a failed write harmless (a cache, one project's record) catches it."""

    def __init__(self, message: str, code: int | None = None) -> None:
        OSError.__init__(self, code, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


#: the errors of a write that say the storage, not the tool, is at fault: (why, what to do)
_STORAGE = {"ENOSPC": ("no space is left on its device", "free some space or choose another place"),
            "EDQUOT": ("the disk quota is used up", "free some space or choose another place"),
            "EFBIG": ("it would be larger than the file system allows", "choose another place"),
            "EROFS": ("its file system is read-only", "choose a writable place")}


def storage_error(exc: OSError, what: str | None = None) -> OutputError | None:
    """The one sentence for ``exc`` when a full or read-only storage caused it (None: another error)."""
    import errno

    if isinstance(exc, OutputError) and what is None:
        return exc  # said already, with its path
    found = next((text for name, text in _STORAGE.items() if getattr(errno, name, None) == exc.errno), None)
    if found is None:
        return None
    reason, advice = found
    where = what or exc.filename or "an output"
    return OutputError(f"could not write {where}: {reason}; {advice}, and run again", exc.errno)
