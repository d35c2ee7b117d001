"""Reading the generated ``kernel.cpp`` back with libclang, for the HLS lint: its functions, loops and pragmas.

libclang parses the file (with the project's own ``hls_vector.h``/``hls_streamofblocks.h`` stand-ins);
each function defined in it is copied once into a tree of :class:`~hetero_dse.hls.ctree.Node`
(``ctree.py``). On that tree: the ``#pragma HLS`` lines, each in the scope (function body or loop body) it
is written in; every loop with its label, pragmas and the loops around it; ``const int`` definitions and
arrays. The integer expressions themselves are read in ``cvalues.py``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from hetero_dse.errors import HeteroDSEError
from hetero_dse.hls.ctree import Node, NodeCopier
from hetero_dse.hls.cvalues import NotAffine, c_eval

__all__ = ["CFile", "CFunction", "CLoop", "LintError", "Pragma", "parse_kernel"]

_PRAGMA = re.compile(r"^\s*#pragma\s+HLS\s+(\w+)(.*)$", re.IGNORECASE)


class LintError(HeteroDSEError):
    """The kernel could not be read (no libclang, a parse error)."""


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


# ------------------------------------------------------------------------------------------ pragmas
@dataclass(frozen=True)
class Pragma:
    """One ``#pragma HLS NAME key=value bare ...`` line; ``args`` holds bare words with the value ``""``."""

    line: int
    name: str
    args: dict[str, str]
    text: str

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.args.get(key, default)

    def int(self, key: str, default: int | None = None) -> int | None:
        value = self.args.get(key)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            return None

    def __str__(self) -> str:
        return self.text.strip()


def _pragma(line: int, text: str) -> Pragma | None:
    m = _PRAGMA.match(text)
    if m is None:
        return None
    args: dict[str, str] = {}
    for word in m.group(2).split():
        key, _, value = word.partition("=")
        args[key.lower()] = value
    return Pragma(line, m.group(1).upper(), args, text)


# ------------------------------------------------------------------------------------------- loops
@dataclass(eq=False)
class CLoop:
    """A ``for`` loop: its variable, label (empty where it has none), the pragmas at the top of its body and
    the loops it is inside (outermost first)."""

    node: Node
    var: str
    label: str
    pragmas: list[Pragma] = field(default_factory=list)
    parents: list[CLoop] = field(default_factory=list)
    function: str = ""

    @property
    def line(self) -> int:
        return self.node.line

    @property
    def body(self) -> Node:
        return self.node.children[-1]

    @property
    def name(self) -> str:
        return self.label or self.var

    def pragma(self, name: str) -> Pragma | None:
        return next((p for p in self.pragmas if p.name == name), None)

    def has(self, name: str) -> bool:
        return self.pragma(name) is not None

    def values(self, env: dict[str, int], defs: dict[str, Node]) -> list[int]:
        """The loop variable's values, by running its header (init; var OP bound; update) in ``env``."""
        try:
            init, cond, step = self.node.children[:3]
            start = init.children[0].children[-1]
            lhs, rhs = cond.children[0], cond.children[-1]
        except (IndexError, AttributeError, ValueError):  # a header without its init, condition or step
            raise NotAffine(f"loop {self.name}: a header of other parts than (init; var OP bound; update)") from None
        v = c_eval(start, env, defs)
        out = []
        for _ in range(1 << 22):
            scope = {**env, self.var: v}
            left, right = c_eval(lhs, scope, defs), c_eval(rhs, scope, defs)
            test = {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right,
                    "!=": left != right}.get(cond.op)
            if test is None:
                raise NotAffine(f"loop {self.name}: condition {cond.op}")
            if not test:
                return out
            out.append(v)
            if step.kind == "UNARY_OPERATOR" and step.op in ("++", "++post"):
                v += 1
            elif step.kind == "COMPOUND_ASSIGNMENT_OPERATOR" and step.op in ("+=", "*="):
                amount = c_eval(step.children[-1], scope, defs)
                v = v + amount if step.op == "+=" else v * amount
            else:
                raise NotAffine(f"loop {self.name}: step")
        raise NotAffine(f"loop {self.name} does not end")

    def trip_count(self, env: dict[str, int] | None = None, defs: dict[str, Node] | None = None) -> int:
        return len(self.values(env or {}, defs or {}))

    def depends_on(self, names: set[str], defs: dict[str, Node]) -> bool:
        """Whether the header reads any of ``names`` (through local definitions)."""
        seen: set[str] = set()

        def reads(n: Node) -> bool:
            for x in n.walk():
                if x.kind == "DECL_REF_EXPR":
                    if x.name in names:
                        return True
                    if x.name in defs and x.name not in seen:
                        seen.add(x.name)
                        if reads(defs[x.name]):
                            return True
            return False

        init, cond, step = self.node.children[:3]
        return reads(init.children[0].children[-1]) or reads(cond) or reads(step)


