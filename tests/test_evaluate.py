"""The evaluators of ``hetero_dse.evaluate``: each returns every row's objective and, for a row that has no
time, the reason — the FPGA model's exceeded resource, the GPU space's limit, a stored failure — and the GPU
roofline's figures are estimates, not measurements."""

from __future__ import annotations

import numpy as np
import pytest

from cost_models.fpga import FpgaModel
from cost_models.gpu_roofline import GpuEstimate, estimate
from hetero_dse.analysis import analyze
from hetero_dse.evaluate.cached import HistoryEvaluator
from hetero_dse.evaluate.model import UNEMITTED_TRANSFER, ModelEvaluator
from hetero_dse.hardware.board import RESOURCE_KINDS, load_board
from hetero_dse.hardware.gpus import get_device
from hetero_dse.history import HistoryDB, Workload
from hetero_dse.history.store import WorkloadHistory
from hetero_dse.ops import get_builtin
from hetero_dse.space.fpga import FpgaSpace
from hetero_dse.space.gpu import GpuSpace


def test_the_model_names_the_resource_an_infeasible_design_exceeds():
    op = get_builtin("conv2d").instantiate(shape="yolo:C8")
    board = load_board("zcu102")
    space = FpgaSpace(analyze(op), board, ["float32"], [board.default_clock_mhz])
    rows = space.sample(2000, np.random.default_rng(0))
    model = FpgaModel(space.tables)
    evaluation = ModelEvaluator(model).evaluate(rows, None, None)
    usage = model.evaluate(rows)["usage"]
    feasible = np.isfinite(evaluation.objective) & np.isfinite(model.evaluate(rows)["latency_s"])
    assert feasible.any() and (~feasible).any()
    for i in range(len(rows)):
        error = evaluation.error(i)
        if feasible[i]:
            assert error is None
        elif usage[i].max() > 1.0:  # the worst resource, as a share of the board's usable amount
            worst = int(np.argmax(usage[i]))
            assert error == f"needs {usage[i, worst]:.0%} of the board's usable {RESOURCE_KINDS[worst]}"
        else:
            assert error == UNEMITTED_TRANSFER
    told = []
    ModelEvaluator(model).evaluate(rows[:50], None, None, on_row=lambda i, s, e, _t: told.append((s is None, e)))
    assert [e for _, e in told] == [evaluation.error(i) for i in range(50)]
    assert all((s_none) == (e is not None) for s_none, e in told)


def test_the_roofline_returns_estimates_with_the_limit_a_point_breaks():
    from hetero_dse.evaluate.estimate import RooflineEvaluator
    from hetero_dse.space.point import Point

    op = get_builtin("gemm").instantiate({"M": 2048, "N": 2048, "K": 64})
    device = get_device("h100")
    space = GpuSpace(analyze(op), device)
    too_wide = Point({"split.i": (2, 1, 1024, 1), "split.j": (1, 1, 2048, 1), "split.k": (1, 64, 1), "unroll": 16})
    rows = np.vstack([space.encode(too_wide), space.sample(32, np.random.default_rng(0))])
    evaluation = RooflineEvaluator(op, space, device, estimate).evaluate(rows, None, None)
    assert evaluation.error(0) == space.beyond_limits(too_wide) and "2097152 threads per block > 1024" in \
        evaluation.error(0)
    assert evaluation.objective[0] == np.inf and evaluation.figures[0] is None
    for i in range(1, len(rows)):
        point = space.decode(rows[i])
        if evaluation.error(i) is None:
            # a model's figures: the roofline's estimate of the point, no spread, no load
            assert isinstance(evaluation.figures[i], GpuEstimate)
            assert evaluation.objective[i] == estimate(space, point).seconds
    assert np.isfinite(evaluation.objective[1:]).any()


def test_the_history_in_front_keeps_the_reason_a_stored_point_failed(tmp_path):
    from hetero_dse.explore.loop import Evaluation
    from hetero_dse.space.splits import SplitSpace

    op = get_builtin("gemm").instantiate({"M": 16, "N": 16, "K": 16})
    space = SplitSpace(analyze(op), 3, 3, {})
    db = HistoryDB(str(tmp_path / "h.sqlite"))
    try:
        memo = WorkloadHistory(db, Workload("gemm", op.signature(), "toy", {"hetero_dse": "test"}))
        rows = np.unique(space.sample(64, np.random.default_rng(0)), axis=0)[:4]
        memo.add(space.decode(rows[1]), None, "build failed")

        class Failing:
            def evaluate(self, rows, best, deadline, on_row=None):
                for i in range(len(rows)):
                    on_row(i, None if i == 0 else 1.0, "timed out" if i == 0 else None, None)
                return Evaluation(np.array([np.inf] + [1.0] * (len(rows) - 1)), [f"f{r[0]}" for r in rows],
                                  ["timed out"] + [None] * (len(rows) - 1))

        evaluation = HistoryEvaluator(Failing(), space, memo).evaluate(rows, None, None, on_row=lambda *a: None)
        assert [evaluation.error(i) for i in range(4)] == ["timed out", "build failed", None, None]
        # each figure stays with its row; the row the history answered has none
        assert evaluation.figures == [f"f{rows[0, 0]}", None, f"f{rows[2, 0]}", f"f{rows[3, 0]}"]
    finally:
        db.close()


