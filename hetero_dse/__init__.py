"""hetero_dse: explore how to run a tensor operator best on an FPGA board, a CPU and a GPU.

A user marks an operator written with TVM tensor expressions::

    import hetero_dse as hd
    from tvm import te

    @hd.operator(M=512, N=512, K=512)
    def gemm(M, N, K, dtype="float32"):
        A = te.placeholder((M, K), name="A", dtype=dtype)
        B = te.placeholder((K, N), name="B", dtype=dtype)
        k = te.reduce_axis((0, K), name="k")
        C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
        return [A, B, C]
"""

from __future__ import annotations

__version__ = "0.1.0"

from hetero_dse.errors import HeteroDSEError
from hetero_dse.operator import Operator, OperatorDef, operator
from hetero_dse.operator_params import Param

__all__ = ["HeteroDSEError", "Operator", "OperatorDef", "Param", "operator", "__version__"]
