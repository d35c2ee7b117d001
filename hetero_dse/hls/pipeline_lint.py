"""The lint of a layer-pipelined project (``pipeline_project``): its code held to its design.json, so that the
lanes, FIFOs and accumulation the model charges are the ones the code builds. The C-simulation checks the trip
counts (``check_pipeline_trips``); this checks what a C-simulation cannot see:

- ``dataflow``: each kernel is one DATAFLOW region (else the stages run one after the other);
- ``fifo``: every FIFO has the depth the design gives it (a residual's holds the pixels its block keeps back;
  too shallow and the pipeline deadlocks on the device, which no C-simulation shows), the width and the memory
  the model charges, and no other is declared;
- ``lanes``: each stage's weight rows and window words are as wide as its lanes;
- ``storage``: each stage's weights are one RAM, a row one word, and its line buffer one RAM, in the memories
  the model charges;
- ``burst``: a stage that reads its weights from DDR each image addresses them as the loop's index plus a
  constant, so Vitis forms a burst;
- ``regroup``: each regroup the model charges (between words of other lanes) is a process of the code with its
  lanes and trips, and there is no other;
- ``kernels`` (a pipeline cut into kernels, one an SLR): each kernel runs the model's stages, its streams to and
  from its neighbours are AXI4-Stream ports as wide as the model's crossings, registered at both ends, named as no
  HDL word is, and ``connectivity.cfg`` joins them in order and keeps each to the model's SLR;
- ``dependence``: each PE array's partial sums rotate over the accumulation distance the pragma declares;
- ``pool``: a max pool's stage has no weights and no multiply, and its window pads with the lowest value;
- ``lanes``/``bind_op`` (int8): each packed stage sums its input lanes in chains of the model's length, each
  started afresh, its multiply-adds bound to no core (a BIND_OP stops Vitis matching each into one DSP);
- ``accumulate``: each partial sum starts at zero on its fold's first trip and adds zero on an idle one, in the
  rotation the model's distance gives (a bias of one in an int32 sum survives the requantising shift: the
  mutation test found five such that every image passed);
- ``clamp``: each stage's epilogue clamps once, to the bounds design.json gives it (int8: the requantised range,
  within the type's), each bound the value it compares against: data that never reach a bound cannot show a wrong
  one (``bench/pipeline_mutants.py`` found an int8 saturation to 1 that every image passed).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from cost_models.fpga_costs import packed_chain
from hetero_dse.hls.lint.record import LintError, LintReport
from hetero_dse.hls.network_lint_parts import function_text, packed_chains, packed_split_ok
from hetero_dse.hls.pipeline_weights import lowest

__all__ = ["HDL_WORDS", "is_pipeline_project", "lint_pipeline"]

#: words of VHDL and Verilog a port may not be named (HLS renames such a port in the RTL, adding ``_r``)
HDL_WORDS = frozenset({"in", "out", "inout", "input", "output", "begin", "end", "signal", "reg", "wire", "port",
                       "entity", "process", "buffer", "register", "module", "type", "range", "loop", "case"})


def is_pipeline_project(project: Path) -> bool:
    try:
        return json.loads((Path(project) / "design.json").read_text()).get("architecture") == "pipeline"
    except (OSError, ValueError, AttributeError):
        return False


def lint_pipeline(project: str | Path) -> LintReport:
    project = Path(project)
    try:
        record = json.loads((project / "design.json").read_text())
        stages, fifos = record["design"]["per_stage"], record["fifos"]
        clamps = ({int(c["stage"]): {"lo": str(c["lo"]), "hi": str(c["hi"])} for c in record["clamps"]}
                  if "clamps" in record else None)  # (a project written before design.json gave them: unchecked)
        source = (project / "src" / "kernel.cpp").read_text()
        header = (project / "src" / "kernel.h").read_text()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LintError(f"{project} is not a pipeline project written by hetero_dse ({exc})") from None
    report = LintReport()
    kernels = record["design"].get("kernels") or []
    names = [f"{record['top']}_{k}" for k in range(len(kernels))] if kernels else [record["top"]]
    tops = {name: _kernel_text(source, name) for name in names}
    top = "".join(tops.values())
    for name, text in tops.items():
        if "#pragma HLS DATAFLOW" not in text:
            report.add("dataflow", "kernel.cpp", f"{name} is not a DATAFLOW region: its stages would run one "
                                                 "after the other, not at the rate the model gives")
    packed = record.get("dtype", record.get("design", {}).get("dtype")) == "int8"
    widths = _widths(source + header)
    if kernels:
        _check_kernels(project, tops, kernels, widths, 8 if packed else 32, report)
    _check_fifos(widths, top, fifos, 8 if packed else 32, report)
    _check_regroups(source, widths, record["design"].get("regroups", []), report)
    for i, s in enumerate(stages):
        p, q = s["in_lanes"], s["out_lanes"]
        if s["engine"] == "maxpool":
            _check_pool(source, i, s, packed, report)
            continue
        m = re.search(rf"static data_t W{i}\[(\d+)\]\[(\d+)\]", source)
        if s["weights"] == "ddr":  # read from DDR each image: its rows' type, no RAM
            m = re.search(rf"typedef hls::vector<data_t, (\d+)()> s{i}_wrow_t;", source)
        if m is None or int(m.group(2) or m.group(1)) != p * q:
            report.add("lanes", "kernel.cpp", f"stage {i}: its weight rows hold {m and m.group(2)} weights, its "
                                             f"{p} × {q} lanes take {p * q}")
        win = re.search(rf"typedef hls::vector<data_t, (\d+)> s{i}_win_t;", source)
        want = p if s["engine"] == "grid" else p * q
        if s["engine"] != "grid" and p != 1:  # the line buffer's one read port: a tap a trip
            report.add("lanes", "kernel.cpp", f"stage {i}: a depthwise window of {p} taps a trip, the line buffer "
                                              "reads one")
        if win is None or int(win.group(1)) != want:
            report.add("lanes", "kernel.cpp", f"stage {i}: its window words hold {win and win.group(1)} elements, "
                                              f"its lanes take {want}")
        window = function_text(source, f"s{i}_window")
        line = re.search(r"BIND_STORAGE variable=lb type=ram_s2p impl=(\w+)", window)
        if (line.group(1) if line else "registers") != s["line"]:
            report.add("storage", "kernel.cpp", f"stage {i}: its line buffer is bound to "
                                                f"{line.group(1) if line else 'no memory'}, the model keeps it in "
                                                f"{s['line']}")
        body = function_text(source, f"s{i}_mac")
        bound = re.search(rf"BIND_STORAGE variable=W{i} type=ram_1p impl=(\w+)", body)
        if s["weights"] == "ddr":
            _check_streamed(source, next((t for t in tops.values() if f"s{i}_mac(" in t), top), i, body, report)
        elif (bound.group(1) if bound else "registers") != s["weights"] or \
                f"ARRAY_RESHAPE variable=W{i} type=complete dim=2" not in body:
            report.add("storage", "kernel.cpp", f"stage {i}: its weights are bound to "
                                                f"{bound.group(1) if bound else 'no memory'} (a row one word: "
                                                f"{'ARRAY_RESHAPE' in body}), the model keeps them in "
                                                f"{s['weights']}, a row one word")
        pairs = packed and s["engine"] == "grid" and q % 2 == 0  # two output lanes a DSP48E2
        if pairs:
            _check_chain(body, i, p, report)
        _check_accumulate(body, i, s["distance"], 2 if pairs else 1, report)
        if clamps is not None:
            _check_clamp(body, i, clamps.get(i), packed, report)
        dep = re.search(r"DEPENDENCE variable=acc .*distance=(\d+)", body)
        rot = re.search(r"acc\[t % (\d+)\]", body)
        if dep is None or rot is None or int(dep.group(1)) != int(rot.group(1)) or int(dep.group(1)) != s[
                "distance"]:
            report.add("dependence", "kernel.cpp", f"stage {i}: the partial sums rotate over "
                                                   f"{rot and rot.group(1)}, the pragma declares "
                                                   f"{dep and dep.group(1)}, the model's distance is {s['distance']}")
    # the pragmas held to design.json: DATAFLOW, each FIFO's depth and BIND_STORAGE, each stage's two
    # BIND_STORAGE, its ARRAY_RESHAPE and its DEPENDENCE
    # and each kernel's two INTERFACE axis where the pipeline is cut into kernels
    report.pragmas_checked = len(tops) + 2 * len(fifos) + 4 * len(stages) + 2 * (len(kernels) - 1)
    return report


def _check_accumulate(body: str, i: int, distance: int, sums: int, report: LintReport) -> None:
    """The PE array's ``sums`` accumulations (a packed DSP's two lanes, else one), each
    ``acc[t % D][l] = (t < D ? 0 : acc[t % D][l]) + (live ? sum : 0)`` for the model's distance ``D``."""
    writes = re.compile(r"\s*(?:acc\[[^=;]*\]\s*(?:<<|>>|[-+*/%&|^])?=[^=]|(?:\+\+|--)\s*acc\[|"
                        r"acc\[[^;]*\]\s*(?:\+\+|--))")  # every statement that writes a partial sum
    lines = [v.strip() for v in body.splitlines() if writes.match(v)]
    for line in lines:
        m = re.match(r"acc\[t % \d+\]\[([^\]]+)\] = .*\(live \? (\w+) : ", line)
        d = distance
        if m is None or line != (f"acc[t % {d}][{m[1]}] = (t < {d} ? (acc_t)0 : acc[t % {d}][{m[1]}]) + "
                                 f"(live ? {m[2]} : (acc_t)0);"):
            report.add("accumulate", "kernel.cpp", f"stage {i}: `{line}` is not a partial sum started at zero on "
                                                   f"its fold's first trip, adding zero on an idle one, rotating "
                                                   f"over the model's distance {d}")
    if len(lines) != sums:
        report.add("accumulate", "kernel.cpp", f"stage {i}: its PE array accumulates {len(lines)} partial sums a "
                                               f"trip, the model's {sums}")


