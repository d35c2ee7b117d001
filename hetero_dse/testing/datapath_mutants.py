"""Mutants that change the datapath of a generated kernel: its arithmetic, its banks and its DDR accesses.

An operator added (a product of three operands, the adder tree adding a product twice, the sum seeded
with 0 and added serially), an add turned into a subtract or an epilogue operand's add dropped, the
accumulation moved back into the PE function (a longer carried path), a bank chosen at run time, a DDR
read or write made conditional or strided, a port word of fewer lanes. Each still compiles, and each
changes what the design computes or what Vitis would build from it.
"""

from __future__ import annotations

import re

from hetero_dse.testing.mutant_source import FOR_LOOP, HEADER, Kind, SourceFile, kind_registry

__all__ = ["DATAPATH_KINDS"]

DATAPATH_KINDS: dict[str, Kind] = {}
_kind = kind_registry(DATAPATH_KINDS)


# ------------------------------------------------------------------------------------------ arithmetic
@_kind("extra_mul")
def _extra_mul(src: SourceFile):
    for i, line in enumerate(src.lines):
        m = re.search(r"\(\((pe_x0\[\w+\]) \* (pe_x1\[\w+\])\)\)", line)
        if m:
            yield i, "a product of three operands", src.with_lines(
                {i: line.replace(m.group(0), f"(({m.group(1)} * {m.group(2)} * {m.group(2)}))")})
        m = re.search(r"^(\s*)pe_prod\[pe_r\] = pe_m;$", line)
        if m:
            yield i, "a compound multiply (*=) after the product", src.with_lines(
                {i: f"{line}\n{m.group(1)}pe_prod[pe_r] *= pe_x0[pe_r];"})
        m = re.search(r"const (\w+) (hdse_t\d+) = (.+) \+ (.+);$", line)
        if m:
            yield i, f"{m.group(2)} scaled by its operand", src.with_lines(
                {i: line.replace(f"= {m.group(3)} + {m.group(4)};", f"= {m.group(3)} + {m.group(4)} * {m.group(4)};")})


@_kind("extra_add")
def _extra_add(src: SourceFile):
    for i, line in enumerate(src.lines):
        m = re.search(r"const acc_t pe_pair = (pe_prod\[pe_q\]) \+ (pe_prod\[pe_q \+ pe_s\]);", line)
        if m:
            yield i, "the tree adds one product twice", src.with_lines(
                {i: line.replace(m.group(0), f"const acc_t pe_pair = {m.group(1)} + {m.group(2)} + {m.group(1)};")})
        m = re.search(r"const acc_t pe_acc = (.+) \+ pe_sum;", line)
        if m:
            yield i, "the accumulation subtracts and adds again", src.with_lines(
                {i: line.replace("+ pe_sum;", "+ pe_sum - pe_sum + pe_sum;")})


@_kind("sum_seeded")
def _sum_seeded(src: SourceFile):
    """The tree's sum seeded with 0 (``s = 0; s += p``): one more adder a lane and a serial chain."""
    for i, line in enumerate(src.lines):
        if "tree_level: for" in line:
            end = _block_end(src.lines, i)
            indent = line[: len(line) - len(line.lstrip())]
            reduce = re.search(r"pe_s < (\d+)", line).group(1)
            new = [f"{indent}acc_t pe_serial = 0;",
                   f"{indent}serial: for (int pe_q = 0; pe_q < {reduce}; ++pe_q) {{",
                   f"{indent}  #pragma HLS UNROLL",
                   f"{indent}  pe_serial += pe_prod[pe_q];",
                   f"{indent}}}",
                   f"{indent}pe_prod[0] = pe_serial;"]
            replaced = {j: None for j in range(i, end + 1)}
            replaced[i] = "\n".join(new)
            yield i, "the adder tree replaced by s = 0; s += p", src.with_lines(replaced)


@_kind("op_swapped")
def _op_swapped(src: SourceFile):
    for i, line in enumerate(src.lines):
        m = re.search(r"const \w+ (pe_acc|pe_pair|hdse_t\d+) = .* \+ ", line)
        if m:
            yield i, f"{m.group(1)}: an add turned into a subtract", src.with_lines({i: line.replace(" + ", " - ", 1)})


@_kind("residual_dropped")
def _residual_dropped(src: SourceFile):
    for i, line in enumerate(src.lines):
        m = re.search(r"const (\w+) (hdse_t\d+) = (hdse_\w+) \+ \(\(\w+\)hdse_e\d+\[hdse_l\]\);", line)
        if m:
            yield i, f"{m.group(2)}: the operand's add dropped", src.with_lines(
                {i: line.replace(m.group(0), f"const {m.group(1)} {m.group(2)} = {m.group(3)};")})


