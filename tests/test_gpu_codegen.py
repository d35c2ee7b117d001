"""GPU schedules from the generated space: CUDA source for every built-in without a GPU (TVM calls nvcc),
its shared memory exactly the space's count, the same schedule computing the reference on TVM's CPU path, and
the device limits enforced before anything is built."""

from __future__ import annotations

import re
import shutil
import zlib

import numpy as np
import pytest

from hetero_dse.hardware.gpus import get_device
from gpu_cpu.cuda_usage import declared_shared_bytes
from gpu_cpu.schedule import apply_gpu, build_cpu, build_cuda, run_cpu
from hetero_dse.space.gpu import GpuSpace
from hetero_dse.analysis import analyze
from hetero_dse.errors import HeteroDSEError
from hetero_dse.ops import BUILTIN, get_builtin

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="CUDA code generation needs nvcc")


@needs_nvcc
@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_cuda_source_for_every_builtin(name):
    op = get_builtin(name).instantiate(shape="small:s2")
    device = get_device("h100")
    space = GpuSpace(analyze(op), device)
    point = space.decode(space.sample(1, np.random.default_rng(zlib.crc32(name.encode())))[0])
    executable, source = build_cuda(apply_gpu(op, point), device)
    assert "__global__" in source
    blocks = int(np.prod([point[f"split.{n}"][0] for n in space.loop_names[: space.num_spatial]]))
    assert ("blockIdx.x" in source) == (blocks > 1)  # one block: TVM drops the index
    threads = space.limits(point)["threads"]
    bounds = re.search(r"__launch_bounds__\((\d+)\)", source)
    assert (int(bounds.group(1)) if bounds else 1) == threads <= device.max_threads_per_block
    if analyze(op).main.reduce:
        assert "__shared__" in source  # inputs staged in shared memory
    # what the code declares is what the space counted (and the roofline charges, and the limits check)
    assert declared_shared_bytes(source) == space.limits(point)["shared_bytes"]


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_the_gpu_schedule_computes_the_reference_on_tvms_cpu_path(name):
    """Where there is no GPU: the same loops, stages and padding (computed in the shared stage) run serially."""
    op = get_builtin(name).instantiate(shape="small:s2")
    space = GpuSpace(analyze(op), get_device("h100"), domain=False)
    for row in space.sample(2, np.random.default_rng(zlib.crc32(name.encode()))):
        inputs = op.random_inputs(1)
        got = run_cpu(build_cpu(apply_gpu(op, space.decode(row), emulate=True)), op, inputs)
        np.testing.assert_allclose(got, op.reference(inputs), rtol=1e-4, atol=1e-4)


def test_a_strided_padded_convolution_stages_its_tile_not_its_image():
    """Review of the GPU flow (issue 22): with the padding inlined into the main block, every stage's region was
    clipped at the image's border, TVM could not size it and staged whole rows: YOLO-v1 C4 13-28x the tile
    for most points, C1 up to 1.25 MB, MobileNet-V2's first depthwise layer 785 KB for a 12 KB tile. The
    padding is now computed in the stage, whose region is one rectangle of the padded image."""
    from hetero_dse.space.point import Point

    h100 = get_device("h100")
    depthwise = get_builtin("depthwise_conv2d").instantiate({"batch": 1, "C": 32, "H": 112, "W": 112, "kernel": 3,
                                                             "padding": 1})
    point = Point({"split.b": (1, 1, 1, 1), "split.c": (2, 4, 4, 1), "split.i": (7, 2, 8, 1),
                   "split.j": (14, 1, 2, 4), "split.rx": (1, 3, 1), "split.ry": (1, 3, 1), "unroll": 16})
    _, source = build_cuda(apply_gpu(depthwise, point), h100)  # nvcc compiles it: within the 48 KB
    # the input tile: 16 channels × (16 + 2) rows × (8 + 2) columns; the weights 16 × 3 × 3 (float32)
    assert declared_shared_bytes(source) == (16 * 18 * 10 + 16 * 3 * 3) * 4 == 12096
    for layer in ("C1", "C4"):
        op = get_builtin("conv2d").instantiate(shape=f"yolo:{layer}")
        space = GpuSpace(analyze(op), h100, domain=False)
        for row in space.sample(4, np.random.default_rng(1)):
            p = space.decode(row)
            _, source = build_cuda(apply_gpu(op, p), h100, compile_here=False)
            assert declared_shared_bytes(source) == space.limits(p)["shared_bytes"]