#: an epilogue's clamp as the code writes it: ``x = x < lo ? lo : (x > hi ? hi : x);`` (a float's bounds cast)
_CLAMP = re.compile(r"\b(\w) = \1 < ([^?]+?) \? ([^:]+?) : \(\1 > ([^?]+?) \? ([^:]+?) : \1\);")


def _check_clamp(body: str, i: int, want: dict | None, integer: bool, report: LintReport) -> None:
    """The stage's epilogue clamps once, each bound compared against the value it gives, to design.json's bounds
    (``clamps``; int8 within the type's range)."""
    found = _CLAMP.findall(body)
    if want is None or len(found) != 1:
        report.add("clamp", "kernel.cpp", f"stage {i}: its epilogue clamps {len(found)} times"
                   + (", and design.json gives no bounds for it" if want is None else ", not once"))
        return
    _, lo_cmp, lo, hi_cmp, hi = (v.strip() for v in found[0])
    cast = "" if integer else "(acc_t)"
    bounds = (f"{cast}{want['lo']}", f"{cast}{want['hi']}")
    if (lo_cmp, lo, hi_cmp, hi) != (bounds[0], bounds[0], bounds[1], bounds[1]):
        report.add("clamp", "kernel.cpp", f"stage {i}: its epilogue compares against {lo_cmp} and {hi_cmp} and "
                                          f"clamps to {lo} and {hi}; design.json's bounds are {want['lo']} and "
                                          f"{want['hi']}")
    elif integer and not (want["lo"].lstrip("-").isdigit() and want["hi"].lstrip("-").isdigit()
                          and -128 <= int(want["lo"]) <= int(want["hi"]) <= 127):
        report.add("clamp", "kernel.cpp", f"stage {i}: its int8 outputs are clamped to [{want['lo']}, {want['hi']}], "
                                          "past the type's [-128, 127]")


