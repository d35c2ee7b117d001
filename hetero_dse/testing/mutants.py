"""Defects put into a generated HLS project on purpose, one at a time, to test the checks that should catch
them (the HLS lint, the stand-in synthesis, validation).

Each *kind* is a defect an engineer or a drifting template could put into ``src/kernel.cpp`` or
``src/kernel.h`` while ``design.json`` stays as it was: a pragma removed or weakened (a partial UNROLL, a
partition of fewer banks, a PIPELINE dropped or at a higher II, a DEPENDENCE gone or with a longer
distance, an operator bound to another core, a memory of another kind, the PE inlined), a loop that runs
fewer times, an operator added, the accumulation moved back into the PE, a bank chosen at run time, a DDR
access made conditional or strided, a port word of another width. Every mutant still compiles, and every
one changes what Vitis would build or what the design computes: kinds that would be equivalent (an UNROLL
removed inside a pipeline, which Vitis unrolls anyway; a BIND_OP removed where Vitis's default is the same
core; a DEPENDENCE distance shortened where the II does not change) are not generated.

``mutants(project)`` lists every mutant of every kind at every site; :func:`apply` writes one into a copy.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from math import ceil
from pathlib import Path
from typing import Any

__all__ = ["KINDS", "Mutant", "apply", "mutants"]

KERNEL, HEADER, CONFIG = "src/kernel.cpp", "src/kernel.h", "hls_config.tcl"


@dataclass(frozen=True)
class Mutant:
    kind: str
    file: str  # relative to the project
    line: int  # 1-based, in the file as generated
    description: str
    text: str  # the whole mutated file

    def __str__(self) -> str:
        return f"{self.kind} ({self.file}:{self.line}): {self.description}"


@dataclass
class _Source:
    lines: list[str]
    record: dict[str, Any]
    file: str = KERNEL

    def with_lines(self, replaced: dict[int, str | None], inserted: dict[int, list[str]] | None = None) -> str:
        """The file with line ``i`` (0-based) replaced (None: removed) and lines inserted after others."""
        out = []
        for i, line in enumerate(self.lines):
            new = replaced.get(i, line)
            if new is not None:
                out.append(new)
            out.extend((inserted or {}).get(i, []))
        return "\n".join(out) + "\n"

    def loop_of(self, i: int) -> tuple[int, str, int] | None:
        """The ``for`` header the pragma on line ``i`` belongs to: (line, variable, literal bound)."""
        for j in range(i - 1, -1, -1):
            if "for (" in self.lines[j]:
                m = _FOR.search(self.lines[j])
                if m is None:  # a loop of another form (the adder tree's levels): its trips are not read here
                    return j, "", -1
                return j, m.group("var"), int(m.group("bound")) if m.group("bound").isdigit() else -1
        return None

    def function_of(self, i: int) -> str:
        for j in range(i, -1, -1):
            m = re.match(r"^(?:static |extern \"C\" )\S.*?(\w+)\(", self.lines[j])
            if m:
                return m.group(1)
        return ""


_FOR = re.compile(r"for \(int (?P<var>\w+) = 0; (?P=var) < (?P<bound>\w+); \+\+(?P=var)\)")
_PRAGMA = re.compile(r"#pragma HLS (\w+)(.*)$")

Kind = Callable[[_Source], Iterator[tuple[int, str, str]]]  # -> (line, description, new text)
KINDS: dict[str, Kind] = {}


def _kind(name: str) -> Callable[[Kind], Kind]:
    def register(fn: Kind) -> Kind:
        KINDS[name] = fn
        return fn

    return register


def _pragmas(src: _Source, name: str) -> Iterator[tuple[int, str, re.Match]]:
    for i, line in enumerate(src.lines):
        m = _PRAGMA.search(line)
        if m and m.group(1) == name:
            yield i, line, m


def _args(rest: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)


# --------------------------------------------------------------------------------------------- pragmas
@_kind("unroll_partial")
def _unroll_partial(src: _Source):
    for i, line, _ in _pragmas(src, "UNROLL"):
        loop = src.loop_of(i)
        if loop and loop[2] >= 4:
            factor = loop[2] // 2
            yield i, f"UNROLL factor={factor} on a loop of {loop[2]}", src.with_lines(
                {i: line.replace("UNROLL", f"UNROLL factor={factor}")})


@_kind("partition_removed")
def _partition_removed(src: _Source):
    for i, _line, m in _pragmas(src, "ARRAY_PARTITION"):
        yield i, f"ARRAY_PARTITION removed ({m.group(2).strip()})", src.with_lines({i: None})


@_kind("partition_weakened")
def _partition_weakened(src: _Source):
    for i, line, m in _pragmas(src, "ARRAY_PARTITION"):
        args = _args(m.group(2))
        if args.get("type") == "cyclic" and int(args.get("factor", 1)) >= 4:
            f = int(args["factor"])
            yield i, f"cyclic factor {f} -> {f // 2}", src.with_lines(
                {i: line.replace(f"factor={f}", f"factor={f // 2}")})
        elif args.get("type") == "complete" and "variable=" in line and args.get("variable", "").endswith("_s"):
            # a channel's dimension partitioned completely: half its banks instead
            size = _channel_dim(src, args["variable"], int(args.get("dim", 1)))
            if size and size >= 4:
                yield i, f"complete -> cyclic factor={size // 2}", src.with_lines(
                    {i: line.replace("type=complete", f"type=cyclic factor={size // 2}")})
        if args.get("type") == "cyclic":
            yield i, "cyclic -> block", src.with_lines({i: line.replace("type=cyclic", "type=block")})


def _channel_dim(src: _Source, variable: str, dim: int) -> int | None:
    block = None
    for line in src.lines:
        m = re.search(rf"stream_of_blocks<(\w+)(?:, \d+)?> {variable};", line)
        if m:
            block = m.group(1)
    for line in src.lines:
        m = re.match(rf"typedef \w+ {block}((?:\[\d+\])+);", line) if block else None
        if m:
            dims = [int(x) for x in re.findall(r"\d+", m.group(1))]
            return dims[dim - 1] if dim <= len(dims) else None
    return None


@_kind("pipeline_removed")
def _pipeline_removed(src: _Source):
    for i, _line, _ in _pragmas(src, "PIPELINE"):
        yield i, f"PIPELINE removed in {src.function_of(i)}", src.with_lines({i: None})


@_kind("pipeline_ii")
def _pipeline_ii(src: _Source):
    for i, line, m in _pragmas(src, "PIPELINE"):
        ii = int(_args(m.group(2)).get("II", 1))
        yield i, f"II={ii} -> {ii + 1} in {src.function_of(i)}", src.with_lines(
            {i: re.sub(r"II=\d+", f"II={ii + 1}", line)})


@_kind("pipeline_style")
def _pipeline_style(src: _Source):
    """A pipeline switched off, or flushed/free-running instead of the stalling pipeline the model schedules."""
    for i, line, _ in _pragmas(src, "PIPELINE"):
        yield i, f"PIPELINE off in {src.function_of(i)}", src.with_lines(
            {i: re.sub(r"PIPELINE.*$", "PIPELINE off", line)})
        yield i, f"PIPELINE style=flp in {src.function_of(i)}", src.with_lines({i: line + " style=flp"})


@_kind("nest_broken")
def _nest_broken(src: _Source):
    """The loop nest around a pipelined loop made imperfect (a statement of its own in an outer loop) or its
    flattening switched off: the pipeline then drains and refills every outer iteration."""
    for i, _line, _ in _pragmas(src, "PIPELINE"):
        loop = src.loop_of(i)
        parent = src.loop_of(loop[0]) if loop else None
        if parent is None or src.function_of(parent[0]) != src.function_of(i) or "tile_" in src.lines[parent[0]]:
            continue
        indent = src.lines[parent[0]][: len(src.lines[parent[0]]) - len(src.lines[parent[0]].lstrip())] + "  "
        yield parent[0], f"LOOP_FLATTEN off on the loop over {parent[1]}", src.with_lines(
            {}, {parent[0]: [f"{indent}#pragma HLS LOOP_FLATTEN off"]})
        yield parent[0], f"a statement in the loop over {parent[1]}", src.with_lines(
            {}, {parent[0]: [f"{indent}{{ static int hdse_trace = 0; hdse_trace += 1; }}"]})


@_kind("pipeline_moved_out")
def _pipeline_moved_out(src: _Source):
    """The PIPELINE pragma one loop further out: the loop it was on is then unrolled inside it."""
    for i, line, _ in _pragmas(src, "PIPELINE"):
        loop = src.loop_of(i)
        if loop is None or loop[2] < 2:
            continue
        parent = src.loop_of(loop[0])
        if parent is None or parent[2] < 2 or src.function_of(parent[0]) != src.function_of(i):
            continue
        yield i, f"PIPELINE moved out to the loop over {parent[1]}", src.with_lines(
            {i: None}, {parent[0]: [line]})


@_kind("trip_halved")
def _trip_halved(src: _Source):
    for i, line in enumerate(src.lines):
        m = _FOR.search(line)
        label = line.strip().split(":")[0]
        if m and m.group("bound").isdigit() and int(m.group("bound")) >= 2 and label.startswith(
                ("pe_", "tile_", "box_", "lane_")) and label not in ("pe_mul",):
            n = int(m.group("bound"))
            yield i, f"{label} {n} -> {n // 2} iterations", src.with_lines(
                {i: line.replace(f"< {n};", f"< {n // 2};")})


@_kind("dependence_removed")
def _dependence_removed(src: _Source):
    for i, _line, _ in _pragmas(src, "DEPENDENCE"):
        yield i, "DEPENDENCE removed", src.with_lines({i: None})


@_kind("dependence_distance")
def _dependence_distance(src: _Source):
    predicted = src.record["predicted"]
    for i, line, m in _pragmas(src, "DEPENDENCE"):
        d = int(_args(m.group(2))["distance"])
        for new in sorted({d + 1, 2 * d, 4 * d, d // 2}):
            if new < 1 or new == d:
                continue
            if new < d and ceil(predicted["recurrence"] / new) <= predicted["ii"]:
                continue  # a shorter distance Vitis would schedule at the same II: equivalent
            yield i, f"distance {d} -> {new}", src.with_lines({i: line.replace(f"distance={d}", f"distance={new}")})
        yield i, "dependent=true -> false", src.with_lines({i: line.replace("dependent=true", "dependent=false")})


_IMPLS = {"fmul": ("fabric", "meddsp", "maxdsp"), "fadd": ("fabric",), "fsub": ("fabric",), "mul": ("fabric",),
          "add": ("dsp",), "sub": ("dsp",)}
_DEFAULT = {"fadd": "fulldsp", "fsub": "fulldsp", "add": "fabric", "sub": "fabric"}  # what Vitis picks unbound


@_kind("bind_op_impl")
def _bind_op_impl(src: _Source):
    for i, line, m in _pragmas(src, "BIND_OP"):
        args = _args(m.group(2))
        for impl in _IMPLS.get(args.get("op", ""), ()):
            if impl != args.get("impl"):
                yield i, f"{args['variable']} op={args['op']} impl={args['impl']} -> {impl}", src.with_lines(
                    {i: line.replace(f"impl={args['impl']}", f"impl={impl}")})


@_kind("bind_op_removed")
def _bind_op_removed(src: _Source):
    for i, _line, m in _pragmas(src, "BIND_OP"):
        args = _args(m.group(2))
        if _DEFAULT.get(args.get("op")) == args.get("impl"):
            continue  # Vitis binds the same core unasked
        yield i, f"BIND_OP of {args['variable']} removed", src.with_lines({i: None})


@_kind("bind_storage")
def _bind_storage(src: _Source):
    for i, line, m in _pragmas(src, "BIND_STORAGE"):
        args = _args(m.group(2))
        for impl in ("bram", "uram", "lutram"):
            if impl != args.get("impl"):
                yield i, f"{args['variable']} impl={args['impl']} -> {impl}", src.with_lines(
                    {i: line.replace(f"impl={args['impl']}", f"impl={impl}")})
        yield i, f"{args['variable']} latency 1 -> 2", src.with_lines({i: line.replace("latency=1", "latency=2")})
        yield i, f"BIND_STORAGE of {args['variable']} removed", src.with_lines({i: None})


@_kind("inline")
def _inline(src: _Source):
    for i, line, _ in _pragmas(src, "INLINE"):
        yield i, "INLINE off removed", src.with_lines({i: None})
        yield i, "INLINE off -> INLINE", src.with_lines({i: line.replace(" off", "")})


@_kind("interface")
def _interface(src: _Source):
    for i, line, m in _pragmas(src, "INTERFACE"):
        args = _args(m.group(2))
        if args.get("mode") != "m_axi":
            continue
        if args.get("bundle") != "gmem0":
            yield i, f"port {args['port']} on bundle gmem0", src.with_lines(
                {i: line.replace(f"bundle={args['bundle']}", "bundle=gmem0")})
        depth = int(args["depth"])
        if depth >= 2:
            yield i, f"port {args['port']} depth {depth} -> {depth // 2}", src.with_lines(
                {i: line.replace(f"depth={depth}", f"depth={depth // 2}")})


@_kind("interface_options")
def _interface_options(src: _Source):
    """A port's own m_axi settings overriding hls_config.tcl's: short bursts, one transaction in flight."""
    for i, line, m in _pragmas(src, "INTERFACE"):
        args = _args(m.group(2))
        if args.get("mode") == "m_axi":
            yield i, f"port {args['port']} bursts of 2 beats", src.with_lines({i: line + " max_read_burst_length=2"})
            yield i, f"port {args['port']} one transaction in flight", src.with_lines(
                {i: line + " num_read_outstanding=1"})


@_kind("config_interface")
def _config_interface(src: _Source):
    """hls_config.tcl asking for shorter bursts or fewer transactions in flight than the model charges."""
    if src.file != CONFIG:
        return
    for i, line in enumerate(src.lines):
        for option in ("max_read_burst_length", "max_write_burst_length", "num_read_outstanding"):
            m = re.search(rf"-m_axi_{option} (\d+)", line)
            if m:
                yield i, f"-m_axi_{option} {m.group(1)} -> 16" if m.group(1) != "16" else f"-m_axi_{option} -> 4", \
                    src.with_lines({i: line.replace(m.group(0), f"-m_axi_{option} {16 if m.group(1) != '16' else 4}")})
        if line.startswith("config_interface") and "burst_length" in line:
            yield i, "the burst settings removed", src.with_lines({i: None})


@_kind("dataflow_removed")
def _dataflow_removed(src: _Source):
    for i, _line, _ in _pragmas(src, "DATAFLOW"):
        yield i, "DATAFLOW removed", src.with_lines({i: None})


@_kind("blocks")
def _blocks(src: _Source):
    """A channel one block shallower (no overlap of a load with the compute) or deeper (more memory)."""
    types = sorted({m.group(1, 2) for line in src.lines for m in re.finditer(r"stream_of_blocks<(\w+), (\d+)>", line)})
    text = "\n".join(src.lines) + "\n"
    for block, n in types:
        for new in {1, 3} - {int(n)}:
            at = next(i for i, line in enumerate(src.lines) if f"stream_of_blocks<{block}, {n}>" in line)
            yield at, f"{block} channel {n} -> {new} blocks", text.replace(
                f"stream_of_blocks<{block}, {n}>", f"stream_of_blocks<{block}, {new}>")


# ------------------------------------------------------------------------------------------ arithmetic
@_kind("extra_mul")
def _extra_mul(src: _Source):
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
def _extra_add(src: _Source):
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
def _sum_seeded(src: _Source):
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
def _op_swapped(src: _Source):
    for i, line in enumerate(src.lines):
        m = re.search(r"const \w+ (pe_acc|pe_pair|hdse_t\d+) = .* \+ ", line)
        if m:
            yield i, f"{m.group(1)}: an add turned into a subtract", src.with_lines({i: line.replace(" + ", " - ", 1)})


@_kind("residual_dropped")
def _residual_dropped(src: _Source):
    for i, line in enumerate(src.lines):
        m = re.search(r"const (\w+) (hdse_t\d+) = (hdse_\w+) \+ \(\(\w+\)hdse_e\d+\[hdse_l\]\);", line)
        if m:
            yield i, f"{m.group(2)}: the operand's add dropped", src.with_lines(
                {i: line.replace(m.group(0), f"const {m.group(1)} {m.group(2)} = {m.group(3)};")})


@_kind("accumulate_in_pe")
def _accumulate_in_pe(src: _Source):
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
def _bank_at_run_time(src: _Source):
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


def _trips_of(src: _Source, var: str) -> int:
    for line in src.lines:
        m = _FOR.search(line)
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
def _ddr_conditional(src: _Source):
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
def _ddr_strided(src: _Source):
    for i, line in enumerate(src.lines):
        m = re.search(r"= (\w+)\[(.*) \+ hdse_(k|j)\];$", line)
        if m and "_word_t hdse_cur" in line:
            yield i, f"{m.group(1)} read every other word", src.with_lines(
                {i: line.replace(f"+ hdse_{m.group(3)}];", f"+ 2 * hdse_{m.group(3)}];")})


@_kind("port_width")
def _port_width(src: _Source):
    if src.file != HEADER:
        return
    for i, line in enumerate(src.lines):
        m = re.match(r"typedef hls::vector<(\w+), (\d+)> (\w+);", line)
        if m and int(m.group(2)) >= 2:
            n = int(m.group(2))
            yield i, f"{m.group(3)} {n} -> {n // 2} lanes", src.with_lines({i: line.replace(f", {n}>", f", {n // 2}>")})


# ----------------------------------------------------------------------------------------------- api
def mutants(project: str | Path, kinds: list[str] | None = None) -> list[Mutant]:
    """Every mutant of ``kinds`` (all by default) of one project, in a stable order."""
    project = Path(project)
    record = json.loads((project / "design.json").read_text())
    out = []
    for file in (KERNEL, HEADER, CONFIG):
        if not (project / file).is_file():
            continue
        src = _Source((project / file).read_text().splitlines(), record, file)
        for kind in kinds or KINDS:
            for line, description, text in KINDS[kind](src):
                out.append(Mutant(kind, file, line + 1, description, text))
    return out


def apply(project: str | Path, mutant: Mutant, into: str | Path) -> Path:
    """A copy of ``project`` in ``into`` with ``mutant`` written into it."""
    into = Path(into)
    if into.exists():
        shutil.rmtree(into)
    shutil.copytree(project, into, ignore=shutil.ignore_patterns("data", "prj", "sim_build"))
    (into / mutant.file).write_text(mutant.text)
    return into