@_kind("accumulate_in_pe")
def _accumulate_in_pe(src: SourceFile):
    """The old sum passed into the PE function (not inlined), which adds it after its products: the carried
    path is then the PE's whole pipeline (the first template's defect)."""
    text = "\n".join(src.lines) + "\n"
    call = re.search(r"const acc_t pe_sum = pe\(([^;]*)\);\n(\s*)const acc_t pe_acc = (obuf[^ ]+) \+ pe_sum;\n"
                     r"\s*#pragma HLS BIND_OP variable=pe_acc op=(\w+) impl=(\w+)\n"
                     r"\s*(obuf[^ ]+) = pe_init \? pe_sum : pe_acc;", text)
    ret = re.search(r"(\n\s*)return pe_prod\[0\];", text)
    sig = re.search(r"static acc_t pe\(([^)]*)\)", text)
    carried = "#pragma HLS DEPENDENCE" in text  # else the sum goes on across tiles only: no carried path
    if call and ret and sig and carried:
        at = text[: call.start()].count("\n")
        ind = ret.group(1)
        text = text.replace(ret.group(0), f"{ind}const acc_t pe_acc = pe_old + pe_prod[0];{ind}#pragma HLS BIND_OP "
                                          f"variable=pe_acc op={call.group(4)} impl={call.group(5)}"
                                          f"{ind}return pe_init ? pe_prod[0] : pe_acc;")
        text = text.replace(sig.group(0), f"static acc_t pe({sig.group(1)}, acc_t pe_old, bool pe_init)")
        text = text.replace(call.group(0), f"{call.group(6)} = pe({call.group(1)}, {call.group(3)}, pe_init);")
        yield at, "the accumulation moved into the PE function", text


@_kind("bank_at_run_time")
def _bank_at_run_time(src: SourceFile):
    for i, line in enumerate(src.lines):
        m = re.search(r"const int (\w+) = (\w+)_o \* (\d+) \+ \2_u;", line)
        if m:
            trips = _trips_of(src, m.group(2) + "_o")
            yield i, f"{m.group(1)}: lane and pipeline index swapped", src.with_lines(
                {i: line.replace(m.group(0), f"const int {m.group(1)} = {m.group(2)}_u * {trips} + {m.group(2)}_o;")})
        # a set of banks' copy indexing the run's dimension as the word does: the same element (the copy is
        # enabled only for its set), but its bank is then chosen at run time, for every copy of every lane
        m = re.search(r"\(hdse_j / (\d+)\) \* \d+ \+ hdse_t \* (\d+) \+ (x\d+i)", line)
        if m:
            yield i, f"{m.group(3)}: a set's bank chosen at run time", src.with_lines(
                {i: line.replace(m.group(0), f"hdse_j * {m.group(2)} + {m.group(3)}")})


def _trips_of(src: SourceFile, var: str) -> int:
    for line in src.lines:
        m = FOR_LOOP.search(line)
        if m and m.group("var") == var:
            return int(m.group("bound"))
    return 1


def _block_end(lines: list[str], start: int) -> int:
    """The line where the block opened on line ``start`` closes."""
    depth = 0
    for j in range(start, len(lines)):
        depth += lines[j].count("{") - lines[j].count("}")
        if depth <= 0:
            return j
    return len(lines) - 1


# ------------------------------------------------------------------------------------------- DDR ports
@_kind("ddr_conditional")
def _ddr_conditional(src: SourceFile):
    for i, line in enumerate(src.lines):
        m = re.search(r"const (\w+_word_t) (hdse_cur|hdse_e\d+) = (\w+)\[(.+)\];$", line)
        if m:
            yield i, f"the read of {m.group(3)} guarded", src.with_lines(
                {i: line.replace(m.group(0), f"const {m.group(1)} {m.group(2)} = ({m.group(4)}) >= 0 ? {m.group(3)}"
                                             f"[{m.group(4)}] : {m.group(1)}(0);")})
        m = re.search(r"^(\s*)(\w+)\[hdse_o\] = hdse_w;$", line)
        if m:
            yield i, f"the write of {m.group(2)} guarded", src.with_lines(
                {i: f"{m.group(1)}if (hdse_o >= 0) {m.group(2)}[hdse_o] = hdse_w;"})


@_kind("ddr_strided")
def _ddr_strided(src: SourceFile):
    for i, line in enumerate(src.lines):
        m = re.search(r"= (\w+)\[(.*) \+ hdse_(k|j)\];$", line)
        if m and "_word_t hdse_cur" in line:
            yield i, f"{m.group(1)} read every other word", src.with_lines(
                {i: line.replace(f"+ hdse_{m.group(3)}];", f"+ 2 * hdse_{m.group(3)}];")})


@_kind("port_width")
def _port_width(src: SourceFile):
    if src.file != HEADER:
        return
    for i, line in enumerate(src.lines):
        m = re.match(r"typedef hls::vector<(\w+), (\d+)> (\w+);", line)
        if m and int(m.group(2)) >= 2:
            n = int(m.group(2))
            yield i, f"{m.group(3)} {n} -> {n // 2} lanes", src.with_lines({i: line.replace(f", {n}>", f", {n // 2}>")})