def _check_pool(source: str, i: int, s: dict, integer: bool, report: LintReport) -> None:
    """A max pool's stage (``fpga_pipeline_pool``): no weights, a compare and select a lane (no multiply, which
    the model does not charge it), its window padded with the lowest value (a zero would be the maximum of a
    window of negatives over the padding), its window words a tap of its lanes, and its partial maxima
    rotating over the model's distance."""
    body = function_text(source, f"s{i}_pool")
    if not body:
        report.add("pool", "kernel.cpp", f"stage {i} is a max pool, but the code has no s{i}_pool process")
        return
    if re.search(rf"\bW{i}\b|s{i}_wrow_t|s{i}_wload", source):
        report.add("pool", "kernel.cpp", f"stage {i}: a max pool has no weights, but the code declares or reads some")
    if re.search(r"[\w\]\)]\s*\*\s*[\w(]", re.sub(r"\(long\)frames \* \d+", "", body)):  # but its trip count
        report.add("pool", "kernel.cpp", f"stage {i}: its running maximum multiplies, which the model does not charge "
                                         "(a compare and select a lane)")
    least = lowest(integer)
    pad = re.search(rf"const s{i}_in_t zero = ([^;]+);", function_text(source, f"s{i}_window"))
    if pad is None or pad.group(1).strip() != least:
        report.add("pool", "kernel.cpp", f"stage {i}: its window pads with {pad and pad.group(1)}, not the lowest "
                                         f"value {least}: a window over the padding of negative pixels would take "
                                         "the pad for its maximum")
    win = re.search(rf"typedef hls::vector<data_t, (\d+)> s{i}_win_t;", source)
    if s["in_lanes"] != 1 or win is None or int(win.group(1)) != s["out_lanes"]:
        report.add("lanes", "kernel.cpp", f"stage {i}: its window words hold {win and win.group(1)} elements, its "
                                          f"{s['in_lanes']} × {s['out_lanes']} lanes take a tap of {s['out_lanes']}")
    dep = re.search(r"DEPENDENCE variable=acc .*distance=(\d+)", body)
    rot = re.search(r"acc\[t % (\d+)\]", body)
    if dep is None or rot is None or int(dep.group(1)) != int(rot.group(1)) or int(dep.group(1)) != s["distance"]:
        report.add("dependence", "kernel.cpp", f"stage {i}: the partial maxima rotate over {rot and rot.group(1)}, "
                                               f"the pragma declares {dep and dep.group(1)}, the model's distance is "
                                               f"{s['distance']}")


