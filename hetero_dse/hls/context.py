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
from hetero_dse.analysis import Access, Analysis, split_epilogue
from hetero_dse.analysis.expr import is_tensor_load, kind, text, to_affine
from hetero_dse.hardware.board import Board
from hetero_dse.hls.cexpr import INFIX, CodegenError, CPrinter, c_type, identifier
from hetero_dse.hls.ports import add_guard_words, ddr_port, word_loops
from hetero_dse.hls.tensors import ddr_load, element, placeholders, tensor_of
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point


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

    main_tensor, epilogue_ops = split_epilogue(op.output)
    main_op = main_tensor.op
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

    # ---------------------------------------------------------------------------------- buffers and ports
    # Every DDR tensor is a port of whole words: an operator input, or a producer the host prepares.
    port_bits = int(design["port_bits"])
    buffers = []
    ports: list[dict[str, Any]] = []
    for i, access in enumerate(analysis.reads):  # the model describes the read buffers in the same order
        tensor = tensor_of(op, access.tensor)
        source = access.ddr
        perm = tuple(int(d) for d in design["buffers"][i].get("layout", range(len(source.shape))))
        natural = perm == tuple(range(len(perm)))
        port = next((p for p in ports if p["tensor"] == source.tensor and p["perm"] == perm), None)
        if port is None:
            ddr = tensor_of(op, source.tensor)
            name = source.tensor if natural else f"{source.tensor}_t{''.join(str(d) for d in perm)}"
            port = ddr_port(name, str(ddr.dtype), [source.shape[d] for d in perm], port_bits, f"gmem{len(ports)}",
                         tensor=source.tensor, perm=perm)
            if source.host:
                # the host evaluates the producer over its whole tensor and hands the kernel the result
                port["prepare"] = {"value": element(ddr, [f"g{d}" for d in range(len(source.shape))], op, te),
                                   "inputs": sorted(placeholders(ddr))}
            elif not natural:
                # the host transposes the input: position at of the port's layout is dimension perm[at]
                coords = [""] * len(perm)
                for at, d in enumerate(perm):
                    coords[d] = f"g{at}"
                port["prepare"] = {"value": element(ddr, coords, op, te), "inputs": [identifier(source.tensor)]}
            ports.append(port)
        buffers.append(_buffer(i, access, tensor, design["buffers"][i], by_name, ids, level_of, op, te, port))
    write_info = design["buffers"][-1]
    out_dims = [lp.tile for lp in spatial]
    out_dtype = str(op.output.dtype)
    # the output in the model's DDR layout: the host reads it out after the run (transposing it back where a
    # dimension was moved innermost), as it prepares a transposed input before
    out_perm = tuple(int(d) for d in write_info.get("layout", range(len(op.output.shape))))
    out_natural = out_perm == tuple(range(len(out_perm)))
    out_name = main.name if out_natural else f"{main.name}_t{''.join(str(d) for d in out_perm)}"
    out_port = ddr_port(out_name, out_dtype, [int(op.output.shape[d]) for d in out_perm], port_bits,
                        f"gmem{len(ports)}", extents=[int(n) for n in write_info["extents"]], tensor=main.name,
                        perm=out_perm)
    for port in ports:
        add_guard_words(port, [b for b in buffers if b["port"] is port])
    cores = design["cores"]
    epilogue = _epilogue(op, analysis, epilogue_ops, out_port, port_bits, len(ports) + 1,
                         accumulator_dtype(str(op.dtype)), cores)
    host_inputs = [{"name": identifier(t.op.name), "ctype": c_type(str(t.dtype)), "dtype": str(t.dtype),
                    "size": prod(int(d) for d in t.shape)} for t in op.inputs]

    # ---------------------------------------------------------------------------------- compute body
    for b, access, info in zip(buffers, analysis.reads, design["buffers"], strict=False):
        b["window"] = _window(b, access, info, by_name, ids)

    def load_in_compute(load: Any, _printed: list[str]) -> str:
        tensor = load.args[0]
        indices = tuple(to_affine(ix, loop_vars, tensor=tensor.op.name, node=main.name) for ix in load.args[1:])
        for b, access in zip(buffers, analysis.reads, strict=True):
            if access.tensor == tensor.op.name and access.indices == indices:
                if b["window"]:
                    return f"sel_{b['name']}[{b['window']['lane']}]"
                return f"{b['name']}[{']['.join(b['local_index'])}]"
        raise CodegenError(f"load of {tensor.op.name} in node {main.name} matches no buffer")

    body_c = CPrinter([(var, ids[name]) for var, name in loop_vars], load_in_compute)(value)
    acc_ctype = c_type(out_dtype)
    pe = _pe_function(value, loop_vars, ids, load_in_compute, reduction, buffers)

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
    if pe["pe_function"]:
        # the PE's parameters and the call's arguments: its operands and which reduce lanes are live (the
        # output element it adds into stays with the caller: see the template)
        params = [f"const {x['ctype']} {x['name']}[{reduce_lanes}]" for x in pe["pe_inputs"]]
        args = [x["name"] for x in pe["pe_inputs"]]
        if reduction and any(lp.partial for lp in reduce):
            params.append(f"const bool pe_live[{reduce_lanes}]")
            args.append("pe_live")
        pe.update(pe_params=", ".join(params), pe_args=", ".join(args))
    out_xfer = word_loops(out_dims, write_info, out_port, [f"o_{ids[lp.name]}" for lp in spatial],
                          [0] * len(spatial), list(out_port["perm"]))
    return {
        "top": top,
        "operator": op.name,
        # printed in // comments and the README: a string parameter's newline or */ must not end the comment
        "signature": " ".join(op.signature().replace("*/", "* /").split()),
        "dtype": str(op.dtype),
        "acc_ctype": acc_ctype,
        "acc_dtype": accumulator_dtype(str(op.dtype)),
        "ports": ports,
        "host_inputs": host_inputs,
        "element": ELEMENT,
        "out_port": out_port,
        "all_ports": [*ports, out_port, *epilogue["ports"]],
        "epilogue": epilogue,
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
        "ops": {"mul": cores["mul"]["op"], "mul_impl": cores["mul"]["impl"], "add": cores["add"]["op"],
                "add_impl": cores["add"]["impl"]},
        "port_bits": port_bits,
        "axi": design["axi"],
        "buffers": buffers,
        "lock_levels": lock_levels,
        "out_buffer": {
            "dims": out_dims,
            "partition": write_info["partition"],
            "storage": write_info["storage"],
            "blocks": int(write_info["blocks"]),
            "index": [ids[lp.name] for lp in spatial],
            "bounds": [lp.extent for lp in spatial],
        },
        "out_xfer": out_xfer,
        "out_origins": [ids[lp.name] for lp in spatial if re.search(rf"\bo_{ids[lp.name]}\b", out_xfer["run_start"])],
        # the output word's address in its port, which the epilogue's operand ports share
        "out_address": _word_address(out_xfer),
        "reduction": reduction,
        "body": body_c,
        **pe,
        "spatial_lanes": prod(lp.unroll for lp in spatial),
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


def _word_address(x: dict[str, Any]) -> str:
    words = x["iterations"] > 1
    if x["run_start"] == "0":
        return "hdse_k" if words else "0"
    return f"({x['run_start']}) / {x['word']}" + (" + hdse_k" if words else "")


def _epilogue(op: Operator, analysis: Analysis, nodes: list[Any], out_port: dict[str, Any], port_bits: int,
              first_bundle: int, acc_dtype: str, cores: dict[str, dict[str, str]]) -> dict[str, Any]:
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


def _pe_function(value: Any, loop_vars: list[tuple[Any, str]], ids: dict[str, str],
                 load_in_compute: Any, reduction: bool, buffers: list[dict[str, Any]]) -> dict[str, Any]:
    """The PE as a function of its own (INLINE off): each distinct load of the body is an operand array
    of one element a reduce lane. A body that uses a loop index outside its loads keeps its PE inline."""
    marker = "\x00"
    if marker in CPrinter([(var, marker) for var, _ in loop_vars], lambda _load, _printed: "x")(value):
        return {"pe_function": False}
    inputs: list[dict[str, str]] = []
    lane = "pe_r" if reduction else "0"

    def operand(load: Any, printed: list[str]) -> str:
        text = load_in_compute(load, printed)
        found = next((x for x in inputs if x["load"] == text), None)
        if found is None:
            (b,) = [b for b in buffers if text.startswith((f"{b['name']}[", f"sel_{b['name']}["))]
            found = {"name": f"pe_x{len(inputs)}", "load": text, "ctype": b["ctype"]}
            inputs.append(found)
        return f"{found['name']}[{lane}]"

    body = CPrinter([(var, ids[name]) for var, name in loop_vars], operand)(value)
    return {"pe_function": True, "pe_inputs": inputs, "pe_body": body}


def _window(b: dict[str, Any], access: Access, info: dict[str, Any], loops: dict[str, _Loop],
            ids: dict[str, str]) -> dict[str, Any] | None:
    """How the compute reads a buffer that slides along its one unrolled dimension (``info["window"]``,
    see ``cost_models.fpga_kernel``): that dimension whole into registers, then one pick a lane."""
    window = info.get("window") or []
    if not window:
        return None
    (d,) = window
    unrolled = [n for n in access.indices[d].loops if loops[n].unroll > 1]
    if len(unrolled) != 1 or any(loops[n].unroll > 1 for e, ix in enumerate(access.indices) if e != d
                                 for n in ix.loops):
        raise CodegenError(f"buffer {b['name']} windows dimension {d} but is not unrolled along it alone (a bug: "
                           "please report it)")
    lp = loops[unrolled[0]]
    ident = ids[lp.name]
    return {"dim": d, "width": b["dims"][d], "loop": lp.name, "id": ident, "lane": f"{ident}_u",
            "lanes": lp.unroll, "index": _lane_var(ident, lp), "pick": b["local_index"][d],
            "read_index": [("hdse_b" if e == d else ix) for e, ix in enumerate(b["local_index"])]}


def _lane_var(ident: str, lp: _Loop) -> str:
    """The C expression of a loop's index inside one tile, from its pipelined and unrolled parts."""
    outer = lp.tile // lp.unroll
    if lp.unroll > 1:
        return f"{ident}_o * {lp.unroll} + {ident}_u" if outer > 1 else f"{ident}_u"
    return f"{ident}_o" if outer > 1 else "0"


def _buffer(i: int, access: Access, tensor: Any, info: dict[str, Any], loops: dict[str, _Loop],
            ids: dict[str, str], level_of: dict[str, int], op: Operator, te: Any,
            port: dict[str, Any]) -> dict[str, Any]:
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

    base, local, inside, lowest_start, highest_start = [], [], [], [], []
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
        lowest_start.append(lowest)
        highest_start.append(highest - dims[d] + 1)
        local_terms = [f"{c}*{ids[n]}" if c != 1 else ids[n] for n, c in index.terms]
        offset = -shift
        local.append(" + ".join(local_terms + ([str(offset)] if offset or not local_terms else [])))
    origins = sorted({n for index in access.indices for n, _ in index.terms
                      if level_of[n] <= level and loops[n].trips > 1}, key=lambda n: level_of[n])

    # The element value: the word's lane for an operator input (or a producer the host prepared); for a
    # producer that shifts an input (the padding), its expression around that lane, evaluated on chip.
    source = access.ddr
    coords = [f"g{d}" for d in range(len(dims))]
    if source.host or isinstance(tensor.op, te.PlaceholderOp):
        value = ELEMENT
    else:
        value = CPrinter([(iv.var, c) for iv, c in zip(tensor.op.axis, coords, strict=True)],
                         lambda _load, _printed: ELEMENT)(tensor.op.body[0])
    lead = list(source.lead)
    perm = list(port["perm"])
    xfer = word_loops(dims, info, port, base, lead, perm)
    strides = port["strides"]
    q = xfer["q"]
    first = sum((lowest_start[d] - lead[d]) * strides[at] for at, d in enumerate(perm[:q + 1]))
    last = sum((highest_start[d] - lead[d] + (dims[d] - 1 if at < q else 0)) * strides[at]
               for at, d in enumerate(perm[:q + 1]))
    return {
        "name": name,
        "tensor": access.tensor,
        "port": port,
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
        "access": str(access),
        "xfer": xfer,
        "coords_used": [d for d in range(len(dims)) if re.search(rf"\bg{d}\b", f"{value} {' && '.join(inside)}")],
        # the first and last word any run of any tile reads, for the guard words around the tensor
        "words_read": (first // port["word"], last // port["word"] + xfer["iterations"] - 1),
    }


#: The name of a word's lane in the read processes' element expressions.
ELEMENT = "hdse_elem"
