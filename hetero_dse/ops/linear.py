"""Matrix operators of FlexTensor's Table 1 (GEMV, GEMM, bilinear) and the block-circulant matrix (BCM)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero_dse.operator import operator
from hetero_dse.operator_params import Param
from hetero_dse.ops._common import DTYPE, accumulator, mac
from hetero_dse.ops.shapes import BCM_SMALL, BILINEAR_SMALL, GEMM_SMALL, GEMV_SMALL


def _f64(*arrays: np.ndarray) -> list[np.ndarray]:
    return [a.astype(np.float64) for a in arrays]


@operator(M=Param(1024, help="rows"), K=Param(1024, help="columns (reduction)"), dtype=DTYPE,
          shape_sets=[GEMV_SMALL], reference=lambda p, a, b: np.matmul(*_f64(a, b)))
def gemv(M, K, dtype):
    """Matrix-vector multiply O[i] = A[i,k] * B[k]."""
    from tvm import te

    A = te.placeholder((M, K), name="A", dtype=dtype)
    B = te.placeholder((K,), name="B", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")
    acc = accumulator(dtype)
    O = te.compute((M,), lambda i: te.sum(mac(A[i, k], B[k], acc), axis=k), name="O")
    return [A, B, O]


@operator(M=Param(512, help="rows of A and O"), N=Param(512, help="columns of B and O"),
          K=Param(512, help="reduction"), dtype=DTYPE, shape_sets=[GEMM_SMALL], weights=("B",),
          reference=lambda p, a, b: np.matmul(*_f64(a, b)))
def gemm(M, N, K, dtype):
    """Matrix-matrix multiply O[i,j] = A[i,k] * B[k,j]. B is a weight (a linear layer's, as a network's linear
    layers are captured): a CPU kernel may take it packed ahead, as oneDNN's linear layers do."""
    from tvm import te

    A = te.placeholder((M, K), name="A", dtype=dtype)
    B = te.placeholder((K, N), name="B", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")
    acc = accumulator(dtype)
    O = te.compute((M, N), lambda i, j: te.sum(mac(A[i, k], B[k, j], acc), axis=k), name="O")
    return [A, B, O]


@operator(M=Param(64, help="batch rows"), N=Param(64, help="outputs"), K=Param(256, help="first input size"),
          L=Param(256, help="second input size"), dtype=DTYPE, shape_sets=[BILINEAR_SMALL],
          reference=lambda p, a, b, c: np.einsum("ik,jkl,il->ij", *_f64(a, b, c)))
def bilinear(M, N, K, L, dtype):
    """Bilinear transformation O[i,j] = A[i,k] * B[j,k,l] * C[i,l] (torch.nn.functional.bilinear)."""
    from tvm import te

    A = te.placeholder((M, K), name="A", dtype=dtype)
    B = te.placeholder((N, K, L), name="B", dtype=dtype)
    C = te.placeholder((M, L), name="C", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")
    l = te.reduce_axis((0, L), name="l")  # noqa: E741 - the paper's name
    acc = accumulator(dtype)
    O = te.compute((M, N), lambda i, j: te.sum(mac(mac(A[i, k], B[j, k, l], acc), C[i, l], acc), axis=[k, l]),
                   name="O")
    return [A, B, C, O]


def _bcm_reference(params: dict[str, Any], x: np.ndarray, w: np.ndarray) -> np.ndarray:
    P, Q, b = params["P"], params["Q"], params["block"]
    i = np.arange(b)
    shift = (i[:, None] - i[None, :]) % b  # circulant block: C[i, j] = w[(i - j) mod b]
    blocks = w.astype(np.float64)[:, :, shift]  # (P, Q, b, b)
    matrix = blocks.transpose(0, 2, 1, 3).reshape(P * b, Q * b)
    return (x.astype(np.float64) @ matrix.T).reshape(x.shape[0], P, b)


@operator(batch=Param(16, help="vectors multiplied at once"), P=Param(32, help="block rows"),
          Q=Param(32, help="block columns"), block=Param(16, help="circulant block size"), dtype=DTYPE,
          shape_sets=[BCM_SMALL], reference=_bcm_reference)
def bcm(batch, P, Q, block, dtype):
    """Block-circulant matrix times vectors: a (P*b) x (Q*b) matrix of b x b circulant blocks.

    Each block is stored as its generator w[p, q, :] (C[i, j] = w[(i - j) mod b], CirCNN's compression).
    A producer node unrolls the generator to length 2b-1 so that the main node's access is affine:
    O[n, p, i] = X[n, q*b + j] * Wx[p, q, i - j + b - 1].
    """
    from tvm import te

    X = te.placeholder((batch, Q * block), name="X", dtype=dtype)
    Wg = te.placeholder((P, Q, block), name="W", dtype=dtype)
    Wx = te.compute((P, Q, 2 * block - 1), lambda p, q, t: Wg[p, q, (t + 1) % block], name="circulant")
    q = te.reduce_axis((0, Q), name="q")
    j = te.reduce_axis((0, block), name="j")
    acc = accumulator(dtype)
    O = te.compute((batch, P, block),
                   lambda n, p, i: te.sum(mac(X[n, q * block + j], Wx[p, q, i - j + block - 1], acc), axis=[q, j]),
                   name="O")
    return [X, Wg, O]
