"""The lint of a network kernel's Winograd engine (``hls_templates/network/winograd.cpp.j2``) against the model
(``cost_models/fpga_network.py``, ``fpga_winograd.py``): what ``network_lint`` checks of every engine, for this
one's buffers and processes, and what it alone has:

* in int8, its types as wide as the model's (``integer_types``);
* its rows: a transformed patch of α² × the input lanes, a weight row of α² lane grids as the port brings it (9,
  the taps, where the engine transforms them) and of α² as the products take it, a patch's sums of α² × the output
  lanes, the output tile a pixel a row, each buffer the rows the model sizes (the output tile m² rows a patch's,
  in as many banks as a word holds channel groups, each in m banks by pixel, each a stream of blocks of its own:
  the output transform stores a patch row, each pixel by its bank's name, a cycle);
* where a 3×3 weight row is an iteration of the weight process or more but no whole number of them, the rows end to
  end in the stream, each picked out of the row register at one of ``EngineShape.row_picks`` places, all its
  weights at once;
* the read process's box in α² banks (partitioned completely along both of a patch's sides) bound to the memory
  the model charges, and its box and transform loops pipelined at II 1, the transform over every input lane;
* the PE array: α² elements × the output lanes × the input lanes unrolled, each product and add bound to the core
  the model charges, the accumulation's DEPENDENCE distance the model's; in int8 the products summed in chains of
  DSP48E2 multiply-adds as the model's ``EngineShape.chain`` (no core bound to them, expression balancing off),
  then the tree;
* the two transforms: as many adds and multiplies, each bound to a fabric core (a float engine's to a DSP core
  where the model has ``transform_dsp``), as ``transform_ops`` charges a lane, and the output transform over every
  output lane in a loop pipelined at II 1;
* where the engine transforms its weights: ``wino_w_transform``'s adds and constant multiplies, each bound to a
  fabric core, as ``weight_transform_ops`` charges a lane pair, over every lane pair of a row at once, in registers;
* where an int8 engine's output divides by more than a shift (F(4×4)): ``wino_divide``'s one constant multiply on
  the fabric, called once, inside the loop over the lanes of the pixel leaving;
* the int8 PE array's and output transform's values in the engine's types, no local narrower.
"""

from __future__ import annotations

import re
from typing import Any

from cost_models.fpga_network import EngineShape
from cost_models.fpga_winograd import divide_adds, integer_types, transform_impl, transform_ops, weight_transform_ops
from hetero_dse.hls.cparse import CFile
from hetero_dse.hls.lint.record import LintReport
from hetero_dse.hls.network_lint_parts import (
    check_pe_loop,
    check_pipelined,
    check_streams,
    check_weight_ports,
    function_text,
    typedef_rows,
    vector_lanes,
)
from hetero_dse.hls.network_run import tile_banks, write_process

__all__ = ["check_winograd"]


