"""The DATAFLOW processes' loops and memories against design.json: how often each process runs (its tile
loops), the words a read or write process moves a block and at what II, whether each DDR access is a
sequential, unconditional run (what Vitis turns into a burst), whether every buffer access picks its bank
at compile time, and whether every DDR pointer carries whole port words."""

from __future__ import annotations

import itertools
import re
from math import prod
from typing import Any

from hetero_dse.hls.cparse import CFile, CFunction, CLoop
from hetero_dse.hls.ctree import Node
from hetero_dse.hls.cvalues import NotAffine, array_access, c_affine, c_eval, strip
from hetero_dse.hls.lint.record import DesignRecord, LintReport

__all__ = ["check_banks", "check_ports", "check_tile_loops", "check_transfer", "linear_in"]


# ------------------------------------------------------------------------------------------ tile loops
def check_tile_loops(fn: CFunction, r: DesignRecord, runs: int, what: str, report: LintReport) -> None:
    """The process's tile loops: each as many trips as the design tiles its loop, ``runs`` in all (blocks
    loaded, tiles computed or written)."""
    total = 1
    for lp in fn.loops:
        if not lp.label.startswith("tile_"):
            continue
        knob = r.loop_by_ident(lp.label.removeprefix("tile_"))
        try:
            trips = lp.trip_count({}, fn.defs)
        except NotAffine:
            report.add("trips", f"{fn.name}:{lp.line}", f"the trip count of {lp.label} cannot be read")
            return
        total *= trips
        if knob is None or trips != knob.trips:
            report.add("trips", f"{fn.name}:{lp.line}", f"{lp.label} runs {trips} times; the design has "
                                                        f"{knob.trips if knob else 'no such loop'} tiles along it")
    if total != runs:
        report.add("trips", f"{fn.name}:{fn.node.line}", f"{fn.name}'s tile loops run {total} times; the model "
                                                         f"charges {runs} {what}")


# ------------------------------------------------------------------------------------------- transfer
def check_transfer(fn: CFunction, info: dict[str, Any], region: CLoop | None, report: LintReport) -> None:
    """A read or write process moves the words a block the model charges (the pipelined nest of ``box_*``
    loops: runs times words a run), one word an iteration, at the word II it charges."""
    if region is not None:
        report.mark(region.pragma("PIPELINE"))
        walked = [lp for lp in (*region.parents, region) if lp.label.startswith("box_")]
    else:  # one word a block: no loop to pipeline
        walked = [lp for lp in fn.loops if lp.label.startswith("box_") and not lp.label.endswith("_lane")
                  and not lp.has("UNROLL")]
    try:
        beats = prod(lp.trip_count({}, fn.defs) for lp in walked)
    except NotAffine:
        report.add("transfer", fn.name, "a loop bound of the process is not a constant")
        return
    if beats != info["beats_per_load"]:
        report.add("transfer", fn.name, f"the process moves {beats} words a block; the model charges "
                                        f"{info['beats_per_load']}")
    # the elements of an iteration's word: its lanes (of the run's dimension, with the whole dimensions inside
    # it packed beside them), one per unrolled iteration inside the word loop
    shape, split = info["shape"], int(info["split"])
    layout = info.get("layout") or list(range(len(shape)))
    per_word = int(info["packed"]) * (min(int(shape[layout[split]]), int(info["lanes"])) if split >= 0 else 1)
    lanes = [lp for lp in fn.loops if not lp.label.startswith("tile_") and lp not in walked
             and (region is None or region in lp.parents)]
    # a partition by sets of a word's lanes: one copy of the lanes a set, the one the word picks enabled
    sets = [lp for lp in lanes if lp.label.endswith("_set")]
    lanes = [lp for lp in lanes if lp not in sets]
    try:
        copies = prod(lp.trip_count({}, fn.defs) for lp in sets)
    except NotAffine:
        copies = None
    if copies != int(info.get("bank_sets", 1)):
        report.add("transfer", fn.name, f"the process has {copies} copies of a word's lanes; the model's banks "
                                        f"come in {int(info.get('bank_sets', 1))} sets")
    try:
        moved = prod(lp.trip_count({}, fn.defs) for lp in lanes)
    except NotAffine:
        moved = None
    if moved != per_word:
        report.add("transfer", fn.name, f"an iteration moves {moved} elements; the model's word carries {per_word}")
    if region is None:
        for node, (array, _), conditions in _ddr_accesses(fn, fn.body):
            if conditions:
                report.add("burst", f"{fn.name}:{node.line}", f"the access to {array} is conditional")
        return
    ii = region.pragma("PIPELINE").int("ii", 1)
    if ii != info["word_ii"]:
        report.add("transfer", f"{fn.name}:{region.line}", f"the word loop asks for II={ii}; the model charges "
                                                           f"{info['word_ii']}")
    _check_bursts(fn, info, region, report)


