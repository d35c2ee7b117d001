"""Printing TE expressions as C++ for the HLS kernel: the operator's own arithmetic, indices and conditions.

Tensor loads are handed to a callback (the caller decides whether a load is an on-chip buffer, a DDR
pointer, or a producer node to inline); everything else is printed here, fully parenthesised.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from hetero_dse.analysis.expr import call_name, is_tensor_load, kind
from hetero_dse.errors import HeteroDSEError

C_TYPES = {"float32": "float", "float64": "double", "float16": "half", "int8": "int8_t", "int16": "int16_t",
           "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t",
           "uint32": "uint32_t", "bool": "bool"}

INFIX = {"Add": "+", "Sub": "-", "Mul": "*", "EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">",
          "GE": ">=", "And": "&&", "Or": "||"}


class CodegenError(HeteroDSEError):
    """The operator uses something the HLS generator cannot print."""


def c_type(dtype: str) -> str:
    try:
        return C_TYPES[str(dtype)]
    except KeyError:
        raise CodegenError(f"data type {dtype} has no C++ type in the HLS generator") from None


class CPrinter:
    """Prints one expression with variables renamed and tensor loads delegated.

    Args:
        variables: (TVM Var, C text) pairs; every Var met must be one of them.
        load: called with the load expression and its printed indices, returns the C text of the value.
    """

    def __init__(self, variables: Sequence[tuple[Any, str]], load: Callable[[Any, list[str]], str]) -> None:
        self.variables = list(variables)
        self.load = load

    def __call__(self, e: Any) -> str:
        k = kind(e)
        if is_tensor_load(e):
            return self.load(e, [self(ix) for ix in e.args[1:]])
        if k == "IntImm":
            value = int(e.value)
            return str(value) if str(e.ty) != "bool" else ("true" if value else "false")
        if k == "FloatImm":
            text = repr(float(e.value))
            return f"{text}f" if str(e.ty) == "float32" else text
        if k == "Var":
            for var, name in self.variables:
                if e.same_as(var):
                    return name
            raise CodegenError(f"variable {e.name} is not a loop of the node being printed")
        if k == "Cast":
            return f"(({c_type(str(e.ty))})({self(e.value)}))"
        if k in INFIX:
            return f"({self(e.a)} {INFIX[k]} {self(e.b)})"
        if k == "Div":
            return f"({self(e.a)} / {self(e.b)})"
        if k == "FloorDiv":
            return f"hdse_floordiv({self(e.a)}, {self(e.b)})"
        if k in ("FloorMod", "Mod"):
            return f"hdse_floormod({self(e.a)}, {self(e.b)})"
        if k in ("Min", "Max"):
            return f"hdse_{k.lower()}({self(e.a)}, {self(e.b)})"
        if k == "Not":
            return f"(!{self(e.a)})"
        if k == "Select":
            return f"({self(e.condition)} ? {self(e.true_value)} : {self(e.false_value)})"
        if k == "Call" and call_name(e).endswith("if_then_else"):
            c, a, b = e.args
            return f"({self(c)} ? {self(a)} : {self(b)})"
        raise CodegenError(f"the HLS generator cannot print a {k} expression ({e})")


#: Names the kernel template declares itself; a loop or tensor of the same name gets a suffix.
RESERVED = frozenset({"buf", "blk", "obuf", "once", "pe", "acc_t", "out_block_t", "compute", "compute_tile",
                      "write_out",
                      "int", "float", "double", "char", "short", "long", "bool", "const", "static", "void", "for",
                      "if", "else", "return", "true", "false", "auto", "new", "delete", "this", "case", "do",
                      "while", "switch", "default", "register", "signed", "unsigned", "struct", "union", "enum",
                      "typedef", "template", "typename", "namespace", "class", "extern", "inline", "sizeof"})


def identifier(name: str) -> str:
    """A C identifier from a tensor or loop name, never one the template or C++ itself uses."""
    ident = re.sub(r"\W", "_", name)
    ident = ident if ident and not ident[0].isdigit() else f"_{ident}"
    if ident in RESERVED or ident.startswith(("pe_", "hdse_")) or re.fullmatch(r"[gxt]\d+\w*|[got]_\w+", ident):
        ident = f"{ident}_v"
    return ident
