"""The PE array (``compute_tile`` and the PE function it calls) against design.json: the pipelined nest
(labels, trip counts, where the PIPELINE pragma is and the II it asks for), the lanes, the operators of one
iteration and the cores they are bound to, the accumulation's dependence distance and loop-carried path,
and the write process's epilogue operators."""

from __future__ import annotations

from math import ceil, prod

from cost_models.fpga_costs import RMW_EXTRA_CYCLES
from hetero_dse.hls.cparse import CFile, CFunction, CLoop
from hetero_dse.hls.ctree import Node
from hetero_dse.hls.cvalues import NotAffine, array_access, c_affine, strip
from hetero_dse.hls.lint.arith import Arithmetic, count_arithmetic
from hetero_dse.hls.lint.record import DesignRecord, LintReport

__all__ = ["check_bindings", "check_compute", "check_epilogue", "pipeline_region"]

def pipeline_region(fn: CFunction, report: LintReport, expect: bool = True) -> CLoop | None:
    """The loop a process pipelines (its one PIPELINE pragma); a finding where there is none or several."""
    pipelined = [lp for lp in fn.loops if lp.has("PIPELINE")]
    if len(pipelined) > 1:
        report.add("pipeline", f"{fn.name}:{pipelined[1].line}", f"{fn.name} has {len(pipelined)} pipelined loops; "
                                                                 "the design pipelines one loop nest a process")
    if not pipelined:
        if expect:
            report.add("pipeline", f"{fn.name}:{fn.node.line}", f"{fn.name} pipelines no loop: the model charges one "
                                                                "iteration an II, not the loop body's whole latency")
        return None
    return max(pipelined, key=lambda lp: len(lp.parents))


def _ii(lp: CLoop | CFunction) -> int | None:
    p = lp.pragma("PIPELINE")
    if p is None:
        return None
    return p.int("ii", 1)


def check_compute(k: CFile, r: DesignRecord, report: LintReport) -> Arithmetic | None:
    fn = k.functions.get("compute_tile")
    if fn is None:
        report.add("arithmetic", "compute_tile", "the kernel has no compute_tile function")
        return None
    nest = r.pipeline_nest
    region_loop = pipeline_region(fn, report, expect=bool(nest))
    chain = [*region_loop.parents, region_loop] if region_loop else []
    where = f"compute_tile:{region_loop.line if region_loop else fn.node.line}"
    for lp in chain:
        report.mark(lp.pragma("PIPELINE"))
    # the pipelined nest: reduce loops outside spatial loops, each the model's iterations inside a tile
    got = [(lp.label, _trips(lp, fn, report)) for lp in chain]
    want = [(f"pe_{lp.ident}", lp.outer) for lp in nest]
    if got != want:
        report.add("trips", where, f"the pipelined nest is {_nest(got)}; the model's is {_nest(want)}")
    iterations = prod(t or 0 for _, t in got)
    charged = r.predicted["compute_cycles_per_tile"] - r.predicted["pipeline_depth"]
    if region_loop is not None and iterations * int(r.predicted["ii"]) != charged:
        report.add("trips", where, f"the pipeline runs {iterations} iterations at II={r.predicted['ii']} a tile; "
                                   f"the model charges {charged} cycles besides its depth")
    if region_loop is not None and _ii(region_loop) != int(r.predicted["ii"]):
        report.add("ii", where, f"the pipeline asks for II={_ii(region_loop)}, the model predicts {r.predicted['ii']}")
    # the lanes: every unrolled loop of the operator, one lane a value
    for lp in fn.loops:
        if lp.label.startswith("lane_"):
            knob = r.loop_by_ident(lp.label.removeprefix("lane_"))
            trips = _trips(lp, fn, report)
            if knob is None or trips != knob.unroll:
                report.add("trips", f"compute_tile:{lp.line}", f"lane loop {lp.label} has {trips} lanes; the design "
                                                               f"unrolls {knob.unroll if knob else 'no such loop'}")
    region = region_loop.body if region_loop else fn.body
    arithmetic = count_arithmetic(k, fn, region)
    for lp in arithmetic.unreadable:
        report.add("arithmetic", f"{lp.function}:{lp.line}", f"the bounds of loop {lp.name} cannot be read")
    counts = arithmetic.counts
    report.mul_per_iteration, report.add_per_iteration = counts["mul"], counts["add"]
    units = r.predicted["units"]
    for unit in ("mul", "add"):
        if counts[unit] != units[unit]:
            report.add("arithmetic", where, f"one pipeline iteration of compute_tile performs {counts[unit]} data "
                                            f"{unit}s; the model charges {units[unit]}")
    for unit in ("div", "cmp"):
        if counts[unit]:
            what = "divisions" if unit == "div" else "comparisons"
            report.add("arithmetic", where, f"one pipeline iteration of compute_tile performs {counts[unit]} data "
                                            f"{what}; the model charges none")
    _check_dependence(fn, r, chain, region, report)
    _check_pe_functions(k, fn, region, report)
    return arithmetic


