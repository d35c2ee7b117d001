"""The FPGA target: a board's design space for an operator, scored by the analytical read/compute/write model,
the best designs written as Vitis HLS projects (C-simulated on request), and their report."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from math import prod
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from cost_models.calibration import Calibration
from cost_models.fpga import FpgaModel
from cost_models.fpga_describe import describe
from cost_models.fpga_costs import ARITHMETIC
from hetero_dse import __version__
from hetero_dse.analysis import Analysis, analyze
from hetero_dse.errors import HeteroDSEError
from hetero_dse.evaluate.model import ModelEvaluator
from hetero_dse.explore.loop import LoopResult
from hetero_dse.explore.settings import AUTO_MODELLED, MODEL_STARTS
from hetero_dse.hardware.board import RESOURCE_KINDS, Board
from hetero_dse.history import Record, Workload, workload_spec
from hetero_dse.history.store import WorkloadHistory
from hetero_dse.operator import Operator
from hetero_dse.space.fpga import FpgaSpace, SpaceOptions
from hetero_dse.targets.base import Alternative, Defaults, Row, Search, Searched, Written
from hetero_dse.targets.fpga_report import design_row, fpga_markdown, fpga_record
from hetero_dse.targets.fpga_search import Designs, Exploration
from hetero_dse.targets.fpga_winograd import winograd_choice, winograd_row
from hetero_dse.targets.fpga_network import network_designs, write_network

__all__ = ["DEFAULT_BUDGET", "SA_PATIENCE", "Exploration", "FpgaTarget", "check_clocks", "check_dtypes",
           "fpga_workload"]

#: designs scored when the user gives no budget to a sampling explorer (they converge well before; BENCHMARKS.md)
DEFAULT_BUDGET = 30_000
#: rounds without a better design that end annealing's search when the user gives no --patience or --budget. Its
#: 512 chains found their last better design by round 92 on the 62 layers of YOLO-v1, ResNet-18 and
#: MobileNet-V2 (3 seeds each), never more than 56 rounds after the one before, and then walked up to 3,000
#: rounds over designs already scored (``bench/sa_patience.py``, BENCHMARKS.md): 2.7 times the longest gap
#: seen ends every one of them with the same best design
SA_PATIENCE = 150
#: loop iterations of an operator past which the model's 64-bit counts (cycles, bytes) could overflow
MAX_ITERATIONS = 2**53

#: designs of each FPGA search kept in the history database (the guided GA's population is 16)
HISTORY_DESIGNS = 64


class FpgaTarget:
    """One board, with the data types, clocks and space options to explore and the model's settings.
    ``budget``: designs scored when the search is given none; ``csim``: C-simulate each project written."""

    kind = "fpga"
    report_key = "explorations"
    artefact = "HLS project"

    @property
    def bandwidth_gbps(self) -> float:
        """The board's DDR/HBM bandwidth over all its channels (the roofline's memory roof)."""
        return self.board.memory.channels * self.board.memory.bandwidth_gbps_per_channel

    def __init__(self, board: Board, *, dtypes: Sequence[str] = (), clocks: Sequence[float] = (),
                 options: SpaceOptions | None = None, traffic_weight: float = 0.01,
                 calibration: Calibration | None = None, budget: int = DEFAULT_BUDGET, csim: bool = False,
                 algorithm: str = "auto", batch: int = 1) -> None:
        self.board, self.dtypes, self.options = board, list(dtypes), options
        self.batch = batch  # images each compute unit of a network's throughput design runs at a time
        # a 3×3 convolution's: one operator's (``targets/fpga_winograd``) and the network kernel's
        # (``fpga_network_algorithm.ALGORITHMS``)
        self.algorithm = algorithm
        self.clocks = check_clocks(board, clocks)
        self.traffic_weight, self.calibration, self.csim = traffic_weight, calibration, csim
        self.device = board.name
        # auto stays simulated annealing with a history: the model makes the default 30,000 designs cheap
        self.defaults = Defaults(MODEL_STARTS, AUTO_MODELLED, budget, "designs", auto_from_history=False,
                                 patience={"sa": SA_PATIENCE})

    def preparation(self, operators: Sequence[Operator]) -> None:
        return None

    def check(self, op: Operator) -> None:
        check_dtypes(op, self.dtypes)
        iterations = prod(lp.extent for lp in analyze(op).main.loops)
        if iterations >= MAX_ITERATIONS:  # the model's cycle and traffic counts are 64-bit integers
            raise HeteroDSEError(f"{op.title} has {iterations:.3g} loop iterations, more than the FPGA model counts "
                                 f"({MAX_ITERATIONS:.3g}); choose a smaller shape")

    def alternatives(self, op: Operator) -> Sequence[Alternative]:
        # Winograd is another generator's (the network kernel's engine), not a point of this space: it is set
        # against the best design in ``finish`` (``targets/fpga_winograd``)
        return ()

    def space(self, op: Operator) -> FpgaSpace:
        dtypes = check_dtypes(op, self.dtypes)
        return FpgaSpace(analyze(op.with_dtype(dtypes[0])), self.board, dtypes, self.clocks, self.options)

    def workload(self, op: Operator, space: FpgaSpace) -> Workload:
        return fpga_workload(op, space.analysis, self.board)

    def evaluator(self, op: Operator, space: FpgaSpace, history: WorkloadHistory | None, progress=None):
        # Not read through the history: the model scores a design in a microsecond, less than a lookup, and
        # the history holds its latency, not the objective it ranks by. Its best designs are written after.
        return nullcontext(ModelEvaluator(FpgaModel(space.tables, traffic_weight=self.traffic_weight,
                                                    calibration=self.calibration)))

    def observers(self, space: FpgaSpace, search: Search) -> list[Designs]:
        return [Designs(space, max(search.top_k, HISTORY_DESIGNS))]

    def finish(self, op: Operator, space: FpgaSpace, explorer: str, loop: LoopResult, evaluator: ModelEvaluator,
               observers: Sequence[Designs], history: WorkloadHistory | None, search: Search,
               alternatives: Sequence[Searched] = ()) -> Exploration:
        model = evaluator.model
        result = observers[0].result(space, explorer, loop)
        if history is not None and result.found:
            latency = model.evaluate(result.top_rows)["latency_s"]
            history.db.add_many(history.id, [Record(space.decode(row), float(s), source=explorer)
                                             for row, s in zip(result.top_rows, latency, strict=True)])
        result.top_rows, result.top_objective = result.top_rows[:search.top_k], result.top_objective[:search.top_k]
        e = Exploration(op, self, space, explorer, loop, estimate=True, board=self.board, model=model, result=result)
        if not result.found:
            if loop.interrupted:
                return e
            raise HeteroDSEError(nothing_fits(e))
        # each with the score it is ranked by (the objective), which the report prints beside its latency
        e.designs = [(space.decode(r), {**describe(model, r), "score_s": float(score)})
                     for r, score in zip(result.top_rows, result.top_objective, strict=True)]
        e.pareto = [(space.decode(r), describe(model, r)) for r in result.pareto_rows]
        e.best, e.best_seconds = e.designs[0][0], e.designs[0][1]["latency_s"]
        # the second algorithm, a 3×3 convolution by Winograd on the network kernel's engine, at the best design's
        # data type and clock target (not after a Ctrl-C: the run stops with what it has)
        if not loop.interrupted:
            e.winograd = winograd_choice(op, self.board, e.best["dtype"], e.best["clock_mhz"], self.algorithm,
                                         e.best_seconds, calibrated=self.calibration is not None)
            loop.interrupted = e.winograd is not None and e.winograd.interrupted
        return e

    def directory(self, op: Operator) -> str:
        return f"{op.slug}/{self.board.name}"

    def write(self, e: Exploration, out: Path, seed: int) -> Written:
        from hetero_dse.hls.csim import csim
        from hetero_dse.hls.project import TestBenchTooLarge, check_testbench_size, write_project

        if not e.designs:
            return Written(why="interrupted before a feasible design")
        op, analysis = e.best_operator()
        if e.winograd is not None and e.winograd.chosen:  # the network kernel's project for this one layer
            try:  # the same limits as the single-operator kernel's test bench, before drawing its data
                check_testbench_size(op, analysis)
            except TestBenchTooLarge as exc:
                return Written(why=str(exc))
            record = write_network(e.winograd.design, [op], out / self.directory(e.op) / "hls", out, self.csim, seed)
            if "directory" not in record:
                return Written(why=record["project_why"].removeprefix("no project written: "))
            check = record.get("check")
            return Written(record["directory"], passed=check["passed"] if check else None, check=check)
        point, design = e.best_design
        try:
            directory = write_project(out / self.directory(e.op) / "hls", op, analysis, point, design,
                                      self.board, seed=seed, search_interrupted=e.interrupted)
        except TestBenchTooLarge as exc:  # the search's result still goes into the report
            return Written(why=str(exc))
        written = Written(str(directory.relative_to(out)), warnings=_lint_warnings(directory, out))
        if self.csim:
            result = csim(directory)
            written.passed = result.passed
            written.check = {"passed": result.passed, "mismatches": result.mismatches,
                             "max_abs_error": result.max_abs_error, "elements": result.elements,
                             "headers": result.headers}
        return written

    def row(self, e: Exploration, written: Written | None) -> Row:
        if e.winograd is not None and e.winograd.chosen:
            return winograd_row(e, written)
        design = e.designs[0][1] if e.designs else None
        detail = ""
        if design is not None:
            res, util = design["resources"], design["utilisation"]
            detail = (f"{e.designs[0][0]['dtype']} · PE {design['pe']} · II {design['ii']} · DSP {res['dsp']:,.0f} "
                      f"({100 * util['dsp']:.0f}%) · BRAM18K {res['bram18k']:,.0f} ({100 * util['bram18k']:.0f}%)"
                      + clock_note(design))
        return Row("fpga", e.op.name, e.op.shape_name, self.board.name, "model", e.best_seconds,
                   design["gops"] if design else None, design["roofline"] if design else None,
                   design["bound"] if design else None, None, e.explorer, e.loop.evaluations, 0, 0, e.loop.wall_s,
                   e.interrupted, written.directory if written else None, written.why if written else None,
                   _verdict(written), detail)

    def record(self, e: Exploration, written: Written | None) -> dict[str, Any]:
        return fpga_record(e, written)

    def markdown(self, e: Exploration, written: Written | None) -> list[str]:
        return fpga_markdown(e, written)

    def footnote(self) -> str:
        return ("FPGA: the analytical read/compute/write model under the board's usable caps (percentages of "
                "resources are of those caps). The I/O bound is seed 001's Theorem 4.9 for direct convolutions and "
                "a matmul-style bound otherwise (raised to the compulsory traffic); the kind used is in report.json.")

    def network(self, graph: Any, outcomes: Sequence[Exploration], out: Path | None = None) -> dict[str, Any]:
        """One accelerator for the whole network on this board (``fpga_network.network_designs``)."""
        return network_designs(self, graph, outcomes, check_dtypes(graph.operators()[0], self.dtypes)[0], out)

    def csv_rows(self, e: Exploration) -> list[dict[str, Any]]:
        return [design_row(e, rank, p, d) for rank, (p, d) in enumerate(e.designs, start=1)]


def clock_note(design: dict) -> str:
    """`` · 188 of 250 MHz (2 SLRs, fan-out 64)`` where the model derates the target clock, else nothing."""
    clock = design.get("clock") or {}
    target, achieved = clock.get("target_mhz"), clock.get("achieved_mhz")
    if not target or not achieved or achieved >= target * 0.999:
        return ""
    why = [f"{clock['slrs_spanned']} SLRs"] if clock.get("slrs_spanned", 1) > 1 else []
    if clock.get("fanout", 1) > 16:
        why.append(f"fan-out {clock['fanout']:.0f}")
    return f" · {achieved:.0f} of {target:.0f} MHz ({', '.join(why)}; {clock.get('basis', 'estimate')})"


def _lint_warnings(directory: Path, out: Path) -> list[str]:
    """The HLS lint's verdict on a project just written, when it found the code and design.json apart (the
    verdict is in design.json; ``hetero_dse csim`` fails on it)."""
    verdict = json.loads((directory / "design.json").read_text()).get("lint", {})
    if verdict.get("ok") is True:
        return []
    findings = verdict.get("findings") or [verdict.get("error", "no verdict")]
    return [f"HLS lint on {directory.relative_to(out)}: {len(findings)} finding(s), first: {findings[0]} "
            "(see design.json; hetero_dse csim fails on it)"]


def _verdict(written: Written | None) -> str:
    if written is None or written.passed is None:
        return "—"
    return "pass" if written.passed else "FAIL"


def check_dtypes(op: Operator, dtypes: Sequence[str]) -> list[str]:
    chosen = list(dtypes) or [op.dtype]
    for dtype in chosen:
        if dtype not in ARITHMETIC:
            raise HeteroDSEError(f"data type {dtype} is not one the FPGA model knows; use "
                                 f"{', '.join(ARITHMETIC)}")
        op.with_dtype(dtype)
    return chosen


def check_clocks(board: Board, clocks: Sequence[float]) -> list[float]:
    chosen = [float(c) for c in clocks] or [board.default_clock_mhz]
    for clock in chosen:
        if not math.isfinite(clock) or clock <= 0:
            raise HeteroDSEError(f"a clock target must be a positive number of MHz, got {clock:g}")
        if clock > board.max_clock_mhz:
            raise HeteroDSEError(f"board {board.name} cannot run at {clock:g} MHz: its maximum is "
                                 f"{board.max_clock_mhz:g} MHz (clock.max_mhz in {board.path.name})")
    return chosen


def fpga_workload(op: Operator, analysis: Analysis, board: Board) -> Workload:
    """The history's key for ``op``'s designs on ``board`` as the analytical model scores them."""
    return Workload(op.name, op.signature(), f"fpga {board.name}", {"hetero_dse": __version__, "model": "analytical"},
                    workload_spec(analysis))


def nothing_fits(e: Exploration) -> str:
    """One sentence: which resource the nearest design exceeds, and by how much."""
    r = e.result
    name = e.op.name + (f" ({e.op.shape_name})" if e.op.shape_name else "")
    if r.closest_row is None or r.closest_usage is None:
        return f"no design of {name} was evaluated on {e.board.name}; raise --budget or --time-budget"
    i = int(np.argmax(r.closest_usage))
    kind = RESOURCE_KINDS[i]
    cap, left = e.board.cap(kind), e.board.kernel_resources(kind)
    shell = " left by the shell" if left != e.board.resources[kind] else ""
    return (f"nothing fits on {e.board.name}: the smallest design of {name} found needs "
            f"{r.closest_usage[i] * cap:,.0f} {kind.upper()}, {r.closest_usage[i]:.2f}x the usable {cap:,} "
            f"({e.board.usable[kind]:.0%} of {left:,}{shell}); try a larger board or smaller shapes")
