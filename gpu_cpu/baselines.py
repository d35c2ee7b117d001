"""Library baselines: the torch call a user would otherwise make for a built-in operator (oneDNN on CPU,
cuDNN/cuBLAS on GPU), timed on the same device in the same run as the explored schedules.

Only operators torch expresses directly have one (BCM and the fused shift convolution do not).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from hetero_dse.operator import Operator
from hetero_dse.hardware.allocator import serve_from_heap
from hetero_dse.hardware.host import host_cores


def _conv(nd: int, transposed: bool) -> Callable[..., Any]:
    def call(p: dict[str, Any], x: Any, w: Any, bias: Any = None) -> Any:
        import torch.nn.functional as F

        fn = getattr(F, f"conv_transpose{nd}d" if transposed else f"conv{nd}d")
        kwargs = {"stride": p.get("stride", 1), "padding": p.get("padding", 0), "dilation": p.get("dilation", 1),
                  "groups": p.get("groups", 1)}
        return fn(x, w, bias, **kwargs)

    return call


def _depthwise(p: dict[str, Any], x: Any, w: Any, bias: Any = None) -> Any:
    import torch.nn.functional as F

    return F.conv2d(x, w, bias, stride=p["stride"], padding=p["padding"], dilation=p["dilation"], groups=p["C"])


def _gemm(p: dict[str, Any], a: Any, b: Any, bias: Any = None) -> Any:
    import torch

    return a @ b if bias is None else torch.addmm(bias, a, b)


def _bilinear(p: dict[str, Any], a: Any, b: Any, c: Any) -> Any:
    import torch.nn.functional as F

    return F.bilinear(a, c, b)


LIBRARY: dict[str, Callable[..., Any]] = {
    "gemv": lambda p, a, b: a @ b,
    "gemm": _gemm,
    "bilinear": _bilinear,
    "conv1d": _conv(1, False), "conv_transpose1d": _conv(1, True),
    "conv2d": _conv(2, False), "conv_transpose2d": _conv(2, True),
    "conv3d": _conv(3, False), "conv_transpose3d": _conv(3, True),
    "group_conv2d": _conv(2, False), "dilated_conv2d": _conv(2, False),
    "depthwise_conv2d": _depthwise,
}


#: the operators whose torch call takes a bias of its own (a convolution's, addmm's), as a network calls them
_TAKES_BIAS = {"gemm", "conv2d", "group_conv2d", "dilated_conv2d", "depthwise_conv2d", "conv1d", "conv3d"}


def torch_call(op: Operator) -> Callable[..., Any] | None:
    """The torch function computing ``op`` (same memory layout of the result), or None if torch has none.

    An operator with an epilogue is what torch eager runs for that part of a network: the library call with
    its bias, then each other step as its own op (the residual add, the activation in place)."""
    base = LIBRARY.get(op.name)
    if base is None or not op.epilogue:
        return base
    steps = list(op.epilogue)
    main = len(op.inputs) - op.epilogue_inputs

    def call(p: dict[str, Any], *args: Any) -> Any:
        import torch
        import torch.nn.functional as F

        extras = list(args[main:])
        rest = steps
        if steps[0] == "bias" and op.name in _TAKES_BIAS:
            out = base(p, *args[:main], extras.pop(0).reshape(-1))
            rest = steps[1:]
        else:
            out = base(p, *args[:main])
        for step in rest:
            name, _, arg = step.partition("(")
            values = [float(v) for v in arg.rstrip(")").split(",")] if arg else []
            if name == "bias":
                shape = [1] * out.dim()
                shape[1 if op.name != "gemm" else -1] = -1
                out = out + extras.pop(0).reshape(shape)
            elif name == "add":
                out = torch.add(out, extras.pop(0).reshape(out.shape))
            elif name == "relu":
                out = F.relu(out, inplace=True)
            elif name == "relu6":
                out = F.relu6(out, inplace=True)
            elif name == "leaky_relu":
                out = F.leaky_relu(out, values[0] if values else 0.01, inplace=True)
            else:
                out = torch.clamp(out, values[0], values[1])
        return out

    return call


def torch_output(op: Operator, inputs: list[np.ndarray]) -> np.ndarray | None:
    """``op`` computed by its torch call on ``inputs`` (float32 on the CPU), flattened to ``op``'s output shape."""
    import torch

    call = torch_call(op)
    if call is None:
        return None
    with torch.no_grad():
        out = call(dict(op.params), *[torch.from_numpy(np.ascontiguousarray(a)) for a in inputs])
    return out.numpy().reshape([int(d) for d in op.output.shape])


