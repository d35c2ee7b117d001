"""The fused epilogue (bias, residual add, activation) as the HLS kernel's write process applies it.

Each output element passes through the epilogue on its way to DDR: the operands are ports of their own,
laid out by the host as the output is so that the write process reads them word for word beside its own
write, and the arithmetic is printed one statement an operation, each add, subtract and multiply bound
(``BIND_OP``) to the core the model charges, so that Vitis builds exactly the instances the model counts.
"""

from __future__ import annotations

from math import prod
from typing import Any

from hetero_dse.analysis import Analysis
from hetero_dse.analysis.expr import is_tensor_load, kind, text
from hetero_dse.hls.cexpr import INFIX, CodegenError, CPrinter, c_type, identifier
from hetero_dse.hls.ports import ddr_port
from hetero_dse.hls.tensors import ddr_load, tensor_of
from hetero_dse.operator import Operator

__all__ = ["epilogue_context"]


def epilogue_context(op: Operator, analysis: Analysis, nodes: list[Any], out_port: dict[str, Any],
                     port_bits: int, first_bundle: int, acc_dtype: str,
                     cores: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The epilogue as the write process applies it to each element on its way out: its operand ports (each
    laid out by the host as the output is, a bias broadcast over the output, so that the write process reads
    it word for word beside its own write) and its arithmetic as one statement per operation, each add and
    multiply bound like the PE's, one operator instance a lane (``design.json``'s ``epilogue``)."""
    from tvm import te

    if not nodes:
        return {"ports": [], "lines": [], "value": "", "steps": []}
    shape = [int(d) for d in op.output.shape]
    names = [lp.name for lp in analysis.main.spatial]
    ports = []
    for i, access in enumerate(analysis.epilogue_reads):
        tensor = tensor_of(op, access.tensor)
        port = ddr_port(f"{access.tensor}_o", str(tensor.dtype), [shape[d] for d in out_port["perm"]], port_bits,
                        f"gmem{first_bundle + i}", extents=out_port["extents"], tensor=access.tensor,
                        perm=out_port["perm"])
        coords = [_affine_c(ix, names) for ix in access.indices]
        port["prepare"] = {"value": ddr_load(tensor, coords), "inputs": [identifier(access.tensor)]}
        # the host fills the operand's vector in the output's layout (zeros in the padding)
        port["size"] = prod(out_port["extents"])
        port["operand"] = f"hdse_e{i}"
        ports.append(port)
    ctype = c_type(acc_dtype)
    ops = {k: (cores[c]["op"], cores[c]["impl"]) for k, c in (("Add", "add"), ("Sub", "sub"), ("Mul", "mul"))}
    lines: list[str] = []
    value = "hdse_v"
    for k, node in enumerate(nodes):
        def load(e: Any, _printed: list[str], previous: str = value) -> str:
            """An operand's element from its port word; the node before (the sum itself, at first) by name."""
            t = e.args[0]
            if isinstance(t.op, te.PlaceholderOp):
                for i, access in enumerate(analysis.epilogue_reads):
                    if access.tensor == t.op.name:
                        return f"(({ctype}){ports[i]['operand']}[hdse_l])"
                raise CodegenError(f"the epilogue reads {t.op.name}, which is no operand port (a bug: please "
                                   "report it)")
            return previous

        printer = _SsaPrinter(load, ctype, ops, lines)
        result = printer(node.body[0])
        lines.append(f"const {ctype} hdse_v{k + 1} = {result};")
        value = f"hdse_v{k + 1}"
    return {"ports": ports, "lines": lines, "value": value, "steps": list(analysis.epilogue_steps)}


class _SsaPrinter(CPrinter):
    """Prints an element-wise body as one statement an add, subtract or multiply, each bound to the operator
    the model charges (``BIND_OP``): Vitis then instantiates exactly those, one a lane."""

    def __init__(self, load: Any, ctype: str, ops: dict[str, tuple[str, str]], lines: list[str]) -> None:
        super().__init__([], load)
        self.ctype, self.ops, self.lines = ctype, ops, lines
        self.named: dict[str, str] = {}  # each distinct subexpression once, as the model counts them

    def __call__(self, e: Any) -> str:
        k = kind(e)
        if is_tensor_load(e):
            return self.load(e, [])  # an operand's element is the lane's; its indices are the output's
        if k in self.ops:
            if text(e) in self.named:
                return self.named[text(e)]
            a, b = self(e.a), self(e.b)
            name = f"hdse_t{len(self.lines)}"
            op, impl = self.ops[k]
            self.lines.append(f"const {self.ctype} {name} = {a} {INFIX[k]} {b};")
            self.lines.append(f"#pragma HLS BIND_OP variable={name} op={op} impl={impl}")
            self.named[text(e)] = name
            return name
        return super().__call__(e)


def _affine_c(ix: Any, names: list[str]) -> str:
    """An affine index over the output's loops as C over the host's coordinates ``g<d>``."""
    terms = [f"{c} * g{names.index(n)}" if c != 1 else f"g{names.index(n)}" for n, c in ix.terms]
    if ix.constant or not terms:
        terms.append(str(ix.constant))
    return " + ".join(terms)
