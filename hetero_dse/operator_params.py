"""The shape parameters of an operator builder: what a parameter is (its type, default and allowed values), how
a value a user gives is checked, and named sets of them (``yolo:C8``).

``@operator`` (``hetero_dse.operator``) turns each keyword of the decorator, or default of the builder, into a
:class:`Param` (:func:`as_param`); a value from the command line (``--param K=256``) or a named shape
(``--shape yolo:C8``) is checked by :meth:`Param.parse`. The built-in library (``hetero_dse.ops``) declares its
parameters and shape sets with these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hetero_dse.errors import OperatorError, ShapeError

__all__ = ["DTYPES", "Param", "ParamValue", "ShapeSet", "as_param"]

#: Data types an operator may be built for; integer types accumulate in int32.
DTYPES = ("float32", "float16", "bfloat16", "int8", "int16", "int32")

ParamValue = int | str


@dataclass(frozen=True)
class Param:
    """One parameter of an operator builder.

    Args:
        default: value used when the user gives none; its type (int or str) is the parameter's type.
        minimum: smallest allowed value of an integer parameter (1 for a shape, 0 for a padding).
        choices: allowed values of a string parameter.
        help: one line shown by ``hetero_dse ops``.
    """

    default: ParamValue
    minimum: int | None = 1
    choices: tuple[str, ...] | None = None
    help: str = ""

    def parse(self, name: str, raw: Any, where: str) -> ParamValue:
        """Convert a user-given value (``"256"`` from the command line, or a Python value) and check it."""
        if isinstance(self.default, str):
            value = str(raw)
            if self.choices is not None and value not in self.choices:
                raise ShapeError(f"{where}: parameter {name} must be one of {', '.join(self.choices)}, got {value!r}")
            return value
        value = _as_int(raw)
        if value is None:
            raise ShapeError(f"{where}: parameter {name} must be an integer, got {raw!r}")
        if self.minimum is not None and value < self.minimum:
            kind = "a positive integer" if self.minimum == 1 else f"an integer >= {self.minimum}"
            raise ShapeError(f"{where}: parameter {name} must be {kind}, got {value}")
        return value


def _as_int(raw: Any) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, (int, np.integer)):
        return int(raw)
    if isinstance(raw, str):
        text = raw.strip()
        if text.lstrip("+-").isdigit():
            return int(text)
    return None


@dataclass(frozen=True)
class ShapeSet:
    """Named parameter sets of one operator, e.g. the 15 YOLO-v1 conv layers as ``yolo:C1``…``yolo:C15``."""

    name: str
    shapes: Mapping[str, Mapping[str, ParamValue]]
    description: str = ""


def as_param(name: str, given: Any) -> Param:
    """The :class:`Param` a decorator's keyword or a builder's default ``given`` for parameter ``name`` stands for:
    a ``dtype`` is one of :data:`DTYPES`; any other is an int (a shape) or a str."""
    if isinstance(given, Param):
        return given
    if name == "dtype":
        return Param(str(given), choices=DTYPES, help="data type of the inputs")
    if isinstance(given, bool) or not isinstance(given, (int, str)):
        raise OperatorError(f"parameter {name}: default must be an int or a str, got {given!r}")
    return Param(given)