def _trips(lp: CLoop, fn: CFunction, report: LintReport) -> int | None:
    try:
        return lp.trip_count({}, fn.defs)
    except NotAffine:
        report.add("trips", f"{fn.name}:{lp.line}", f"the trip count of loop {lp.name} cannot be read")
        return None


def _nest(loops: list[tuple[str, int | None]]) -> str:
    return " > ".join(f"{label or '(unlabelled)'}[{trips}]" for label, trips in loops) or "no loop"


# ------------------------------------------------------------------------------------- dependence
def _distance(chain: list[CLoop], index: list[Node], fn: CFunction) -> int | None:
    """Iterations of the pipelined nest between two updates of one output element: the loops inside the
    innermost loop that does not pick the element."""
    variables: set[str] = set()
    for ix in index:
        variables |= {v for v, c in c_affine(ix, fn.defs).items() if v and c}
    trips = [lp.trip_count({}, fn.defs) for lp in chain]
    for at in range(len(chain) - 1, -1, -1):
        if chain[at].var not in variables and trips[at] > 1:
            return prod(trips[at + 1:])
    return None


def _obuf_writes(region: Node) -> list[tuple[Node, Node]]:
    """``obuf[...] = value`` and ``obuf[...] op= value`` statements: (assignment, target)."""
    out = []
    for n in region.walk():
        if n.kind in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR") and n.op in ("=", "+=", "-=", "*="):
            target = strip(n.children[0])
            access = array_access(target)
            if access and access[0] == "obuf":
                out.append((n, target))
    return out


def _check_dependence(fn: CFunction, r: DesignRecord, chain: list[CLoop], region: Node,
                      report: LintReport) -> None:
    pragmas = [p for p in fn.all_pragmas if p.name == "DEPENDENCE"]
    report.mark(*pragmas)
    writes = _obuf_writes(region)
    code_distance = None
    where = f"compute_tile:{chain[-1].line}" if chain else "compute_tile"
    if writes and chain:
        try:
            code_distance = _distance(chain, array_access(writes[0][1])[1], fn)
        except NotAffine:
            report.add("dependence", where, "the output element's index cannot be read as affine")
    if r.carried:
        want = int(r.predicted["accumulation_distance"])
        if code_distance != want:
            report.add("dependence", where, f"the code updates an output element every {code_distance} pipeline "
                                            f"iterations; the model's accumulation distance is {want}")
        if len(pragmas) != 1:
            report.add("dependence", where, f"{len(pragmas)} DEPENDENCE pragmas where the accumulation needs one "
                                            f"(variable=obuf, inter, RAW, dependent=true, distance={want}): without it "
                                            "Vitis assumes the next iteration reads what this one writes")
        else:
            p = pragmas[0]
            got = (p.get("variable"), p.get("type"), p.get("direction"), p.get("dependent"), p.int("distance"))
            if got != ("obuf", "inter", "RAW", "true", want):
                report.add("dependence", f"compute_tile:{p.line}",
                           f"DEPENDENCE {' '.join(f'{k}={v}' for k, v in p.args.items())} is not the accumulation's "
                           f"(variable=obuf type=inter direction=RAW dependent=true distance={want}): a distance "
                           "longer than the code's lets Vitis schedule a read before the write it needs")
    elif pragmas:
        report.add("dependence", f"compute_tile:{pragmas[0].line}", "a DEPENDENCE pragma where the design carries "
                                                                    "no accumulation through the pipeline")
    # the loop-carried path: from the old value's read to its write, through what operators
    recurrence = int(r.predicted["recurrence"])
    ram = r.write["storage"] != "registers"
    for assignment, _target in writes:
        if not r.carried:
            break
        path, through = _carried_path(assignment, fn, r)
        if path is None:
            continue
        cycles = path + (RMW_EXTRA_CYCLES if ram else 0)
        if through:
            report.add("recurrence", f"compute_tile:{assignment.line}",
                       f"the old sum passes through a call of {through} before it is written back: the carried path "
                       f"is the call's whole pipeline, not the add the model charges ({recurrence} cycles)")
        elif cycles > recurrence:
            report.add("recurrence", f"compute_tile:{assignment.line}",
                       f"the accumulation's carried path is {cycles} cycles; the model charges {recurrence}")
        distance = int(r.predicted["accumulation_distance"])
        if distance and ceil(cycles / distance) > int(r.predicted["ii"]) and not through:
            report.add("recurrence", f"compute_tile:{assignment.line}",
                       f"a {cycles}-cycle carried path every {distance} iterations needs II={ceil(cycles / distance)}; "
                       f"the model predicts {r.predicted['ii']}")