@pytest.mark.parametrize("board", ["vu9p"])
def test_the_model_reads_the_spaces_tables_not_the_space(board):
    """The cost model scores rows from the value tables the space publishes: the same figures from tables
    rebuilt by hand as from the space's own."""
    from dataclasses import replace

    op = get_builtin("conv2d").instantiate(shape="yolo:C8")
    b = load_board(board)
    space = FpgaSpace(analyze(op), b, ["float32"], [b.default_clock_mhz])
    rows = space.sample(256, np.random.default_rng(1))
    tables = space.tables
    assert (tables.tiles(rows) == space.tiles(rows)).all()
    copied = replace(tables, tile_table=tables.tile_table.copy(), unroll_table=tables.unroll_table.copy())
    a, c = FpgaModel(tables).evaluate(rows), FpgaModel(copied).evaluate(rows)
    assert np.array_equal(a["objective"], c["objective"])
    assert not hasattr(FpgaModel(tables), "space")


def test_a_cached_kernel_is_dropped_when_a_source_it_inlines_changes(tmp_path):
    """numba checks only a cached function's own file: an edit to a helper the kernel inlines, in another
    module, must still drop the cached machine code."""
    from cost_models.kernel_cache import KERNEL_SOURCES, STAMP, drop_stale

    for name in KERNEL_SOURCES:
        (tmp_path / f"{name}.py").write_text(f"# {name}\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    cached = [cache / "fpga_kernel.evaluate_kernel-73.py311.nbi", cache / "fpga_kernel.evaluate_kernel-73.py311.1.nbc"]
    other = cache / "learned.fit-10.py311.nbi"  # not the FPGA model's: left alone
    for f in (*cached, other):
        f.write_bytes(b"x")
    assert drop_stale(tmp_path, [cache]) and not any(f.exists() for f in cached) and other.exists()
    assert (cache / STAMP).is_file()
    for f in cached:
        f.write_bytes(b"x")
    assert not drop_stale(tmp_path, [cache]) and all(f.exists() for f in cached)  # the same sources: kept
    (tmp_path / "fpga_pe_array.py").write_text("# the pipeline's II changed\n")
    elsewhere = tmp_path / "numba_cache_dir" / "some" / "path"  # NUMBA_CACHE_DIR: numba's first choice
    elsewhere.mkdir(parents=True)
    (elsewhere / cached[0].name).write_bytes(b"x")
    assert drop_stale(tmp_path, [cache, tmp_path / "numba_cache_dir"])
    assert not any(f.exists() for f in cached) and not (elsewhere / cached[0].name).exists()


def test_the_kernel_cache_knows_every_module_the_kernels_compile_in():
    """The modules the cached kernels import from, read from their source, are all in KERNEL_SOURCES: a new
    helper module left out would be served stale after an edit."""
    import ast
    from pathlib import Path

    from cost_models.kernel_cache import KERNEL_SOURCES, PACKAGE

    seen, todo = set(), ["fpga_kernel", "fpga_blocks"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in ast.walk(ast.parse((PACKAGE / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cost_models."):
                todo.append(node.module.split(".", 1)[1])
    assert seen - {"kernel_cache"} <= set(KERNEL_SOURCES) and Path(PACKAGE / "fpga_kernel.py").is_file()


def test_a_measured_gpu_never_builds_a_point_beyond_its_limits(monkeypatch):
    """The device's limits are checked where the trial is made, not by rebuilding a space in the builder: a
    point beyond them is a failed trial with the space's sentence, and no job is sent to the builders."""
    import hetero_dse.targets.gpu as gpu_target
    from gpu_cpu.measure import MeasureResult
    from hetero_dse.space.point import Point

    sent = []

    class Builders:  # stands in for the build-and-measure pipeline: every job "runs" in a millisecond
        def __init__(self, **_):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def evaluate(self, jobs):
            sent.extend(jobs)
            return iter([MeasureResult(1e-3)] * len(jobs))

    monkeypatch.setattr(gpu_target, "present_gpu", lambda: get_device("h100"))
    monkeypatch.setattr(gpu_target, "Pipeline", Builders)
    target = gpu_target.GpuTarget("h100")
    op = get_builtin("gemm").instantiate({"M": 2048, "N": 2048, "K": 64})
    space = target.space(op)
    too_wide = Point({"split.i": (2, 1, 1024, 1), "split.j": (1, 1, 2048, 1), "split.k": (1, 64, 1), "unroll": 16})
    fits = space.decode(space.sample(1, np.random.default_rng(0))[0])
    with target.evaluator(op, space, None) as evaluator:
        evaluation = evaluator.evaluate(np.vstack([space.encode(too_wide), space.encode(fits)]), None, None)
    assert evaluation.error(0) == space.beyond_limits(too_wide) and evaluation.objective[1] == 1e-3
    assert [job.point for job in sent] == [fits.to_json()]
    assert [t.result.error for t in evaluator.trials] == [space.beyond_limits(too_wide), None]
