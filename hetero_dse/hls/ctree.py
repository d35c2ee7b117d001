"""The syntax tree of the generated ``kernel.cpp``, copied out of libclang for the HLS lint.

Every call into libclang crosses a foreign-function boundary, and the lint walks the PE array's loops many
times: so each function of the kernel is copied once into a small tree of :class:`Node` (kind, name,
operator, type, lines, children, an integer literal's value), and the lint reads only that. libclang does
not expose a binary operator's spelling or a literal's value, so the copier reads them from the tokens.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Any

__all__ = ["Node", "NodeCopier"]


class Node:
    """One AST node of a function in the kernel file, copied out of libclang."""

    __slots__ = ("kind", "name", "op", "type", "line", "end_line", "children", "value")

    def __init__(self, kind: str, name: str, op: str, type_: str, line: int, end_line: int,
                 children: list[Node], value: int | None) -> None:
        self.kind, self.name, self.op, self.type = kind, name, op, type_
        self.line, self.end_line, self.children, self.value = line, end_line, children, value

    def walk(self):
        """This node and every node below it, depth first."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def __repr__(self) -> str:
        return f"Node({self.kind} {self.name or self.op} @{self.line})"


#: Node kinds whose type the lint reads (declarations, casts, calls); asking libclang for every node's type
#: would double the copying time for nothing.
_TYPED = {"VAR_DECL", "PARM_DECL", "CSTYLE_CAST_EXPR", "CXX_STATIC_CAST_EXPR", "CXX_REINTERPRET_CAST_EXPR",
          "CALL_EXPR", "FUNCTION_DECL"}
_NAMED = {"VAR_DECL", "PARM_DECL", "DECL_REF_EXPR", "LABEL_STMT", "FUNCTION_DECL", "CALL_EXPR", "MEMBER_REF_EXPR",
          "TYPE_REF"}


class NodeCopier:
    """Copies libclang cursors of one translation unit into :class:`Node` trees, operators and literals read
    from the file's tokens."""

    def __init__(self, tu: Any, path: Path) -> None:
        from clang import cindex

        size = path.stat().st_size
        extent = tu.get_extent(str(path), (0, size))
        toks = [(t.extent.start.offset, t.spelling) for t in tu.get_tokens(extent=extent)]
        self.offsets = [o for o, _ in toks]
        self.spellings = [s for _, s in toks]
        self.cindex = cindex

    def token_at_or_after(self, offset: int) -> str:
        i = bisect.bisect_left(self.offsets, offset)
        return self.spellings[i] if i < len(self.spellings) else "?"

    def token_before(self, offset: int) -> str:
        i = bisect.bisect_left(self.offsets, offset) - 1
        return self.spellings[i] if i >= 0 else "?"

    def copy(self, c: Any) -> Node:
        kind = c.kind.name
        kids = [self.copy(k) for k in c.get_children()]
        op = ""
        value = None
        if kind in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR") and kids:
            lhs_end = next(iter(c.get_children())).extent.end.offset
            op = self.token_at_or_after(lhs_end)
        elif kind == "UNARY_OPERATOR":
            first = self.token_at_or_after(c.extent.start.offset)
            prefix = first in ("-", "+", "!", "~", "++", "--", "*", "&")
            op = first if prefix else self.token_before(c.extent.end.offset)
            if op in ("++", "--") and first not in ("++", "--"):
                op += "post"
        elif kind == "INTEGER_LITERAL":
            value = int(self.token_at_or_after(c.extent.start.offset).rstrip("uUlL"), 0)
        elif kind == "CXX_BOOL_LITERAL_EXPR":
            value = int(self.token_at_or_after(c.extent.start.offset) == "true")
        elif kind == "FLOATING_LITERAL":
            op = self.token_at_or_after(c.extent.start.offset)
        name = c.spelling if kind in _NAMED else ""
        type_ = c.type.get_canonical().spelling if kind in _TYPED else ""
        return Node(kind, name, op, type_, c.extent.start.line, c.extent.end.line, kids, value)

