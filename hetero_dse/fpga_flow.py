"""FPGA exploration of one operator on one board: space, model, search, best designs (no I/O, no CLI)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from cost_models.calibration import Calibration
from cost_models.fpga import FpgaModel
from cost_models.fpga_costs import ARITHMETIC
from hetero_dse import __version__
from hetero_dse.analysis import Analysis, analyze
from hetero_dse.hardware.board import RESOURCE_KINDS, Board
from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore import search
from hetero_dse.explore.search import MODEL_STARTS, ExplorerSettings, SearchResult
from hetero_dse.history import HistoryDB, Record, Workload, workload_spec
from hetero_dse.history.match import Prior
from hetero_dse.operator import Operator
from hetero_dse.space.fpga import FpgaSpace, SpaceOptions
from hetero_dse.space.point import Point


#: designs of each FPGA search kept in the history database (the guided GA's population is 16)
HISTORY_DESIGNS = 64


@dataclass
class Exploration:
    """The outcome of exploring one operator on one board."""

    op: Operator
    board: Board
    space: FpgaSpace
    model: FpgaModel
    result: SearchResult
    designs: list[tuple[Point, dict[str, Any]]] = field(default_factory=list)  # top-k, best first
    pareto: list[tuple[Point, dict[str, Any]]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.op.slug

    @property
    def best(self) -> tuple[Point, dict[str, Any]]:
        return self.designs[0]

    def best_operator(self) -> tuple[Operator, Analysis]:
        """The operator instantiated at the best design's data type, with its analysis."""
        dtype = self.best[0]["dtype"]
        op = with_dtype(self.op, dtype)
        return op, analyze(op)


def with_dtype(op: Operator, dtype: str) -> Operator:
    """``op`` rebuilt for another data type, or a clear error if it has no ``dtype`` parameter allowing it."""
    if dtype == op.dtype:
        return op
    param = op.definition.params.get("dtype")
    if param is None:
        raise HeteroDSEError(f"operator {op.name} cannot use data type {dtype}: it has no 'dtype' parameter "
                             f"(its inputs are {op.dtype})")
    if param.choices and dtype not in param.choices:
        raise HeteroDSEError(f"operator {op.name} cannot use data type {dtype}: its dtype is one of "
                             f"{', '.join(map(str, param.choices))}")
    rebuilt = op.definition.instantiate({**dict(op.params), "dtype": dtype})
    return replace(rebuilt, shape_name=op.shape_name)


def check_dtypes(op: Operator, dtypes: Sequence[str]) -> list[str]:
    chosen = list(dtypes) or [op.dtype]
    for dtype in chosen:
        if dtype not in ARITHMETIC:
            raise HeteroDSEError(f"data type {dtype} is not one the FPGA model knows; use "
                                 f"{', '.join(ARITHMETIC)}")
        with_dtype(op, dtype)
    return chosen


def check_clocks(board: Board, clocks: Sequence[float]) -> list[float]:
    chosen = [float(c) for c in clocks] or [board.default_clock_mhz]
    for clock in chosen:
        if clock <= 0:
            raise HeteroDSEError(f"a clock target must be positive, got {clock:g} MHz")
        if clock > board.max_clock_mhz:
            raise HeteroDSEError(f"board {board.name} cannot run at {clock:g} MHz: its maximum is "
                                 f"{board.max_clock_mhz:g} MHz (clock.max_mhz in {board.path.name})")
    return chosen


def explore(op: Operator, board: Board, *, dtypes: Sequence[str] = (), clocks: Sequence[float] = (),
            options: SpaceOptions | None = None, explorer: ExplorerSettings | str = "auto", seed: int = 0,
            budget: int | None = None,
            time_budget_s: float | None = None, top_k: int = 10,
            progress: Callable[[int, float], None] | None = None, default_budget: int = 30_000,
            traffic_weight: float = 0.01, history: HistoryDB | None = None,
            calibration: Calibration | None = None) -> Exploration:
    """Search the FPGA space of ``op`` on ``board``; raise if no design fits (saying what is over and by how much).

    With a ``history``, the guided GA and transfer learning start from the designs of the same operator at
    other shapes on this board, and the best designs found (with the model's latency) are stored for later
    searches. ``auto`` does not switch to them here: the model makes the default 30,000 designs cheap.
    A ``calibration`` (``hetero_dse calibrate``) replaces the model's constants it fitted.
    """
    dtypes = check_dtypes(op, dtypes)
    clocks = check_clocks(board, clocks)
    analysis = analyze(with_dtype(op, dtypes[0]))
    space = FpgaSpace(analysis, board, dtypes, clocks, options)
    model = FpgaModel(space, traffic_weight=traffic_weight, calibration=calibration)
    settings = ExplorerSettings.of(explorer)
    workload = fpga_workload(op, analysis, board)
    prior = Prior.load(history, workload) if history is not None and settings.name in ("gga", "tl") else None
    strategy = settings.make(space, seed, default_starts=MODEL_STARTS, prior=prior)
    if budget is None and strategy.name != "exhaustive":
        budget = default_budget
    result = search(space, model, strategy, budget=budget, time_budget_s=time_budget_s,
                    top_k=max(top_k, HISTORY_DESIGNS if history is not None else 0),
                    patience=settings.patience, progress=progress)
    settings.keep(strategy)
    if history is not None and result.found:
        latency = model.evaluate(result.top_rows)["latency_s"]
        history.add_many(history.workload_id(workload), [Record(space.decode(row), float(s), source=strategy.name)
                                                         for row, s in zip(result.top_rows, latency, strict=True)])
    result.top_rows, result.top_objective = result.top_rows[:top_k], result.top_objective[:top_k]
    exploration = Exploration(op, board, space, model, result)
    if not result.found:
        if result.interrupted:
            return exploration
        raise HeteroDSEError(nothing_fits(exploration))
    exploration.designs = [(space.decode(r), model.describe(r)) for r in result.top_rows]
    exploration.pareto = [(space.decode(r), model.describe(r)) for r in result.pareto_rows]
    return exploration


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
    cap = e.board.cap(kind)
    used = r.closest_usage[i] * cap
    return (f"nothing fits on {e.board.name}: the smallest design of {name} found needs {used:,.0f} "
            f"{kind.upper()}, {r.closest_usage[i]:.2f}x the usable {cap:,} "
            f"({e.board.usable[kind]:.0%} of {e.board.resources[kind]:,}); try a larger board or smaller shapes")
