"""The operator's tensors as C for the HLS kernel: finding a tensor by name, and one element of it printed as
a read of its DDR array or as its producer's body inlined (padding, expansion)."""

from __future__ import annotations

from typing import Any

from hetero_dse.hls.cexpr import CodegenError, CPrinter, identifier
from hetero_dse.hls.ports import flat_index
from hetero_dse.operator import Operator

__all__ = ["ddr_load", "element", "placeholders", "tensor_of"]


def tensor_of(op: Operator, name: str) -> Any:
    from tvm import te

    stack, seen = [op.output], []
    while stack:
        t = stack.pop()
        if t.op.name == name:
            return t
        if isinstance(t.op, te.ComputeOp):
            for x in t.op.input_tensors:
                if not any(x.same_as(s) for s in seen):
                    seen.append(x)
                    stack.append(x)
    raise CodegenError(f"tensor {name} is not part of operator {op.name}")


def element(tensor: Any, coords: list[str], op: Operator, te: Any) -> str:
    """C expression of ``tensor[coords]``: a flat DDR read, or the producer's body with its loops renamed."""
    if isinstance(tensor.op, te.PlaceholderOp):
        return ddr_load(tensor, coords)
    producer = tensor.op
    if producer.reduce_axis:
        raise CodegenError(f"producer node {producer.name} has a reduction; the HLS generator inlines "
                           "element-wise producers only")

    def load(e: Any, printed: list[str]) -> str:
        t = e.args[0]
        return element(t, [f"({p})" for p in printed], op, te)

    return CPrinter([(iv.var, c) for iv, c in zip(producer.axis, coords, strict=True)], load)(producer.body[0])


def ddr_load(tensor: Any, coords: list[str]) -> str:
    return f"{identifier(tensor.op.name)}[{flat_index(coords, [int(d) for d in tensor.shape])}]"


def placeholders(tensor: Any) -> set[str]:
    """Identifiers of the operator inputs ``tensor`` is computed from (itself if it is one)."""
    from tvm import te

    if isinstance(tensor.op, te.PlaceholderOp):
        return {identifier(tensor.op.name)}
    found: set[str] = set()
    for t in tensor.op.input_tensors:
        found |= placeholders(t)
    return found