def _kernel_text(source: str, name: str) -> str:
    """The text of the kernel ``name`` (``extern "C" void name(``, to its closing brace at column 0)."""
    start = source.find(f'extern "C" void {name}(')
    return source[start:source.find("\n}\n", start)] if start >= 0 else ""


def _check_kernels(project: Path, tops: dict[str, str], kernels: list[dict], widths: dict[str, int],
                   elem_bits: int, report: LintReport) -> None:
    """A pipeline cut into kernels, one an SLR (``fpga_pipeline_slrs``): each kernel runs the model's stages, reads
    the stream from the kernel before and writes the one to the next (AXI4-Stream, as wide as the model's
    crossing) where it has one, and ``connectivity.cfg`` joins them in order and keeps each to the model's SLR."""
    names = list(tops)
    for name, text in tops.items():  # a port named as an HDL word is renamed in the RTL: stream_connect misses it
        args = re.findall(r"&(\w+)\s*[,)]", text[:text.find("{")])
        for arg in set(args) & HDL_WORDS:
            report.add("kernels", "kernel.cpp", f"{name}: its port {arg} is a VHDL or Verilog word, which HLS renames "
                                                f"({arg}_r): connectivity.cfg's stream_connect would name no port")
    for k, (name, text) in enumerate(tops.items()):
        want, first, last = kernels[k], kernels[k]["first"], kernels[k]["last"]
        ran = sorted(int(i) for i in re.findall(r"^\s*HDSE_PROCESS\(s(\d+)_(?:mac|pool)\(", text, re.M))
        if ran != list(range(first, last + 1)):
            report.add("kernels", "kernel.cpp", f"{name} runs stages {ran}, the model's {first}–{last}")
        for port, wanted in (("stream_in", k > 0), ("stream_out", k < len(kernels) - 1)):
            # registered at both ends (each end in its own SLR: the crossing register to register)
            axis = f"#pragma HLS INTERFACE axis port={port} register_mode=both" in text
            kind = re.search(rf"hls::stream<(\w+)> &{port}\b", text)
            bits = widths.get(kind.group(1), 0) * elem_bits if kind else 0
            need = want["crossing_bits"] if port == "stream_in" else kernels[k + 1]["crossing_bits"] if wanted else 0
            if axis != wanted or bits != need:
                report.add("kernels", "kernel.cpp", f"{name}: its {port} is {bits} bits an AXI4-Stream word "
                                                    f"(registered at both ends: {axis}), the model's {need}")
    try:
        links = (project / "connectivity.cfg").read_text()
    except OSError:
        return  # a board without a platform: no link
    joined = re.findall(r"^stream_connect=(\w+)_1\.stream_out:(\w+)_1\.stream_in$", links, re.M)
    chain = list(zip(names, names[1:], strict=False))
    if joined != chain:
        report.add("kernels", "connectivity.cfg", f"the streams join {joined}, the model's kernels in order are "
                                                  f"{chain}")
    placed = dict(re.findall(r"^slr=(\w+)_1:SLR(\d+)$", links, re.M))
    for name, k in zip(names, kernels, strict=True):
        if placed.get(name) != str(k["slr"]):
            report.add("kernels", "connectivity.cfg", f"{name} is kept to SLR{placed.get(name)}, the model's "
                                                      f"SLR{k['slr']}")


