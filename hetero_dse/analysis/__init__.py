"""Static analysis of an operator (FlexTensor §4.1).

For every node of the operator's mini-graph: statistical information (#sl, #rl, trip counts, loop
order) and structural information (#in, #out, #cs); for the main node (the one writing the output):
each access as an affine function of its loops, from which any tile's footprint follows; and the FLOP
count and compulsory DDR bytes of the whole operator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from math import prod
from typing import Any, Literal

from hetero_dse.analysis.expr import (
    AffineExpr,
    count_arithmetic,
    count_multiplies,
    distinct_operations,
    loads,
    text,
    to_affine,
)
from hetero_dse.analysis.footprint import bounding_box, footprint
from hetero_dse.errors import AnalysisError
from hetero_dse.operator import Operator

__all__ = ["Access", "AffineExpr", "Analysis", "Loop", "Node", "analyze"]


@dataclass(frozen=True)
class Loop:
    """One loop of a node: spatial (no dependence, parallel) or reduce (carries the accumulation)."""

    name: str
    extent: int
    kind: Literal["spatial", "reduce"]


@dataclass(frozen=True)
class Node:
    """One node of the mini-graph: a nested loop producing one tensor."""

    name: str
    spatial: tuple[Loop, ...]
    reduce: tuple[Loop, ...]
    inputs: tuple[str, ...]
    consumers: tuple[str, ...]
    arithmetic_per_iteration: int
    body: str = field(compare=False)
    multiplies_per_iteration: int = 0
    #: an element-wise node's operations, each distinct subexpression once (``expr.distinct_operations``)
    operations: tuple[tuple[str, int], ...] = field(default=(), compare=False)

    @property
    def additions_per_iteration(self) -> int:
        """Arithmetic that is not a multiplication: adds, subtracts, min/max, the accumulation."""
        return self.arithmetic_per_iteration - self.multiplies_per_iteration

    @property
    def loops(self) -> tuple[Loop, ...]:
        """Loop order of the default nest: spatial loops outside, reduce loops inside."""
        return self.spatial + self.reduce

    @property
    def trip_count(self) -> int:
        return prod(loop.extent for loop in self.loops)

    @property
    def flops(self) -> int:
        return self.trip_count * self.arithmetic_per_iteration


@dataclass(frozen=True)
class DdrSource:
    """Where the elements of a read come from in DDR.

    ``tensor`` is an operator input read at ``index − lead`` per dimension (``lead`` all 0: the access
    reads the input itself; not 0: a producer that only shifts an input and fills outside it, such as the
    zero padding of a convolution, which the FPGA read process evaluates on chip). ``host`` is True for
    any other producer (an expansion, a circulant): its tensor is prepared on the host and read whole.
    """

    tensor: str
    shape: tuple[int, ...]
    lead: tuple[int, ...]
    host: bool = False


@dataclass(frozen=True)
class Access:
    """A read (or the write) of one tensor by the main node, each index affine in the main node's loops."""

    tensor: str
    shape: tuple[int, ...]
    dtype: str
    indices: tuple[AffineExpr, ...]
    from_input: bool  # True: an operator input (DDR); False: a producer node's tensor (e.g. the padding)
    source: DdrSource | None = field(default=None, compare=False)

    @property
    def ddr(self) -> DdrSource:
        """The DDR tensor this access reads (itself when no source was found: the write, or a test's access)."""
        return self.source or DdrSource(self.tensor, self.shape, (0,) * len(self.shape))

    @property
    def bytes_per_element(self) -> int:
        return dtype_bytes(self.dtype)

    def dims(self, loop: str) -> tuple[int, ...]:
        """The dimensions whose index ``loop`` appears in."""
        return tuple(d for d, index in enumerate(self.indices) if index.coefficient(loop))

    def packed_dim(self, loop: str) -> int | None:
        """The dimension a kernel vectorised along ``loop`` moves innermost to read this tensor a vector at a time:
        the one dimension ``loop`` indexes, where it is not already the innermost (None otherwise)."""
        dims = self.dims(loop)
        return dims[0] if len(dims) == 1 and dims[0] != len(self.indices) - 1 else None

    def footprint(self, tile: Mapping[str, int]) -> int:
        """Distinct elements touched by a tile (loop name -> tile extent; absent loops held at extent 1)."""
        return footprint(self.indices, tile)

    def footprint_bytes(self, tile: Mapping[str, int]) -> int:
        return self.footprint(tile) * self.bytes_per_element

    def bounding_box(self, tile: Mapping[str, int]) -> tuple[int, ...]:
        return bounding_box(self.indices, tile)

    def __str__(self) -> str:
        return f"{self.tensor}[{', '.join(str(ix) for ix in self.indices)}]"


