"""Integer expressions of the generated ``kernel.cpp``, read on the tree of :mod:`hetero_dse.hls.ctree`.

The lint checks trip counts, bank indices and DDR addresses, which the templates write as integer C
expressions of loop variables and ``const int`` locals: here they are evaluated (C's truncating division
included) where every variable has a value, or read as affine functions of the loop variables where the
check needs their coefficients (a bank fixed at compile time, a run of sequential words).
"""

from __future__ import annotations

from hetero_dse.hls.ctree import Node

__all__ = ["Affine", "NotAffine", "array_access", "c_affine", "c_eval", "strip"]


class NotAffine(Exception):
    """An expression the reader cannot evaluate (or read as affine) where it needs to."""


Affine = dict[str, int]  # variable -> coefficient, "" -> constant

_STRIPPED = {"UNEXPOSED_EXPR", "PAREN_EXPR", "CSTYLE_CAST_EXPR", "CXX_STATIC_CAST_EXPR", "CXX_FUNCTIONAL_CAST_EXPR"}


def strip(n: Node) -> Node:
    """Through implicit conversions, parentheses and casts."""
    while n.kind in _STRIPPED and n.children:
        n = n.children[-1]
    return n


def c_eval(n: Node, env: dict[str, int], defs: dict[str, Node]) -> int:
    """An integer expression's value where the variables of ``env`` have theirs."""
    n = strip(n)
    k = n.kind
    if k in ("INTEGER_LITERAL", "CXX_BOOL_LITERAL_EXPR"):
        return n.value
    if k == "DECL_REF_EXPR":
        if n.name in env:
            return env[n.name]
        if n.name in defs:
            return c_eval(defs[n.name], env, defs)
        raise NotAffine(n.name)
    if k == "BINARY_OPERATOR":
        a, b = (c_eval(x, env, defs) for x in n.children)
        op = n.op
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op in ("/", "%") and b:
            q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C truncates toward zero
            return q if op == "/" else a - q * b
        cmp = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b,
               "&&": bool(a) and bool(b), "||": bool(a) or bool(b)}
        if op in cmp:
            return int(cmp[op])
    if k == "UNARY_OPERATOR" and n.children:
        v = c_eval(n.children[0], env, defs)
        if n.op == "-":
            return -v
        if n.op == "+":
            return v
        if n.op == "!":
            return int(not v)
    if k == "CONDITIONAL_OPERATOR":
        test, a, b = n.children
        return c_eval(a if c_eval(test, env, defs) else b, env, defs)
    raise NotAffine(f"{k} at line {n.line}")


def c_affine(n: Node, defs: dict[str, Node]) -> Affine:
    """``n`` as an affine function of the variables it reads, local constants substituted."""
    n = strip(n)
    k = n.kind
    if k == "INTEGER_LITERAL":
        return {"": n.value}
    if k == "DECL_REF_EXPR":
        if n.name in defs:
            return c_affine(defs[n.name], defs)
        return {n.name: 1}
    if k == "BINARY_OPERATOR" and n.op in ("+", "-", "*"):
        a, b = (c_affine(x, defs) for x in n.children)
        if n.op in ("+", "-"):
            sign = 1 if n.op == "+" else -1
            out = dict(a)
            for v, x in b.items():
                out[v] = out.get(v, 0) + sign * x
            return {v: x for v, x in out.items() if x or v == ""}
        if set(a) <= {""}:
            a, b = b, a
        if set(b) <= {""}:
            return {v: x * b.get("", 0) for v, x in a.items()}
    if k == "BINARY_OPERATOR" and n.op == "/":
        # a quotient by a constant is a term of its own (the set of banks' word index, ports.word_loops): its
        # multiples of a partition factor leave the bank alone
        a, b = (c_affine(x, defs) for x in n.children)
        if set(b) <= {""} and b.get("", 0) > 0:
            if set(a) <= {""}:
                return {"": int(a.get("", 0) / b[""])}  # C truncates
            name = " + ".join(f"{x}*{v}" if v else str(x) for v, x in sorted(a.items()))
            return {f"({name})/{b['']}": 1}
    if k == "UNARY_OPERATOR" and n.op in ("-", "+") and n.children:
        inner = c_affine(n.children[0], defs)
        return {v: -x for v, x in inner.items()} if n.op == "-" else inner
    raise NotAffine(f"{k} at line {n.line}")


def array_access(n: Node) -> tuple[str, list[Node]] | None:
    """``name[i][j]`` -> (name, [i, j]) for an outermost array subscript."""
    indices = []
    while n.kind == "ARRAY_SUBSCRIPT_EXPR":
        base, index = n.children
        indices.append(index)
        n = strip(base)
    if n.kind == "DECL_REF_EXPR":
        return n.name, indices[::-1]
    return None