def linear_in(n: Node, var: str, defs: dict[str, Node]) -> int:
    """The coefficient of ``var`` in ``n``; parts of ``n`` that do not read ``var`` may be anything (an
    address computed at run time). Raises :class:`NotAffine` where ``var`` is not read linearly."""
    n = strip(n)
    if not _reads(n, var, defs, set()):
        return 0
    if n.kind == "DECL_REF_EXPR":
        return 1 if n.name == var else linear_in(defs[n.name], var, defs)
    if n.kind == "BINARY_OPERATOR" and n.op in ("+", "-"):
        a, b = (linear_in(c, var, defs) for c in n.children)
        return a + b if n.op == "+" else a - b
    if n.kind == "BINARY_OPERATOR" and n.op == "*":
        a, b = n.children
        if not _reads(a, var, defs, set()):
            return c_eval(a, {}, defs) * linear_in(b, var, defs)
        if not _reads(b, var, defs, set()):
            return c_eval(b, {}, defs) * linear_in(a, var, defs)
    raise NotAffine(f"{var} at line {n.line}")


def _reads(n: Node, var: str, defs: dict[str, Node], seen: set[str]) -> bool:
    for x in n.walk():
        if x.kind == "DECL_REF_EXPR":
            if x.name == var:
                return True
            if x.name in defs and x.name not in seen:
                seen.add(x.name)
                if _reads(defs[x.name], var, defs, seen):
                    return True
    return False


def _ddr_accesses(fn: CFunction, node: Node, conditions: tuple[Node, ...] = ()):
    """Every access to a DDR pointer under ``node``, with the conditions (``if``, ``?:``) it is under."""
    pointers = {name for name, p in fn.params.items() if "*" in p.type}
    if node.kind == "ARRAY_SUBSCRIPT_EXPR":
        access = array_access(node)
        if access and access[0] in pointers:
            yield node, access, conditions
            return
    if node.kind in ("IF_STMT", "CONDITIONAL_OPERATOR"):
        test, *branches = node.children
        yield from _ddr_accesses(fn, test, conditions)
        for b in branches:
            yield from _ddr_accesses(fn, b, (*conditions, test))
        return
    for c in node.children:
        yield from _ddr_accesses(fn, c, conditions)


def _check_bursts(fn: CFunction, info: dict[str, Any], region: CLoop, report: LintReport) -> None:
    """Vitis infers a burst from a pipelined loop whose DDR access is one a port an iteration, unconditional,
    and walks consecutive words (UG1399, "Optimizing Burst Transfers"; two accesses to one bundle in a
    region defeat it, HLS 214-224): each port here must, or the model's words a cycle and its burst lengths do
    not hold."""
    word_loop = region.label.endswith("_word")
    inside = {id(lp.node) for lp in fn.loops if region in lp.parents}
    per_port: dict[str, int] = {}
    for node, (array, index), conditions in _ddr_accesses(fn, region.body):
        where = f"{fn.name}:{node.line}"
        per_port[array] = per_port.get(array, 0) + 1
        if conditions:
            report.add("burst", where, f"the access to {array} is conditional: Vitis infers no burst from it "
                                       "(HLS 214-232), one transaction a word instead")
        try:
            # a row loop pipelined (one word a run) walks runs, not words
            step = linear_in(index[0], region.var, fn.defs) if word_loop else 1
        except NotAffine:
            report.add("burst", where, f"the word index of {array} is not linear in the pipelined loop "
                                       f"{region.name}: Vitis infers no burst from it")
            continue
        if word_loop and step != 1:
            report.add("burst", where, f"{array}'s word index steps by {step} a pipeline iteration: the run is not "
                                       "sequential (HLS 214-230)")
        if any(id(lp.node) in inside for lp in _loops_around(fn, node)):
            report.add("burst", where, f"{array} is accessed in a loop the pipeline unrolls: several accesses to one "
                                       "port an iteration, which Vitis does not burst (HLS 214-224)")
    for array, n in per_port.items():
        if n > 1:
            report.add("burst", f"{fn.name}:{region.line}", f"{n} accesses to {array} an iteration: Vitis does not "
                                                            "burst several accesses to one port (HLS 214-224)")
    runs = info.get("run_words")
    if runs is not None:
        words = region.trip_count({}, fn.defs) if word_loop else 1
        if words != runs:
            report.add("burst", f"{fn.name}:{region.line}", f"the process moves runs of {words} words; the model "
                                                            f"charges its bursts for runs of {runs}")


