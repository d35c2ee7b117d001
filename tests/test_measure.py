"""Isolated measurement: a crashing or hanging candidate becomes a failed result and the next one runs."""

from __future__ import annotations

import os
import signal
import time

import pytest

from gpu_cpu.measure import MeasureJob, Measurer, measure_cpu_job
from hetero_dse.space.cpu import CpuSpace
from hetero_dse.analysis import analyze
from hetero_dse.ops import get_builtin

#: timings: run in the suite's serial pass, with no other test beside them (scripts/test.sh)
pytestmark = pytest.mark.timing


def crash(_payload):
    os.kill(os.getpid(), signal.SIGSEGV)


def hang(_payload):
    time.sleep(120)
    return 1.0


def fail(_payload):
    raise RuntimeError("build failed: no such intrinsic")


def quick(payload):
    return float(payload)


def gemm_job(**overrides):
    op = get_builtin("gemm").instantiate(shape="small:s1")
    space = CpuSpace(analyze(op))
    point = space.decode(space.cardinalities // 2)
    return MeasureJob("builtin", "gemm", dict(op.params), point.to_json(), **overrides)


def test_a_real_candidate_is_built_checked_and_timed():
    with Measurer(timeout_s=120) as m:
        result = m.run(measure_cpu_job, gemm_job())
    assert result.ok and 0 < result.seconds < 0.1


@pytest.mark.slow
def test_crash_and_hang_are_failures_and_the_search_goes_on():
    with Measurer(timeout_s=3) as m:
        crashed = m.run(crash, None)
        assert not crashed.ok and "crashed" in crashed.error
        assert m.run(quick, 2.5).seconds == 2.5  # a fresh worker took over
        hung = m.run(hang, None)
        assert not hung.ok and hung.error == "timed out after 3 s" and hung.wall_s < 30
        failed = m.run(fail, None)
        assert not failed.ok and failed.error == "RuntimeError: build failed: no such intrinsic"
        assert m.run(quick, 1.0).ok


def flaky_build(job, directory):
    """Stands in for a builder: crashes or hangs on demand, else 'builds' a file holding the job's time."""
    if job.name == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if job.name == "hang":
        time.sleep(120)
    if job.name == "reject":
        raise ValueError("TVM rejects the point")
    path = os.path.join(directory, f"{job.params['t']}.built")
    with open(path, "w") as f:
        f.write(str(job.params["t"]))
    return path


def read_built(payload):
    _job, path = payload
    with open(path) as f:
        return float(f.read())


def fake_job(name, t=0.0):
    return MeasureJob("builtin", name, {"t": t}, {})


@pytest.mark.slow
@pytest.mark.parametrize("overlap", [True, False])
def test_pipeline_turns_build_crashes_hangs_and_errors_into_failures_and_keeps_the_order(overlap):
    from gpu_cpu.pipeline import Pipeline

    jobs = [fake_job("ok", 1.0), fake_job("crash"), fake_job("ok", 2.0), fake_job("hang"), fake_job("reject"),
            fake_job("ok", 3.0)]
    with Pipeline(build_timeout_s=3, builders=2, build=flaky_build, measure=read_built, overlap=overlap) as pipeline:
        results = list(pipeline.evaluate(jobs))
    assert [r.seconds for r in results] == [1.0, None, 2.0, None, None, 3.0]
    assert results[1].error == "the build crashed its worker process"
    assert results[3].error == "build timed out after 3 s"
    assert results[4].error == "build: ValueError: TVM rejects the point"


def test_pipeline_builds_real_candidates_and_reports_a_rejected_point():
    from gpu_cpu.pipeline import Pipeline

    good = gemm_job()
    bad = MeasureJob(good.source, good.name, good.params, {**good.point, "split.i": [3, 1, 1, 1]})
    with Pipeline(timeout_s=120) as pipeline:
        results = list(pipeline.evaluate([good, bad, good]))
    assert results[0].ok and results[2].ok and 0 < results[0].seconds < 0.1
    assert not results[1].ok and results[1].error.startswith("build: ")


class FakeModule:
    """A built module whose one run takes 20 ms and whose timer reports a 9 ms warm-up repeat, then 1, 2, 3 ms."""

    entry_name = "main"

    def __init__(self):
        self.timed = False
        self.min_repeat_ms = None

    def __getitem__(self, name):
        def run(*args):
            time.sleep(0.02)
        return run

    def time_evaluator(self, name, dev, number, repeat, min_repeat_ms=0):
        self.timed, self.min_repeat_ms, self.repeat = True, min_repeat_ms, repeat

        class Report:
            results = (9e-3, 1e-3, 2e-3, 3e-3)[: repeat]
        return lambda *args: Report()


def test_a_candidate_far_slower_than_the_best_is_not_timed_further():
    import tvm

    from gpu_cpu.measure import check_and_time

    op = get_builtin("gemm").instantiate(shape="small:s1")
    job = gemm_job(check=False)
    module = FakeModule()
    timed = check_and_time(module, op, tvm.cpu(0), job)
    assert timed["seconds"] == 2e-3 and module.timed  # no cutoff: the median, with its repeats
    assert timed["repeats"] == [1e-3, 2e-3, 3e-3] and timed["foreign_load"] is not None
    assert module.repeat == job.repeat + 1  # the first repeat of a fresh timer (the 9 ms) is dropped
    module = FakeModule()
    slow = check_and_time(module, op, tvm.cpu(0), MeasureJob(**{**job.__dict__, "cutoff_s": 5e-3}))
    assert 0.02 <= slow < 0.5 and not module.timed  # the first run's time, no further runs
    module = FakeModule()
    assert check_and_time(module, op, tvm.cpu(0), MeasureJob(**{**job.__dict__, "cutoff_s": 1.0}))["seconds"] == 2e-3


def test_each_timed_repeat_lasts_the_targets_floor_unless_the_job_says_otherwise():
    # three runs of a millisecond kernel are at the mercy of a shared machine's moment; the floor steadies
    # them (bench/cpu_timing_noise.py), and search, replay and the baselines' timing share it
    import tvm

    from gpu_cpu.measure import MIN_REPEAT_MS, check_and_time

    op = get_builtin("gemm").instantiate(shape="small:s1")
    job = gemm_job(check=False)
    assert job.min_repeat_ms is None and MIN_REPEAT_MS["llvm"] >= 10
    module = FakeModule()
    check_and_time(module, op, tvm.cpu(0), job)
    assert module.min_repeat_ms == MIN_REPEAT_MS["llvm"]
    module = FakeModule()
    check_and_time(module, op, tvm.cpu(0), MeasureJob(**{**job.__dict__, "min_repeat_ms": 0}))
    assert module.min_repeat_ms == 0


def _tvm_threads(env: dict[str, str]) -> int:
    import subprocess
    import sys

    code = ("import os, gpu_cpu; assert 'TVM_NUM_THREADS' not in os.environ or os.environ.get('KEEP') == '1'; "
            "from gpu_cpu.measure import Measurer; Measurer(); import tvm; "
            "print(tvm.get_global_func('runtime.NumThreads')())")
    return int(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              check=True).stdout)


