"""Reading the generated ``kernel.cpp`` back with libclang, for the HLS lint: the translation unit, each
function's labelled loops with the pragmas at the top of their bodies, its ``const int`` definitions, array
accesses, and index expressions as affine functions of loop variables (evaluated over unrolled loops).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from hetero_dse.errors import HeteroDSEError

PRAGMA = re.compile(r"^\s*#pragma\s+HLS\s+(\w+)(.*)$", re.IGNORECASE)


class LintError(HeteroDSEError):
    """The kernel could not be read (no libclang, a parse error)."""


# ------------------------------------------------------------------------------------------ parsing
@cache
def _system_includes() -> tuple[str, ...]:
    """The C++ compiler's own include directories (the libclang wheel ships no headers of its own)."""
    compiler = shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        return ()
    out = subprocess.run([compiler, "-xc++", "-E", "-v", "/dev/null"], capture_output=True, text=True,
                         timeout=60, check=False).stderr
    dirs, inside = [], False
    for line in out.splitlines():
        if line.startswith("#include <...> search starts here"):
            inside = True
        elif line.startswith("End of search list"):
            break
        elif inside:
            dirs.append(line.strip())
    return tuple(dirs)


def parse_kernel(kernel: Path, include: Path) -> Any:
    try:
        from clang import cindex
    except ImportError as exc:  # pragma: no cover - libclang is a dependency
        raise LintError("the HLS lint needs libclang ('pip install libclang')") from exc
    args = ["-x", "c++", "-std=c++14", f"-I{include}", f"-I{kernel.parent}"]
    args += [f"-isystem{d}" for d in _system_includes()]
    tu = cindex.Index.create().parse(str(kernel), args=args)
    errors = [d for d in tu.diagnostics if d.severity >= cindex.Diagnostic.Error]
    if errors:
        raise LintError(f"{kernel} does not parse: {errors[0].spelling} (line {errors[0].location.line})")
    return tu


def c_kind(c: Any) -> str:
    return c.kind.name


def c_children(c: Any) -> list[Any]:
    return list(c.get_children())


def c_strip(c: Any) -> Any:
    """Through implicit casts and parentheses."""
    while c_kind(c) in ("UNEXPOSED_EXPR", "PAREN_EXPR", "CSTYLE_CAST_EXPR") and c_children(c):
        kids = c_children(c)
        c = kids[-1]
    return c


def c_operator(c: Any) -> str:
    """The spelling of a binary operator: the first token after its left operand."""
    lhs = c_children(c)[0]
    end = lhs.extent.end.offset
    for tok in c.get_tokens():
        if tok.extent.start.offset >= end:
            return tok.spelling
    return "?"


# --------------------------------------------------------------------------------- symbolic values
class NotAffine(Exception):
    pass


Affine = dict[str, int]  # variable -> coefficient, "" -> constant


def c_affine(c: Any, defs: dict[str, Any]) -> Affine:
    """``c`` as an affine function of loop variables, with local constants substituted."""
    c = c_strip(c)
    k = c_kind(c)
    if k == "INTEGER_LITERAL":
        return {"": int(next(c.get_tokens()).spelling.rstrip("uUlL"))}
    if k == "DECL_REF_EXPR":
        name = c.spelling
        if name in defs:
            return c_affine(defs[name], defs)
        return {name: 1}
    if k == "BINARY_OPERATOR":
        a, b = (c_affine(x, defs) for x in c_children(c))
        op = c_operator(c)
        if op in ("+", "-"):
            sign = 1 if op == "+" else -1
            out = dict(a)
            for v, x in b.items():
                out[v] = out.get(v, 0) + sign * x
            return {v: x for v, x in out.items() if x or v == ""}
        if op == "*":
            if set(a) <= {""}:
                a, b = b, a
            if set(b) <= {""}:
                return {v: x * b.get("", 0) for v, x in a.items()}
    if k == "UNARY_OPERATOR" and c_children(c):
        tokens = [t.spelling for t in c.get_tokens()]
        inner = c_affine(c_children(c)[0], defs)
        if tokens and tokens[0] == "-":
            return {v: -x for v, x in inner.items()}
        if tokens and tokens[0] == "+":
            return inner
    raise NotAffine(c.extent.start.line)


def c_value(c: Any, env: dict[str, int], defs: dict[str, Any]) -> int:
    """An integer expression evaluated in ``env`` (loop headers of unrolled loops)."""
    form = c_affine(c, defs)
    total = form.get("", 0)
    for v, x in form.items():
        if v:
            if v not in env:
                raise NotAffine(c.extent.start.line)
            total += x * env[v]
    return total


