"""CPU schedule space (issue 4, first part): points from the generated space build with TVM and compute
exactly what the operator's reference computes."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from gpu_cpu.schedule import apply_cpu, build_cpu, run_cpu
from gpu_cpu.space import CpuSpace, factorizations
from hetero_dse.analysis import analyze
from hetero_dse.ops import BUILTIN, get_builtin
from hetero_dse.space.fpga import SpaceError


def test_factorizations_are_every_ordered_divisible_split():
    assert factorizations(12, 2) == ((1, 12), (2, 6), (3, 4), (4, 3), (6, 2), (12, 1))
    assert len(factorizations(224, 4)) == 224  # 2^5 * 7: C(8,3) * C(4,3)
    assert all(np.prod(f) == 13 for f in factorizations(13, 3)) and len(factorizations(13, 3)) == 3


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_sampled_schedules_build_and_match_the_reference(name, dtype):
    op = get_builtin(name).instantiate({"dtype": dtype}, shape="small:s2")
    space = CpuSpace(analyze(op))
    inputs = op.random_inputs(0)
    want = op.reference(inputs).astype(np.float64)
    rows = space.sample(2, np.random.default_rng(zlib.crc32(name.encode())))  # stable across runs
    for i, row in enumerate(rows):
        # both loop orders; producers inlined in one, computed first in the other; vectorised along the
        # innermost output dimension in one, along the outermost (inputs packed, tile transposed) in the other
        for j, knob in enumerate(space.choices):
            column = len(space.loops) + j
            if knob == "vector":
                row[column] = i * (space.cardinalities[column] - 1)
            elif knob in ("order", "inline"):
                row[column] = i % space.cardinalities[column]
        point = space.decode(row)
        assert np.array_equal(space.encode(point), row)
        got = run_cpu(build_cpu(apply_cpu(op, point)), op, inputs).astype(np.float64)
        if dtype == "int8":
            assert np.array_equal(got, want), point
        else:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=str(point))


def test_points_outside_the_space_are_refused():
    space = CpuSpace(analyze(get_builtin("gemm").instantiate(shape="small:s1")))
    point = space.decode(np.zeros(space.num_knobs, dtype=int))
    with pytest.raises(SpaceError, match="not a factorisation of 16"):
        space.encode(point.replace(**{"split.i": (3, 1, 1, 1)}))
    with pytest.raises(SpaceError, match="not a point of the CPU space"):
        space.decode([99] * space.num_knobs)


def test_vectorising_over_output_channels_packs_the_weights_and_transposes_the_tile():
    op = get_builtin("conv2d").instantiate(shape="small:s1")
    space = CpuSpace(analyze(op))
    assert space.choices["vector"] == ("j", "i", "k")  # b has extent 1
    point = space.decode(np.zeros(space.num_knobs, dtype=int)).replace(
        **{"split.k": (2, 1, 1, 4), "vector": "k", "order": 0, "inline": 0})
    script = apply_cpu(op, point).script()
    assert "W_global = T.sblock_alloc_buffer((4, 3, 3, 8))" in script  # W[k, c, r, s] packed as [c, r, s, k]
    assert "O_global[v_b, v_i, v_j, v_k]" in script  # the accumulated tile with k innermost
    assert "T.vectorized(4)" in script
    inputs = op.random_inputs(0)
    np.testing.assert_allclose(run_cpu(build_cpu(apply_cpu(op, point)), op, inputs), op.reference(inputs),
                               rtol=1e-4, atol=1e-5)
