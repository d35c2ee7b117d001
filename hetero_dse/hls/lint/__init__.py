"""The HLS lint: reads a generated ``kernel.cpp`` back and holds every pragma, loop and operator of it to
the project's ``design.json``.

The kernel is parsed with clang (libclang), not regenerated from the context that produced it, so a
template that drifts from the model is caught from what it actually emitted. What it checks:

* the top (``top.py``): DATAFLOW; every port's m_axi/s_axilite interface, bundle (one a port) and depth;
  every channel's blocks, box, ARRAY_PARTITION (dimension, type, factor: the model's banks) and
  BIND_STORAGE (the model's memory, ram_2p, read latency 1);
* each process (``processes.py``): its tile loops' trips and runs (blocks loaded, tiles computed and
  written); a read or write process's words a block and word II; every DDR access an unconditional,
  sequential run (a burst) of the model's length; every buffer access's bank fixed at compile time; every
  DDR pointer a whole port word of the board's width; no data arithmetic in a read process;
* the PE array (``compute.py``): the pipelined nest (labels, trips, order), its PIPELINE and II, each lane
  loop's lanes; the data multiplies, adds (compound and subtract forms included), divisions and
  comparisons of one iteration against the model's operator instances, each bound (BIND_OP) to the core
  the model charges; the PE function kept (INLINE off) and pipelined at II 1, its operand arrays registers;
  the accumulation's DEPENDENCE (variable, direction, distance) against the distance the code's loops give,
  and its loop-carried path (operators between the old sum's read and its write) against the model's
  recurrence and II; the write process's epilogue operators;
* every UNROLL whole; no loop of a process that neither a pipeline nor an UNROLL covers; no PIPELINE on a
  loop of one iteration; and no pragma that no check accounts for.

What only synthesis can confirm (the II achieved, Fmax, the bursts Vitis actually forms, the partition of
stream_of_blocks blocks) is listed in the project README, not claimed here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hetero_dse.hls.cparse import CFile, CFunction, CLoop, LintError, parse_kernel
from hetero_dse.hls.lint.arith import count_arithmetic
from hetero_dse.hls.lint.compute import check_bindings, check_compute, check_epilogue, pipeline_region
from hetero_dse.hls.lint.processes import check_banks, check_ports, check_tile_loops, check_transfer
from hetero_dse.hls.lint.record import DesignRecord, Finding, LintReport
from hetero_dse.hls.lint.top import check_config, check_top

__all__ = ["Finding", "LintError", "LintReport", "lint"]


def lint(project: str | Path, record: dict[str, Any] | None = None) -> LintReport:
    """Check the generated kernel of an HLS project against its design record (``record``, read from the
    project's ``design.json`` when not given)."""
    project = Path(project)
    kernel = project / "src" / "kernel.cpp"
    record_path = project / "design.json"
    from hetero_dse.hls.network_lint import is_network_project, lint_network
    from hetero_dse.hls.pipeline_lint import is_pipeline_project, lint_pipeline

    if record is None and is_pipeline_project(project):
        return lint_pipeline(project)  # a layer-pipelined network: one stage a layer
    if record is None and is_network_project(project):
        return lint_network(project)  # the shared kernel of a whole network: its own checks
    if not kernel.is_file() or (record is None and not record_path.is_file()):
        raise LintError(f"{project} is not a hetero_dse HLS project (no src/kernel.cpp and design.json)")
    if record is None:
        try:
            record = json.loads(record_path.read_text())
        except ValueError:
            raise LintError(f"{record_path} is not a design record written by hetero_dse explore") from None
        except OSError as exc:
            raise LintError(f"cannot read {record_path}: {exc.strerror}") from None
    r = DesignRecord(record, str(record_path))
    k = parse_kernel(kernel, project / "sim" / "include")
    report = LintReport()
    check_top(k, r, report)
    check_ports(k, int(r.predicted.get("port_bits", 0)), report)
    partitions = _partitions(k.functions.get(r.top))
    bound = []
    for i, info in enumerate(r.reads):
        fn = k.functions.get(r.read_process(i))
        if fn is None:
            report.add("transfer", r.read_process(i), f"the kernel has no read process for buffer {info['tensor']}")
            continue
        region = pipeline_region(fn, report, expect=_walks(info))
        check_tile_loops(fn, r, int(info["loads"]), "loads of its buffer", report)
        check_transfer(fn, info, region, report)
        check_banks(fn, region, partitions, report)
        arithmetic = count_arithmetic(k, fn, fn.body)
        if sum(arithmetic.counts.values()):
            counted = ", ".join(f"{n} {u}" for u, n in sorted(arithmetic.counts.items()))
            report.add("arithmetic", fn.name, f"{fn.name} performs data arithmetic ({counted}) that the model charges "
                                              "nowhere")
        bound.append(arithmetic)
    compute = k.functions.get("compute")
    if compute is not None:
        check_tile_loops(compute, r, int(r.predicted["tiles"]), "tiles", report)
    arithmetic = check_compute(k, r, report)
    if arithmetic is not None:
        bound.append(arithmetic)
        check_banks(k.functions["compute_tile"], pipeline_region(k.functions["compute_tile"], LintReport()),
                    partitions, report)
    write = k.functions.get("write_out")
    if write is None:
        report.add("transfer", "write_out", "the kernel has no write process")
    else:
        region = pipeline_region(write, report, expect=_walks(r.write))
        check_tile_loops(write, r, int(r.write["loads"]), "output tiles", report)
        check_transfer(write, r.write, region, report)
        check_banks(write, region, partitions, report)
        epilogue = check_epilogue(k, r, report, region, one_word=not _walks(r.write))
        if epilogue is not None:
            bound.append(epilogue)
    check_bindings(bound, k, r, report)
    _check_loops(k, r, report)
    check_config(project, r, report)
    for p in k.pragmas:
        unknown = sorted(set(p.args) - _OPTIONS.get(p.name, set()))
        if p.name in _OPTIONS and unknown:
            report.add("pragma", f"line {p.line}", f"'{p}' sets {', '.join(unknown)}, which the design does not: "
                                                   "the model charges the pragma without it")
    for p in k.pragmas:
        if p.line not in report.verified:
            report.add("pragma", f"line {p.line}", f"'{p}' is not a pragma the design calls for")
    report.pragmas_checked = len(report.verified)
    return report


#: The options each pragma the generator writes may carry (anything else changes what Vitis builds: PIPELINE off
#: or style=, an interface's own burst length, a BIND_OP latency...).
_OPTIONS = {"PIPELINE": {"ii"}, "UNROLL": {"factor"}, "ARRAY_PARTITION": {"variable", "type", "factor", "dim"},
            "BIND_STORAGE": {"variable", "type", "impl", "latency"}, "BIND_OP": {"variable", "op", "impl"},
            "DEPENDENCE": {"variable", "type", "direction", "dependent", "distance"}, "INLINE": {"off"},
            "INTERFACE": {"mode", "port", "offset", "bundle", "depth"}, "DATAFLOW": set()}


def _walks(info: dict[str, Any]) -> bool:
    """Whether a read or write process walks more than one word a block: a loop to
    pipeline."""
    return int(info["rows"]) * int(info["iterations_per_row"]) > 1


def _partitions(top: CFunction | None) -> dict[str, list[tuple[int, int | None]]]:
    """ARRAY_PARTITION pragmas of the channels: variable -> [(dim, factor or None for complete)]."""
    out: dict[str, list[tuple[int, int | None]]] = {}
    for var, ps in (top.variable_pragmas("ARRAY_PARTITION") if top else {}).items():
        for p in ps:
            factor = None if p.get("type") == "complete" else p.int("factor", 1)
            out.setdefault(var, []).append((p.int("dim", 1), factor))
    return out


def _perfect(outer: CLoop, pipelined: CLoop) -> bool:
    """Whether ``outer``'s body is the next loop towards ``pipelined`` and nothing else (integer constants
    aside): a perfect nest, which Vitis flattens into one pipelined loop."""
    body = outer.body
    stmts = body.children if body.kind == "COMPOUND_STMT" else [body]
    nested = [s for s in stmts if s.kind in ("FOR_STMT", "LABEL_STMT", "COMPOUND_STMT")]
    constants = [s for s in stmts if s.kind == "DECL_STMT" and all(
        d.type in ("const int", "const bool") for d in s.children if d.kind == "VAR_DECL")]
    if len(nested) + len(constants) != len(stmts) or len(nested) != 1:
        return False
    inner = nested[0]
    while inner.kind in ("LABEL_STMT", "COMPOUND_STMT") and len(inner.children) == 1:
        inner = inner.children[0]
    return inner.kind == "FOR_STMT" or inner is pipelined.node


def _check_loops(k: CFile, r: DesignRecord, report: LintReport) -> None:
    """Every UNROLL is whole; every loop of a process is a tile loop, the pipelined nest, inside a pipeline,
    or unrolled; no PIPELINE on a loop of one iteration."""
    for fn in k.functions.values():
        if fn.name == r.top:
            continue
        pipelined_fn = fn.pragma("PIPELINE") is not None
        regions = [lp for lp in fn.loops if lp.has("PIPELINE")]
        for lp in fn.loops:
            where = f"{fn.name}:{lp.line}"
            try:
                trips = lp.trip_count({}, fn.defs)
            except Exception:  # noqa: BLE001 - a bound that depends on an enclosing lane: enumerated elsewhere
                trips = None
            unroll = lp.pragma("UNROLL")
            if unroll is not None:
                report.mark(unroll)
                factor = unroll.int("factor")
                if unroll.get("factor") is not None and (factor is None or trips is None or factor < trips):
                    report.add("unroll", where, f"loop {lp.name} is unrolled by a factor of {unroll.get('factor')} "
                                                f"of its {trips} iterations; the design unrolls its lanes whole")
                if unroll.get("off") is not None or any(key not in ("factor",) for key in unroll.args):
                    report.add("unroll", where, f"'{unroll}' is not a whole unroll")
            if lp.has("PIPELINE") and trips == 1:
                report.add("pipeline", where, f"PIPELINE on loop {lp.name} of one iteration")
            # the loops of a pipelined nest (the tile loops around it hold the locks: the model charges the
            # pipeline's restart a block)
            inner = next((reg for reg in regions if lp in reg.parents), None)
            if inner is not None and not lp.label.startswith("tile_") and not _perfect(lp, inner):
                report.add("pipeline", where, f"loop {lp.name} holds statements besides the loop nest it pipelines: "
                                              "Vitis cannot flatten it, and the pipeline drains and refills every "
                                              f"iteration of {lp.name}")
            covered = (lp.label.startswith("tile_") or pipelined_fn or lp.has("PIPELINE")
                       or any(reg in lp.parents or lp in reg.parents for reg in regions) or unroll is not None)
            if not covered and (trips is None or trips > 1):
                report.add("unroll", where, f"loop {lp.name} is neither pipelined nor unrolled: its {trips} "
                                            "iterations run one after the other, which the model does not charge")