def test_tvm_runs_parallel_loops_on_every_physical_core():
    # TVM's own default is half the logical CPUs on x86 (it assumes hyper-threads): on a machine without
    # SMT that measured every schedule on half the cores against torch on all of them. Importing gpu_cpu
    # sets nothing; making a measurer does.
    from hetero_dse.hardware.host import host_cores

    assert 1 <= host_cores() <= os.cpu_count()
    env = {k: v for k, v in os.environ.items() if k not in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")}
    assert _tvm_threads(env) == host_cores()
    assert _tvm_threads({**env, "TVM_NUM_THREADS": "1", "KEEP": "1"}) == 1  # the user's choice wins


def test_another_tuners_exported_module_is_checked_and_timed_in_a_worker(tmp_path):
    # how bench/yolo_common.py times MetaSchedule's best: exported, then loaded in a worker like a candidate
    import tvm

    from gpu_cpu.pipeline import measure_built_job
    from gpu_cpu.schedule import host_target

    gemm = get_builtin("gemm").instantiate(shape="small:s1")
    gemv = get_builtin("gemv").instantiate(shape="small:s1")
    path = str(tmp_path / "gemm.so")
    tvm.compile(tvm.IRModule({"main": gemm.prim_func()}), target=host_target()).export_library(path)
    with Measurer(timeout_s=120) as m:
        timed = m.run(measure_built_job, (MeasureJob("builtin", "gemm", dict(gemm.params), {}), path))
        wrong = m.run(measure_built_job, (MeasureJob("builtin", "gemv", dict(gemv.params), {}), path))
    assert timed.ok and 0 < timed.seconds < 0.1
    assert not wrong.ok  # a module of another operator fails its run or its check against the reference


def test_torch_is_timed_in_a_worker_of_its_own():
    from gpu_cpu.measure import time_torch_isolated

    assert time_torch_isolated(get_builtin("bcm").instantiate(shape="small:s1"), "builtin") is None
    timed = time_torch_isolated(get_builtin("gemm").instantiate({"M": 64, "N": 64, "K": 64}), "builtin")
    # a sanity bound, not a speed: beside the suite's other worker torch's threads wait on a busy core (a 64^3
    # product was timed at 16 ms, flagged with a foreign load of 0.98 cores)
    assert timed is not None and 0 < timed.seconds < 0.5
    # its spread and conditions travel with it: ten repeats, the median among them, the foreign load read
    assert len(timed.repeats) == 10 and min(timed.repeats) <= timed.seconds <= max(timed.repeats)
    assert timed.foreign_load is not None and timed.timing()["median_s"] == timed.seconds
