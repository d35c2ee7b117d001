"""The context builder of the HLS kernel: everything the Jinja templates print, as plain data.

Python does the arithmetic here (tile origins, box offsets, partition factors, C expressions of the
operator's body); the templates only loop and print. The architecture is the one the model scores
(``cost_models/fpga.py``): one read process per on-chip buffer, one compute process, one write process,
connected by two-block ``hls::stream_of_blocks`` channels inside a DATAFLOW region.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod
from typing import Any

from cost_models.fpga import accumulator_dtype
from cost_models.fpga_costs import PORT_BITS
from cost_models.transfer import transfer_plan
from hetero_dse.analysis import Access, Analysis, dtype_bytes
from hetero_dse.analysis.expr import kind, to_affine
from hetero_dse.board import Board
from hetero_dse.hls.cexpr import CodegenError, CPrinter, c_type
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point


def identifier(name: str) -> str:
    """A C identifier from a tensor or loop name."""
    ident = re.sub(r"\W", "_", name)
    return ident if ident and not ident[0].isdigit() else f"_{ident}"


@dataclass(frozen=True)
class _Loop:
    name: str
    extent: int
    tile: int
    unroll: int
    kind: str

    @property
    def trips(self) -> int:
        return -(-self.extent // self.tile)

    @property
    def partial(self) -> bool:
        return self.extent % self.tile != 0


def build_context(op: Operator, analysis: Analysis, point: Point, design: dict[str, Any], board: Board,
                  top: str | None = None) -> dict[str, Any]:
    """The template context of one design point of ``op`` (instantiated at the point's data type)."""
    from tvm import te

    main = analysis.main
    loops = [_Loop(lp.name, lp.extent, int(point[f"tile.{lp.name}"]), int(point[f"unroll.{lp.name}"]), lp.kind)
             for lp in main.loops]
    by_name = {lp.name: lp for lp in loops}
    ids = {lp.name: identifier(lp.name) for lp in loops}
    spatial = [lp for lp in loops if lp.kind == "spatial"]
    reduce = [lp for lp in loops if lp.kind == "reduce"]
    levels = [by_name[n] for n in point["order"]] + reduce  # tile loops, outermost first
    level_of = {lp.name: i for i, lp in enumerate(levels)}
    top = identifier(top or f"{op.name}_kernel")

    main_op = op.output.op
    if len(main_op.body) != 1:
        raise CodegenError(f"node {main.name} has {len(main_op.body)} outputs; the HLS generator handles one")
    body = main_op.body[0]
    loop_vars = [(iv.var, lp.name) for iv, lp in zip([*main_op.axis, *main_op.reduce_axis], main.loops, strict=True)]
    reduction = kind(body) == "Reduce"
    if reduction:
        if kind(body.combiner.result[0]) != "Add":
            raise CodegenError(f"node {main.name} reduces with {kind(body.combiner.result[0])}; the HLS generator "
                               "handles sum reductions")
        if not (kind(body.condition) == "IntImm" and int(body.condition.value) == 1):
            raise CodegenError(f"node {main.name} has a conditional reduction; the HLS generator does not handle it")
        value = body.source[0]
    else:
        value = body

    # ---------------------------------------------------------------------------------- DDR ports
    ports = []
    for i, t in enumerate(op.inputs):
        ports.append({"name": identifier(t.op.name), "ctype": c_type(str(t.dtype)), "dtype": str(t.dtype),
                      "shape": [int(d) for d in t.shape], "size": prod(int(d) for d in t.shape),
                      "bundle": f"gmem{i}"})
    out_dtype = str(op.output.dtype)
    out_port = {"name": identifier(main.name), "ctype": c_type(out_dtype), "dtype": out_dtype,
                "shape": [int(d) for d in op.output.shape], "size": prod(int(d) for d in op.output.shape),
                "bundle": f"gmem{len(ports)}"}

    # ---------------------------------------------------------------------------------- buffers
    buffers = []
    for i, access in enumerate(analysis.reads):  # the model describes the read buffers in the same order
        tensor = _tensor_of(op, access.tensor)
        buffer = _buffer(i, access, tensor, design["buffers"][i], by_name, ids, level_of, op, te)
        used = _placeholders(tensor)
        buffer["ports"] = [p for p in ports if p["name"] in used]
        buffers.append(buffer)
    write_info = design["buffers"][-1]
    out_dims = [lp.tile for lp in spatial]

    # ---------------------------------------------------------------------------------- compute body
    def load_in_compute(load: Any, _printed: list[str]) -> str:
        tensor = load.args[0]
        indices = tuple(to_affine(ix, loop_vars, tensor=tensor.op.name, node=main.name) for ix in load.args[1:])
        for b, access in zip(buffers, analysis.reads, strict=True):
            if access.tensor == tensor.op.name and access.indices == indices:
                return f"{b['name']}[{']['.join(b['local_index'])}]"
        raise CodegenError(f"load of {tensor.op.name} in node {main.name} matches no buffer")

    body_c = CPrinter([(var, ids[name]) for var, name in loop_vars], load_in_compute)(value)
    acc_ctype = c_type(out_dtype)

    out_level = len(spatial) - 1
    lock_levels = []
    for lv in range(-1, len(levels)):
        lock_levels.append({
            "level": lv,
            "inputs": [b for b in buffers if b["level"] == lv],
            "output": lv == out_level,
        })

    ii = int(design["ii"])
    distance = int(design["accumulation_distance"])
    reduce_outer = prod(lp.tile // lp.unroll for lp in reduce)
    return {
        "top": top,
        "operator": op.name,
        "signature": op.signature(),
        "dtype": str(op.dtype),
        "acc_ctype": acc_ctype,
        "acc_dtype": accumulator_dtype(str(op.dtype)),
        "ports": ports,
        "out_port": out_port,
        "all_ports": [*ports, out_port],
        "loops": [{"name": lp.name, "id": ids[lp.name], "extent": lp.extent, "tile": lp.tile, "unroll": lp.unroll,
                   "outer": lp.tile // lp.unroll, "trips": lp.trips, "kind": lp.kind, "partial": lp.partial}
                  for lp in loops],
        "levels": [{"name": lp.name, "id": ids[lp.name], "trips": lp.trips, "tile": lp.tile, "kind": lp.kind}
                   for lp in levels],
        "spatial": [{"name": lp.name, "id": ids[lp.name], "outer": lp.tile // lp.unroll, "unroll": lp.unroll,
                     "tile": lp.tile} for lp in spatial],
        "reduce": [{"name": lp.name, "id": ids[lp.name], "outer": lp.tile // lp.unroll, "unroll": lp.unroll,
                    "tile": lp.tile, "extent": lp.extent, "partial": lp.partial} for lp in reduce],
        "guarded_reduce": [{"id": ids[lp.name], "extent": lp.extent} for lp in reduce if lp.partial],
        "buffers": buffers,
        "lock_levels": lock_levels,
        "out_buffer": {
            "dims": out_dims,
            "partition": write_info["partition"],
            "storage": write_info["storage"],
            "index": [ids[lp.name] for lp in spatial],
            "write_index": [f"o_{ids[lp.name]} + x{d}" for d, lp in enumerate(spatial)],
            "bounds": [lp.extent for lp in spatial],
        },
        "out_flat": _flat([f"g{d}" for d in range(len(spatial))], out_port["shape"]),
        "out_loops": box_loops(out_dims, out_port["shape"], PORT_BITS // 8 // dtype_bytes(out_dtype), write_info),
        "reduction": reduction,
        "body": body_c,
        "ii": ii,
        "accumulation_distance": distance,
        "carried_reduction": reduction and reduce_outer > 1 and not str(op.dtype).startswith("int"),
        "board": board.name,
        "part": board.part,
        "platform": board.platform,
        "clock_mhz": float(point["clock_mhz"]),
        "clock_period_ns": round(1000.0 / float(point["clock_mhz"]), 3),
        "connectivity": board.memory.connectivity or "DDR",
        "memory_channels": board.memory.channels,
    }


def _buffer(i: int, access: Access, tensor: Any, info: dict[str, Any], loops: dict[str, _Loop],
            ids: dict[str, str], level_of: dict[str, int], op: Operator, te: Any) -> dict[str, Any]:
    """One on-chip buffer: its box, partition, where it is (re)loaded and how each element is computed."""
    name = f"buf{i}_{identifier(access.tensor)}"
    dims = [int(w) for w in info["shape"]]
    base, local = [], []
    for index in access.indices:
        terms = [f"{c}*o_{ids[n]}" if c != 1 else f"o_{ids[n]}" for n, c in index.terms]
        shift = sum(c * (loops[n].tile - 1) for n, c in index.terms if c < 0)
        const = index.constant + shift
        base.append(" + ".join(terms + ([str(const)] if const or not terms else [])))
        local_terms = [f"{c}*{ids[n]}" if c != 1 else ids[n] for n, c in index.terms]
        offset = -shift
        local.append(" + ".join(local_terms + ([str(offset)] if offset or not local_terms else [])))
    used = [n for index in access.indices for n in index.loops]
    active = [level_of[n] for n in used if loops[n].trips > 1]
    level = max(active) if active else -1

    # The element value: a DDR load for an operator input; the producer node's expression otherwise
    # (padding, expansion, circulant), evaluated while reading so the compute stage sees plain buffers.
    coords = [f"g{d}" for d in range(len(dims))]
    value = _element(tensor, coords, op, te)
    return {
        "name": name,
        "tensor": access.tensor,
        "block": f"{name}_t",
        "ctype": c_type(str(tensor.dtype)),
        "dims": dims,
        "partition": [int(f) for f in info["partition"]],
        "storage": info["storage"],
        "level": level,
        "base": base,
        "local_index": local,
        "shape": [int(d) for d in tensor.shape],
        "value": value,
        "lanes": int(info["lanes"]),
        "access": str(access),
        "box_loops": box_loops(dims, [int(d) for d in tensor.shape], PORT_BITS // 8 // dtype_bytes(str(tensor.dtype)),
                               info),
    }


def box_loops(widths: list[int], shape: list[int], word: int, info: dict[str, Any]) -> dict[str, Any]:
    """The loops of a read or write process over a box, after ``transfer_plan`` (what the model charges)."""
    plan = transfer_plan(widths, shape, word)
    if (plan.split, plan.lanes, plan.cycles) != (info["split"], info["lanes"], info["cycles_per_load"]):
        raise CodegenError(f"transfer plan {plan} disagrees with the model's {info['split'], info['lanes']} "
                           "(a bug: please report it)")
    loops: list[dict[str, str | None]] = []
    if plan.split < 0:
        loops.append({"header": "for (int once = 0; once < 1; ++once)", "pragma": "PIPELINE II=1", "define": None})
    guard = []
    for d, w in enumerate(widths):
        if d < plan.split:
            loops.append({"header": f"for (int x{d} = 0; x{d} < {w}; ++x{d})", "pragma": None, "define": None})
        elif d == plan.split:
            q = plan.lanes
            loops.append({"header": f"for (int x{d}o = 0; x{d}o < {-(-w // q)}; ++x{d}o)",
                          "pragma": "PIPELINE II=1", "define": None})
            loops.append({"header": f"for (int x{d}i = 0; x{d}i < {q}; ++x{d}i)", "pragma": "UNROLL",
                          "define": f"const int x{d} = x{d}o * {q} + x{d}i;"})
            if w % q:
                guard.append(f"x{d} < {w}")
        else:
            loops.append({"header": f"for (int x{d} = 0; x{d} < {w}; ++x{d})", "pragma": "UNROLL", "define": None})
    return {"loops": loops, "guard": " && ".join(guard), "elements_per_cycle": plan.elements_per_cycle,
            "cycles": plan.cycles}


def _tensor_of(op: Operator, name: str) -> Any:
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


def _element(tensor: Any, coords: list[str], op: Operator, te: Any) -> str:
    """C expression of ``tensor[coords]``: a flat DDR read, or the producer's body with its loops renamed."""
    if isinstance(tensor.op, te.PlaceholderOp):
        return _ddr_load(tensor, coords)
    producer = tensor.op
    if producer.reduce_axis:
        raise CodegenError(f"producer node {producer.name} has a reduction; the HLS generator inlines "
                           "element-wise producers only")

    def load(e: Any, printed: list[str]) -> str:
        t = e.args[0]
        return _element(t, [f"({p})" for p in printed], op, te)

    return CPrinter([(iv.var, c) for iv, c in zip(producer.axis, coords, strict=True)], load)(producer.body[0])


def _ddr_load(tensor: Any, coords: list[str]) -> str:
    return f"{identifier(tensor.op.name)}[{_flat(coords, [int(d) for d in tensor.shape])}]"


def _flat(coords: list[str], shape: list[int]) -> str:
    """Row-major flat index of ``coords`` in a tensor of ``shape``."""
    flat = coords[0] if coords else "0"
    for c, n in zip(coords[1:], shape[1:], strict=True):
        flat = f"({flat}) * {n} + {c}"
    return flat


def _placeholders(tensor: Any) -> set[str]:
    """Identifiers of the operator inputs ``tensor`` is computed from (itself if it is one)."""
    from tvm import te

    if isinstance(tensor.op, te.PlaceholderOp):
        return {identifier(tensor.op.name)}
    found: set[str] = set()
    for t in tensor.op.input_tensors:
        found |= _placeholders(t)
    return found
