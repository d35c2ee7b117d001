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