def _check_streamed(source: str, top: str, i: int, body: str, report: LintReport) -> None:
    """Stage ``i`` reads its weights from DDR each image, as the model charges: no RAM of them in its PE array, a
    reader process on an m_axi port of its own feeding its rows, its address the loop's index plus a constant
    (a burst; UG1399)."""
    port = re.search(rf"#pragma HLS INTERFACE m_axi port=w{i} offset=slave bundle=(\w+)", top)
    others = re.findall(r"#pragma HLS INTERFACE m_axi port=\w+ offset=slave bundle=(\w+)", top)
    reader = re.search(rf"HDSE_PROCESS\(s{i}_wstream\(w{i}, s{i}_wload, frames\)\);", top)
    if f"static data_t W{i}[" in body or port is None or others.count(port.group(1)) != 1 or reader is None or \
            f"static void s{i}_wstream(" not in source:
        report.add("storage", "kernel.cpp", f"stage {i}: the model reads its weights from DDR each image on a port "
                                            "of its own, through its reader; the code does not")
    elif not re.search(r"const wgt_word_t v = weights\[\d+ \+ i\];", function_text(source, f"s{i}_wstream")):
        report.add("burst", "kernel.cpp", f"stage {i}: its reader's address is not the loop's index plus a "
                                          "constant, so Vitis infers no burst and reads a beat at a time (the model "
                                          "charges a word a cycle)")


def _check_regroups(code: str, widths: dict[str, int], groups: list[dict], report: LintReport) -> None:
    """Each regroup the model charges is a process of the code, reading words of its input lanes and writing
    words of its output lanes, its loop the model's trips; the code has no other."""
    found = {m.group(1): m for m in re.finditer(
        r"static void regroup_(\w+)\(hls::stream<(\w+)> &in, hls::stream<(\w+)> &out, int frames\) \{"
        r"(?:(?!\nstatic void ).)*?it < \(long\)frames \* (\d+);", code, re.S)}
    for g in groups:
        m = found.pop(g["consumer"], None)
        got = m and (widths.get(m.group(2)), widths.get(m.group(3)), int(m.group(4)))
        if got != (g["in_lanes"], g["out_lanes"], g["trips"]):
            report.add("regroup", "kernel.cpp", f"the regroup for {g['consumer']}: {got and got[:2]} lanes in and out "
                                                f"over {got and got[2]} trips a frame in the code, the model's "
                                                f"{g['in_lanes']} and {g['out_lanes']} over {g['trips']}")
    for name in found:
        report.add("regroup", "kernel.cpp", f"the regroup for {name} is not in the design")


