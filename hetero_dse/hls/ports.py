"""The DDR ports of a generated kernel and the loops its read and write processes run over them.

A port is an array of whole words (``hls::vector`` of the board's port width) over one DDR tensor, laid
out by the host (``perm``: the buffer dimension at each DDR position; ``extents``: the output padded to
whole tiles and its rows to whole words; guard words around an input whose runs reach past its ends). The
loops are the transfer plan of ``cost_models.transfer`` (one implementation with the model), checked against
``design.json``.
"""

from __future__ import annotations

from math import prod
from typing import Any

from cost_models.fpga import ddr_strides_of
from cost_models.transfer import transfer_plan
from hetero_dse.analysis import dtype_bytes
from hetero_dse.hls.cexpr import CodegenError, c_type, identifier

__all__ = ["add_guard_words", "ddr_port", "flat_index", "word_loops"]


def ddr_port(name: str, dtype: str, shape: list[int], port_bits: int, bundle: str,
             extents: list[int] | None = None, tensor: str | None = None,
             perm: tuple[int, ...] | None = None) -> dict[str, Any]:
    """A DDR port of whole words named ``name`` over ``tensor`` (``name`` by default) laid out in the order
    ``perm`` (its dimensions, outermost first; ``shape`` is in that order); ``extents``: the layout's extents
    where they are larger than the tensor's (the output and its epilogue operands: every dimension padded to
    whole tiles and the rows to whole words, so that a tile's words are its own and every write is
    unconditional); ``pitch`` is then the padded row."""
    word = port_bits // (8 * dtype_bytes(dtype))
    layout = list(extents) if extents is not None else list(shape)
    strides = ddr_strides_of(layout)
    words = -(-prod(layout) // word)
    coords = [f"g{d}" for d in range(len(shape))]
    perm = perm if perm is not None else tuple(range(len(shape)))
    natural = [0] * len(shape)
    for at, d in enumerate(perm):
        natural[d] = shape[at]
    return {"name": identifier(name), "tensor": tensor or name, "perm": perm, "ctype": c_type(dtype),
            "dtype": dtype, "shape": list(shape), "extents": layout,
            "size": prod(shape), "bundle": bundle, "word": word, "word_t": f"{name}_word_t", "strides": strides,
            "pitch": layout[-1] if extents is not None else 0, "words": words, "head": 0, "tail": 0,
            "depth": words, "prepare": None,
            # an element's place among the tensor's elements, and in the port's layout, by its coordinates in
            # the port's order (g<at>)
            "flat": flat_index(coords, list(shape)), "layout_flat": flat_index(coords, layout),
            # ... and by its coordinates in the tensor's own order (g<d>), for the host's loops over the tensor
            "natural_shape": natural, "natural_flat": flat_index(coords, natural),
            "natural_layout_flat": flat_index([f"g{d}" for d in perm], layout)}


def add_guard_words(port: dict[str, Any], buffers: list[dict[str, Any]]) -> None:
    """Zero words before and after a tensor that the runs of a padded or partial box reach past its ends.

    The read processes read every word of a run unconditionally (a guard would break the burst); the host
    allocates the tensor with these words around it, and the kernel offsets its word index by ``head``.
    """
    first = min((b["words_read"][0] for b in buffers), default=0)
    last = max((b["words_read"][1] for b in buffers), default=0)
    port["head"] = max(0, -first)
    port["tail"] = max(0, last + 1 - port["words"])
    port["depth"] = port["head"] + port["words"] + port["tail"]


def word_loops(widths: list[int], info: dict[str, Any], port: dict[str, Any], base: list[str],
               lead: list[int], perm: list[int] | None = None) -> dict[str, Any]:
    """The loops of a read or write process over a box in whole port words (``cost_models.transfer``).

    Runs (the dimensions outside ``q``) and the words of a run are a pipelined loop nest; the lanes of a
    word (dimension ``q``'s ``lanes`` and the whole dimensions inside it) are unrolled. The loops follow the
    port's DDR order (``perm``: the buffer dimension at each DDR position); each keeps the name of its
    buffer dimension (``x<d>``). ``base`` is the C expression of the box's first coordinate per buffer
    dimension and ``lead`` the shift of the DDR tensor against the buffer's (the padding).
    """
    perm = list(perm if perm is not None else range(len(widths)))
    word = port["word"]
    w = [widths[d] for d in perm]
    ddr_shape = [n if lead[d] == 0 else -1 for d, n in zip(perm, port["extents"], strict=True)]
    plan = transfer_plan(w, ddr_shape, [info["partition"][d] for d in perm], word, port["strides"],
                         info["static_offset"], info["word_offset"])
    mine = (plan.q, plan.lanes, plan.packed, plan.ii, plan.iterations, plan.runs, plan.funnel, plan.ok, plan.sets)
    theirs = (info["split"], info["lanes"], info["packed"], info["word_ii"], info["iterations_per_row"],
              info["rows"], info["funnel"], info["transfer_ok"], info.get("bank_sets", 1))
    if mine != theirs or not plan.ok:
        raise CodegenError(f"the transfer of a {widths} box ({mine}) disagrees with the model's {theirs} or "
                           "cannot be generated (a bug: please report it)")
    q = plan.q
    dims = len(w)
    inner = [prod(w[at + 1:]) for at in range(dims)]
    row_loops, row_defines, lane_loops, lane_defines, lane_terms = [], [], [], [], []
    for at in range(max(q, 0)):
        d = perm[at]
        if w[at] > 1:
            row_loops.append({"label": f"box_d{d}", "header": f"for (int x{d} = 0; x{d} < {w[at]}; ++x{d})"})
        else:
            row_defines.append(f"const int x{d} = 0;")
    words = -(-w[q] // plan.lanes) if q >= 0 else 1
    guard = ""
    if q >= 0:
        d = perm[q]
        count = min(w[q], plan.lanes)
        if count > 1:
            lane_loops.append({"label": f"box_d{d}_lane", "header": f"for (int x{d}i = 0; x{d}i < {count}; ++x{d}i)"})
            lane_terms.append(f"x{d}i * {plan.packed}" if plan.packed > 1 else f"x{d}i")
            if plan.sets == 1:  # else x_q is spelled per set (below), where its bank is known
                lane_defines.append(f"const int x{d} = hdse_j * {plan.lanes} + x{d}i;" if words > 1
                                    else f"const int x{d} = x{d}i;")
        else:
            lane_defines.append(f"const int x{d} = hdse_j;" if words > 1 else f"const int x{d} = 0;")
        if words > 1 and w[q] % plan.lanes:
            guard = f"x{d} < {w[q]}" if plan.sets == 1 else f"hdse_j * {plan.lanes} + x{d}i < {w[q]}"
    for at in range(q + 1, dims):
        d = perm[at]
        if w[at] > 1:
            lane_loops.append({"label": f"box_d{d}", "header": f"for (int x{d} = 0; x{d} < {w[at]}; ++x{d})"})
            lane_terms.append(f"x{d} * {inner[at]}" if inner[at] > 1 else f"x{d}")
        else:
            lane_defines.append(f"const int x{d} = 0;")
    # where the run starts in the DDR tensor (element x_q = 0 and the inner dimensions at 0)
    terms = []
    for at in range(q + 1):
        d = perm[at]
        parts = [p for p in (base[d] if base[d] != "0" else "", f"x{d}" if at < q and w[at] > 1 else "",
                             f"{-lead[d]}" if lead[d] else "") if p]
        coord = " + ".join(parts).replace("+ -", "- ") or "0"
        if coord != "0":
            stride = port["strides"][at]
            terms.append(f"({coord}) * {stride}" if stride > 1 else f"({coord})")
    label_dim = perm[q] if q >= 0 else -1
    # a partition of dimension q by sets x lanes: lane l of word j lands in bank (j mod sets) x lanes + l. The
    # code names that bank at compile time: one unrolled copy per set, the one the word picks enabled, each
    # indexing x_q as (j / sets) x (sets x lanes) + set x lanes + l, whose bank a scheduler reads off the
    # constant terms (the quotient's multiple of the factor falls out)
    sets = int(plan.sets)
    set_index = (f"(hdse_j / {sets}) * {sets * int(plan.lanes)} + hdse_t * {int(plan.lanes)} + x{label_dim}i"
                 if sets > 1 else "")
    return {"q": q, "lanes": plan.lanes, "packed": plan.packed, "ii": plan.ii, "words": words,
            "iterations": plan.iterations, "funnel": plan.funnel, "static": plan.static, "sets": plan.sets,
            "trips": plan.runs * plan.iterations,
            "offset": int(info["word_offset"]), "word": word, "row_loops": row_loops, "row_defines": row_defines,
            "lane_loops": lane_loops, "lane_defines": lane_defines, "lane": " + ".join(lane_terms) or "0",
            "guard": guard, "run_start": " + ".join(terms) or "0",
            "label": f"box_d{label_dim}_word" if q >= 0 else "box_word", "cycles": plan.cycles, "beats": plan.beats,
            "perm": perm, "set_dim": label_dim, "q_coord": f"hdse_j * {int(plan.lanes)} + x{label_dim}i",
            "set_index": set_index, "set_label": f"box_d{label_dim}_set"}


def flat_index(coords: list[str], shape: list[int]) -> str:
    """Row-major flat index of ``coords`` in a tensor of ``shape``."""
    flat = coords[0] if coords else "0"
    for c, n in zip(coords[1:], shape[1:], strict=True):
        flat = f"({flat}) * {n} + {c}"
    return flat
