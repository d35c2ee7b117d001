"""The PE array of the HLS kernel's compute process, as the Jinja templates print it.

The PE is a function of its own (INLINE off) whose operands are arrays of one element a reduce lane,
unless its body reads a loop index outside its loads; a buffer that slides along its one unrolled
dimension is read whole into registers along it and picked from one lane at a time (the model's
``window``, ``cost_models.fpga_pe_array.partition_box``). The rest of the compute (its loops, the adder tree,
the accumulation) is printed from the kernel's context (``context.py``).
"""

from __future__ import annotations

from typing import Any

from hetero_dse.analysis import Access
from hetero_dse.hls.cexpr import CodegenError, CPrinter
from hetero_dse.hls.tile_loops import TileLoop, index_in_tile

__all__ = ["buffer_window", "pe_function"]


def pe_function(value: Any, loop_vars: list[tuple[Any, str]], ids: dict[str, str],
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


def buffer_window(b: dict[str, Any], access: Access, info: dict[str, Any], loops: dict[str, TileLoop],
                  ids: dict[str, str]) -> dict[str, Any] | None:
    """How the compute reads a buffer that slides along its one unrolled dimension (``info["window"]``,
    see ``cost_models.fpga_pe_array.partition_box``): that dimension whole into registers, then one pick a lane."""
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
            "lanes": lp.unroll, "index": index_in_tile(ident, lp), "pick": b["local_index"][d],
            "read_index": [("hdse_b" if e == d else ix) for e, ix in enumerate(b["local_index"])]}
