"""The built-in operator library: FlexTensor's 12 operators (Table 1) plus BCM and shift convolution."""

from __future__ import annotations

import difflib

from hetero_dse.errors import OperatorError
from hetero_dse.operator import OperatorDef
from hetero_dse.ops.conv import (
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    depthwise_conv2d,
    dilated_conv2d,
    group_conv2d,
)
from hetero_dse.ops.linear import bcm, bilinear, gemm, gemv
from hetero_dse.ops.shift import shift_conv2d
from hetero_dse.ops.winograd import winograd_group_product, winograd_product

#: Built-in operators by name, in FlexTensor's Table 1 order, then BCM and SHO.
BUILTIN: dict[str, OperatorDef] = {
    op.name: op
    for op in (gemv, gemm, bilinear, conv1d, conv_transpose1d, conv2d, conv_transpose2d, conv3d,
               conv_transpose3d, group_conv2d, depthwise_conv2d, dilated_conv2d, bcm, shift_conv2d)
}

#: operators the tool builds for itself (a Winograd convolution's batched product, ``gpu_cpu/winograd.py``):
#: found by name where a measuring worker rebuilds one, not listed among the built-ins
INTERNAL: dict[str, OperatorDef] = {op.name: op for op in (winograd_product, winograd_group_product)}

#: FlexTensor's abbreviations (Table 3), accepted wherever an operator name is.
ABBREVIATIONS = {"gmv": "gemv", "gmm": "gemm", "bil": "bilinear", "c1d": "conv1d", "t1d": "conv_transpose1d",
                 "c2d": "conv2d", "t2d": "conv_transpose2d", "c3d": "conv3d", "t3d": "conv_transpose3d",
                 "grp": "group_conv2d", "dep": "depthwise_conv2d", "dil": "dilated_conv2d", "sho": "shift_conv2d"}


def get_builtin(name: str) -> OperatorDef:
    """Look up a built-in operator by name or FlexTensor abbreviation.

    Raises:
        OperatorError: no such operator (the message suggests the closest names).
    """
    key = ABBREVIATIONS.get(name.lower(), name.lower())
    if key in BUILTIN or key in INTERNAL:
        return BUILTIN.get(key) or INTERNAL[key]
    close = difflib.get_close_matches(key, list(BUILTIN) + list(ABBREVIATIONS), n=3)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    raise OperatorError(f"unknown operator {name!r}{hint}; 'hetero_dse ops' lists the built-in operators")