def _widths(code: str) -> dict[str, int]:
    """Each element type's values: a struct's array, an ``hls::vector``'s length (a named constant resolved)."""
    widths = {m.group(1): int(m.group(2)) for m in re.finditer(r"struct (\w+) \{ data_t c\[(\d+)\]; \};", code)}
    consts = {m.group(1): m.group(2) for m in re.finditer(r"\b([A-Z_]+) = (\d+)\b", code)}
    widths.update({m.group(2): int(consts.get(m.group(1), m.group(1))) for m in re.finditer(
        r"typedef hls::vector<data_t, (\w+)> (\w+);", code)})
    return widths


def _check_fifos(widths: dict[str, int], top: str, fifos: list[dict], elem_bits: int, report: LintReport) -> None:
    """Each FIFO the top function declares is one of the design's, as deep (its pragma's depth and its type's,
    which the C-simulation bounds it by, ``csim --dataflow``), as wide (its element type's values) and bound to the
    memory the model charges (a FIFO left to Vitis past 2 words or 1,024 bits goes to memory)."""
    declared = {m.group(3): (m.group(1), int(m.group(2) or 0)) for m in re.finditer(
        r"^\s*hls::stream<(\w+)(?:, (\d+))?> (\w+);", top, re.M)}
    types = {name: kind for name, (kind, _) in declared.items()}
    depths = {m.group(1): int(m.group(2)) for m in re.finditer(r"#pragma HLS STREAM variable=(\w+) depth=(\d+)",
                                                                top)}
    bound = {m.group(1): m.group(2) for m in re.finditer(
        r"#pragma HLS BIND_STORAGE variable=(\w+) type=fifo impl=(\w+)", top)}
    for f in fifos:
        name = f["stream"]
        typed = declared.get(name, (None, None))[1]
        if depths.get(name) != f["depth"] or typed != f["depth"]:
            report.add("fifo", "kernel.cpp", f"FIFO {name}: depth {depths.get(name)} by its pragma and {typed} by its "
                                             f"type in the code, {f['depth']} in the design")
        if "bits" in f:
            bits = widths.get(types.get(name, ""), 0) * elem_bits
            if bits != f["bits"]:
                report.add("fifo", "kernel.cpp", f"FIFO {name}: {bits}-bit words in the code, {f['bits']} in the "
                                                 "design (the model charges its words)")
            if bound.get(name) != f["memory"]:
                got = bound.get(name) or "no memory (left to Vitis)"
                report.add("fifo", "kernel.cpp", f"FIFO {name}: bound to {got}, the model keeps it in {f['memory']}")
    for name in set(types) - {f["stream"] for f in fifos}:
        report.add("fifo", "kernel.cpp", f"FIFO {name} is not in the design")


def _check_chain(body: str, i: int, p: int, report: LintReport) -> None:
    """A packed int8 stage sums its input lanes in chains of the model's length (``packed_chain``), each chain's
    sum started afresh (longer runs pass the low lane's 18 bits), its multiply-adds bound to no core where they
    chain (a BIND_OP stops Vitis matching each into one DSP)."""
    chain = packed_chain(p)
    m = packed_chains(body)
    if m is None or not m["chains"].isdigit() or int(m["chain"]) != chain or int(m["chains"]) * chain != p:
        report.add("lanes", "kernel.cpp", f"stage {i}: its packed products are not summed in chains of "
                                          f"{chain}, each started afresh with its expression balancing off, over "
                                          f"its {p} input lanes (the model's)")
    elif not packed_split_ok(body):
        report.add("lanes", "kernel.cpp", f"stage {i}: a packed chain's sum is not split as the signed correction "
                                          "needs: the low lane's 18 bits sign-extended, the high lane's the rest "
                                          "plus the borrow a negative low took")
    elif chain > 1 and "BIND_OP" in m["body"]:
        report.add("bind_op", "kernel.cpp", f"stage {i}: the chain's multiply-adds bind a core, which stops Vitis "
                                            "matching each into one DSP48E2 (the model charges one)")
