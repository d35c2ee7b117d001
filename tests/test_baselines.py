"""Library baselines compute what the operators compute, so their times are a fair comparison."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_cpu.baselines import LIBRARY, time_torch_cpu, torch_output
from hetero_dse.ops import BUILTIN, get_builtin

#: timings: run in the suite's serial pass, with no other test beside them (scripts/test.sh)
pytestmark = pytest.mark.timing


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_torch_call_equals_the_reference(name):
    op = get_builtin(name).instantiate(shape="small:s2")
    inputs = op.random_inputs(3)
    np.testing.assert_allclose(torch_output(op, inputs), op.reference(inputs), rtol=1e-4, atol=1e-5)


def test_operators_without_a_library_call():
    assert set(BUILTIN) - set(LIBRARY) == {"bcm", "shift_conv2d"}
    assert time_torch_cpu(get_builtin("bcm").instantiate(shape="small:s1")) is None


def test_timing_is_positive_and_scales_with_work():
    # the least of three timings each, of two products 32,768x apart in work: a small call shares the cores
    # with whatever else runs (the suite's other worker), and torch's threads waiting on a busy core made one
    # timing of a 64^3 product 6x slower than a 512^3 one; no load makes a call a thousand times slower
    small = min(time_torch_cpu(get_builtin("gemm").instantiate({"M": 32, "N": 32, "K": 32}), repeat=3,
                               min_seconds=0.05) for _ in range(3))
    large = min(time_torch_cpu(get_builtin("gemm").instantiate({"M": 1024, "N": 1024, "K": 1024}), repeat=3,
                               min_seconds=0.05) for _ in range(3))
    assert 0 < small < large
