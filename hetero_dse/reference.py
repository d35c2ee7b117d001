"""The numerical reference of an operator: TVM's default (unscheduled) build, the ground truth for operators
with no library — the HLS test bench's expected output, and the check of every built-in operator.

The default schedule is a plain loop nest; it is slow but computes exactly what the tensor expression
says, so it serves as the numerical reference of a custom operator and as the check of a built-in one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero_dse.operator import Operator


def build_naive(op: Operator, target: str | dict = "llvm") -> Any:
    """Compile ``op`` unscheduled for ``target``; returns TVM's executable."""
    import tvm

    mod = tvm.IRModule({"main": op.prim_func()})
    return tvm.compile(mod, target=target)


def run_naive(op: Operator, inputs: list[np.ndarray]) -> np.ndarray:
    """Run ``op`` on the CPU with TVM's default schedule and return its output."""
    import tvm

    executable = build_naive(op)
    dev = tvm.cpu(0)
    out_shape = tuple(int(d) for d in op.output.shape)
    args = [tvm.runtime.tensor(a, dev) for a in inputs]
    out = tvm.runtime.tensor(np.zeros(out_shape, dtype=str(op.output.dtype)), dev)
    executable(*args, out)
    return out.numpy()
