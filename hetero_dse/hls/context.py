"""The context builder of the HLS kernel: everything the Jinja templates print, as plain data.

Python does the arithmetic here (tile origins, box offsets, partition factors, C expressions of the
operator's body); the templates only loop and print. The architecture is the one the model scores
(``cost_models/fpga.py``): one read process per on-chip buffer, one compute process, one write process,
connected by two-block ``hls::stream_of_blocks`` channels inside a DATAFLOW region. This module puts the
kernel's context together; each read process's buffer is worked out in ``buffers.py``, the PE and its
register windows in ``pe_array.py``, the write process's epilogue in ``write_epilogue.py``.
"""

from __future__ import annotations

import re
from math import prod
from typing import Any

from cost_models.fpga import accumulator_dtype
from hetero_dse.analysis import Analysis, split_epilogue
from hetero_dse.analysis.expr import kind, to_affine
from hetero_dse.hardware.board import Board
from hetero_dse.hls.buffers import ELEMENT, buffer_context
from hetero_dse.hls.cexpr import CodegenError, CPrinter, c_type, identifier
from hetero_dse.hls.pe_array import buffer_window, pe_function
from hetero_dse.hls.ports import add_guard_words, ddr_port, word_loops
from hetero_dse.hls.tensors import element, placeholders, tensor_of
from hetero_dse.hls.tile_loops import TileLoop, index_in_tile
from hetero_dse.hls.write_epilogue import epilogue_context
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point

__all__ = ["build_context"]


def build_context(op: Operator, analysis: Analysis, point: Point, design: dict[str, Any], board: Board,
                  top: str | None = None) -> dict[str, Any]:
    """The template context of one design point of ``op`` (instantiated at the point's data type)."""
    from tvm import te

    main = analysis.main
    loops = [TileLoop(lp.name, lp.extent, int(point[f"tile.{lp.name}"]), int(point[f"unroll.{lp.name}"]), lp.kind)
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
        buffers.append(buffer_context(i, access, tensor, design["buffers"][i], by_name, ids, level_of, op, te, port))
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
    epilogue = epilogue_context(op, analysis, epilogue_ops, out_port, port_bits, len(ports) + 1,
                                accumulator_dtype(str(op.dtype)), cores)
    host_inputs = [{"name": identifier(t.op.name), "ctype": c_type(str(t.dtype)), "dtype": str(t.dtype),
                    "size": prod(int(d) for d in t.shape)} for t in op.inputs]

    # ---------------------------------------------------------------------------------- compute body
    for b, access, info in zip(buffers, analysis.reads, design["buffers"], strict=False):
        b["window"] = buffer_window(b, access, info, by_name, ids)

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
    pe = pe_function(value, loop_vars, ids, load_in_compute, reduction, buffers)

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
                     "tile": lp.tile, "index": index_in_tile(ids[lp.name], lp)} for lp in spatial],
        "reduce": [{"name": lp.name, "id": ids[lp.name], "outer": lp.tile // lp.unroll, "unroll": lp.unroll,
                    "tile": lp.tile, "extent": lp.extent, "partial": lp.partial,
                    "index": index_in_tile(ids[lp.name], lp)}
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
