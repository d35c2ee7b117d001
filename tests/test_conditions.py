"""Measurement integrity (review finding D4): one timing at a time on a machine, the foreign load recorded with
each, and a time taken under load never answered from the history."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from gpu_cpu.conditions import LOADED_CORES, Conditions, timing
from hetero_dse.evaluate.cached import HistoryEvaluator
from hetero_dse.history import HistoryDB, Workload, point_key
from hetero_dse.history.store import WorkloadHistory
from hetero_dse.testing.contracts import toy_space

#: timings: run in the suite's serial pass, with no other test beside them (scripts/test.sh)
pytestmark = pytest.mark.timing


def _hold_lock(seconds: float) -> subprocess.Popen:
    code = ("import time, sys; from gpu_cpu.conditions import timing\n"
            f"with timing():\n    print('held', flush=True); time.sleep({seconds})\n")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_timings_on_one_machine_take_turns(tmp_path, monkeypatch):
    monkeypatch.setenv("HETERO_DSE_MEASURE_LOCK", str(tmp_path / "lock"))
    holder = _hold_lock(1.0)
    try:
        with timing() as conditions:
            pass
    finally:
        holder.wait(10)
    assert conditions.waited_s > 0.5  # another process was timing: this one waited for it


def test_foreign_load_during_a_timing_is_measured_and_flags_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HETERO_DSE_MEASURE_LOCK", str(tmp_path / "lock"))
    monkeypatch.setenv("HETERO_DSE_LOADED_CORES", str(LOADED_CORES))  # the tool's own limit, not the suite's
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        with timing() as conditions:
            time.sleep(1.0)  # this process idle: what the machine did meanwhile was someone else's
    finally:
        busy.kill()
        busy.wait(10)
    assert conditions.foreign_load is not None and conditions.foreign_load > 0.6
    assert conditions.loaded and LOADED_CORES < 0.6
    assert Conditions(foreign_load=0.05).loaded is False


def test_a_time_taken_under_load_is_measured_again_and_replaced(tmp_path):
    db = HistoryDB(str(tmp_path / "h.sqlite"))
    space = toy_space()
    memo = WorkloadHistory(db, Workload("gemm", "gemm[16]", "toy", {"hetero_dse": "test"}))
    rows = np.unique(space.sample(32, np.random.default_rng(0)), axis=0)[:2]
    loaded, clean = space.decode(rows[0]), space.decode(rows[1])
    memo.add(loaded, 9e-3, None, {"foreign_load": 1.4, "loaded": True})
    memo.add(clean, 2e-3, None, {"foreign_load": 0.01, "loaded": False})

    class Inner:
        asked: list[int] = []

        def evaluate(self, rows, best, deadline, on_row=None):
            self.asked.append(len(rows))
            for i in range(len(rows)):
                on_row(i, 3e-3, None, {"foreign_load": 0.02, "loaded": False})
            return type("E", (), {"objective": np.full(len(rows), 3e-3), "figures": None})()

    inner = Inner()
    evaluation = HistoryEvaluator(inner, space, memo).evaluate(rows, None, None)
    assert inner.asked == [1]  # the loaded point measured again, the clean one answered
    assert list(evaluation.objective) == [3e-3, 2e-3]
    stored = memo.known([loaded, clean])
    assert stored[point_key(loaded)].seconds == 3e-3 and not stored[point_key(loaded)].loaded
    assert stored[point_key(clean)].seconds == 2e-3
    db.close()


def test_a_speedup_from_a_loaded_timing_is_never_printed_bare(monkeypatch):
    """The second review's D4: two searches at once printed 89.66× and 10.21× for one kernel, the flag only in
    the detail column. Every place the ratio is printed says UNDER LOAD when either timing was loaded."""
    from hetero_dse.crossdevice import across_devices, across_markdown
    from hetero_dse.explore.loop import LoopResult
    from hetero_dse.report import ROW_COLUMNS, row_cells
    from hetero_dse.report_html import _rows_table
    from hetero_dse.targets.tuned import Tuned
    from gpu_cpu.measure import MeasureResult
    from hetero_dse.testing.contracts import toy_space

    monkeypatch.setenv("HETERO_DSE_LOADED_CORES", str(LOADED_CORES))  # the host's own limit is not the test's
    ours = MeasureResult(1e-3, repeats=(1e-3,) * 3, foreign_load=0.01)
    space = toy_space()

    def tuned(library: MeasureResult) -> Tuned:
        t = Tuned(op=None, target=None, space=space, explorer="sa", loop=LoopResult(3, 1.0), retimed=ours,
                  library=library, library_seconds=library.seconds)
        t.best_seconds = ours.seconds
        return t

    calm, busy = MeasureResult(4e-3, foreign_load=0.02), MeasureResult(4e-3, foreign_load=1.5)
    assert not tuned(calm).loaded and tuned(busy).loaded
    assert tuned(busy).speedup == 4.0  # the ratio is kept (it is data), only never shown without its flag

    from hetero_dse.targets.base import Row
    speedup = ROW_COLUMNS.index("speedup")
    rows = [Row("cpu", "gemm", s, "cpu", "measured", 1e-3, 2.0, 0.1, None, 4e-3, "sa", 3, 0, 0, 1.0, False,
                "out", None, "—", "", loaded=loaded) for s, loaded in (("a", False), ("b", True))]
    assert [row_cells(r)[speedup] for r in rows] == ["4.00×", "4.00× UNDER LOAD"]
    as_json = [r.to_json() for r in rows]
    assert "4.00× UNDER LOAD" in _rows_table(as_json) and _rows_table(as_json[:1]).count("UNDER LOAD") == 0
    gpu = {**as_json[1], "kind": "gpu", "device": "gpu", "loaded": False}
    text = "\n".join(across_markdown(across_devices([as_json[1], gpu])))
    assert "4.00× lib UNDER LOAD" in text and text.count("UNDER LOAD") == 1
