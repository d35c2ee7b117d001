"""Reading TE expressions: affine index extraction, arithmetic counting and a readable printer.

TVM 0.27 prints tensor loads inside expressions as ``te.tensor_load(metadata[...])``; the printer here
writes ``A[i, k]`` instead, for tables and error messages a person reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hetero_dse.errors import AnalysisError

TENSOR_LOAD = "te.tensor_load"
_BINARY = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "FloorDiv": "//", "FloorMod": "%", "Mod": "%",
           "Min": "min", "Max": "max", "EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">=",
           "And": "&&", "Or": "||"}
# Value arithmetic counted as one floating-point (or integer) operation each.
_ARITHMETIC = {"Add", "Sub", "Mul", "Div", "FloorDiv", "Mod", "FloorMod", "Min", "Max"}


@dataclass(frozen=True)
class AffineExpr:
    """``sum(coefficient * loop) + constant`` over named loops; terms keep the loop order."""

    terms: tuple[tuple[str, int], ...]
    constant: int = 0

    def coefficient(self, loop: str) -> int:
        return dict(self.terms).get(loop, 0)

    @property
    def loops(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.terms)

    def __str__(self) -> str:
        parts: list[str] = []
        for name, c in self.terms:
            mag = abs(c)
            term = name if mag == 1 else f"{mag}*{name}"
            parts.append(("- " if c < 0 else "+ ") + term if parts else ("-" if c < 0 else "") + term)
        if self.constant or not parts:
            if parts:
                parts.append(f"{'-' if self.constant < 0 else '+'} {abs(self.constant)}")
            else:
                parts.append(str(self.constant))
        return " ".join(parts)


def kind(expr: Any) -> str:
    """Class name of a TVM expression node (stable across TVM's module reshuffles)."""
    return type(expr).__name__


def is_tensor_load(expr: Any) -> bool:
    return kind(expr) == "Call" and getattr(expr.op, "name", "") == TENSOR_LOAD


def call_name(expr: Any) -> str:
    return str(getattr(expr.op, "name", ""))


def children(expr: Any) -> list[Any]:
    """Sub-expressions of a node, loads' tensors excluded."""
    k = kind(expr)
    if hasattr(expr, "a") and hasattr(expr, "b"):
        return [expr.a, expr.b]
    if k in ("Cast", "Broadcast"):
        return [expr.value]
    if k == "Not":
        return [expr.a]
    if k == "Select":
        return [expr.condition, expr.true_value, expr.false_value]
    if k == "Call":
        args = list(expr.args)
        return args[1:] if is_tensor_load(expr) else args
    if k == "Reduce":
        return [*expr.source, expr.condition]
    if k == "Let":
        return [expr.value, expr.body]
    return []


def to_affine(expr: Any, loops: Sequence[tuple[Any, str]], *, tensor: str, node: str) -> AffineExpr:
    """Express an index as an affine function of the node's loops.

    Args:
        expr: the index expression.
        loops: the node's loop variables with their names, in loop order.
        tensor: name of the tensor being read (for the error message).
        node: name of the node reading it.

    Raises:
        AnalysisError: the index is not affine (``//``, ``%``, a product of loops) or depends on data.
    """
    coeffs, const = _linear(expr, loops, tensor, node, expr)
    order = [name for _, name in loops]
    terms = tuple((name, coeffs[name]) for name in order if coeffs.get(name, 0) != 0)
    return AffineExpr(terms, const)


def _linear(e: Any, loops: Sequence[tuple[Any, str]], tensor: str, node: str, whole: Any) -> tuple[dict[str, int], int]:
    k = kind(e)
    if k == "IntImm":
        return {}, int(e.value)
    if k == "Var":
        for var, name in loops:
            if e.same_as(var):
                return {name: 1}, 0
        raise AnalysisError(f"node {node} reads tensor {tensor} at index '{text(whole)}', which uses '{e.name}', "
                            "not a loop of the node (a symbolic shape?): give shape parameters concrete values")
    if k == "Cast":
        return _linear(e.value, loops, tensor, node, whole)
    if k in ("Add", "Sub"):
        ca, ka = _linear(e.a, loops, tensor, node, whole)
        cb, kb = _linear(e.b, loops, tensor, node, whole)
        sign = 1 if k == "Add" else -1
        merged = dict(ca)
        for name, c in cb.items():
            merged[name] = merged.get(name, 0) + sign * c
        return merged, ka + sign * kb
    if k == "Mul":
        ca, ka = _linear(e.a, loops, tensor, node, whole)
        cb, kb = _linear(e.b, loops, tensor, node, whole)
        if not ca:
            return {n: ka * c for n, c in cb.items()}, ka * kb
        if not cb:
            return {n: kb * c for n, c in ca.items()}, ka * kb
    if is_tensor_load(e):
        raise AnalysisError(f"node {node} reads tensor {tensor} at index '{text(whole)}', which depends on the data "
                            f"of tensor {e.args[0].op.name}; the analysis needs indices that are affine in the loops")
    raise AnalysisError(f"node {node} reads tensor {tensor} at index '{text(whole)}', which is not an affine "
                        f"function of the loops ({k} is not affine); rewrite the access with an extra loop "
                        "or a producer node")


def count_arithmetic(expr: Any) -> int:
    """Arithmetic operations on values in one evaluation of ``expr`` (indices and conditions excluded)."""
    # one combine (the accumulation) per reduction iteration besides the source's own arithmetic
    return _count(expr, _ARITHMETIC, per_reduce=1)


def count_multiplies(expr: Any) -> int:
    """Value multiplications and divisions in one evaluation (the operations that need DSP multipliers)."""
    return _count(expr, frozenset({"Mul", "Div"}), per_reduce=0)


def distinct_operations(expr: Any) -> dict[str, int]:
    """The operations of an element-wise body counted once per distinct subexpression (what a printer that
    names each subexpression once instantiates): ``add`` (adds and subtracts), ``mul``, and ``compare`` (min,
    max, a select: a comparator and a multiplexer, never a DSP). Loads' indices are not counted."""
    seen: set[str] = set()
    counts = {"add": 0, "mul": 0, "compare": 0}
    classes = {"Add": "add", "Sub": "add", "Mul": "mul", "Min": "compare", "Max": "compare", "Select": "compare"}
    stack = [expr]
    while stack:
        e = stack.pop()
        if is_tensor_load(e):
            continue
        k = kind(e)
        if k in classes:
            key = text(e)  # the same text is the same computation: the same loads, constants and operations
            if key in seen:
                continue
            seen.add(key)
            counts[classes[k]] += 1
        stack.extend(children(e))
    return counts


def _count(expr: Any, counted: frozenset[str] | set[str], per_reduce: int) -> int:
    k = kind(expr)
    if is_tensor_load(expr) or k in ("IntImm", "FloatImm", "Var", "StringImm"):
        return 0
    if k == "Reduce":
        return per_reduce + sum(_count(s, counted, per_reduce) for s in expr.source)
    if k == "Select":
        return _count(expr.true_value, counted, per_reduce) + _count(expr.false_value, counted, per_reduce)
    if k == "Call":
        args = list(expr.args)
        if call_name(expr).endswith("if_then_else"):
            args = args[1:]
        return sum(_count(a, counted, per_reduce) for a in args)
    own = 1 if k in counted else 0
    return own + sum(_count(c, counted, per_reduce) for c in children(expr))


def loads(expr: Any) -> list[Any]:
    """Every tensor load in ``expr``, outermost first (a load inside an index is found too)."""
    found: list[Any] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        if is_tensor_load(e):
            found.append(e)
        stack.extend(reversed(children(e)))
    return found


def text(e: Any) -> str:
    """A readable rendering of a TE expression (``A[i, k] * B[k, j]``)."""
    s = _text(e)
    return s[1:-1] if kind(e) in _GROUPED else s


_GROUPED = ("Add", "Sub", "Or", "And")


def _text(e: Any) -> str:
    k = kind(e)
    if is_tensor_load(e):
        return f"{e.args[0].op.name}[{', '.join(text(a) for a in e.args[1:])}]"
    if k in ("IntImm", "FloatImm"):
        return str(e.value)
    if k == "Var":
        return str(e.name)
    if k == "Cast":
        return f"{e.ty}({text(e.value)})"
    if k in _BINARY:
        op = _BINARY[k]
        if op in ("min", "max"):
            return f"{op}({text(e.a)}, {text(e.b)})"
        inner = f"{_text(e.a)} {op} {_text(e.b)}"
        return f"({inner})" if k in _GROUPED else inner
    if k == "Reduce":
        axes = ", ".join(str(a.var.name) for a in e.axis)
        return f"sum[{axes}]({', '.join(text(s) for s in e.source)})"
    if k == "Select":
        return f"select({text(e.condition)}, {text(e.true_value)}, {text(e.false_value)})"
    if k == "Call":
        return f"{call_name(e).split('.')[-1]}({', '.join(text(a) for a in e.args)})"
    return str(e)