@dataclass
class CLoop:
    cursor: Any
    var: str
    label: str
    line: int
    pragmas: list[tuple[str, str]]

    def values(self, env: dict[str, int], defs: dict[str, Any]) -> list[int]:
        """The loop variable's values, by running the header (init; var OP bound; update)."""
        init, cond, step, _body = c_children(self.cursor)
        var_decl = c_children(init)[0]
        v = c_value(c_children(var_decl)[-1], env, defs)
        out = []
        for _ in range(1 << 20):
            scope = {**env, self.var: v}
            lhs, rhs = c_children(cond)
            left, right = c_value(lhs, scope, defs), c_value(rhs, scope, defs)
            op = c_operator(cond)
            if not {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right,
                    "!=": left != right}.get(op, False):
                return out
            out.append(v)
            tokens = [t.spelling for t in step.get_tokens()]
            if tokens in ([self.var, "++"], ["++", self.var]):
                v += 1
            elif len(tokens) >= 3 and tokens[0] == self.var and tokens[1] in ("+=", "*="):
                amount = c_value(c_children(step)[-1], scope, defs)
                v = v + amount if tokens[1] == "+=" else v * amount
            else:
                raise NotAffine(step.extent.start.line)
        raise NotAffine(self.line)

    def has(self, pragma: str) -> bool:
        return any(p == pragma for p, _ in self.pragmas)


# ------------------------------------------------------------------------------------------ the lint
class Kernel:
    def __init__(self, path: Path, include: Path) -> None:
        self.path = path
        self.lines = path.read_text().splitlines()
        self.tu = parse_kernel(path, include)
        self.functions = {c.spelling: c for c in self.tu.cursor.get_children()
                          if c_kind(c) == "FUNCTION_DECL" and c.location.file and Path(c.location.file.name) == path
                          and c.is_definition()}
        self.pragmas = [(i + 1, m.group(1).upper(), m.group(2)) for i, line in enumerate(self.lines)
                        if (m := PRAGMA.match(line))]

    def loops(self, function: Any) -> list[CLoop]:
        """Every for-loop of a function, with its label and the pragmas at the top of its body."""
        found: list[CLoop] = []

        def walk(c: Any, label: str) -> None:
            for child in c_children(c):
                if c_kind(child) == "LABEL_STMT":
                    walk(child, child.spelling)
                    continue
                if c_kind(child) == "FOR_STMT":
                    init = c_children(child)[0]
                    var = c_children(init)[0].spelling
                    found.append(CLoop(child, var, label, child.extent.start.line, []))
                walk(child, "")

        walk(function, "")
        for line, name, args in self.pragmas:
            inside = [lp for lp in found if lp.cursor.extent.start.line < line <= lp.cursor.extent.end.line]
            if inside:
                max(inside, key=lambda lp: lp.line).pragmas.append((name, args))
        return found

    def partitions(self) -> dict[str, list[tuple[int, int | None]]]:
        """ARRAY_PARTITION pragmas: variable -> [(dim, factor or None for complete)]."""
        out: dict[str, list[tuple[int, int | None]]] = {}
        for _, name, args in self.pragmas:
            if name != "ARRAY_PARTITION":
                continue
            kv = dict(re.findall(r"(\w+)=(\S+)", args))
            factor = None if kv.get("type") == "complete" else int(kv.get("factor", 1))
            out.setdefault(kv["variable"], []).append((int(kv.get("dim", 1)), factor))
        return out


def c_defs(function: Any) -> dict[str, Any]:
    """Local ``const int`` definitions of a function: name -> initialiser (substituted in indices)."""
    defs = {}
    for c in function.walk_preorder():
        if c_kind(c) == "VAR_DECL" and c.type.spelling == "const int":
            kids = [k for k in c_children(c) if c_kind(k) != "TYPE_REF"]
            if kids:
                defs[c.spelling] = kids[-1]
    return defs


def c_array_access(c: Any) -> tuple[str, list[Any]] | None:
    """``name[i][j]`` -> (name, [i, j]) for an outermost array subscript."""
    indices = []
    while c_kind(c) == "ARRAY_SUBSCRIPT_EXPR":
        base, index = c_children(c)
        indices.append(index)
        c = c_strip(base)
    if c_kind(c) == "DECL_REF_EXPR":
        return c.spelling, indices[::-1]
    return None


def c_dims(cursor: Any) -> list[int]:
    return [int(x) for x in re.findall(r"\[(\d+)\]", cursor.type.get_canonical().spelling)]