def time_torch_cpu(op: Operator, repeat: int = 10, min_seconds: float = 0.2,
                   samples: list[float] | None = None) -> float | None:
    """Median seconds of ``op``'s torch call on this CPU (all cores), or None when torch has no such call;
    ``samples`` (when given) receives each repeat's seconds per run. Its memory comes from the heap, reused
    (``serve_from_heap``), as in a running network, not mmap'd afresh on every call."""
    import torch

    call = torch_call(op)
    if call is None:
        return None
    serve_from_heap()
    torch.set_num_threads(host_cores())
    params = dict(op.params)
    args = [torch.from_numpy(np.ascontiguousarray(a.astype(np.float32))) for a in op.random_inputs(0)]
    with torch.no_grad():
        call(params, *args)  # warm-up: oneDNN picks its kernel on the first call
        start = time.perf_counter()
        runs = 0
        while runs < 3 or time.perf_counter() - start < min_seconds / 4:
            call(params, *args)
            runs += 1
        number = max(1, int(runs * min_seconds / max(time.perf_counter() - start, 1e-9) / repeat))
        runs_s = samples if samples is not None else []
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                call(params, *args)
            runs_s.append((time.perf_counter() - t0) / number)
    return float(np.median(runs_s))


def time_torch_cuda(op: Operator, repeat: int = 10, number: int = 20, tf32: bool = False,
                    samples: list[float] | None = None) -> float | None:
    """Median seconds of ``op``'s torch call (cuDNN/cuBLAS) on the CUDA device, timed with CUDA events; None
    when torch has no such call or sees no GPU. ``samples`` (when given) receives each repeat's seconds per run.

    Strict FP32 by default, the arithmetic the explored schedules do: torch lets cuDNN convolutions round
    their inputs to TF32 on tensor cores unless told otherwise, a different (less exact) computation.
    ``tf32=True`` times what a user gets by default. A float16 or bfloat16 operator is timed on inputs of its
    type (cuDNN's tensor-core kernels); an int8 one has no torch call on CUDA."""
    import torch

    call = torch_call(op)
    types = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    if call is None or not torch.cuda.is_available() or op.dtype not in types:
        return None  # torch's convolutions and matrix products take no int8 on CUDA
    params = dict(op.params)
    # float16 and bfloat16 inputs as cuDNN takes them (it accumulates in float32 and writes the input type);
    # the epilogue's operands as float32
    main = len(op.inputs) - op.epilogue_inputs
    args = [torch.from_numpy(np.ascontiguousarray(a.astype(np.float32))).to(types[op.dtype] if i < main else
                                                                              torch.float32).cuda()
            for i, a in enumerate(op.random_inputs(0))]
    samples = samples if samples is not None else []
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    saved = cudnn.allow_tf32, matmul.allow_tf32, cudnn.benchmark
    # benchmark: cuDNN times its algorithms on the first call and keeps the fastest, the library at its best
    cudnn.allow_tf32, matmul.allow_tf32, cudnn.benchmark = tf32, tf32, True
    try:
        with torch.no_grad():
            call(params, *args)  # warm-up: cuDNN picks its algorithm on the first call
            torch.cuda.synchronize()
            for _ in range(repeat):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(number):
                    call(params, *args)
                end.record()
                torch.cuda.synchronize()
                samples.append(start.elapsed_time(end) / 1e3 / number)
    finally:
        cudnn.allow_tf32, matmul.allow_tf32, cudnn.benchmark = saved
    return float(np.median(samples))
