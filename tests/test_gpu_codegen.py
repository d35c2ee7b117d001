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