def _loops_around(fn: CFunction, node: Node) -> list[CLoop]:
    """The loops of ``fn`` whose body holds ``node``."""
    return [lp for lp in fn.loops if any(x is node for x in lp.body.walk())]


# ------------------------------------------------------------------------------------------------ banks
def _stream_of(function: str, array: str) -> str:
    """The DATAFLOW channel whose block ``array`` is inside ``function`` (the template's naming)."""
    if array == "obuf":
        return "out_s"
    if array == "buf" and function.startswith("read_"):
        return f"{function.removeprefix('read_')}_s"
    return f"{array}_s"


def _subscripts(node: Node):
    """Outermost array subscripts under ``node`` (an index's own subscripts included)."""
    if node.kind == "ARRAY_SUBSCRIPT_EXPR":
        yield node
        n = node
        while n.kind == "ARRAY_SUBSCRIPT_EXPR":
            yield from _subscripts(n.children[1])
            n = strip(n.children[0])
        return
    for c in node.children:
        yield from _subscripts(c)


def check_banks(fn: CFunction, region: CLoop | None, partitions: dict[str, list[tuple[int, int | None]]],
                report: LintReport) -> None:
    """In the PE array every access to a partitioned buffer picks its bank at compile time: along each
    dimension, every variable the pipeline walks steps by a multiple of the cyclic factor. In a read or
    write process (a port word an iteration) a dimension may be walked by the pipeline as long as every lane
    of the word has the same index there, and no bank takes more lanes of one word than the II asks for."""
    if region is None:
        return
    lanes = [lp for lp in fn.loops if region in lp.parents]
    lane_vars = {lp.var for lp in lanes}
    lane_ranges: dict[str, list[int]] = {}
    for lp in lanes:
        try:
            lane_ranges[lp.var] = lp.values({}, fn.defs)
        except NotAffine:
            pass
    name = fn.name
    for c in _subscripts(region.body):
        access = array_access(c)
        if access is None:
            continue
        array, indices = access
        parts = partitions.get(_stream_of(name, array))
        if not parts:
            continue
        dims = fn.arrays.get(array, [])
        complete = {d for d, f in parts if f is None}
        if name != "compute_tile" and all(d + 1 in complete or (d < len(dims) and dims[d] == 1)
                                          for d in range(len(indices))):
            continue  # registers throughout: an index chosen at run time is a multiplexer, not a bank
        report.accesses_checked += 1
        forms: list[tuple[int, int, dict[str, int]]] = []  # (dim, factor, affine index) of partitioned dimensions
        for dim, factor in parts:
            if dim > len(indices):
                continue
            f = factor if factor is not None else (dims[dim - 1] if dim <= len(dims) else 0)
            try:
                forms.append((dim, f, c_affine(indices[dim - 1], fn.defs)))
            except NotAffine:
                report.add("banks", f"{name}:{c.line}", f"index {dim} of {array} is not affine: its bank cannot be "
                                                        "checked")
        runtime = [(dim, f, [v for v, x in form.items() if v and v not in lane_vars and f and x % f])
                   for dim, f, form in forms]
        runtime = [x for x in runtime if x[2]]
        if name != "compute_tile":
            ii = region.pragma("PIPELINE").int("ii", 1)
            load = _bank_load(forms, lane_ranges)
            if load is not None and load <= ii:
                continue
            if load is not None:
                report.add("banks", f"{name}:{c.line}", f"{load} lanes of one iteration write one bank of {array}, "
                                                        f"more than the II={ii} allows")
                continue
        if not runtime:
            continue
        dim, f, moving = runtime[0]
        report.add("banks", f"{name}:{c.line}", f"{array} dimension {dim} (partition factor {f}) is indexed by "
                                                f"{', '.join(moving)}, which the pipeline walks: its bank is chosen at "
                                                "run time")


