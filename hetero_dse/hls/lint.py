"""The HLS lint: reads a generated ``kernel.cpp`` back and checks it against its ``design.json``.

The kernel is parsed with clang (libclang), not regenerated from the context that produced it, so a
template that drifts from the model is caught from what it actually emitted. Checks:

* ``arithmetic``: the data multiplies and adds one pipeline iteration of ``compute_tile`` performs (every
  enclosing unrolled loop enumerated, the adder tree included) equal the model's operator instances
  (``units``), and so its DSP figure;
* ``banks``: in the PE array (``compute_tile``) every access to a partitioned buffer picks its bank at
  compile time: along each dimension, every variable the pipeline walks (not an unrolled lane) steps by
  a multiple of the dimension's cyclic factor. In the read and write processes (a port word an
  iteration) a dimension may be walked by the pipeline as long as every lane of the word has the same
  index there, and no bank takes more lanes of one word than the II the pipeline asks for;
* ``ports``: every DDR pointer (a pointer parameter of any function) points to whole port words,
  ``hls::vector<T, N>`` of the board's ``port_bits``, and is only ever read or written a whole word at a
  time (no lane of a DDR word assigned in place, no cast to another pointer type): with words that are
  whole and aligned by their type, Vitis needs no automatic widening, which a guarded or unaligned scalar
  access defeats;
* ``transfer``: each read and write process issues the words a block the model charges (runs times
  words a run, from its loop headers) and its word loop asks for the model's word II;
* ``pipeline``: no PIPELINE pragma on a loop of one iteration (Vitis drops it with the loop);
* ``ii``: the compute's pipelined loop asks for the model's II, and a carried sum declares the distance.

What only synthesis can confirm (achieved II, Fmax, burst widening, the partition of stream_of_blocks
blocks) is listed in the project README, not claimed here.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any

from hetero_dse.hls.cparse import (
    Affine,
    CLoop,
    Kernel,
    LintError,
    NotAffine,
    c_affine,
    c_array_access,
    c_children,
    c_defs,
    c_dims,
    c_kind,
    c_operator,
    c_strip,
)





@dataclass(frozen=True)
class Finding:
    check: str  # arithmetic | banks | pipeline | ii
    where: str  # function:line
    message: str

    def __str__(self) -> str:
        return f"{self.where}: [{self.check}] {self.message}"


@dataclass
class LintReport:
    """What the lint found, and the figures it read from the code."""

    findings: list[Finding] = field(default_factory=list)
    mul_per_iteration: int = 0
    add_per_iteration: int = 0
    accesses_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "findings": [str(f) for f in self.findings],
                "counted": {"mul": self.mul_per_iteration, "add": self.add_per_iteration},
                "accesses_checked": self.accesses_checked}


def lint(project: str | Path, design: dict[str, Any] | None = None) -> LintReport:
    """Check the generated kernel of an HLS project against its predicted figures (``design``, read from
    the project's ``design.json`` when not given)."""
    project = Path(project)
    kernel = project / "src" / "kernel.cpp"
    record_path = project / "design.json"
    if not kernel.is_file() or (design is None and not record_path.is_file()):
        raise LintError(f"{project} is not a hetero_dse HLS project (no src/kernel.cpp and design.json)")
    if design is None:
        try:
            design = json.loads(record_path.read_text())["predicted"]
        except (ValueError, KeyError, TypeError):
            raise LintError(f"{record_path} is not a design record written by hetero_dse explore") from None
    missing = [k for k in ("units", "ii") if k not in design]
    if missing:
        raise LintError(f"{record_path} has no {' or '.join(missing)}: it was written by an older hetero_dse; run "
                        "explore again to get a project the lint can check")
    k = Kernel(kernel, project / "sim" / "include")
    report = LintReport()
    partitions = k.partitions()
    compute = write = None
    callees: dict[str, tuple[Any, list[CLoop]]] = {}
    for name, function in k.functions.items():
        loops = k.loops(function)
        defs = c_defs(function)
        callees[name] = (function, loops)
        if name == "compute_tile":
            compute = (function, loops, defs)
        if name == "write_out":
            write = (function, loops, defs)
        for lp in loops:
            if lp.has("PIPELINE"):
                try:
                    trips = len(lp.values({}, defs))
                except NotAffine:
                    trips = None
                if trips == 1:
                    report.findings.append(Finding("pipeline", f"{name}:{lp.line}",
                                                   f"PIPELINE on loop {lp.label or lp.var} of one iteration"))
        _check_banks(name, function, loops, defs, partitions, report)
        _check_ports(name, function, int(design.get("port_bits", 0)), report)
        _check_transfer(name, loops, defs, design, report)
    if compute is None:
        report.findings.append(Finding("arithmetic", "compute_tile", "the kernel has no compute_tile function"))
        return report
    _check_arithmetic(*compute, design, report, callees)
    epilogue = design.get("epilogue") or {}
    if write is not None and epilogue.get("steps"):
        # the epilogue's operators in one iteration of the write: one set a lane of the word, as charged
        lanes = int(epilogue["lanes"])
        charged = {"mul": lanes * int(epilogue["muls"]), "add": lanes * int(epilogue["adds"])}
        _check_arithmetic(*write, {"units": charged}, report, name="write_out")
    return report


#: Bits of the C types a port word can hold, as clang spells them canonically.
_CTYPE_BITS = {"float": 32, "double": 64, "signed char": 8, "char": 8, "unsigned char": 8, "short": 16,
               "unsigned short": 16, "int": 32, "unsigned int": 32, "long": 64, "unsigned long": 64,
               "long long": 64, "unsigned long long": 64}
_WORD = re.compile(r"^(?:const )?hls::vector<(.+), (\d+)(?:UL|U|L)?>$")


def _check_ports(name: str, function: Any, port_bits: int, report: LintReport) -> None:
    """Every DDR pointer of ``function`` carries whole port words and is used a whole word at a time."""
    params = {c.spelling: c for c in c_children(function) if c_kind(c) == "PARM_DECL" and c.type.kind.name == "POINTER"}
    for pname, param in params.items():
        pointee = param.type.get_pointee().get_canonical().spelling
        m = _WORD.match(pointee)
        bits = _CTYPE_BITS.get(m.group(1), 0) * int(m.group(2)) if m else 0
        where = f"{name}:{param.extent.start.line}"
        if not m:
            report.findings.append(Finding("ports", where, f"DDR pointer {pname} is {pointee} *, not a port word: its "
                                                           "accesses are scalar and Vitis widens them only when "
                                                           "they are aligned, unconditional and sequential"))
            continue
        if port_bits and bits != port_bits:
            report.findings.append(Finding("ports", where, f"DDR pointer {pname} carries {bits}-bit words; the "
                                                           f"board's ports are {port_bits} bits"))
    if not params:
        return
    for c in function.walk_preorder():
        kind = c_kind(c)
        if kind == "CALL_EXPR" and c.spelling == "operator[]":
            # a lane taken from (or written into) a word in DDR itself: every lane is a port access of its
            # own, and a lane written is a partial word
            in_ddr = [a for sub in c.walk_preorder() if c_kind(sub) == "ARRAY_SUBSCRIPT_EXPR"
                      and sub.extent.start.offset == c.extent.start.offset and (a := c_array_access(sub))]
            if any(array in params for array, _ in in_ddr):
                report.findings.append(Finding("ports", f"{name}:{c.extent.start.line}",
                                               "a lane of a word in DDR is accessed in place, not the whole word"))
        elif kind in ("CSTYLE_CAST_EXPR", "CXX_REINTERPRET_CAST_EXPR", "CXX_STATIC_CAST_EXPR"):
            refs = [r.spelling for r in c.walk_preorder() if c_kind(r) == "DECL_REF_EXPR" and r.spelling in params]
            if refs and c.type.kind.name == "POINTER":
                report.findings.append(Finding("ports", f"{name}:{c.extent.start.line}",
                                               f"DDR pointer {refs[0]} is cast to {c.type.spelling}: its accesses "
                                               "are no longer whole port words"))


def _pipelined(loops: list[CLoop]) -> list[CLoop]:
    return [lp for lp in loops if lp.has("PIPELINE")]


def _stream_of(function: str, array: str) -> str:
    """The DATAFLOW channel whose block ``array`` is inside ``function`` (the template's naming)."""
    if array == "obuf":
        return "out_s"
    if array == "buf" and function.startswith("read_"):
        return f"{function.removeprefix('read_')}_s"
    return f"{array}_s"


def _check_banks(name: str, function: Any, loops: list[CLoop], defs: dict[str, Any],
                 partitions: dict[str, list[tuple[int, int | None]]], report: LintReport) -> None:
    pipelined = _pipelined(loops)
    if not pipelined:
        return
    region = max(pipelined, key=lambda lp: lp.line)
    lane_vars = {lp.var for lp in loops if lp.has("UNROLL")}
    lane_ranges: dict[str, list[int]] = {}
    for lp in loops:
        if lp.has("UNROLL"):
            try:
                lane_ranges[lp.var] = lp.values({}, defs)
            except NotAffine:
                pass
    sizes: dict[str, list[int]] = {}
    for c in function.walk_preorder():
        if c_kind(c) in ("PARM_DECL", "VAR_DECL"):
            dims = c_dims(c)
            if dims:
                sizes[c.spelling] = dims
    seen: set[int] = set()
    for c in region.cursor.walk_preorder():
        if c_kind(c) != "ARRAY_SUBSCRIPT_EXPR" or c.hash in seen:
            continue
        access = c_array_access(c)
        for sub in c.walk_preorder():
            if c_kind(sub) == "ARRAY_SUBSCRIPT_EXPR":
                seen.add(sub.hash)
        if access is None:
            continue
        array, indices = access
        parts = partitions.get(_stream_of(name, array))
        if not parts:
            continue
        dims = sizes.get(array, [])
        complete = {d for d, f in parts if f is None}
        if name != "compute_tile" and all(d + 1 in complete or (d < len(dims) and dims[d] == 1)
                                          for d in range(len(indices))):
            continue  # registers throughout: an index chosen at run time is a multiplexer, not a bank
        report.accesses_checked += 1
        forms: list[tuple[int, int, Affine]] = []  # (dim, factor, affine index) of partitioned dimensions
        for dim, factor in parts:
            if dim > len(indices):
                continue
            f = factor if factor is not None else (dims[dim - 1] if dim <= len(dims) else 0)
            try:
                forms.append((dim, f, c_affine(indices[dim - 1], defs)))
            except NotAffine:
                report.findings.append(Finding("banks", f"{name}:{c.extent.start.line}",
                                               f"index {dim} of {array} is not affine: its bank cannot be checked"))
        runtime = [(dim, f, [v for v, x in form.items() if v and v not in lane_vars and f and x % f])
                   for dim, f, form in forms]
        runtime = [r for r in runtime if r[2]]
        if name != "compute_tile":
            # a read or write process moves a word an iteration: its lanes may share a bank up to the II
            # the pipeline asks for, and a bank the run picks at run time must be the same for every lane
            ii = _ii(region)
            load = _bank_load(forms, {d for d, _, _ in runtime}, lane_ranges)
            if load is not None and load <= ii:
                continue
            if load is not None:
                report.findings.append(Finding(
                    "banks", f"{name}:{c.extent.start.line}",
                    f"{load} lanes of one iteration write one bank of {array}, more than the II={ii} allows"))
                continue
        if not runtime:
            continue
        dim, f, moving = runtime[0]
        report.findings.append(Finding(
            "banks", f"{name}:{c.extent.start.line}",
            f"{array} dimension {dim} (partition factor {f}) is indexed by {', '.join(moving)}, which the "
            "pipeline walks: its bank is chosen at run time"))


def _check_transfer(name: str, loops: list[CLoop], defs: dict[str, Any], design: dict[str, Any],
                    report: LintReport) -> None:
    """A read or write process issues the words a block the model charges (its ``box_*`` loops that are
    not unrolled, and the unrolled group of words an iteration: runs times words a run) at the word II the
    model charges."""
    m = re.match(r"read_buf(\d+)_", name)
    buffers = design.get("buffers") or []
    info = buffers[int(m.group(1))] if m and int(m.group(1)) < len(buffers) else (
        buffers[-1] if name == "write_out" and buffers else None)
    if info is None or "word_ii" not in info:
        return
    walked = [lp for lp in loops if lp.label.startswith("box_") and not lp.has("UNROLL")]
    # a group of words an iteration moves (banks fixed for the group together) is an unrolled word loop
    walked += [lp for lp in loops if lp.label.endswith("_word_group") and lp.has("UNROLL")]
    try:
        beats = prod(len(lp.values({}, defs)) for lp in walked)
    except NotAffine:
        report.findings.append(Finding("transfer", name, "a loop bound of the process is not a constant"))
        return
    if beats != info["beats_per_load"]:
        report.findings.append(Finding("transfer", name, f"the process moves {beats} words a block; the model "
                                                         f"charges {info['beats_per_load']}"))
    for lp in _pipelined(loops):
        if _ii(lp) != info["word_ii"]:
            report.findings.append(Finding("transfer", f"{name}:{lp.line}", f"the word loop asks for II={_ii(lp)}; "
                                                                           f"the model charges {info['word_ii']}"))


def _ii(loop: CLoop) -> int:
    for pragma, args in loop.pragmas:
        if pragma == "PIPELINE":
            m = re.search(r"II\s*=\s*(\d+)", args)
            return int(m.group(1)) if m else 1
    return 1


def _bank_load(forms: list[tuple[int, int, Affine]], runtime_dims: set[int],
               lane_ranges: dict[str, list[int]]) -> int | None:
    """The most unrolled lanes of one access that meet in one bank, or None where a dimension the
    pipeline walks also depends on a lane (the lanes' banks then move apart at run time)."""
    lanes = sorted({v for _, _, form in forms for v in form if v in lane_ranges})
    if any(v in lane_ranges for dim, _, form in forms if dim in runtime_dims for v in form):
        return None
    if not lanes:
        return 1  # one access per iteration
    fixed = [(f, form) for dim, f, form in forms if dim not in runtime_dims]
    counts: dict[tuple[int, ...], int] = {}
    for values in itertools.product(*(lane_ranges[v] for v in lanes)):
        env = dict(zip(lanes, values, strict=True))
        key = tuple(sum(x * env.get(v, 0) for v, x in form.items() if v) % f for f, form in fixed)
        counts[key] = counts.get(key, 0) + 1
    return max(counts.values())


def _check_arithmetic(compute: Any, loops: list[CLoop], defs: dict[str, Any], design: dict[str, Any],
                      report: LintReport, callees: dict[str, tuple[Any, list[CLoop]]] | None = None,
                      name: str = "compute_tile") -> None:
    """The data multiplies and adds of one pipeline iteration of the compute (or of the write process, whose
    epilogue has operators of its own), every unrolled loop enumerated and every call of a kernel function
    (the PE) followed into its body, against the model's operator instances."""
    callees = callees or {}
    pipelined = _pipelined(loops)
    region = max(pipelined, key=lambda lp: lp.line).cursor if pipelined else compute
    where = f"{name}:{region.extent.start.line}"
    if pipelined and name == "compute_tile":
        text = " ".join(a for lp in pipelined for p, a in lp.pragmas if p == "PIPELINE")
        m = re.search(r"II\s*=\s*(\d+)", text)
        if m is None or int(m.group(1)) != int(design["ii"]):
            report.findings.append(Finding("ii", where, f"the pipeline asks for II={m.group(1) if m else '?'}, "
                                                        f"the model predicts {design['ii']}"))
    unrolled = {lp.cursor.hash: lp for _, ls in [(None, loops), *callees.values()] for lp in ls
                if lp.has("UNROLL")}
    tainted: set[str] = set()
    counts = {"*": 0, "+": 0}

    def is_data(c: Any) -> bool:
        c = c_strip(c)
        if c_kind(c) == "ARRAY_SUBSCRIPT_EXPR":
            return True
        if c_kind(c) == "DECL_REF_EXPR":
            return c.spelling in tainted
        return any(is_data(x) for x in c_children(c) if c_kind(c) != "ARRAY_SUBSCRIPT_EXPR")

    def visit(c: Any, env: dict[str, int], times: int) -> None:
        kind = c_kind(c)
        if kind == "FOR_STMT" and c.hash in unrolled:
            lp = unrolled[c.hash]
            try:
                values = lp.values(env, defs)
            except NotAffine:
                report.findings.append(Finding("arithmetic", f"compute_tile:{lp.line}",
                                               f"the bounds of unrolled loop {lp.label or lp.var} cannot be read"))
                return
            body = c_children(c)[-1]
            for v in values:
                visit(body, {**env, lp.var: v}, times)
            return
        if kind == "CALL_EXPR" and c.spelling in callees and c.spelling != "compute_tile":
            # a PE function: its data parameters carry operands; its body runs once per call
            function, _ = callees[c.spelling]
            for param in c_children(function):
                if c_kind(param) == "PARM_DECL" and param.type.get_canonical().spelling not in ("bool", "int"):
                    tainted.add(param.spelling)
            body = [x for x in c_children(function) if c_kind(x) == "COMPOUND_STMT"]
            for x in body:
                visit(x, {}, times)
        if kind == "VAR_DECL":
            kids = [x for x in c_children(c) if c_kind(x) != "TYPE_REF"]
            if kids and is_data(kids[-1]):
                tainted.add(c.spelling)
        if kind == "BINARY_OPERATOR":
            op = c_operator(c)
            if op in counts and any(is_data(x) for x in c_children(c)):
                counts[op] += times
        for i, child in enumerate(c_children(c)):
            if kind == "ARRAY_SUBSCRIPT_EXPR" and i > 0:
                continue  # an index: integer arithmetic on loop variables
            visit(child, env, times)

    visit(region, {}, 1)
    if name == "compute_tile":
        report.mul_per_iteration, report.add_per_iteration = counts["*"], counts["+"]
    units = design["units"]
    for op, unit in (("*", "mul"), ("+", "add")):
        if counts[op] != units[unit]:
            report.findings.append(Finding(
                "arithmetic", where,
                f"one pipeline iteration of {where.split(':')[0]} performs {counts[op]} data {unit}s; the model "
                f"charges {units[unit]}"))