def check_winograd(k: CFile, source: str, e: EngineShape, dtype: str, storage: dict[str, str],
                   cores: dict[str, tuple[str, str]], add: Any, report: LintReport) -> None:
    a2, L, I = e.alpha ** 2, e.out_lanes, e.in_lanes  # noqa: E741
    rows = {"wino_irow_t": I, "wino_vrow_t": a2 * I, "wino_wrow_t": e.row_grids(3) * L * I, "wino_urow_t": a2 * L * I,
            "wino_mrow_t": a2 * L, "wino_orow_t": L}
    for row, width in rows.items():
        if vector_lanes(source, row) != width:
            add("buffer", row, f"a row of {vector_lanes(source, row)} lanes; the model's is {width}")
    bank_rows = -(-e.tile_rows // (e.out_banks * e.out_cols))  # a bank of the output tile, by group and pixel
    if e.tile_rows % e.out_banks:
        add("buffer", "wino_out_t", f"the output tile's {e.tile_rows} rows do not divide into {e.out_banks} banks")
    _check_stores(function_text(source, "wino_out"), e, add)
    for buf, depth in (("wino_in_t", e.in_rows), ("wino_mid_t", e.out_rows), ("wino_out_t", bank_rows)):
        if typedef_rows(source, buf) != [depth]:
            add("buffer", buf, f"declared {typedef_rows(source, buf)} rows; the model sizes it {depth}")
    if dtype == "int8":
        _check_integer_types(source, e, add)
        _check_integer_locals(source, add)
    report.pragmas_checked += check_streams(k, "wino_layer", storage, add,
                                            {"in_s": "in", "mid_s": "out",
                                             **{f"out_s{x}": "tile" for x in _banks(e)}})
    _check_box(k, e, storage, add, report)
    _check_pe(k, source, e, cores, add, report)
    ops = transform_ops(e.tile, dtype)
    # a float engine's two transforms on the cores the model charges them (the fabric's, or DSPs)
    core = transform_impl(e.transform_dsp, dtype)
    transforms = [("wino_in_transform", ops.in_adds, ops.in_muls, "transform_ops", core),
                  ("wino_out_transform", ops.out_adds, ops.out_muls, "transform_ops", core)]
    if e.w_transform:
        w = weight_transform_ops(e.tile)
        transforms.append(("wino_w_transform", w.in_adds, w.in_muls, "weight_transform_ops", "fabric"))
        _check_weight_lanes(k, L * I, add, report)
    elif "wino_w_transform" in k.functions:
        add("transform", "wino_w_transform", "the code transforms its weights; the model has the host transform them")
    if dtype == "int8" and divide_adds(e.tile):
        transforms.append(("wino_divide", 0, 1, "exact_division", "fabric"))
        _check_divide_lanes(k, source, L * e.out_cols, add, report)
    elif "wino_divide" in k.functions:
        add("transform", "wino_divide", "the code divides its output by more than a shift; the model does not")
    for fn_name, adds, muls, charged_by, impl in transforms:
        _check_transform(k, source, fn_name, adds, muls, add, report, charged_by, impl)
    for fn_name, loop, lanes_loop, lanes in (("wino_read_in", "transform", "transform_lane", I),
                                             ("wino_out", "inverse", "inverse_lane", L)):
        fn = k.functions.get(fn_name)
        lp, lanes_lp = (fn.loop(loop), fn.loop(lanes_loop)) if fn else (None, None)
        if lp is None or lp.pragma("PIPELINE") is None or lp.pragma("PIPELINE").int("ii") != 1:
            add("ii", fn_name, f"its {loop} loop is not pipelined at II 1 as the model charges (a patch a cycle)")
        if lanes_lp is None or lanes_lp.trip_count() != lanes or not lanes_lp.has("UNROLL"):
            add("lanes", fn_name, f"the {lanes_loop} loop transforms {lanes_lp.trip_count() if lanes_lp else None} "
                                  f"lanes at once; the model {lanes}")
        report.pragmas_checked += 2
    # the arrays a pipelined iteration reads or writes whole: in registers, or II 1 does not hold
    # (a word of several channel groups gathered in ``rows``, one to each bank, in the same iteration)
    registers = {"wino_read_in": ("x", "y") + (("rows",) if e.in_banks > 1 else ()),
                 "wino_compute": ("prod", "tap", "u") if e.w_transform else ("prod",),
                 "wino_out": ("pix", "x", "y", "row")}
    for fn_name, arrays in registers.items():
        _check_registers(k, fn_name, arrays, add, report)
    check_pipelined(k, "wino_read_in", "read_in", "word_in", e.word, add, report)
    # its output tile written by the write process the model charges: a word a cycle, from its banks
    writer = write_process(e.out_banks, e.out_cols)
    if not re.search(rf"\b{writer}<", function_text(source, "wino_layer")):
        add("process", "wino_layer", f"its output is not written by {writer}, the write process the model charges "
                                     f"(a word of {e.word} activations from {e.out_banks} bank(s) of "
                                     f"{e.out_cols} a cycle)")
    check_pipelined(k, "wino_read_w", "read_w", "word_w", e.w_word, add, report, name="WV")
    check_weight_ports(source, "wino_read_w", e.w_ports, add)
    _check_picks(k, source, e, add, report)


def _banks(e: EngineShape) -> list[str]:
    """The output tile's banks as the code names them, by channel group and by pixel."""
    return [x for names in tile_banks(e.out_banks, e.out_cols) for x in names]


def _check_stores(text: str, e: EngineShape, add: Any) -> None:
    """The output transform stores a patch row, its pixel c into bank c of the channel group's ``out_cols`` banks by
    pixel, all at one row (the row's first pixel's, ``f / m``), each bank by its own name, once (a bank chosen
    through a pointer or an array of them is one memory to Vitis, not a stream of blocks of its own); the pointwise
    mode's pixel into the one bank that holds it; the row taken from the patch's pixels at an index the code bounds
    (``e % m``: an m:1 select a pixel, not one of every pixel)."""
    m = e.out_cols
    want = sorted((f"obuf{x}", f"f / {m}", f"point ? pix[e] : row[{c}]" if e.pointwise else f"row[{c}]")
                  for names in tile_banks(e.out_banks, m) for c, x in enumerate(names))
    stores = sorted(re.findall(r"\b(obuf[\d_]*)\[([^\]]*)\] = ([^;]*);", text))
    uses = re.findall(r"\bobuf[\d_]*\b", text)
    if stores != want or len(uses) != 2 * len(want):  # each declared once and stored once
        add("banks", "wino_out", f"stores a patch row's pixels as {stores} and names the banks {len(uses)} times; "
                                 f"the model has one store of pixel c to bank c of each of {m}, at f / {m}")
    if e.pointwise:
        guards = [x for names in tile_banks(e.out_banks, m) for c, x in enumerate(names)
                  if f"if (!point || (inside && f % {m} == {c})) obuf{x}[" not in text]
        if guards:
            add("banks", "wino_out", f"the pointwise mode's pixel is not stored into only the bank of its pixel in "
                                     f"{['obuf' + x for x in guards]}")
    if f"pix[(e % {m}) * {m} + " not in text:
        add("lanes", "wino_out", f"the row leaving is not taken at e % {m}: an index the code does not bound selects "
                                 f"among every pixel, where the model charges an {m}:1 select")


def _check_picks(k: CFile, source: str, e: EngineShape, add: Any, report: LintReport) -> None:
    """Where the engine's 3×3 weight rows run end to end (``EngineShape.row_picks``), its weight process holds them
    in a register an iteration's weights but one place's wider than a row, and picks a row out of it at that many
    places, ``gap`` weights apart, every weight of the row at once (the register and select the model charges);
    where they are padded to whole iterations, it picks none."""
    fn = k.functions.get("wino_read_w")
    pick, lanes = (fn.loop("pick"), fn.loop("pick_lane")) if fn else (None, None)
    got = 1 if pick is None else pick.trip_count() if pick.has("UNROLL") else None
    row, per = e.row_grids(3) * e.out_lanes * e.in_lanes, e.w_ports * e.w_word
    if got != e.row_picks or (pick is not None and (lanes is None or lanes.trip_count() != row
                                                    or not lanes.has("UNROLL"))):
        add("weights", "wino_read_w", f"picks a row of {lanes.trip_count() if lanes else None} weights at {got} "
                                      f"place(s) an iteration; the model charges {e.row_picks} of {row}, unrolled")
    if e.row_picks > 1:
        gap = per // e.row_picks
        text = function_text(source, "wino_read_w")
        width = vector_lanes(source, "wino_wwin_t")
        forms = [f"if (extra == x * {gap}) {{", f"whole[j] = row[{per - gap} - x * {gap} + j];", "have = extra;"]
        if width != row + per - gap or any(f not in text for f in forms):
            add("weights", "wino_read_w", f"its row register is {width} weights wide, or a row is not picked at "
                                          f"its {e.row_picks} places {gap} apart; the model charges "
                                          f"{row + per - gap} ({[f for f in forms if f not in text]})")
    report.pragmas_checked += 1


def _check_box(k: CFile, e: EngineShape, storage: dict[str, str], add: Any, report: LintReport) -> None:
    fn = k.functions.get("wino_read_in")
    if fn is None:
        add("process", "wino_read_in", "missing")
        return
    if e.in_rows % e.in_banks:
        add("buffer", "wino_read_in", f"its box's {e.in_rows} rows do not divide into {e.in_banks} banks")
    want = [e.alpha, e.alpha, e.in_banks, e.in_rows // e.in_banks]
    if fn.arrays.get("box") != want:
        add("buffer", "wino_read_in", f"its box is {fn.arrays.get('box')}; the model's is α × α × {e.in_banks} banks "
                                      f"of {e.in_rows // e.in_banks} rows ({want})")
    parts = {p.get("dim") for p in fn.all_pragmas if p.name == "ARRAY_PARTITION" and p.get("variable") == "box"
             and p.get("type") == "complete"}
    if parts != {"1", "2", "3"}:
        add("partition", "wino_read_in", f"its box is partitioned completely along dims {sorted(parts)}; the model "
                                         "reads a patch's α² elements a cycle from α² banks (dims 1 and 2) and stores "
                                         "a word's channel groups in a cycle, one to each of their banks (dim 3)")
    binds = [p for p in fn.all_pragmas if p.name == "BIND_STORAGE" and p.get("variable") == "box"]
    if len(binds) != 1 or binds[0].get("impl") != storage.get("box"):
        add("storage", "wino_read_in", f"its box is bound {[str(b) for b in binds]}; the model charges "
                                       f"{storage.get('box')}")
    report.pragmas_checked += 3


def _check_pe(k: CFile, source: str, e: EngineShape, cores: dict[str, tuple[str, str]], add: Any,
              report: LintReport) -> None:
    fn = k.functions.get("wino_compute")
    chained = e.chain > 1
    # the operators the model charges to a core, each bound by name: the accumulation, the tree's adds where there
    # is a tree, the product where no chain takes it (a DSP's multiply-add; the tree's pragma is written even where
    # its loop never runs)
    wanted = {"acc"} | ({"pair"} if e.in_lanes // e.chain > 1 else set()) | (set() if chained else {"m"})
    if not check_pe_loop(fn, "wino_compute", e.distance, cores, len(wanted), add, report):
        return
    counts = {}
    want = {"element": e.alpha ** 2, "lane": e.out_lanes, "mul": e.chain if chained else e.in_lanes}
    if chained:
        want["chain"] = e.in_lanes // e.chain
    for label, n in want.items():
        lp = fn.loop(label)
        counts[label] = lp.trip_count() if lp is not None else None
        if counts[label] != n or not lp.has("UNROLL"):
            add("lanes", "wino_compute", f"the {label} loop runs {counts[label]} times unrolled; the model {n}")
    bound_vars = {p.get("variable") for lp in fn.loops for p in lp.pragmas if p.name == "BIND_OP"}
    for var in sorted(wanted - bound_vars):
        add("bind_op", "wino_compute", f"{var} is bound to no core; the model charges it to one")
    if chained:
        in_chain = [p for lp in fn.loops if lp.label in ("chain", "mul") for p in lp.pragmas if p.name == "BIND_OP"]
        if in_chain or "sum" in bound_vars:
            add("bind_op", "wino_compute", "a chain's multiply-add is bound to a core: Vitis would not match it into "
                                           "one DSP48E2 with the chain's add, which the model charges to the DSP")
        if not _chains(function_text(source, "wino_compute"), e.in_lanes // e.chain, e.chain):
            add("chain", "wino_compute", f"no chain of {e.chain} multiply-adds whose sum starts afresh in the "
                                         "unrolled chain loop with its expression balancing off (the model sums "
                                         f"{e.chain} products in DSP post-adders, then a tree)")
    muls = 1
    for v in counts.values():
        muls *= v or 0
    report.mul_per_iteration += muls
    report.add_per_iteration += muls


def _chains(text: str, chains: int, chain: int) -> bool:
    """The PE loop's chains as ``winograd.cpp.j2`` writes them: ``chains`` of ``chain`` multiply-adds, each sum
    started afresh inside the unrolled chain loop, its expression balancing off (else Vitis rebuilds it as a
    tree of fabric adds, or the sum runs on past the chain)."""
    return re.search(rf"chain: for \(int c = 0; c < {chains}; \+\+c\) \{{\n\s*#pragma HLS UNROLL\n"
                     r"\s*#pragma HLS EXPRESSION_BALANCE off\n\s*wino_m_t sum = 0;\n"
                     rf"\s*mul: for \(int k = 0; k < {chain}; \+\+k\) \{{", text) is not None


def _check_weight_lanes(k: CFile, lanes: int, add: Any, report: LintReport) -> None:
    """The PE loop transforms every lane pair of a weight row at once (the model charges that many transforms)."""
    fn = k.functions.get("wino_compute")
    lp = fn.loop("w_lane") if fn else None
    if lp is None or lp.trip_count() != lanes or not lp.has("UNROLL"):
        add("lanes", "wino_compute", f"its w_lane loop transforms {lp.trip_count() if lp else None} lane pairs of a "
                                     f"weight row at once; the model {lanes}")
    report.pragmas_checked += 1


def _check_integer_types(source: str, e: EngineShape, add: Any) -> None:
    """The int8 engine's types as wide as the model charges them (``fpga_winograd.integer_types``): its buffers,
    adders and the weight port's DSP operand are sized by these widths, and its exactness rests on them."""
    types = integer_types(e.tile)
    for name, want in (("wino_tr_t", types.tr), ("wino_u_t", types.u), ("wino_m_t", types.sums),
                       ("wino_y_t", types.y)):
        m = re.search(rf"typedef (short|int|long long|ap_int<(\d+)>) {name};", source)
        got = None if m is None else int(m.group(2)) if m.group(2) else {"short": 16, "int": 32, "long long": 64}[
            m.group(1)]
        if got != want:
            add("type", name, f"{got} bits; the model's is {want} (fpga_winograd.integer_types)")


def _check_divide_lanes(k: CFile, source: str, lanes: int, add: Any, report: LintReport) -> None:
    """The output process divides every lane of the patch row leaving at once, and only that row's (the model
    charges ``divide_adds`` an output lane of each of a row's m pixels, not one a pixel of the patch)."""
    fn = k.functions.get("wino_out")
    lp = fn.loop("divide_lane") if fn else None
    if lp is None or lp.trip_count() != lanes or not lp.has("UNROLL"):
        add("lanes", "wino_out", f"its divide_lane loop divides {lp.trip_count() if lp else None} lanes of the pixel "
                                 f"row leaving; the model {lanes}")
    else:
        lines = source.splitlines()
        calls = "\n".join(lines[fn.node.line:fn.node.end_line]).count("wino_divide(")
        inside = "\n".join(lines[lp.node.line:lp.node.end_line]).count("wino_divide(")
        # once, in the lanes loop, and no other unrolled loop around that but the pipelined one's body
        around = [q.label for q in lp.parents if q.has("UNROLL")]
        if calls != 1 or inside != 1 or around:
            add("transform", "wino_out", f"wino_divide is called {calls} times, {inside} in the divide_lane loop"
                                         + (f" (inside unrolled {around})" if around else "")
                                         + "; the model charges one a lane of the row leaving")
    report.pragmas_checked += 1


def _check_integer_locals(source: str, add: Any) -> None:
    """Every value the int8 PE array sums, and the output transform's, in the engine's types (``wino_m_t``,
    ``wino_y_t``): a local declared narrower (an ``int`` of a 38-bit sum) wraps where the model's width does
    not, which C-simulation of small values never shows."""
    for fn_name, names, want in (("wino_compute", ("prod", "pair", "acc", "m", "sum"), "wino_m_t"),
                                 ("wino_out", ("x", "y"), "wino_y_t")):
        text = function_text(source, fn_name)
        for name in names:
            for ctype in re.findall(rf"(?:const )?([\w:<>]+) {name}(?:\[| =)", text):
                if ctype not in (want, "wino_mrow_t"):
                    add("type", fn_name, f"{name} is declared {ctype}; the model sums in {want} "
                                         "(fpga_winograd.integer_types)")


def _check_registers(k: CFile, fn_name: str, arrays: tuple[str, ...], add: Any, report: LintReport) -> None:
    fn = k.functions.get(fn_name)
    if fn is None:
        return
    for name in arrays:
        parts = [p for p in fn.all_pragmas if p.name == "ARRAY_PARTITION" and p.get("variable") == name
                 and p.get("type") == "complete"]
        dims = len(fn.arrays.get(name, []))
        if not any(p.get("dim") == "0" or (dims == 1 and p.get("dim") in (None, "1")) for p in parts):
            add("partition", fn_name, f"{name} is not partitioned completely: its elements, read or written "
                                      "together in one pipelined iteration, would share a RAM's two ports")
        report.pragmas_checked += 1


def _check_transform(k: CFile, source: str, fn_name: str, adds: int, muls: int, add: Any, report: LintReport,
                     charged_by: str = "transform_ops", impl: str = "fabric") -> None:
    fn = k.functions.get(fn_name)
    if fn is None:
        add("process", fn_name, "missing")
        return
    binds = [p for p in fn.all_pragmas if p.name == "BIND_OP"]
    got_adds = sum(1 for p in binds if re.fullmatch(r"f?(add|sub)", p.get("op", "")))
    got_muls = sum(1 for p in binds if re.fullmatch(r"f?mul", p.get("op", "")))
    if (got_adds, got_muls) != (adds, muls):
        add("transform", fn_name, f"{got_adds} adds and {got_muls} multiplies a lane; the model charges {adds} and "
                                  f"{muls} (fpga_winograd.{charged_by})")
    if any(p.get("impl") != impl for p in binds):
        add("bind_op", fn_name, f"a transform's operation is bound to a core other than {impl}, which the model "
                                "charges")
    # every statement of the transform is bound: an operation with no BIND_OP is one the model does not see
    unbound = len(re.findall(r"const [\w ]+ s\d+ = [^;]*[-+*] [^;]*;", "\n".join(
        line for line in source.splitlines()[fn.node.line:fn.node.end_line]))) - len(binds)
    if unbound > 0:
        add("bind_op", fn_name, f"{unbound} of its operations bound to no core")
    report.pragmas_checked += len(binds)
