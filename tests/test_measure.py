"""Isolated measurement: a crashing or hanging candidate becomes a failed result and the next one runs."""

from __future__ import annotations

import os
import signal
import time

import pytest

from gpu_cpu.measure import MeasureJob, Measurer, measure_cpu_job
from gpu_cpu.space import CpuSpace
from hetero_dse.analysis import analyze
from hetero_dse.ops import get_builtin


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
