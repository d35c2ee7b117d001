"""The lint of a network project (``network_project.py``): reads the generated shared kernel back (libclang, as
the single-layer lint does) and holds it, and the descriptor table the host passes it, to design.json.

What it checks:

* per engine: each buffer's row one wide word of the lanes the model sizes and its rows, never partitioned
  (Vitis does not partition a stream of blocks), bound to the memory the model charges at read latency 1; the
  read processes' loops pipelined at II 1 with a word's lanes unrolled; the PE array's lanes (the ``lane`` loop
  over the output lanes, two a multiply where int8 packs, the ``mul`` loop over the input lanes, where int8
  packs in ``chain`` loops of the model's length, multiply-adds bound to no core so Vitis matches each into one
  DSP), every other multiply and add bound to the core the model charges, and the accumulation's DEPENDENCE
  distance the model's;
* the write process's loops pipelined; every DDR access of every port in its burst form (consecutive words,
  no condition; the arena's runs kept in flight, each counted for the C-simulation where it is requested:
  ``network_lint_bursts``); one m_axi bundle a port, the ALIAS pragma of the arena's three ports, and each
  function's ports in the order they are passed to it;
* the table: each descriptor design.json's; its shape consistent; tiles whole multiples of the lanes that
  divide the channels and fill no more rows than the buffers have; its tensors inside the arena with the output
  apart from its input and residual, and its weights and parameters inside their buffers;
* connectivity.cfg (``network_lint_links``): every m_axi port of every compute unit on the bank the model places
  it, within the board's banks and holding what the host allocates there, and the XRT test double's banks its.

What runs is checked by the C-simulation: every layer's output against torch, and every process's trip count and
the arena's runs against the model's (``check_trips``). A loop whose bounds the lint cannot count is a finding.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from cost_models.fpga_costs import ARITHMETIC
from cost_models.fpga_network import EngineShape, NetLayer, Tiles, network_trips
from cost_models.fpga_network_ports import kernel_ports
from hetero_dse.hls.cparse import CFile, LintError, parse_kernel
from hetero_dse.hls.cvalues import NotAffine
from hetero_dse.hls.lint.record import Finding, LintReport
from hetero_dse.hls.network_lint_bursts import check_bursts, check_halves, check_port_order, check_runs_in_flight
from hetero_dse.hls.network_lint_links import check_links
from hetero_dse.hls.network_lint_parts import (
    check_box_banks,
    check_pe_loop,
    check_pipelined,
    check_streams,
    check_weight_ports,
    constant,
    function_text,
    packed_chains,
    packed_split_ok,
    typedef_rows,
    vector_lanes,
)
from hetero_dse.hls.network_lint_winograd import check_winograd
from hetero_dse.hls.network_run import NAMES, arena_halves, tile_banks, write_process

__all__ = ["is_network_project", "lint_network"]



def is_network_project(project: Path) -> bool:
    try:
        return "network" in json.loads((Path(project) / "design.json").read_text())
    except (OSError, ValueError):
        return False


def lint_network(project: str | Path) -> LintReport:
    project = Path(project)
    try:
        record = json.loads((project / "design.json").read_text())
        design = record["design"]
    except (OSError, ValueError, KeyError):
        raise LintError(f"{project}/design.json is not a network design record written by hetero_dse") from None
    if any("w_span" in e for e in design.get("engines", [])):  # before the int8 engine transformed its weights
        raise LintError(f"{project} was written by an older hetero_dse (its Winograd weights transformed on the host, "
                        "16 bits each): write the project again to lint it")
    header = project / "src" / "kernel.h"
    if header.is_file() and "HDSE_IN_RUNS" not in header.read_text():  # before the C-simulation counted the runs
        raise LintError(f"{project} was written by an older hetero_dse (its C-simulation does not count the arena's "
                        "runs): write the project again to lint it")
    report = LintReport()
    try:
        _lint(project, record, design, report)
    except NotAffine as exc:  # a loop or index the generator writes with compile-time bounds, here not
        report.findings.append(Finding("form", "kernel.cpp", f"{exc}: not the bounds the generator writes, whose "
                                                             "trips the model charges"))
    return report


def _lint(project: Path, record: dict[str, Any], design: dict[str, Any], report: LintReport) -> None:
    source = (project / "src" / "kernel.cpp").read_text()
    header = (project / "src" / "kernel.h").read_text()
    k = parse_kernel(project / "src" / "kernel.cpp", project / "sim" / "include")

    def add(check: str, where: str, message: str) -> None:
        report.findings.append(Finding(check, where, message))

    word = constant(header, "V")
    for name, key in (("V", "word"), ("WV", "wword"), ("PV", "pword")):
        if constant(header, name) != design[key]:
            add("word", "kernel.h", f"{name}: a port's word holds {constant(header, name)} elements; the model moves "
                                    f"{design[key]}")
    a = ARITHMETIC[design["dtype"]]
    cores = {"mul": (a.mul_core[0], a.mul_core[1]), "add": (a.add_core[0], a.add_core[1])}
    engines = {}
    for e in design["engines"]:
        kind, name = e["kind"], NAMES[e["kind"]]
        lanes = list(e["lanes"].values())
        out_l, in_l = lanes[0], lanes[1] if len(lanes) > 1 else 1
        rows = e["buffer_rows"]
        engines[kind] = EngineShape(kind, out_l, in_l, design["word"], rows["input"], rows["weights"], rows["output"],
                                    e["accumulation_distance"], e.get("params", 1), e.get("packed", False),
                                    design["wword"], design["pword"], e.get("tile", 0), e.get("w_transform", False),
                                    e.get("pointwise", False), rows.get("tile", 0), e.get("weight_ports", 1),
                                    e.get("transform_cores") == "dsp", e.get("taps", 1), e.get("tap_rows", 1))
        if kind == "winograd":
            check_winograd(k, source, engines[kind], design["dtype"], e.get("storage", {}), cores, add, report)
            continue
        lanes_in = in_l if kind == "grid" else out_l
        want = {f"{name}_irow_t": lanes_in, f"{name}_wrow_t": out_l * engines[kind].lane_sums, f"{name}_orow_t": out_l}
        for row, width in want.items():
            got = vector_lanes(source, row)
            if got != width:
                add("buffer", row, f"a row of {got} lanes; the model's is {width}")
        for buf, depth in ((f"{name}_in_t", rows["input"]), (f"{name}_out_t", rows["output"])):
            got = typedef_rows(source, buf)
            if got != [depth]:
                add("buffer", buf, f"declared {got} rows; the model sizes it {depth}")
        banks = engines[kind].box_banks
        streams = {**({f"in_s{b}": "in" for b in range(banks)} if banks > 1 else {"in_s": "in"}), "out_s": "out"}
        report.pragmas_checked += check_streams(k, f"{name}_layer", e.get("storage", {}), add, streams,
                                                {"in": engines[kind].box_latency})
        if banks > 1:
            check_box_banks(source, name, banks, add)
        _check_compute(k, f"{name}_compute", out_l, engines[kind].lane_sums, e["accumulation_distance"], cores,
                       add, report, chain=engines[kind].chain, source=source)
        check_pipelined(k, f"{name}_read_in", "read_in", "word_in", word, add, report)
        check_pipelined(k, f"{name}_read_w", "read_w", "word_w", design["wword"], add, report, name="WV")
        check_weight_ports(source, f"{name}_read_w", engines[kind].w_ports, add)
    # each write process's loops at II 1 as the model charges (a word a cycle); one that gathers a word's rows from
    # banks reads each row from its own bank, into registers
    writers = sorted({(1, 1)} | {(e.out_banks, e.out_cols) for e in engines.values()})
    for banks, cols in writers:
        fn_name = write_process(banks, cols)
        text = function_text(source, fn_name)
        for loop in ("write", "write_res", "bias_in"):
            if not re.search(rf"\b{loop}: for \(.*\) {{\n\s*#pragma HLS PIPELINE II=1\n", text):
                add("ii", fn_name, f"its {loop} loop is not pipelined at II 1 as the model charges")
            report.pragmas_checked += 1
        if (banks, cols) != (1, 1):
            _check_gather(text, fn_name, banks, cols, add)
        # a word's lanes each take their channel's bias (and multiplier) in the cycle: V banks of them
        for array in ("tile_bias", "tile_mult") if "tile_mult" in text else ("tile_bias",):
            if f"#pragma HLS ARRAY_PARTITION variable={array} type=cyclic factor={word}\n" not in text:
                add("partition", fn_name, f"its {array} is not in {word} banks (cyclic): the epilogue reads a word's "
                                          f"{word} lanes of it a cycle")
    _check_block_depths(source, add)
    check_bursts(source, add)
    check_port_order(source, add)
    a_ports = design.get("arena_ports", 1)
    if a_ports > 1:
        check_halves(source, add)
    check_runs_in_flight(source, header, k.pragmas, [f"{NAMES[kind]}_read_in" for kind in engines],
                         [write_process(*b) for b in writers], add, a_ports)
    bundles = [p.get("bundle") for p in k.pragmas if p.name == "INTERFACE" and p.get("mode") == "m_axi"]
    if not any(p.name == "INTERFACE" and p.get("port") == "table" and p.get("max_widen_bitwidth") == "32"
               for p in k.pragmas):
        add("interface", "top", "the table's port may be widened past its 32-bit ints: its burst buffer would be "
                                "as wide as the port, where the model charges 32 bits")
    want_ports = len(kernel_ports(0, 0, 0, design.get("weight_ports", 1), a_ports))
    if len(bundles) != len(set(bundles)) or len(bundles) != want_ports:
        add("interface", "top", f"m_axi bundles {bundles}: one a port, {want_ports} ports")
    alias = [p for p in k.pragmas if p.name == "ALIAS"]
    if [sorted((p.get("ports") or "").split(",")) for p in alias] != [
            [f"act_in{h}", f"act_out{h}", f"act_res{h}"] for h in arena_halves(a_ports)]:
        add("interface", "top", f"the three activation ports share one buffer{' of each part' if a_ports > 1 else ''} "
                                "and no ALIAS pragma says so (C/RTL co-simulation would give each its own memory)")
    report.pragmas_checked += len(bundles)
    _check_table(project, record, design, engines, header, add)
    top = k.functions.get(record.get("top", ""))
    if top is None:
        add("interface", "top", f"no function {record.get('top')!r}, the top design.json names, in kernel.cpp")
    else:
        check_links(project, record, list(top.params), {p.get("port") for p in k.pragmas if p.name == "INTERFACE"
                                                         and p.get("mode") == "m_axi"}, add)


def _check_block_depths(source: str, add: Any) -> None:
    """Every stream of blocks two blocks deep, as the model charges its memory (two copies) and overlaps the
    processes on either side of it (one fills a block while the other drains the last)."""
    for depth in sorted(set(re.findall(r"stream_of_blocks<[^<>;(){}]*?,\s*(\d+)>", source)) - {"2"}):
        add("buffer", "streams", f"a stream of blocks {depth} deep; the model charges two blocks and overlaps the "
                                 "processes on either side of it")


def _check_gather(text: str, fn_name: str, banks: int, cols: int, add: Any) -> None:
    """A write process that gathers a word's rows from the output tile's ``banks`` banks of ``cols`` by pixel: each
    of its two loops reads row u from bank u (``cur[u]``; ``cur`` where one), every bank once, from each of its
    ``cols`` by name at the pixel's row, the one that holds the pixel picked by ``f % cols`` (two rows of one bank
    in an iteration would share its RAM's ports: no II 1; a bank picked through an array of them is one memory to
    Vitis), into ``cur`` partitioned completely where it holds several rows (else its rows are one RAM's)."""
    def pick(names: list[str]) -> str:
        if cols == 1:
            return f"obuf{names[0]}[f]"
        return " : ".join([f"f % {cols} == {c} ? obuf{x}[f / {cols}]" for c, x in enumerate(names[:-1])]
                          + [f"obuf{names[-1]}[f / {cols}]"])

    reads = sorted((int(u or 0), expr) for u, expr in re.findall(r"\bcur(?:\[(\d+)\])? = ([^;]*);", text))
    want = sorted([(u, pick(names)) for u, names in enumerate(tile_banks(banks, cols))] * 2)
    if reads != want:
        add("banks", fn_name, f"its loops read a word's rows as {reads}; the model reads each of a word's {banks} "
                              f"rows from its own bank, from the one of that bank's {cols} by pixel that holds the "
                              "pixel, a word a cycle")
    if banks > 1 and "#pragma HLS ARRAY_PARTITION variable=cur type=complete" not in text:
        add("partition", fn_name, f"its word's {banks} output rows (cur) are not partitioned completely: {banks} "
                                  "writes an iteration would share a RAM's two ports")


def _check_compute(k: CFile, fn_name: str, out_l: int, in_l: int, distance: int, cores: dict[str, tuple[str, str]],
                   add: Any, report: LintReport, chain: int = 1, source: str = "") -> None:
    """``chain`` > 1: packed int8, two output lanes a multiply (a DSP48E2 for two int8 products), so the lane loop
    steps by two; each ``chain`` loop sums ``chain`` input lanes in its ``mul`` loop, a multiply-add each with no
    core bound (a BIND_OP would stop Vitis matching the multiply and its add into one DSP), into a ``sum`` the
    chain starts afresh: only up to the model's chain does the low lane's sum stay inside its 18 bits."""
    packed = chain > 1
    fn = k.functions.get(fn_name)
    if not check_pe_loop(fn, fn_name, distance, cores, 2 if packed else 3 if in_l > 1 else 2, add, report):
        return
    lane, mul, chains = fn.loop("lane"), fn.loop("mul"), fn.loop("chain")
    want = out_l // 2 if packed else out_l
    if lane is None or lane.trip_count() != want or not lane.has("UNROLL"):
        add("lanes", fn_name, f"the lane loop runs {lane.trip_count() if lane else None} times; the model {want}"
                              + (" (two output lanes a multiply)" if packed else ""))
    runs = chains.trip_count() if packed and chains is not None and chains.has("UNROLL") else 1
    if packed and (mul is None or mul.trip_count() != chain or runs * chain != in_l or not mul.has("UNROLL")):
        add("lanes", fn_name, f"the chains sum {mul.trip_count() if mul else None} input lanes each, "
                              f"{runs} chains; the model's chain is {chain} of {in_l} lanes (more than 7 products "
                              "overflow the low lane's 18 bits)")
    elif not packed and in_l > 1 and (mul is None or mul.trip_count() != in_l or not mul.has("UNROLL")):
        add("lanes", fn_name, f"the mul loop runs {mul.trip_count() if mul else None} lanes; the model {in_l}")
    if packed and mul is not None and any(p.name == "BIND_OP" for p in mul.pragmas):
        add("bind_op", fn_name, "the chain's multiply-adds bind a core: that stops Vitis matching each multiply and "
                                "its add into one DSP48E2, which the model charges")
    if packed and not packed_split_ok(function_text(source, fn_name)):
        add("lanes", fn_name, "a packed chain's sum is not split as the signed correction needs: the low lane's 18 "
                              "bits sign-extended, the high lane's the rest plus the borrow a negative low took")
    if packed and not packed_chains(function_text(source, fn_name)):
        add("lanes", fn_name, "a chain's sum does not start afresh in the chain loop with its expression balancing "
                              f"off: it would run on over more than the model's {chain} products, past the low "
                              "lane's 18 bits, or Vitis would rebuild it as a tree of fabric adds")
    # multiply-adds an iteration, as the code's unrolled loops give them
    muls = (lane.trip_count() if lane else 0) * (runs * mul.trip_count() if in_l > 1 and mul else 1)
    report.mul_per_iteration += muls  # DSP multiplies: packed, each two products
    report.add_per_iteration += muls * (2 if packed else 1)  # a multiply-add each product (in a DSP or the fabric)


def _check_table(project: Path, record: dict[str, Any], design: dict[str, Any], engines: dict[str, EngineShape],
                 header: str, add: Any) -> None:
    from hetero_dse.hls.network_run import ENGINE_IDS, FIELDS

    by_id = {v: k for k, v in ENGINE_IDS.items()}
    try:
        words = constant(header, "DESCRIPTOR_WORDS")
        table = np.fromfile(project / "data" / "table.bin", dtype=np.int32).reshape(-1, words)
    except (OSError, ValueError, TypeError):
        add("table", "data/table.bin", "unreadable, or not whole descriptors")
        return
    tch = constant(header, "TCH_MAX") or 0
    depth = {p["name"]: p["depth"] for p in record.get("ports", [])}
    if len(table) != len(record["table"]):
        add("table", "data/table.bin", f"{len(table)} descriptors; design.json has {len(record['table'])}")
    for i, (row, want) in enumerate(zip(table, record["table"], strict=False)):
        d = dict(zip(FIELDS, (int(v) for v in row), strict=False))
        if d != want:
            add("table", f"layer {i}", "its descriptor differs from design.json's")
        kind = by_id.get(d["engine"])
        if kind not in engines:
            add("table", f"layer {i}", f"engine {d['engine']} is not in the kernel")
            continue
        e = engines[kind]
        grid = kind != "depthwise"
        lanes_c = e.in_lanes if grid else e.out_lanes
        taps = (d["R"], d["S"], d["stride"])
        side = 1 if taps == (1, 1, 1) else e.tile
        if kind == "winograd" and (d["th"] % side or d["tw"] % side or taps not in
                                   ((3, 3, 1), *([(1, 1, 1)] if e.pointwise else []))):
            add("table", f"layer {i}", f"tiles {d['th']} × {d['tw']} of a {d['R']}×{d['S']} stride-{d['stride']} "
                                       "layer: the Winograd engine runs 3×3 stride-1 layers in whole "
                                       f"{e.tile}×{e.tile} patches" + (" and 1×1 ones" if e.pointwise else ""))
        if (grid and d["tk"] % e.out_lanes) or d["tc"] % lanes_c:
            add("table", f"layer {i}", f"tiles {d['tk']} × {d['tc']} are not whole multiples of the lanes")
        elif (grid and d["tk"] % e.word) or d["tc"] % e.word:  # a run of a pixel's channels is whole words
            add("table", f"layer {i}", f"tiles {d['tk']} × {d['tc']} are not whole words of {e.word} channels")
        layer = NetLayer(kind, d["C"], d["K"], d["H"], d["W"], d["R"], d["S"], d["stride"], d["pad"])
        rows = network_trips(e, layer, Tiles(d["tk"], d["tc"], d["th"], d["tw"]))
        caps = [("in_rows", e.in_rows), ("w_rows", e.w_rows), ("out_rows", e.out_rows)]
        for key, cap in caps + ([("tile_rows", e.tile_rows)] if kind == "winograd" else []):
            if rows[key] > cap:
                add("table", f"layer {i}", f"its tiles fill {rows[key]} {key.replace('_', ' ')}; the buffer has {cap}")
        if (d["tk"] if grid else d["tc"]) > tch:
            add("table", f"layer {i}", f"its output tile of {d['tk']} channels passes the bias array's {tch}")
        _check_regions(i, d, kind, e, depth, add, rows["w_rows"])


def _check_regions(i: int, d: dict[str, int], kind: str, e: EngineShape, depth: dict[str, int], add: Any,
                   w_rows: int) -> None:
    """A descriptor's shape consistent, and its tensors where the kernel may read and write them: the output
    apart from the input and the residual (the read process would read what the write process overwrote on the
    device, whatever the C-simulation, which runs them one after the other, shows), and all within the arena;
    ``w_rows``: a step's weight rows (``network_trips``)."""
    if min(d["tk"], d["tc"], d["th"], d["tw"], d["stride"], d["R"], d["S"]) <= 0:
        add("table", f"layer {i}", "a tile, stride or kernel of zero or less")
        return
    oh = (d["H"] + 2 * d["pad"] - d["R"]) // d["stride"] + 1
    ow = (d["W"] + 2 * d["pad"] - d["S"]) // d["stride"] + 1
    if (d["OH"], d["OW"]) != (oh, ow):
        add("table", f"layer {i}", f"output {d['OH']} × {d['OW']}; its input, kernel, stride and padding give "
                                   f"{oh} × {ow}")
    if kind == "depthwise" and d["K"] != d["C"]:
        add("table", f"layer {i}", f"a depthwise layer of {d['C']} channels writing {d['K']}")
    if kind == "depthwise" and (d["S"] % e.taps or d["R"] % e.tap_rows):
        add("table", f"layer {i}", f"a {d['R']}×{d['S']} layer on a depthwise engine of {e.taps} taps of "
                                   f"{e.tap_rows} window row{'s' if e.tap_rows > 1 else ''} a cycle: its window's "
                                   "width and height must be whole passes of them")
    if d["C"] % e.word or d["K"] % e.word:
        add("table", f"layer {i}", f"{d['C']} or {d['K']} channels is not whole words of {e.word}")
    if d["C"] % d["tc"] or (kind != "depthwise" and d["K"] % d["tk"]):
        add("table", f"layer {i}", f"a channel tile ({d['tk']} × {d['tc']}) that does not divide its channels "
                                   f"({d['K']} × {d['C']}): its last tile would write into the next pixel's")
    # the weights and parameters it reads, within their buffers
    # a block of ``w_rows`` for each channel tile (and output-channel tile, but on the depthwise engine)
    n_c = -(-d["C"] // d["tc"])
    blocks, tch = (n_c, d["tc"]) if kind == "depthwise" else (-(-d["K"] // d["tk"]) * n_c, d["tk"])
    shape = NetLayer(kind, d["C"], d["K"], d["H"], d["W"], d["R"], d["S"], d["stride"], d["pad"])
    # each port's: a step's rows over the ports, padded to whole iterations (``EngineShape.step_reads``)
    w_words = blocks * e.step_reads(shape, w_rows)
    for port, start, words in (("wgt", d["w_off"], w_words),
                               ("params", d["bias_off"], -(-d["K"] // tch) * e.params * tch // e.p_word)):
        if start < 0 or (port in depth and start + words > depth[port]):
            add("table", f"layer {i}", f"its {port} [{start}, {start + words}) leave that buffer of "
                                       f"{depth.get(port)} words")
    # what the layer reads and writes of each tensor (rows a pitch of pixels apart): the input box's rows and
    # columns from the padding's halo to its last tile's end, the output's and residual's image
    n_y, n_x = -(-d["OH"] // d["th"]), -(-d["OW"] // d["tw"])
    last_y = (n_y * d["th"] - 1) * d["stride"] + d["R"] - 1 - d["pad"]
    last_x = (n_x * d["tw"] - 1) * d["stride"] + d["S"] - 1 - d["pad"]
    c_in, c_out = d["C"] // e.word, d["K"] // e.word
    regions = {"input": (d["in_off"] + (-d["pad"] * d["in_pitch"] - d["pad"]) * c_in,
                         ((last_y + d["pad"]) * d["in_pitch"] + last_x + d["pad"] + 1) * c_in),
               "output": (d["out_off"], ((d["OH"] - 1) * d["out_pitch"] + d["OW"]) * c_out)}
    if d["res_off"] >= 0:
        regions["residual"] = (d["res_off"], ((d["OH"] - 1) * d["res_pitch"] + d["OW"]) * c_out)
    if d["in_pitch"] < d["pad"] + max(d["W"], last_x + 1):
        add("table", f"layer {i}", f"its input's rows are {d['in_pitch']} pixels apart, fewer than the columns its "
                                   f"boxes read ({d['pad']} of halo to column {max(d['W'], last_x + 1) - 1})")
    arena = depth.get("act_in")
    for name, (start, words) in regions.items():
        if start < 0 or (arena is not None and start + words > arena):
            add("table", f"layer {i}", f"its {name} [{start}, {start + words}) leaves the arena of {arena} words")
    out0, out_words = regions["output"]
    for name in ("input", "residual"):
        if name in regions:
            start, words = regions[name]
            if start < out0 + out_words and out0 < start + words:
                add("table", f"layer {i}", f"its output overlaps its {name}: on the device the write process "
                                           f"overwrites what the {'read process' if name == 'input' else 'epilogue'}"
                                           " still reads")
