"""Convolutions of FlexTensor's Table 1: 1-D/2-D/3-D, transposed, group, depthwise and dilated.

Every convolution is written so that each access is affine in the loop variables, which the analysis,
the FPGA read stage and the GPU shared-memory staging rely on:

* groups get a loop of their own: a grouped output is laid out ``(batch, G, K/G, *spatial)``, the same
  memory as PyTorch's ``(batch, K, *spatial)``, instead of indexing channels with ``k // (K/G)``;
* a transposed convolution is a stride-1 convolution with the flipped kernel over the input expanded by
  the stride (zeros inserted; an ``expand`` node, present when stride > 1) and padded by
  ``dilation*(kernel-1) - padding`` (FlexTensor's T1D/T2D/T3D mini-graphs);
* a depthwise convolution with a channel multiplier M > 1 lays its output out as ``(batch, C, M, *spatial)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero_dse.errors import ShapeError
from hetero_dse.operator import operator
from hetero_dse.operator_params import Param
from hetero_dse.ops._common import (
    DILATION,
    DTYPE,
    GROUPS,
    KERNEL_LOOPS,
    OUTPUT_LOOPS,
    PADDING,
    SPATIAL_NAMES,
    STRIDE,
    accumulator,
    mac,
    pad,
)
from hetero_dse.ops.shapes import CONV1D_SMALL, CONV2D_SMALL, CONV3D_SMALL, DEPTHWISE_SMALL, GROUP_SMALL, YOLO_V1


def is_pointwise(op: str, params: Any) -> bool:
    """A 1×1 convolution that is a plain matrix product over the pixels: NCHW conv2d, batch 1, stride 1, no
    padding, one group (its input [1, C, H, W] is the [C, H·W] matrix the product reads, memory unchanged)."""
    return (op == "conv2d" and params.get("kernel") == 1 and params.get("stride", 1) == 1
            and params.get("padding", 0) == 0 and params.get("groups", 1) == 1 and params.get("dilation", 1) == 1
            and params.get("batch") == 1)


def conv_nd(data_shape: tuple[int, ...], K: int, kernel: int, stride: int, padding: int, dilation: int,
            groups: int, dtype: str, transposed: bool = False) -> list[Any]:
    """Build an N-D (N = len(data_shape) - 2) convolution; returns ``[I, W, O]``."""
    import tvm
    from tvm import te

    batch, C, *spatial = data_shape
    nd = len(spatial)
    if C % groups or K % groups:
        raise ShapeError(f"groups={groups} must divide both the input channels C={C} and the output channels K={K}")
    Cg, Kg = C // groups, K // groups
    I = te.placeholder((batch, C, *spatial), name="I", dtype=dtype)
    if transposed:
        W = te.placeholder((C, Kg, *[kernel] * nd), name="W", dtype=dtype)
    else:
        W = te.placeholder((K, Cg, *[kernel] * nd), name="W", dtype=dtype)

    data, conv_stride, pad_width = I, stride, padding
    if transposed:
        pad_width = dilation * (kernel - 1) - padding
        if pad_width < 0:
            raise ShapeError(f"padding={padding} is larger than dilation*(kernel-1)={dilation * (kernel - 1)}, "
                             "which a transposed convolution cannot undo")
        conv_stride = 1
        if stride > 1:
            zero = tvm.tirx.const(0, dtype)
            expanded = [(n - 1) * stride + 1 for n in spatial]

            def expand(*idx: Any) -> Any:
                b, c, *x = idx
                on_grid = tvm.tirx.all(*[v % stride == 0 for v in x])
                return tvm.tirx.if_then_else(on_grid, I[(b, c, *[v // stride for v in x])], zero)

            data = te.compute((batch, C, *expanded), expand, name="expand",
                              varargs_names=["b", "c"] + SPATIAL_NAMES[nd])
    if pad_width > 0:
        data = pad(data, 2, pad_width)

    out_spatial = window_positions([int(d) for d in data.shape[2:]], kernel, conv_stride, dilation)

    acc = accumulator(dtype)
    rc = te.reduce_axis((0, Cg), name="rc")
    taps = [te.reduce_axis((0, kernel), name=n) for n in KERNEL_LOOPS[nd]]
    grouped = groups > 1
    out_shape = (batch, groups, Kg, *out_spatial) if grouped else (batch, K, *out_spatial)
    names = ["b", "g", "k"] if grouped else ["b", "k"]

    def body(*idx: Any) -> Any:
        b = idx[0]
        g, k = (idx[1], idx[2]) if grouped else (0, idx[1])
        out = idx[-nd:]
        channel = g * Cg + rc if grouped else rc
        window = [o * conv_stride + r * dilation for o, r in zip(out, taps, strict=True)]
        if transposed:
            weight = W[(channel, k, *[kernel - 1 - r for r in taps])]
        else:
            weight = W[(g * Kg + k if grouped else k, rc, *taps)]
        return te.sum(mac(data[(b, channel, *window)], weight, acc), axis=[rc, *taps])

    O = te.compute(out_shape, body, name="O", varargs_names=names + OUTPUT_LOOPS[nd])
    return [I, W, O]


def window_positions(padded: list[int], kernel: int, stride: int, dilation: int) -> list[int]:
    """Positions of a sliding window along each padded input dimension: the output's spatial extents.

    Raises:
        ShapeError: the dilated kernel is larger than the padded input.
    """
    positions = [(n - dilation * (kernel - 1) - 1) // stride + 1 for n in padded]
    if min(positions) < 1:
        raise ShapeError(f"the kernel ({kernel}, dilation {dilation}) is larger than the padded input "
                         f"({'x'.join(map(str, padded))}): the output would be empty")
    return positions


def _torch_conv(params: dict[str, Any], x: np.ndarray, w: np.ndarray, nd: int, transposed: bool) -> np.ndarray:
    import torch
    import torch.nn.functional as F

    tx, tw = torch.from_numpy(x.astype(np.float64)), torch.from_numpy(w.astype(np.float64))
    kwargs = dict(stride=params["stride"], padding=params["padding"], dilation=params["dilation"],
                  groups=params["groups"])
    if transposed:
        fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[nd]
    else:
        fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    out = fn(tx, tw, **kwargs).numpy()
    if params["groups"] > 1:
        out = out.reshape(out.shape[0], params["groups"], -1, *out.shape[2:])
    return out


def _reference(nd: int, transposed: bool):
    def reference(params: dict[str, Any], x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return _torch_conv(params, x, w, nd, transposed)

    return reference


_CONV_PARAMS = dict(K=Param(64, help="output channels"), kernel=Param(3, help="kernel size (square/cubic)"),
                    stride=STRIDE, padding=PADDING, dilation=DILATION, groups=GROUPS, dtype=DTYPE)


@operator(batch=1, C=Param(64, help="input channels"), L=Param(128, help="input length"), **_CONV_PARAMS,
          shape_sets=[CONV1D_SMALL], weights=("W",), reference=_reference(1, False))
def conv1d(batch, C, L, K, kernel, stride, padding, dilation, groups, dtype):
    """1-D sliding-window convolution O[b,k,i] = I[b,rc,i*st+rx] * W[k,rc,rx]."""
    return conv_nd((batch, C, L), K, kernel, stride, padding, dilation, groups, dtype)


@operator(batch=1, C=Param(64, help="input channels"), L=Param(128, help="input length"), **_CONV_PARAMS,
          shape_sets=[CONV1D_SMALL], weights=("W",), reference=_reference(1, True))
def conv_transpose1d(batch, C, L, K, kernel, stride, padding, dilation, groups, dtype):
    """Transposed 1-D convolution (PyTorch's conv_transpose1d, weight layout C x K/G x k)."""
    return conv_nd((batch, C, L), K, kernel, stride, padding, dilation, groups, dtype, transposed=True)


_CONV2D_DEFAULTS = dict(batch=1, C=Param(64, help="input channels"), H=Param(56, help="input height"),
                        W=Param(56, help="input width"))


@operator(**_CONV2D_DEFAULTS, **{**_CONV_PARAMS, "padding": Param(1, minimum=0, help="zero padding on each side")},
          shape_sets=[YOLO_V1, CONV2D_SMALL], weights=("W",), reference=_reference(2, False))
def conv2d(batch, C, H, W, K, kernel, stride, padding, dilation, groups, dtype):
    """2-D convolution O[b,k,i,j] = I[b,rc,i*st+rx,j*st+ry] * W[k,rc,rx,ry] (NCHW)."""
    return conv_nd((batch, C, H, W), K, kernel, stride, padding, dilation, groups, dtype)


@operator(**_CONV2D_DEFAULTS, **_CONV_PARAMS, shape_sets=[CONV2D_SMALL], weights=("W",), reference=_reference(2, True))
def conv_transpose2d(batch, C, H, W, K, kernel, stride, padding, dilation, groups, dtype):
    """Transposed 2-D convolution (PyTorch's conv_transpose2d, weight layout C x K/G x k x k)."""
    return conv_nd((batch, C, H, W), K, kernel, stride, padding, dilation, groups, dtype, transposed=True)


_CONV3D_DEFAULTS = dict(batch=1, C=Param(16, help="input channels"), D=Param(8, help="input depth"),
                        H=Param(28, help="input height"), W=Param(28, help="input width"))


@operator(**_CONV3D_DEFAULTS, **{**_CONV_PARAMS, "K": Param(32, help="output channels")},
          shape_sets=[CONV3D_SMALL], weights=("W",), reference=_reference(3, False))
def conv3d(batch, C, D, H, W, K, kernel, stride, padding, dilation, groups, dtype):
    """3-D convolution O[b,k,d,i,j] = I[b,rc,d+rd,i+rx,j+ry] * W[k,rc,rd,rx,ry] (NCDHW)."""
    return conv_nd((batch, C, D, H, W), K, kernel, stride, padding, dilation, groups, dtype)


@operator(**_CONV3D_DEFAULTS, **{**_CONV_PARAMS, "K": Param(32, help="output channels")},
          shape_sets=[CONV3D_SMALL], weights=("W",), reference=_reference(3, True))
def conv_transpose3d(batch, C, D, H, W, K, kernel, stride, padding, dilation, groups, dtype):
    """Transposed 3-D convolution (PyTorch's conv_transpose3d)."""
    return conv_nd((batch, C, D, H, W), K, kernel, stride, padding, dilation, groups, dtype, transposed=True)


@operator(**_CONV2D_DEFAULTS, **{**_CONV_PARAMS, "padding": Param(1, minimum=0, help="zero padding on each side"),
                                 "groups": Param(4, help="number of channel groups")},
          shape_sets=[GROUP_SMALL], weights=("W",), reference=_reference(2, False))
def group_conv2d(batch, C, H, W, K, kernel, stride, padding, dilation, groups, dtype):
    """Group convolution: C and K split into G groups, output laid out (batch, G, K/G, H, W)."""
    return conv_nd((batch, C, H, W), K, kernel, stride, padding, dilation, groups, dtype)


@operator(**_CONV2D_DEFAULTS, **{**_CONV_PARAMS, "padding": Param(2, minimum=0, help="zero padding on each side"),
                                 "dilation": Param(2, help="spacing between kernel taps")},
          shape_sets=[CONV2D_SMALL], weights=("W",), reference=_reference(2, False))
def dilated_conv2d(batch, C, H, W, K, kernel, stride, padding, dilation, groups, dtype):
    """Dilated 2-D convolution O[b,k,i,j] = I[b,rc,i+rx*dx,j+ry*dy] * W[k,rc,rx,ry]."""
    return conv_nd((batch, C, H, W), K, kernel, stride, padding, dilation, groups, dtype)


@operator(**_CONV2D_DEFAULTS, multiplier=Param(1, help="output channels per input channel"),
          kernel=Param(3, help="kernel size"), stride=STRIDE, padding=Param(1, minimum=0, help="zero padding"),
          dilation=DILATION, dtype=DTYPE, shape_sets=[DEPTHWISE_SMALL], weights=("W",))
def depthwise_conv2d(batch, C, H, W, multiplier, kernel, stride, padding, dilation, dtype):
    """Depthwise convolution: each input channel convolved with its own M filters."""
    from tvm import te

    I = te.placeholder((batch, C, H, W), name="I", dtype=dtype)
    Wt = te.placeholder((C * multiplier, 1, kernel, kernel), name="W", dtype=dtype)
    data = pad(I, 2, padding) if padding > 0 else I
    out_h, out_w = window_positions([H + 2 * padding, W + 2 * padding], kernel, stride, dilation)
    acc = accumulator(dtype)
    rx = te.reduce_axis((0, kernel), name="rx")
    ry = te.reduce_axis((0, kernel), name="ry")

    def tap(b: Any, c: Any, m: Any, i: Any, j: Any) -> Any:
        x = data[b, c, i * stride + rx * dilation, j * stride + ry * dilation]
        return te.sum(mac(x, Wt[c * multiplier + m, 0, rx, ry], acc), axis=[rx, ry])

    if multiplier > 1:
        O = te.compute((batch, C, multiplier, out_h, out_w), tap, name="O", varargs_names=["b", "c", "m", "i", "j"])
    else:
        O = te.compute((batch, C, out_h, out_w), lambda b, c, i, j: tap(b, c, 0, i, j), name="O")
    return [I, Wt, O]


def _depthwise_reference(params: dict[str, Any], x: np.ndarray, w: np.ndarray) -> np.ndarray:
    import torch
    import torch.nn.functional as F

    out = F.conv2d(torch.from_numpy(x.astype(np.float64)), torch.from_numpy(w.astype(np.float64)),
                   stride=params["stride"], padding=params["padding"], dilation=params["dilation"],
                   groups=params["C"]).numpy()
    if params["multiplier"] > 1:
        out = out.reshape(out.shape[0], params["C"], params["multiplier"], *out.shape[2:])
    return out


depthwise_conv2d.reference = _depthwise_reference
