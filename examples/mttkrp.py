"""A custom operator no library ships: MTTKRP, the kernel of CP tensor decomposition.

O[i, j] = sum over k, l of X[i, k, l] * B[k, j] * C[l, j]   (matricised tensor times Khatri-Rao product)

An op.py may give a numerical reference (numpy here); without one, TVM's unscheduled build is the
ground truth.

    hetero_dse analyze examples/mttkrp.py
"""

import numpy as np
from tvm import te

import hetero_dse as hd


def mttkrp_reference(params, X, B, C):
    return np.einsum("ikl,kj,lj->ij", X.astype(np.float64), B.astype(np.float64), C.astype(np.float64))


@hd.operator(I=128, J=32, K=64, L=64, reference=mttkrp_reference)
def mttkrp(I, J, K, L, dtype="float32"):
    """Matricised tensor times Khatri-Rao product (3-way CP-ALS)."""
    X = te.placeholder((I, K, L), name="X", dtype=dtype)
    B = te.placeholder((K, J), name="B", dtype=dtype)
    C = te.placeholder((L, J), name="C", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")
    l = te.reduce_axis((0, L), name="l")  # noqa: E741
    O = te.compute((I, J), lambda i, j: te.sum(X[i, k, l] * B[k, j] * C[l, j], axis=[k, l]), name="O")
    return [X, B, C, O]
