"""Shift convolution (SHO): the zero-FLOP shift of Wu et al. (CVPR 2018) fused with its 1x1 convolution."""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero_dse.errors import ShapeError
from hetero_dse.operator import operator
from hetero_dse.operator_params import Param
from hetero_dse.ops._common import DTYPE, accumulator, mac, pad
from hetero_dse.ops.shapes import SHIFT_SMALL


def _shift_reference(params: dict[str, Any], x: np.ndarray, w: np.ndarray) -> np.ndarray:
    k, C, H, W = params["kernel"], params["C"], params["H"], params["W"]
    cg, half = C // (k * k), k // 2
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (half, half), (half, half)))
    shifted = np.empty_like(x, dtype=np.float64)
    for gh in range(k):
        for gw in range(k):
            group = slice((gh * k + gw) * cg, (gh * k + gw + 1) * cg)
            shifted[:, group] = padded[:, group, gh:gh + H, gw:gw + W]
    return np.einsum("bchw,kc->bkhw", shifted, w.astype(np.float64))


@operator(batch=1, C=Param(72, help="input channels (a multiple of kernel**2)"), H=Param(28, help="height"),
          W=Param(28, help="width"), K=Param(64, help="output channels"),
          kernel=Param(3, help="shift window: channels split into kernel**2 groups"), dtype=DTYPE,
          shape_sets=[SHIFT_SMALL], reference=_shift_reference, weights=("W",))
def shift_conv2d(batch, C, H, W, K, kernel, dtype):
    """Shift convolution: channel group (gh, gw) moved by (gh - k//2, gw - k//2), then a 1x1 convolution.

    Fused into one node, O[b,k,i,j] = Ipad[b, (gh*k+gw)*Cg + cg, i+gh, j+gw] * W[k, (gh*k+gw)*Cg + cg]; the
    shift costs no multiply and no extra memory pass, and every access stays affine.
    """
    from tvm import te

    if C % (kernel * kernel):
        raise ShapeError(f"shift_conv2d needs C divisible by kernel**2={kernel * kernel}, got C={C}")
    cg = C // (kernel * kernel)
    I = te.placeholder((batch, C, H, W), name="I", dtype=dtype)
    Wt = te.placeholder((K, C), name="W", dtype=dtype)
    data = pad(I, 2, kernel // 2) if kernel > 1 else I
    gh = te.reduce_axis((0, kernel), name="gh")
    gw = te.reduce_axis((0, kernel), name="gw")
    rc = te.reduce_axis((0, cg), name="rc")
    acc = accumulator(dtype)

    def body(b: Any, k: Any, i: Any, j: Any) -> Any:
        channel = (gh * kernel + gw) * cg + rc
        return te.sum(mac(data[b, channel, i + gh, j + gw], Wt[k, channel], acc), axis=[gh, gw, rc])

    O = te.compute((batch, K, H, W), body, name="O")
    return [I, Wt, O]
