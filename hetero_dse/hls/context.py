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
from cost_models.transfer import transfer_plan
from hetero_dse.analysis import Access, Analysis, dtype_bytes
from hetero_dse.analysis.expr import kind, to_affine
from hetero_dse.board import Board
from hetero_dse.hls.cexpr import CodegenError, CPrinter, c_type
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point


#: Names the kernel template declares itself; a loop or tensor of the same name gets a suffix.
RESERVED = frozenset({"buf", "blk", "obuf", "once", "acc_t", "out_block_t", "compute", "compute_tile", "write_out",
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
    word_bytes = int(design["port_bits"]) // 8
    buffers = []
    for i, access in enumerate(analysis.reads):  # the model describes the read buffers in the same order
        tensor = _tensor_of(op, access.tensor)
        buffer = _buffer(i, access, tensor, design["buffers"][i], by_name, ids, level_of, op, te, word_bytes)
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
    reduce_lanes = prod(lp.unroll for lp in reduce)
    accumulate = bool(design["accumulate"])
    if reduction and accumulate != (reduce_outer > 1 or any(lp.trips > 1 for lp in reduce)):
        raise CodegenError("the model and the generator disagree on whether the sum accumulates (a bug: please "
                           "report it)")
    # the compute's pipelined nest: every loop with more than one outer iteration, reduce loops first
    pipeline_loops = [{"id": ids[lp.name], "outer": lp.tile // lp.unroll, "label": f"pe_{ids[lp.name]}"}
                      for lp in reduce + spatial if lp.tile // lp.unroll > 1]
    unrolled_reduce = [lp for lp in reduce if lp.unroll > 1]
    lane_index = "0"
    for lp in unrolled_reduce:
        lane_index = f"{ids[lp.name]}_u" if lane_index == "0" else f"({lane_index}) * {lp.unroll} + {ids[lp.name]}_u"
    out_loops = box_loops(out_dims, out_port["shape"], word_bytes // dtype_bytes(out_dtype), write_info)
    out_inside = " && ".join(f"g{d} < {lp.extent}" for d, lp in enumerate(spatial) if lp.partial)
    floating = not out_dtype.startswith("int")
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
        "levels": [{"name": lp.name, "id": ids[lp.name], "trips": lp.trips, "tile": lp.tile, "kind": lp.kind,
                    "origin": f"t_{ids[lp.name]} * {lp.tile}" if lp.trips > 1 else "0"} for lp in levels],
        "spatial": [{"name": lp.name, "id": ids[lp.name], "outer": lp.tile // lp.unroll, "unroll": lp.unroll,
                     "tile": lp.tile, "index": _lane_var(ids[lp.name], lp)} for lp in spatial],
        "reduce": [{"name": lp.name, "id": ids[lp.name], "outer": lp.tile // lp.unroll, "unroll": lp.unroll,
                    "tile": lp.tile, "extent": lp.extent, "partial": lp.partial, "index": _lane_var(ids[lp.name], lp)}
                   for lp in reduce],
        "guarded_reduce": [{"id": ids[lp.name], "extent": lp.extent, "tile": lp.tile} for lp in reduce if lp.partial],
        "pipeline_loops": pipeline_loops,
        "reduce_lanes": reduce_lanes,
        "reduce_lane_index": lane_index,
        "tree_depth": (reduce_lanes - 1).bit_length(),
        "accumulate": reduction and accumulate,
        "first_tile": " && ".join(f"t_{ids[lp.name]} == 0" for lp in reduce if lp.trips > 1) or "true",
        "recurrence": int(design["recurrence"]),
        "ops": ({"mul": "fmul", "mul_impl": "fulldsp", "add": "fadd", "add_impl": "fulldsp"} if floating
                else {"mul": "mul", "mul_impl": "dsp", "add": "add", "add_impl": "fabric"}),
        "port_bits": int(design["port_bits"]),
        "buffers": buffers,
        "lock_levels": lock_levels,
        "out_buffer": {
            "dims": out_dims,
            "partition": write_info["partition"],
            "storage": write_info["storage"],
            "blocks": int(write_info["blocks"]),
            "inside": out_inside,
            "index": [ids[lp.name] for lp in spatial],
            "write_index": [f"o_{ids[lp.name]} + x{d}" for d, lp in enumerate(spatial)],
            "bounds": [lp.extent for lp in spatial],
        },
        "out_flat": _flat([f"g{d}" for d in range(len(spatial))], out_port["shape"]),
        "out_loops": out_loops,
        "out_guard": " && ".join(filter(None, [out_loops["guard"], out_inside])),
        "reduction": reduction,
        "body": body_c,
        "ii": ii,
        "accumulation_distance": distance,
        # every data type: an integer add is one cycle, but the output buffer's read and write make the
        # loop-carried path longer than one iteration
        "carried_reduction": reduction and reduce_outer > 1,
        "board": board.name,
        "part": board.part,
        "platform": board.platform,
        "clock_mhz": float(point["clock_mhz"]),
        "clock_period_ns": round(1000.0 / float(point["clock_mhz"]), 3),
        "connectivity": board.memory.connectivity or "DDR",
        "memory_channels": board.memory.channels,
    }


def _lane_var(ident: str, lp: _Loop) -> str:
    """The C expression of a loop's index inside one tile, from its pipelined and unrolled parts."""
    outer = lp.tile // lp.unroll
    if lp.unroll > 1:
        return f"{ident}_o * {lp.unroll} + {ident}_u" if outer > 1 else f"{ident}_u"
    return f"{ident}_o" if outer > 1 else "0"


def _buffer(i: int, access: Access, tensor: Any, info: dict[str, Any], loops: dict[str, _Loop],
            ids: dict[str, str], level_of: dict[str, int], op: Operator, te: Any, word_bytes: int) -> dict[str, Any]:
    """One on-chip buffer: its box, partition, where it is (re)loaded and how each element is computed."""
    name = f"buf{i}_{identifier(access.tensor)}"
    dims = [int(w) for w in info["shape"]]
    used = [n for index in access.indices for n in index.loops]
    active = [level_of[n] for n in used if loops[n].trips > 1]
    level = max(active) if active else -1
    shape = [int(d) for d in tensor.shape]

    def origin_max(n: str) -> int:
        """The largest tile origin of loop ``n`` this buffer sees (0 where it is not reloaded along it)."""
        return (loops[n].trips - 1) * loops[n].tile if level_of[n] <= level else 0

    base, local, inside = [], [], []
    for d, index in enumerate(access.indices):
        moving = [(n, c) for n, c in index.terms if level_of[n] <= level and loops[n].trips > 1]
        terms = [f"{c}*o_{ids[n]}" if c != 1 else f"o_{ids[n]}" for n, c in moving]
        shift = sum(c * (loops[n].tile - 1) for n, c in index.terms if c < 0)
        const = index.constant + shift
        base.append(" + ".join(terms + ([str(const)] if const or not terms else [])))
        # the element is inside the tensor for every tile unless the box can cross an edge: emit the test
        # only where it can fail
        lowest = const + sum(c * origin_max(n) for n, c in moving if c < 0)
        highest = const + sum(c * origin_max(n) for n, c in moving if c > 0) + dims[d] - 1
        if lowest < 0:
            inside.append(f"g{d} >= 0")
        if highest >= shape[d]:
            inside.append(f"g{d} < {shape[d]}")
        local_terms = [f"{c}*{ids[n]}" if c != 1 else ids[n] for n, c in index.terms]
        offset = -shift
        local.append(" + ".join(local_terms + ([str(offset)] if offset or not local_terms else [])))
    origins = sorted({n for index in access.indices for n, _ in index.terms
                      if level_of[n] <= level and loops[n].trips > 1}, key=lambda n: level_of[n])

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
        "blocks": int(info["blocks"]),
        "origins": [{"id": ids[n], "tile": loops[n].tile} for n in origins],
        "base": base,
        "local_index": local,
        "inside": " && ".join(inside),
        "shape": shape,
        "value": value,
        "lanes": int(info["lanes"]),
        "access": str(access),
        "box_loops": box_loops(dims, shape, word_bytes // dtype_bytes(str(tensor.dtype)), info),
    }


def box_loops(widths: list[int], shape: list[int], word: int, info: dict[str, Any]) -> dict[str, Any]:
    """The loops of a read or write process over a box, after ``transfer_plan`` (what the model charges).

    Dimensions outside the split are a loop nest, the split dimension a loop over words of ``lanes``
    elements, the dimensions inside it unrolled. Loops of one iteration are not emitted (their index is
    0), and the PIPELINE goes on the innermost loop that remains, so Vitis never drops it with its loop.
    """
    plan = transfer_plan(widths, shape, info["partition"], word)
    if (plan.split, plan.lanes, plan.cycles) != (info["split"], info["lanes"], info["cycles_per_load"]):
        raise CodegenError(f"transfer plan {plan} disagrees with the model's {info['split'], info['lanes']} "
                           "(a bug: please report it)")
    walked: list[dict[str, str | None]] = []  # pipelined part
    unrolled: list[dict[str, str | None]] = []
    defines: list[str] = []
    guard = []
    for d, w in enumerate(widths):
        if d < plan.split:
            if w > 1:
                walked.append({"label": f"box_d{d}", "header": f"for (int x{d} = 0; x{d} < {w}; ++x{d})",
                               "pragma": None, "define": None})
            else:
                defines.append(f"const int x{d} = 0;")
        elif d == plan.split:
            q = plan.lanes
            words = -(-w // q)
            if words > 1:
                walked.append({"label": f"box_d{d}_word", "header": f"for (int x{d}o = 0; x{d}o < {words}; ++x{d}o)",
                               "pragma": None, "define": None})
            if q > 1:
                index = f"x{d}o * {q} + x{d}i" if words > 1 else f"x{d}i"
                unrolled.append({"label": f"box_d{d}_lane", "header": f"for (int x{d}i = 0; x{d}i < {q}; ++x{d}i)",
                                 "pragma": "UNROLL", "define": f"const int x{d} = {index};"})
            else:
                defines.append(f"const int x{d} = {f'x{d}o' if words > 1 else '0'};")
            if w % q:
                guard.append(f"x{d} < {w}")
        elif w > 1:
            unrolled.append({"label": f"box_d{d}", "header": f"for (int x{d} = 0; x{d} < {w}; ++x{d})",
                             "pragma": "UNROLL", "define": None})
        else:
            defines.append(f"const int x{d} = 0;")
    if walked:
        walked[-1]["pragma"] = "PIPELINE II=1"
    loops = walked + unrolled
    if defines and loops:
        # indices of one-iteration dimensions, declared where the innermost loop body starts
        loops[-1]["define"] = " ".join(filter(None, [loops[-1]["define"], *defines]))
        defines = []
    return {"loops": loops, "guard": " && ".join(guard), "elements_per_cycle": plan.elements_per_cycle,
            "cycles": plan.cycles, "defines": defines}


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
