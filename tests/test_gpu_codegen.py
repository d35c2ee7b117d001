"""GPU schedules from the generated space: CUDA source for every built-in without a GPU (TVM calls nvcc),
and the device limits enforced before anything is built."""

from __future__ import annotations

import re
import shutil
import zlib

import numpy as np
import pytest

from hetero_dse.hardware.gpus import get_device
from gpu_cpu.schedule import apply_gpu, build_cuda
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
def test_an_estimated_best_that_nvcc_rejects_fails_and_the_next_best_is_written(tmp_path, monkeypatch):
    """MobileNet-V2's first depthwise layer: the roofline counted 12 KB of shared memory for this point, the
    code TVM generates for it stages 785 KB, and ptxas refuses it. Written as the best, it ended the whole-model
    run; now it is a failed trial with the reason, and the next best point is written. (The search itself now
    generates each new best's code and fails one that stages more than the device has: injected here.)"""
    import json

    from gpu_cpu.measure import MeasureResult
    from hetero_dse.space.point import Point
    from hetero_dse.targets.base import Search
    from hetero_dse.targets.flow import explore
    from hetero_dse.targets.gpu import GpuTarget
    from hetero_dse.targets.measured import Trial

    monkeypatch.setattr("hetero_dse.targets.gpu.present_gpu", lambda: None)
    op = get_builtin("depthwise_conv2d").instantiate({"batch": 1, "C": 32, "H": 112, "W": 112, "kernel": 3,
                                                      "padding": 1})
    target = GpuTarget("h100")
    t = explore(op, target, "random", Search(budget=8))
    bad = Point({"split.b": (1, 1, 1, 1), "split.c": (2, 4, 4, 1), "split.i": (7, 2, 8, 1), "split.j": (14, 1, 2, 4),
                 "split.rx": (1, 3, 1), "split.ry": (1, 3, 1), "unroll": 16})
    t.trials = [Trial(bad, MeasureResult(1e-9)), *t.trials]
    t.best, t.best_seconds = bad, 1e-9
    # what TVM's code declares is what ptxas counted (0xc4240 bytes); the model counts the tile's footprint
    from gpu_cpu.schedule import staged_shared_bytes

    assert staged_shared_bytes(op, bad, get_device("h100")) == 0xC4240
    assert GpuSpace(analyze(op), get_device("h100")).limits(bad)["shared_bytes"] == 12096
    written = target.write(t, tmp_path, 0)
    assert len(written.warnings) == 1 and "too much shared data" in written.warnings[0]
    assert t.best != bad and not t.trials[0].result.ok and "too much shared data" in t.trials[0].result.error
    assert json.loads((tmp_path / written.directory / "schedule.json").read_text())["knobs"] == t.best.to_json()
