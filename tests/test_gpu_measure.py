"""GPU with a GPU (issue 4): where a CUDA device is present, candidates are built, checked against the
reference and timed on it, the best is checked again before it is written, and torch's cuDNN baseline is
timed beside it. Skipped on machines without one (this project's CI has none; run it where a GPU is lent)."""

from __future__ import annotations

import json

import pytest

from hetero_dse.ops import get_builtin


@pytest.fixture(scope="module")
def gpu():
    from hetero_dse.hardware.gpus import present_gpu

    device = present_gpu()
    if device is None:
        pytest.skip("no CUDA device on this machine")
    return device


def test_a_conv2d_is_searched_measured_and_checked_on_the_gpu(gpu, tmp_path):
    from hetero_dse.targets.flow import explore
    from hetero_dse.targets.gpu import GpuTarget

    op = get_builtin("conv2d").instantiate({"batch": 1, "C": 16, "H": 14, "W": 14, "K": 32, "kernel": 3,
                                            "stride": 1, "padding": 1})
    target = GpuTarget(trials=8)
    e = explore(op, target, "q")
    assert not e.estimate and target.gpu.name == gpu.name
    measured = [t for t in e.tune.trials if t.result.ok]
    assert measured, [t.result.error for t in e.tune.trials]
    # a kernel of this size takes microseconds, not the milliseconds of a launch timed from Python
    assert 1e-7 < e.tune.best.result.seconds < 1e-3
    assert e.library_seconds is not None and 1e-7 < e.library_seconds < 1e-2  # cuDNN, strict FP32
    written = target.write(e, tmp_path, seed=0)
    schedule = json.loads((tmp_path / written.directory / "schedule.json").read_text())
    assert schedule["checked_on_gpu"] is True and schedule["estimate"] is False
    assert "__global__" in (tmp_path / written.directory / "kernel.cu").read_text()


def test_a_wrong_kernel_is_a_failed_trial_on_the_gpu(gpu):
    import numpy as np
    import tvm

    from gpu_cpu.measure import MeasureJob, check_and_time
    from gpu_cpu.schedule import apply_gpu, build_cuda
    from hetero_dse.space.gpu import GpuSpace
    from hetero_dse.analysis import analyze

    op = get_builtin("gemm").instantiate({"M": 64, "N": 64, "K": 64})
    space = GpuSpace(analyze(op), gpu)
    point = space.decode(space.sample(1, np.random.default_rng(0))[0])
    executable, _ = build_cuda(apply_gpu(op, point), gpu)
    job = MeasureJob("builtin", "gemm", dict(op.params), point.to_json(), target="cuda", min_repeat_ms=1)
    assert check_and_time(executable.mod, op, tvm.cuda(0), job)["seconds"] > 0

    class Wrong:  # the right kernel, then every output overwritten: what a miscompiled schedule looks like
        entry_name = executable.mod.entry_name

        def __getitem__(self, name):
            def run(*args):
                executable.mod[name](*args)
                args[-1].copyfrom(np.ones([int(d) for d in op.output.shape], dtype="float32"))
            return run

    with pytest.raises(ValueError, match="differs from the reference"):
        check_and_time(Wrong(), op, tvm.cuda(0), job)
