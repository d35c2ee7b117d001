"""Pieces shared by the built-in operators: parameter specs, accumulation type, the padding node."""

from __future__ import annotations

from typing import Any

from hetero_dse.operator_params import DTYPES, Param

DTYPE = Param("float32", choices=DTYPES, help="data type of the inputs (integers accumulate in int32, float16 and "
              "bfloat16 in float32)")
STRIDE = Param(1, help="stride of the sliding window")
PADDING = Param(0, minimum=0, help="zero padding on each side")
DILATION = Param(1, help="spacing between kernel taps")
GROUPS = Param(1, help="number of channel groups")

#: Names of the spatial dimensions of 1-, 2- and 3-D data (input side) and of the output loops.
SPATIAL_NAMES = {1: ["l"], 2: ["h", "w"], 3: ["d", "h", "w"]}
OUTPUT_LOOPS = {1: ["i"], 2: ["i", "j"], 3: ["d", "i", "j"]}
KERNEL_LOOPS = {1: ["rx"], 2: ["rx", "ry"], 3: ["rd", "rx", "ry"]}


def accumulator(dtype: str) -> str:
    """Type the products are summed in: int32 for integer operands (no overflow at these sizes), float32 for
    float16 and bfloat16 ones (a half-precision sum of thousands of products loses the result; tensor cores, cuDNN and
    an HLS engineer all accumulate in float32)."""
    return "int32" if dtype.startswith("int") else "float32" if dtype in ("float16", "bfloat16") else dtype


def mac(a: Any, b: Any, acc: str) -> Any:
    """The product of two loaded operands in the accumulator type."""
    if dtype_of(a) != acc:
        a = a.astype(acc)
    if dtype_of(b) != acc:
        b = b.astype(acc)
    return a * b


def dtype_of(expr: Any) -> str:
    """Data type of a TE expression: a tensor slice carries ``dtype``, a PrimExpr its type ``ty``."""
    dtype = getattr(expr, "dtype", None)
    return str(dtype if dtype is not None else expr.ty)


def pad(data: Any, leading: int, pad_width: int, name: str = "pad") -> Any:
    """Zero-pad the trailing spatial dimensions of ``data`` by ``pad_width`` on both sides.

    ``leading`` dimensions (batch, channel) are left as they are. One node of the mini-graph, as in
    FlexTensor: the padding is a producer that the schedule may inline or stage.
    """
    import tvm
    from tvm import te

    shape = [int(d) for d in data.shape]
    out_shape = shape[:leading] + [d + 2 * pad_width for d in shape[leading:]]
    names = ["b", "c"][:leading] + SPATIAL_NAMES[len(shape) - leading]
    zero = tvm.tirx.const(0, data.dtype)

    def body(*idx: Any) -> Any:
        spatial = idx[leading:]
        extents = shape[leading:]
        inside = [tvm.tirx.all(x >= pad_width, x < n + pad_width) for x, n in zip(spatial, extents, strict=True)]
        src = list(idx[:leading]) + [x - pad_width for x in spatial]
        return tvm.tirx.if_then_else(tvm.tirx.all(*inside), data[tuple(src)], zero)

    return te.compute(out_shape, body, name=name, varargs_names=names)