def _carried_path(assignment: Node, fn: CFunction, r: DesignRecord) -> tuple[int | None, str | None]:
    """Cycles from a read of ``obuf`` to the value written back (the operators' latencies; None where the
    value does not depend on the old one), and the kernel function the path passes through, if any."""
    latency = {"add": int(r.predicted["add_latency"]), "mul": int(r.predicted["mul_latency"])}
    cls = {"+": "add", "-": "add", "*": "mul", "+=": "add", "-=": "add", "*=": "mul"}
    through: list[str] = []
    memo: dict[str, int | None] = {}
    locals_ = {n.name: [c for c in n.children if c.kind != "TYPE_REF"][-1]
               for n in fn.body.walk() if n.kind == "VAR_DECL" and [c for c in n.children if c.kind != "TYPE_REF"]}

    def path(n: Node) -> int | None:
        n = strip(n)
        access = array_access(n) if n.kind == "ARRAY_SUBSCRIPT_EXPR" else None
        if access and access[0] == "obuf":
            return 0
        if n.kind == "DECL_REF_EXPR":
            if n.name in locals_ and n.name not in memo:
                memo[n.name] = None
                memo[n.name] = path(locals_[n.name])
            return memo.get(n.name)
        parts = [p for p in (path(c) for c in n.children) if p is not None]
        if not parts:
            return None
        longest = max(parts)
        if n.kind in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR") and n.op in cls:
            return longest + latency[cls[n.op]]
        if n.kind == "CALL_EXPR" and n.name and n.name not in ("operator[]",):
            through.append(n.name)
        return longest

    value = assignment.children[-1]
    if assignment.kind == "COMPOUND_ASSIGNMENT_OPERATOR":
        inner = path(value)
        p = (inner or 0) + latency[cls[assignment.op]]
    else:
        p = path(value)
    return p, (through[0] if through else None)


# ------------------------------------------------------------------------------------- PE functions
def _check_pe_functions(k: CFile, fn: CFunction, region: Node, report: LintReport) -> None:
    """A kernel function the PE array calls is one PE: not inlined (INLINE off) and pipelined at II 1, so
    that Vitis schedules it once and instantiates it a lane."""
    called = {n.name for n in region.walk() if n.kind == "CALL_EXPR" and n.name in k.functions}
    for name in sorted(called):
        pe = k.functions[name]
        where = f"{name}:{pe.node.line}"
        inline, pipeline = pe.pragma("INLINE"), pe.pragma("PIPELINE")
        report.mark(inline, pipeline)
        if inline is None or "off" not in inline.args:
            report.add("inline", where, f"{name} is not kept as a function (INLINE off): Vitis inlines it and "
                                        "schedules every lane's operators in one body")
        if pipeline is None:
            report.add("pipeline", where, f"{name} is not pipelined: one PE a lane takes new operands every cycle "
                                          "only as a pipeline at II=1")
        elif pipeline.int("ii", 1) != 1:
            report.add("ii", where, f"{name} is pipelined at II={pipeline.int('ii', 1)}; one PE a lane takes new "
                                    "operands every cycle only at II=1")
        _check_local_arrays(pe, report)
    _check_local_arrays(fn, report)


