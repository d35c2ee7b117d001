"""A 2-D convolution with zero padding written by hand: a two-node mini-graph (pad -> conv).

    hetero_dse analyze examples/conv2d.py
    hetero_dse analyze examples/conv2d.py --param C=256 --param K=512 --param H=28 --param W=28
"""

import tvm
from tvm import te

import hetero_dse as hd


@hd.operator(N=1, C=64, H=56, W=56, K=128, R=3, pad=hd.Param(1, minimum=0, help="zero padding"))
def conv2d_nchw(N, C, H, W, K, R, pad):
    """O[n, k, y, x] = sum over c, ry, rx of I[n, c, y + ry, x + rx] * F[k, c, ry, rx] (stride 1)."""
    I = te.placeholder((N, C, H, W), name="I")
    F = te.placeholder((K, C, R, R), name="F")
    Ip = te.compute(
        (N, C, H + 2 * pad, W + 2 * pad),
        lambda n, c, h, w: tvm.tirx.if_then_else(
            tvm.tirx.all(h >= pad, h < H + pad, w >= pad, w < W + pad), I[n, c, h - pad, w - pad], 0.0),
        name="Ipad",
    )
    c = te.reduce_axis((0, C), name="c")
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, R), name="rx")
    out_h, out_w = H + 2 * pad - R + 1, W + 2 * pad - R + 1
    O = te.compute(
        (N, K, out_h, out_w),
        lambda n, k, y, x: te.sum(Ip[n, c, y + ry, x + rx] * F[k, c, ry, rx], axis=[c, ry, rx]),
        name="O",
    )
    return [I, F, O]