@dataclass(frozen=True)
class Analysis:
    """What the design spaces, cost models and code generators need to know about an operator."""

    operator: str
    signature: str
    nodes: tuple[Node, ...]  # post-order: producers before consumers; the last is the main node
    reads: tuple[Access, ...]
    write: Access
    inputs: tuple[tuple[str, tuple[int, ...], str], ...]  # (name, shape, dtype) of the operator inputs
    #: element-wise nodes after the main node's reduction (bias, residual add, activation), applied to each
    #: finished output element; and their reads of operator inputs, in the main node's spatial loops
    epilogue: tuple[Node, ...] = ()
    epilogue_reads: tuple[Access, ...] = ()
    epilogue_steps: tuple[str, ...] = ()  # the operator's named steps, or the nodes' bodies
    #: the inputs the operator declares constant at inference (``@operator(weights=...)``): a kernel may take
    #: them in a layout of its own, packed once ahead
    weights: tuple[str, ...] = ()


    @property
    def main(self) -> Node:
        return self.nodes[-1]

    @property
    def num_spatial_loops(self) -> int:
        """FlexTensor's #sl: spatial loops summed over every node of the mini-graph."""
        return sum(len(n.spatial) for n in self.nodes)

    @property
    def num_reduce_loops(self) -> int:
        """FlexTensor's #rl: reduce loops summed over every node of the mini-graph."""
        return sum(len(n.reduce) for n in self.nodes)

    @property
    def flops(self) -> int:
        """Arithmetic operations of the whole operator (a multiply-add counts 2)."""
        return sum(n.flops for n in (*self.nodes, *self.epilogue))

    @property
    def compulsory_bytes(self) -> int:
        """Bytes every implementation moves at least: each input read once, the output written once."""
        moved = sum(prod(shape) * dtype_bytes(dtype) for _, shape, dtype in self.inputs)
        return moved + prod(self.write.shape) * self.write.bytes_per_element

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per compulsory byte: above a device's FLOPs/bandwidth ratio it can be compute bound."""
        return self.flops / self.compulsory_bytes

    def full_tile(self) -> dict[str, int]:
        """The main node's whole iteration space as a tile."""
        return {loop.name: loop.extent for loop in self.main.loops}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (what ``hetero_dse analyze --json`` prints)."""
        tile = self.full_tile()
        return {
            "operator": self.operator,
            "signature": self.signature,
            "sl": self.num_spatial_loops,
            "rl": self.num_reduce_loops,
            "num_nodes": len(self.nodes),
            "flops": self.flops,
            "compulsory_bytes": self.compulsory_bytes,
            "nodes": [
                {"name": n.name, "main": n is self.main, "spatial": {lp.name: lp.extent for lp in n.spatial},
                 "reduce": {lp.name: lp.extent for lp in n.reduce}, "order": [lp.name for lp in n.loops],
                 "inputs": list(n.inputs), "outputs": 1, "consumers": list(n.consumers), "body": n.body}
                for n in self.nodes
            ],
            "accesses": [
                {"tensor": a.tensor, "access": str(a), "role": "write" if a is self.write else "read",
                 "from_input": a.from_input, "dtype": a.dtype, "footprint_elements": a.footprint(tile),
                 "footprint_bytes": a.footprint_bytes(tile)}
                for a in (*self.reads, self.write)
            ],
        }


def dtype_bytes(dtype: str) -> int:
    """Bytes of one element of a TVM dtype string such as ``float32`` or ``int8``."""
    digits = "".join(ch for ch in dtype if ch.isdigit())
    if dtype == "bool" or not digits:
        return 1
    return max(1, int(digits) // 8)


def analyze(op: Operator) -> Analysis:
    """Analyse ``op``'s mini-graph and its main node's accesses.

    Raises:
        AnalysisError: an access of the main node is not affine in its loops, or depends on data.
    """
    from tvm import te

    main_tensor, tail = split_epilogue(op.output)
    compute_ops = _post_order(main_tensor.op)
    names = _unique_names(compute_ops + tail)
    consumers: dict[int, list[str]] = {id(c): [] for c in compute_ops}
    for c in compute_ops:
        for t in c.input_tensors:
            for producer in compute_ops:
                if t.op.same_as(producer) and names[id(c)] not in consumers[id(producer)]:
                    consumers[id(producer)].append(names[id(c)])

    for before, after in zip([compute_ops[-1], *tail], tail, strict=False):
        consumers[id(before)] = [names[id(after)]]
        consumers[id(after)] = []
    nodes = []
    for c in compute_ops + tail:
        spatial = tuple(Loop(str(iv.var.name), int(iv.dom.extent), "spatial") for iv in c.axis)
        reduce = tuple(Loop(str(iv.var.name), int(iv.dom.extent), "reduce") for iv in c.reduce_axis)
        body = c.body[0]
        nodes.append(Node(
            name=names[id(c)], spatial=_dedupe(spatial), reduce=_dedupe(reduce, taken=[lp.name for lp in spatial]),
            inputs=tuple(t.op.name for t in c.input_tensors), consumers=tuple(consumers[id(c)]),
            arithmetic_per_iteration=count_arithmetic(body), body=text(body),
            multiplies_per_iteration=count_multiplies(body),
            operations=() if c.reduce_axis else tuple(distinct_operations(body).items())))

    nodes, epilogue = nodes[:len(compute_ops)], nodes[len(compute_ops):]
    main_op, main = compute_ops[-1], nodes[-1]
    loop_vars = [(iv.var, lp.name) for iv, lp in zip([*main_op.axis, *main_op.reduce_axis], main.loops, strict=True)]
    reads = []
    for load in loads(main_op.body[0]):
        tensor = load.args[0]
        indices = tuple(to_affine(ix, loop_vars, tensor=tensor.op.name, node=main.name) for ix in load.args[1:])
        access = Access(tensor.op.name, tuple(int(d) for d in tensor.shape), str(tensor.dtype), indices,
                        from_input=isinstance(tensor.op, te.PlaceholderOp), source=ddr_source(tensor))
        if access not in reads:
            reads.append(access)
    if not reads:
        raise AnalysisError(f"node {main.name} reads no tensor; there is nothing to explore")
    write = Access(main.name, tuple(int(d) for d in op.output.shape), str(op.output.dtype),
                   tuple(AffineExpr(((lp.name, 1),)) for lp in main.spatial), from_input=False)
    inputs = tuple((t.op.name, tuple(int(d) for d in t.shape), str(t.dtype)) for t in op.inputs)
    epilogue_reads = []
    for node in tail:
        spatial_vars = [(iv.var, lp.name) for iv, lp in zip(node.axis, main.spatial, strict=True)]
        for load in loads(node.body[0]):
            tensor = load.args[0]
            if not isinstance(tensor.op, te.PlaceholderOp):
                continue
            indices = tuple(to_affine(ix, spatial_vars, tensor=tensor.op.name, node=node.name) for ix in load.args[1:])
            access = Access(tensor.op.name, tuple(int(d) for d in tensor.shape), str(tensor.dtype), indices,
                            from_input=True)
            if access not in epilogue_reads:
                epilogue_reads.append(access)
    return Analysis(op.name, op.signature(), tuple(nodes), tuple(reads), write, inputs, tuple(epilogue),
                    tuple(epilogue_reads), tuple(op.epilogue) or tuple(n.body for n in epilogue),
                    tuple(getattr(op, "weights", ())))


def split_epilogue(output: Any) -> tuple[Any, list[Any]]:
    """(the tensor the operator's reduction writes, the element-wise nodes after it, first to last).

    An epilogue node computes an element of the output's shape from the node before it at the same element
    (and from operator inputs: a bias, a residual); where the chain of such nodes does not start at a
    reduction, there is no epilogue and the output's node is the main node.
    """
    from tvm import te

    tail: list[Any] = []
    t = output
    while isinstance(t.op, te.ComputeOp) and not t.op.reduce_axis and len(t.op.body) == 1:
        computed = [x for x in t.op.input_tensors if not isinstance(x.op, te.PlaceholderOp)]
        if len(computed) != 1 or [int(d) for d in computed[0].shape] != [int(d) for d in t.shape]:
            break
        axes = list(t.op.axis)
        reads = [ld for ld in loads(t.op.body[0]) if ld.args[0].op.same_as(computed[0].op)]
        if not reads or any(len(ld.args) - 1 != len(axes) or not all(
                ix.same_as(iv.var) for ix, iv in zip(ld.args[1:], axes, strict=True)) for ld in reads):
            break
        tail.append(t.op)
        t = computed[0]
    if tail and isinstance(t.op, te.ComputeOp) and t.op.reduce_axis:
        return t, tail[::-1]
    return output, []


def ddr_source(tensor: Any) -> DdrSource:
    """The DDR tensor behind ``tensor`` (see :class:`DdrSource`)."""
    from tvm import te

    shape = tuple(int(d) for d in tensor.shape)
    producer = tensor.op
    if isinstance(producer, te.PlaceholderOp):
        return DdrSource(producer.name, shape, (0,) * len(shape))
    found = loads(producer.body[0]) if not producer.reduce_axis and len(producer.body) == 1 else []
    axes = [(iv.var, f"a{d}") for d, iv in enumerate(producer.axis)]
    leads = set()
    for load in found:
        source = load.args[0]
        if not isinstance(source.op, te.PlaceholderOp) or len(load.args) - 1 != len(axes):
            break
        try:
            index = [to_affine(ix, axes, tensor=source.op.name, node=producer.name) for ix in load.args[1:]]
        except AnalysisError:
            break
        if any(ix.terms != ((f"a{d}", 1),) for d, ix in enumerate(index)):
            break
        leads.add((source.op.name, tuple(int(d) for d in source.shape), tuple(-ix.constant for ix in index)))
    else:
        if len(leads) == 1:
            name, source_shape, lead = leads.pop()
            return DdrSource(name, source_shape, lead)
    return DdrSource(producer.name, shape, (0,) * len(shape), host=True)


def _post_order(output_op: Any) -> list[Any]:
    """Compute nodes reachable from the output, producers before consumers (placeholders excluded)."""
    from tvm import te

    order: list[Any] = []

    def visit(o: Any) -> None:
        if isinstance(o, te.PlaceholderOp) or any(o.same_as(seen) for seen in order):
            return
        if not isinstance(o, te.ComputeOp):
            raise AnalysisError(f"node {o.name} is a {type(o).__name__}; the analysis handles te.compute nodes only")
        for t in o.input_tensors:
            visit(t.op)
        order.append(o)

    visit(output_op)
    return order


def _unique_names(ops: list[Any]) -> dict[int, str]:
    used: set[str] = set()
    return {id(o): _fresh(str(o.name), used) for o in ops}


def _dedupe(loops: tuple[Loop, ...], taken: list[str] | None = None) -> tuple[Loop, ...]:
    """Loop names must be unique within a node (they key tiles)."""
    used = set(taken or [])
    return tuple(Loop(_fresh(lp.name, used), lp.extent, lp.kind) for lp in loops)


def _fresh(name: str, used: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``… if taken; the result is added to ``used``."""
    candidate, n = name, 1
    while candidate in used:
        n += 1
        candidate = f"{name}_{n}"
    used.add(candidate)
    return candidate