def _check_local_arrays(fn: CFunction, report: LintReport) -> None:
    """Arrays a pipelined PE indexes by lane are registers (complete partition): a RAM has two ports."""
    parts = fn.variable_pragmas("ARRAY_PARTITION")
    for n in fn.body.walk():
        if n.kind != "VAR_DECL" or n.name not in fn.arrays or "&" in n.type:
            continue
        ps = parts.pop(n.name, [])
        report.mark(*ps)
        if prod(fn.arrays[n.name]) <= 1:
            if ps:
                report.add("partition", f"{fn.name}:{ps[0].line}", f"{n.name} has one element: nothing to partition")
            continue
        if len(ps) != 1 or ps[0].get("type") != "complete" or ps[0].int("dim", 1) not in (0, 1):
            report.add("partition", f"{fn.name}:{n.line}", f"{n.name} ({' x '.join(map(str, fn.arrays[n.name]))}) is "
                                                           "not partitioned completely: its lanes would share the "
                                                           "two ports of a RAM")


# ------------------------------------------------------------------------------------ write process
def check_epilogue(k: CFile, r: DesignRecord, report: LintReport, region: CLoop | None,
                   one_word: bool = False) -> Arithmetic | None:
    """The write process's operators: the epilogue's, one set a lane of the word, as charged. ``one_word``: the
    process writes one word a tile and pipelines no loop; that word is the body inside its tile loops."""
    fn = k.functions.get("write_out")
    if fn is None or (region is None and not one_word):
        return None
    epilogue = r.predicted.get("epilogue") or {}
    lanes = int(epilogue.get("lanes", 0)) if epilogue.get("steps") else 0
    if region is not None:
        body, where = region.body, f"write_out:{region.line}"
    else:
        tiles = [lp for lp in fn.loops if not lp.has("UNROLL")]
        inner = max(tiles, key=lambda lp: len(lp.parents)) if tiles else None
        body, where = (inner.body, f"write_out:{inner.line}") if inner else (fn.body, f"write_out:{fn.node.line}")
    arithmetic = count_arithmetic(k, fn, body)
    counts = arithmetic.counts
    want = {"mul": lanes * int(epilogue.get("muls", 0)), "add": lanes * int(epilogue.get("adds", 0)),
            "cmp": lanes * int(epilogue.get("compares", 0)), "div": 0}
    for unit, n in want.items():
        if counts[unit] != n:
            report.add("arithmetic", where, f"one pipeline iteration of write_out performs {counts[unit]} data "
                                            f"{unit}s; the model charges {n}")
    return arithmetic


def check_bindings(fn_bound: list[Arithmetic], k: CFile, r: DesignRecord, report: LintReport) -> None:
    """Every variable that is one data operation is bound (BIND_OP) to the core the model charges for it."""
    core_of = {"*": r.cores["mul"], "+": r.cores["add"], "-": r.cores["sub"]}
    seen: set[tuple[str, str]] = set()
    for arithmetic in fn_bound:
        for b in arithmetic.bound:
            if (b.function, b.name) in seen:
                continue
            seen.add((b.function, b.name))
            fn = k.functions[b.function]
            ps = fn.variable_pragmas("BIND_OP").get(b.name, [])
            report.mark(*ps)
            where = f"{b.function}:{b.line}"
            core = core_of.get(b.op)
            if core is None:
                report.add("bind_op", where, f"{b.name} is a division ({b.op}), which the model charges no core for")
                continue
            if len(ps) != 1:
                report.add("bind_op", where, f"{b.name} ({b.op}) is bound by {len(ps)} BIND_OP pragmas; the model "
                                             f"charges op={core['op']} impl={core['impl']}")
                continue
            got = (ps[0].get("op"), ps[0].get("impl"))
            if got != (core["op"], core["impl"]):
                report.add("bind_op", where, f"{b.name} ({b.op}) is bound to op={got[0]} impl={got[1]}; the model "
                                             f"charges op={core['op']} impl={core['impl']}")
