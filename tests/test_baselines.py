"""Library baselines compute what the operators compute, so their times are a fair comparison."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_cpu.baselines import LIBRARY, time_torch_cpu, torch_output
from hetero_dse.ops import BUILTIN, get_builtin


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_torch_call_equals_the_reference(name):
    op = get_builtin(name).instantiate(shape="small:s2")
    inputs = op.random_inputs(3)
    np.testing.assert_allclose(torch_output(op, inputs), op.reference(inputs), rtol=1e-4, atol=1e-5)


def test_operators_without_a_library_call():
    assert set(BUILTIN) - set(LIBRARY) == {"bcm", "shift_conv2d"}
    assert time_torch_cpu(get_builtin("bcm").instantiate(shape="small:s1")) is None


def test_timing_is_positive_and_scales_with_work():
    # the least of three timings each: a small call shares two cores with whatever else runs, and torch's
    # threads waiting on a busy core can make one timing 100x too slow (seen when other tests ran beside it)
    small = min(time_torch_cpu(get_builtin("gemm").instantiate({"M": 64, "N": 64, "K": 64}), repeat=3,
                               min_seconds=0.05) for _ in range(3))
    large = min(time_torch_cpu(get_builtin("gemm").instantiate({"M": 512, "N": 512, "K": 512}), repeat=3,
                               min_seconds=0.05) for _ in range(3))
    assert 0 < small < large