def _bank_load(forms: list[tuple[int, int, dict[str, int]]], lane_ranges: dict[str, list[int]]) -> int | None:
    """The most unrolled lanes of one access that may meet in one bank in one iteration, counted as a
    scheduler does: a dimension whose bank the pipeline picks at run time (a variable other than a lane's
    that steps by less than the factor) may put every lane in any of its banks, so only the dimensions whose
    bank each lane names at compile time tell lanes apart. None where no dimension is partitioned."""
    keys: list[int] = []
    for at, (_, f, form) in enumerate(forms):
        if f and all(v in lane_ranges or x % f == 0 for v, x in form.items() if v):
            keys.append(at)
    lanes = sorted({v for _, _, form in forms for v in form if v in lane_ranges})
    if not any(f for _, f, _ in forms):
        return None
    counts: dict[tuple[int, ...], int] = {}
    for lane_values in itertools.product(*(lane_ranges[v] for v in lanes)) if lanes else [()]:
        env = dict(zip(lanes, lane_values, strict=True))
        key = tuple(sum(x * env.get(v, 0) for v, x in forms[at][2].items() if v in lane_ranges) % forms[at][1]
                    for at in keys)
        counts[key] = counts.get(key, 0) + 1
    return max(counts.values())


# ------------------------------------------------------------------------------------------------ ports
#: Bits of the C types a port word can hold, as clang spells them canonically.
_CTYPE_BITS = {"float": 32, "double": 64, "signed char": 8, "char": 8, "unsigned char": 8, "short": 16,
               "unsigned short": 16, "int": 32, "unsigned int": 32, "long": 64, "unsigned long": 64,
               "long long": 64, "unsigned long long": 64}
_WORD = re.compile(r"^(?:const )?hls::vector<(.+), (\d+)(?:UL|U|L)?>$")


def check_ports(k: CFile, port_bits: int, report: LintReport) -> None:
    """Every DDR pointer (a pointer parameter of any function) points to whole port words,
    ``hls::vector<T, N>`` of the board's ``port_bits``, and is only ever read or written a whole word at a
    time (no lane of a DDR word assigned in place, no cast to another pointer type): with words whole and
    aligned by their type, Vitis needs no automatic widening, which a guarded or unaligned scalar access
    defeats."""
    for fn in k.functions.values():
        params = {p: node for p, node in fn.params.items() if node.type.endswith("*")}
        for pname, param in params.items():
            pointee = param.type.removesuffix("*").strip()
            m = _WORD.match(pointee)
            bits = _CTYPE_BITS.get(m.group(1), 0) * int(m.group(2)) if m else 0
            where = f"{fn.name}:{param.line}"
            if not m:
                report.add("ports", where, f"DDR pointer {pname} is {pointee} *, not a port word: its accesses are "
                                           "scalar and Vitis widens them only when they are aligned, unconditional "
                                           "and sequential")
                continue
            if port_bits and bits != port_bits:
                report.add("ports", where, f"DDR pointer {pname} carries {bits}-bit words; the board's ports are "
                                           f"{port_bits} bits")
        if not params:
            continue
        for c in fn.body.walk():
            if c.kind == "CALL_EXPR" and c.name == "operator[]":
                # a lane taken from (or written into) a word in DDR itself: every lane is a port access of its
                # own, and a lane written is a partial word
                objects = [strip(x) for x in c.children[:1]]
                if any(o.kind == "ARRAY_SUBSCRIPT_EXPR" and (a := array_access(o)) and a[0] in params
                       for o in objects):
                    report.add("ports", f"{fn.name}:{c.line}", "a lane of a word in DDR is accessed in place, not "
                                                               "the whole word")
            elif c.kind in ("CSTYLE_CAST_EXPR", "CXX_REINTERPRET_CAST_EXPR", "CXX_STATIC_CAST_EXPR"):
                refs = [x.name for x in c.walk() if x.kind == "DECL_REF_EXPR" and x.name in params]
                if refs and c.type.endswith("*"):
                    report.add("ports", f"{fn.name}:{c.line}", f"DDR pointer {refs[0]} is cast to {c.type}: its "
                                                               "accesses are no longer whole port words")
