"""Turning command-line arguments (op.py or --op, --shape, --param) into built operators."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hetero_dse.errors import HeteroDSEError, ShapeError
from hetero_dse.loader import load_operators, select
from hetero_dse.operator import Operator
from hetero_dse.ops import get_builtin


def parse_params(items: Sequence[str]) -> dict[str, str]:
    """``["K=256", "dtype=int8"]`` -> ``{"K": "256", "dtype": "int8"}`` (values are checked later, per operator)."""
    params: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ShapeError(f"--param expects NAME=VALUE (e.g. --param K=256), got {item!r}")
        if name.strip() in params:
            raise ShapeError(f"--param {name.strip()} is given twice ({params[name.strip()]} and {value.strip()}); "
                             "give it once")
        params[name.strip()] = value.strip()
    return params


def resolve_operators(op_file: str | None, builtin: str | None, shape: str | None, params: Sequence[str],
                      name: str | None = None) -> list[Operator]:
    """Build every operator the arguments name: one per operator and per shape of a named shape set."""
    if op_file and builtin:
        raise HeteroDSEError("give either an op.py file or --op NAME, not both")
    if not op_file and not builtin:
        raise HeteroDSEError("name an operator: an op.py file (e.g. examples/gemm.py) or a built-in with --op "
                             "(see 'hetero_dse ops')")
    overrides = parse_params(params)
    if builtin:
        if name:
            raise HeteroDSEError("--name picks an operator inside an op.py file; with --op the name is already given")
        definitions = [get_builtin(builtin)]
    else:
        definitions = select(load_operators(op_file), name, Path(op_file))
    operators = []
    for definition in definitions:
        shape_names = [n for n, _ in definition.shapes(shape)] if shape else [None]
        operators.extend(definition.instantiate(overrides, shape=n) for n in shape_names)
    return operators
