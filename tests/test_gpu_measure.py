"""GPU with a GPU (issue 4): where a CUDA device is present, candidates are built, checked against the
reference and timed on it, the best is checked again before it is written, and torch's cuDNN baseline is
timed beside it. Skipped on machines without one (this project's CI has none; run it where a GPU is lent)."""

from __future__ import annotations

import json

import pytest

from hetero_dse.ops import get_builtin

#: timings: run in the suite's serial pass, with no other test beside them (scripts/test.sh)
pytestmark = pytest.mark.timing


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


def _run_on_gpu(executable, inputs, out_shape, out_dtype):
    import numpy as np
    import tvm

    dev = tvm.cuda(0)
    # poisoned: an element the kernel never writes cannot pass for right
    out = tvm.runtime.tensor(np.full(out_shape, 77, dtype=out_dtype), dev)
    executable(*[tvm.runtime.tensor(a, dev) for a in inputs], out)
    dev.sync()
    return out.numpy()


TENSOR_CORE_CASES = {
    "gemm f16 padded": ("gemm", {"M": 100, "N": 72, "K": 40, "dtype": "float16"}),
    "gemm bf16 padded": ("gemm", {"M": 60, "N": 40, "K": 50, "dtype": "bfloat16"}),
    "gemm int8": ("gemm", {"M": 64, "N": 96, "K": 64, "dtype": "int8"}),
    "gemm f16 long K (deep pipelines)": ("gemm", {"M": 96, "N": 80, "K": 264, "dtype": "float16"}),
    "conv f16 C=3 (padded to the instruction)": ("conv2d", {"batch": 1, "C": 3, "H": 20, "W": 20, "K": 24,
                                                             "kernel": 3, "stride": 1, "padding": 1,
                                                             "dtype": "float16"}),
    "conv int8 stride 2": ("conv2d", {"batch": 1, "C": 16, "H": 16, "W": 16, "K": 32, "kernel": 3, "stride": 2,
                                      "padding": 1, "dtype": "int8"}),
}


@pytest.mark.parametrize("case", sorted(TENSOR_CORE_CASES))
def test_tensorized_and_padded_kernels_compute_the_reference_on_the_gpu(gpu, case):
    """The tensor-core template (padding, implicit GEMM, wmma intrinsics) run on the device, for the default
    point and sampled ones, against numpy's reference on the same inputs."""
    import numpy as np

    from gpu_cpu.schedule import apply_gpu, build_cuda
    from hetero_dse.analysis import analyze
    from hetero_dse.space.tensorcore import TensorCoreSpace

    name, params = TENSOR_CORE_CASES[case]
    o = get_builtin(name).instantiate(params)
    space = TensorCoreSpace(analyze(o), gpu)
    default = space.default_point()
    points = [default] + [space.decode(c) for c in space.sample(3, np.random.default_rng(2))]
    splits = (default.replace(split_k=2), default.replace(k_frags=1, split_k=3))
    # the cp.async pipelines, three and four chunks deep, 16-byte copies where the row allows them
    copies = [default.replace(k_frags=1, stages=s, async_copy=1, vector=v) for s in (3, 4) for v in (8, 4)]
    points += [p for p in (*splits, *copies) if not space.violations(p)]
    for seed, p in enumerate(points):
        inputs = o.random_inputs(seed + 5)
        executable, _ = build_cuda(apply_gpu(o, p), gpu)
        got = _run_on_gpu(executable, inputs, [int(d) for d in o.output.shape], str(o.output.dtype))
        want = o.reference(inputs)
        if o.dtype == "int8":
            np.testing.assert_array_equal(got, want)
        else:  # half or bfloat16 products are exact in float32; only the order of the sums differs
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


def test_the_fused_back_to_back_gemm_computes_the_unfused_pair_on_the_gpu(gpu):
    import numpy as np

    from gpu_cpu.b2b import GemmPair, apply_b2b, fused_points
    from gpu_cpu.schedule import build_cuda

    pair = GemmPair(256, 64, 64, 96)  # ReLU after the first GEMM
    inputs = pair.random_inputs(4)
    points = fused_points(pair, gpu)
    for p in (points[0], points[len(points) // 2], points[-1]):
        executable, _ = build_cuda(apply_b2b(pair, p), gpu)
        got = _run_on_gpu(executable, inputs, (pair.m, pair.n1), "float32")
        np.testing.assert_allclose(got, pair.reference(inputs), rtol=1e-4, atol=1e-4)


def test_every_point_of_the_fused_template_is_checked_and_timed_on_the_gpu(gpu):
    """``measure_fused`` as ``explore --model --target gpu`` calls it where a GPU is present: every point of the
    template built, checked against the pair's reference on the device and timed in microseconds."""
    from gpu_cpu.b2b import GemmPair, fused_points
    from gpu_cpu.b2b_measure import fastest_fused, measure_fused

    pair = GemmPair(3136, 32, 16, 32, ("bias",), ("bias", "relu6"), channels_first=True)
    trials = measure_fused(pair, gpu)
    assert len(trials) == len(fused_points(pair, gpu)) > 1
    assert all(t.error is None for t in trials), [t.error for t in trials if t.error]
    assert 1e-7 < fastest_fused(trials).seconds < 1e-3
