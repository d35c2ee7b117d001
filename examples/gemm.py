"""Matrix multiply, the smallest complete op.py.

    hetero_dse analyze examples/gemm.py
    hetero_dse analyze examples/gemm.py --param K=256 --param dtype=int8
"""

from tvm import te

import hetero_dse as hd


@hd.operator(M=512, N=512, K=512)
def gemm(M, N, K, dtype="float32"):
    """C[i, j] = sum over k of A[i, k] * B[k, j]."""
    A = te.placeholder((M, K), name="A", dtype=dtype)
    B = te.placeholder((K, N), name="B", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")
    acc = "int32" if dtype.startswith("int") else dtype
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k].astype(acc) * B[k, j].astype(acc), axis=k), name="C")
    # Inputs and the output, in the order of the generated function's arguments.
    return [A, B, C]
