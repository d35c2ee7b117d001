"""The data arithmetic of one pipeline iteration, read from the code: every multiply, add (a subtract is an
adder too), division and comparison on data (not on indices), each as many times as the loops around it
run — Vitis unrolls every loop inside a pipelined loop or function — with calls of kernel functions (the
PE) followed into their bodies; and the variables whose value is one such operation, which the code must
bind to the core the model charges (``BIND_OP``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from hetero_dse.hls.cparse import CFile, CFunction, CLoop
from hetero_dse.hls.ctree import Node
from hetero_dse.hls.cvalues import NotAffine, strip

__all__ = ["Arithmetic", "BoundValue", "count_arithmetic", "data_names"]

#: Operators by the class of core they take.
_CLASS = {"+": "add", "-": "add", "*": "mul", "/": "div", "%": "div", "+=": "add", "-=": "add", "*=": "mul",
          "/=": "div", "%=": "div", "<": "cmp", ">": "cmp", "<=": "cmp", ">=": "cmp"}
#: The kernel header's helpers that are one comparison each (an epilogue's max and min).
_COMPARE_CALLS = {"hdse_max", "hdse_min"}


@dataclass(frozen=True)
class BoundValue:
    """A variable whose initialiser is one data operation (``const float v = a * b;``)."""

    function: str
    name: str
    op: str  # the C operator
    line: int


@dataclass
class Arithmetic:
    counts: Counter = field(default_factory=Counter)  # add | mul | div | cmp -> operations an iteration
    bound: list[BoundValue] = field(default_factory=list)
    #: loops the count could not enumerate (a bound not known at compile time)
    unreadable: list[CLoop] = field(default_factory=list)


def data_names(fn: CFunction) -> set[str]:
    """Variables of ``fn`` that hold data: a kernel function's non-index parameters, and every local whose
    initialiser reads data (an array element, a word's lane, another data variable)."""
    names = {p for p, node in fn.params.items() if node.type not in ("int", "bool", "const int", "const bool")}
    for n in fn.body.walk():
        if n.kind == "VAR_DECL":
            kids = [k for k in n.children if k.kind != "TYPE_REF"]
            if kids and _reads_data(kids[-1], names):
                names.add(n.name)
    return names


def _reads_data(n: Node, names: set[str]) -> bool:
    n = strip(n)
    if n.kind == "ARRAY_SUBSCRIPT_EXPR":
        return True
    if n.kind == "CALL_EXPR" and n.name == "operator[]":
        return True
    if n.kind == "DECL_REF_EXPR":
        return n.name in names
    return any(_reads_data(c, names) for c in n.children)


def count_arithmetic(k: CFile, fn: CFunction, region: Node) -> Arithmetic:
    """The data operations of one execution of ``region`` (a node of ``fn``)."""
    loops = {id(lp.node): (lp, f) for f in k.functions.values() for lp in f.loops}
    out = Arithmetic()
    taint = {fn.name: data_names(fn)}
    # loop variables some nested loop's bounds read: those loops are enumerated, the others multiplied
    needed: dict[int, bool] = {}

    def enumerate_needed(lp: CLoop, f: CFunction) -> bool:
        if id(lp.node) not in needed:
            inner = [x for x in f.loops if lp in x.parents]
            needed[id(lp.node)] = any(x.depends_on({lp.var}, f.defs) for x in inner)
        return needed[id(lp.node)]

    def is_data(n: Node, f: CFunction) -> bool:
        return _reads_data(n, taint[f.name])

    def visit(n: Node, f: CFunction, env: dict[str, int], times: int, stack: tuple[str, ...]) -> None:
        kind = n.kind
        if kind == "FOR_STMT" and id(n) in loops:
            lp, _ = loops[id(n)]
            try:
                values = lp.values(env, f.defs)
            except NotAffine:
                out.unreadable.append(lp)
                return
            if enumerate_needed(lp, f):
                for v in values:
                    visit(lp.body, f, {**env, lp.var: v}, times, stack)
            elif values:
                visit(lp.body, f, env, times * len(values), stack)
            return
        if kind == "CALL_EXPR":
            callee = k.functions.get(n.name)
            if callee is not None and callee.name not in stack and callee.name != f.name:
                # a kernel function (the PE): its body runs once a call
                taint.setdefault(callee.name, data_names(callee))
                if times and not any(b.function == callee.name for b in out.bound):
                    _collect_bound(callee, taint[callee.name], out)
                visit(callee.body, callee, {}, times, (*stack, f.name))
            elif n.name in _COMPARE_CALLS and any(is_data(c, f) for c in n.children[1:]):
                out.counts["cmp"] += times
        if kind in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR") and n.op in _CLASS:
            if any(is_data(c, f) for c in n.children):
                out.counts[_CLASS[n.op]] += times
        for i, child in enumerate(n.children):
            if kind == "ARRAY_SUBSCRIPT_EXPR" and i > 0:
                continue  # an index: integer arithmetic on loop variables
            visit(child, f, env, times, stack)

    _collect_bound(fn, taint[fn.name], out, region)
    visit(region, fn, {}, 1, ())
    return out


def _collect_bound(fn: CFunction, names: set[str], out: Arithmetic, region: Node | None = None) -> None:
    """Variables (of ``region``, or of the whole function) whose value is one data operation."""
    for n in (region or fn.body).walk():
        if n.kind != "VAR_DECL":
            continue
        kids = [c for c in n.children if c.kind != "TYPE_REF"]
        if not kids:
            continue
        value = strip(kids[-1])
        if value.kind == "CONDITIONAL_OPERATOR":
            # a guarded product (``live ? a * b : 0``): the operation is the branch's
            value = next((strip(c) for c in value.children[1:] if strip(c).kind == "BINARY_OPERATOR"), value)
        if value.kind == "BINARY_OPERATOR" and value.op in ("+", "-", "*", "/") and _reads_data(value, names):
            out.bound.append(BoundValue(fn.name, n.name, value.op, n.line))