def test_device_limits_are_checked_before_building():
    op = get_builtin("gemm").instantiate({"M": 2048, "N": 2048, "K": 64})
    space = GpuSpace(analyze(op), get_device("v100"))
    point = space.decode(np.zeros(space.num_knobs, dtype=int))
    too_many = point.replace(**{"split.i": (1, 1, 64, 32), "split.j": (1, 1, 32, 64)})
    assert space.limits(too_many)["threads"] == 2048
    assert any("threads per block > 1024" in v for v in space.violations(too_many))
    huge_tile = point.replace(**{"split.i": (1, 16, 16, 8), "split.j": (1, 16, 16, 8), "split.k": (1, 1, 64)})
    assert any("shared memory" in v for v in space.violations(huge_tile))
    with pytest.raises(HeteroDSEError, match="unknown GPU 'a100x'"):
        get_device("a100x")


@needs_nvcc
def test_an_estimated_rows_occupancy_uses_the_registers_ptxas_gives_its_kernel(monkeypatch):
    """The model counts a thread's accumulators plus a constant; ptxas gives an unrolled kernel several times
    that. The estimate a row prints takes ptxas's count for the kernel written, and its occupancy follows."""
    from cost_models.gpu_roofline import MAX_THREADS_PER_SM, REGISTERS_PER_SM, estimate
    from gpu_cpu.cuda_usage import ptxas_usage
    from hetero_dse.targets.base import Search
    from hetero_dse.targets.flow import explore
    from hetero_dse.targets.gpu import GpuTarget
    from hetero_dse.targets.gpu_report import estimate_of

    monkeypatch.setattr("hetero_dse.targets.gpu.present_gpu", lambda: None)
    op = get_builtin("conv2d").instantiate(shape="small:s2")
    target = GpuTarget("h100")
    t = explore(op, target, "random", Search(budget=16))
    _, source = build_cuda(apply_gpu(op, t.best), target.gpu, compile_here=False)
    usage = ptxas_usage(source, "sm_90")
    space = target.space(op)
    figures = estimate_of(target, t).figures
    assert figures["registers"] == usage["registers"] != space.limits(t.best)["registers"]
    threads = space.limits(t.best)["threads"]
    assert figures["blocks_per_sm"] == min(32, MAX_THREADS_PER_SM // threads,
                                           REGISTERS_PER_SM // (threads * usage["registers"]),
                                           target.gpu.shared_memory_per_sm // space.limits(t.best)["shared_bytes"])
    assert estimate(space, t.best).figures["registers"] == space.limits(t.best)["registers"]  # no ptxas: the model's


@needs_nvcc
def test_an_estimated_best_that_nvcc_rejects_fails_and_the_next_best_is_written(tmp_path, monkeypatch):
    """An estimated best nvcc refuses (found on MobileNet-V2's first depthwise layer, which staged 785 KB before
    the padding moved into the shared stage) ended the whole-model run when it was written; now it is a failed
    trial with nvcc's reason, and the next best point is written. The refusal is injected here: ptxas's message
    for the first kernel compiled."""
    import json

    import tvm.support.nvcc

    from gpu_cpu.measure import MeasureResult
    from hetero_dse.space.point import Point
    from hetero_dse.targets.base import Search
    from hetero_dse.targets.flow import explore
    from hetero_dse.targets.gpu import GpuTarget
    from hetero_dse.evaluate.measured import Trial

    monkeypatch.setattr("hetero_dse.targets.gpu.present_gpu", lambda: None)
    op = get_builtin("depthwise_conv2d").instantiate({"batch": 1, "C": 32, "H": 112, "W": 112, "kernel": 3,
                                                      "padding": 1})
    target = GpuTarget("h100")
    t = explore(op, target, "random", Search(budget=8))
    bad = Point({"split.b": (1, 1, 1, 1), "split.c": (2, 4, 4, 1), "split.i": (7, 2, 8, 1), "split.j": (14, 1, 2, 4),
                 "split.rx": (1, 3, 1), "split.ry": (1, 3, 1), "unroll": 16})
    t.trials = [Trial(bad, MeasureResult(1e-9)), *t.trials]
    t.best, t.best_seconds = bad, 1e-9
    compile_cuda, calls = tvm.support.nvcc.compile_cuda, []

    def refuse_first(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("Compilation error:\nptxas error   : Entry function 'main_kernel' uses too much "
                               "shared data (0xc4240 bytes, 0xc000 max)")
        return compile_cuda(*args, **kwargs)

    monkeypatch.setattr(tvm.support.nvcc, "compile_cuda", refuse_first)
    written = target.write(t, tmp_path, 0)
    assert len(calls) == 2
    assert len(written.warnings) == 1 and "too much shared data" in written.warnings[0]
    assert t.best != bad and not t.trials[0].result.ok and "too much shared data" in t.trials[0].result.error
    assert json.loads((tmp_path / written.directory / "schedule.json").read_text())["knobs"] == t.best.to_json()