@dataclass(eq=False)
class CFunction:
    name: str
    node: Node
    params: dict[str, Node]
    loops: list[CLoop]
    #: pragmas written in the function's body outside every loop
    pragmas: list[Pragma]
    #: every pragma of the function, wherever it is
    all_pragmas: list[Pragma]
    #: ``const int`` (and ``const bool``) locals: name -> initialiser
    defs: dict[str, Node]
    #: local arrays: name -> dimensions (parameters included)
    arrays: dict[str, list[int]]

    @property
    def body(self) -> Node:
        return next(c for c in self.node.children if c.kind == "COMPOUND_STMT")

    def pragma(self, name: str) -> Pragma | None:
        return next((p for p in self.pragmas if p.name == name), None)

    def variable_pragmas(self, name: str) -> dict[str, list[Pragma]]:
        """Pragmas named ``name`` that take a ``variable=``, by variable."""
        out: dict[str, list[Pragma]] = {}
        for p in self.all_pragmas:
            if p.name == name and p.get("variable"):
                out.setdefault(p.get("variable"), []).append(p)
        return out

    def loop(self, label: str) -> CLoop | None:
        return next((lp for lp in self.loops if lp.label == label), None)


@dataclass
class CFile:
    path: Path
    functions: dict[str, CFunction]
    pragmas: list[Pragma]


def parse_kernel(kernel: Path, include: Path) -> CFile:
    """Parse ``kernel`` (its includes from ``include`` and its own folder) and copy out its functions."""
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
    copier = NodeCopier(tu, kernel)
    lines = kernel.read_text().splitlines()
    pragmas = [p for i, text in enumerate(lines) if (p := _pragma(i + 1, text))]
    functions = {}
    for c in _declarations(tu.cursor):
        if (c.kind.name == "FUNCTION_DECL" and c.is_definition() and c.location.file
                and Path(c.location.file.name) == kernel):
            node = copier.copy(c)
            functions[node.name] = _function(node, pragmas)
    return CFile(kernel, functions, pragmas)


def _declarations(c: Any):
    """Top-level declarations, through ``extern "C" { }`` and namespaces."""
    for child in c.get_children():
        if child.kind.name in ("LINKAGE_SPEC", "NAMESPACE"):
            yield from _declarations(child)
        else:
            yield child


def _function(node: Node, pragmas: list[Pragma]) -> CFunction:
    inside = [p for p in pragmas if node.line < p.line <= node.end_line]
    loops: list[CLoop] = []

    def walk(n: Node, label: str, parents: list[CLoop]) -> None:
        for child in n.children:
            if child.kind == "LABEL_STMT":
                walk(child, child.name, parents)
                continue
            if child.kind == "FOR_STMT":
                init = child.children[0]
                var = init.children[0].name if init.children else ""
                lp = CLoop(child, var, label, [], list(parents), node.name)
                loops.append(lp)
                walk(child, "", [*parents, lp])
                continue
            walk(child, "", parents)

    walk(node, "", [])
    top = []
    for p in inside:
        around = [lp for lp in loops if lp.body.line <= p.line <= lp.body.end_line]
        if around:
            max(around, key=lambda lp: lp.line).pragmas.append(p)
        else:
            top.append(p)
    defs: dict[str, Node] = {}
    arrays: dict[str, list[int]] = {}
    params: dict[str, Node] = {}
    for n in node.walk():
        if n.kind in ("VAR_DECL", "PARM_DECL"):
            dims = [int(x) for x in re.findall(r"\[(\d+)\]", n.type)]
            if dims:
                arrays[n.name] = dims
            if n.kind == "PARM_DECL":
                params[n.name] = n
            elif n.type in ("const int", "const bool"):
                kids = [k for k in n.children if k.kind != "TYPE_REF"]
                if kids:
                    defs[n.name] = kids[-1]
    return CFunction(node.name, node, params, loops, top, inside, defs, arrays)
