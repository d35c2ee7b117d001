"""Epilogues: the element-wise steps that follow a convolution or matrix product in a network (Bolt's
epilogue fusion) — a bias per output channel, a residual add, an activation — made part of the operator.

``fuse(op, steps, channel_axes)`` returns the operator with one more te.compute node after its reduction,
reading the reduction's result at the same element, a bias at the element's channel and a residual at the
same element. Every target then computes the steps where the result is still on chip (the CPU/GPU schedule
inlines the node into the accumulator's write-back, the FPGA's write process applies it per word lane) and
the analysis keeps the reduction as the main node (``hetero_dse.analysis``).

A step is text, so that it keys the history and reads in a report: ``bias``, ``add`` (a residual of the
output's shape), ``relu``, ``relu6``, ``leaky_relu(ALPHA)`` and ``clip(LO,HI)``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from hetero_dse.errors import OperatorError
from hetero_dse.operator import Operator

__all__ = ["ACTIVATIONS", "activation_clamp", "apply_numpy", "apply_te", "check_steps", "fuse", "parse_step"]

ACTIVATIONS = ("relu", "relu6", "leaky_relu", "clip")
_STEP = re.compile(r"(bias|add|relu6|relu|leaky_relu|clip)(?:\(([^)]*)\))?")


def parse_step(step: str) -> tuple[str, tuple[float, ...]]:
    """``leaky_relu(0.1)`` -> (``leaky_relu``, (0.1,)); one sentence for a step that is not one."""
    m = _STEP.fullmatch(step.replace(" ", ""))
    args: tuple[float, ...] = ()
    if m and m.group(2):
        try:
            args = tuple(float(a) for a in m.group(2).split(","))
        except ValueError:
            m = None
    want = {"leaky_relu": 1, "clip": 2}
    if not m or len(args) != want.get(m.group(1), 0) and not (m.group(1) == "leaky_relu" and not args):
        raise OperatorError(f"{step!r} is not an epilogue step; the steps are bias, add, relu, relu6, "
                            "leaky_relu(ALPHA) and clip(LO,HI)")
    return m.group(1), args


def activation_clamp(steps: Sequence[str]) -> tuple[float, float, float]:
    """The activation among ``steps`` as (low, high, slope): a value below zero times the slope, then clamped to
    [low, high] (the form a generated epilogue applies); no activation is (-inf, inf, 1)."""
    inf = float("inf")
    for step in steps:
        kind, args = parse_step(step)
        if kind == "relu":
            return (-inf, inf, 0.0)
        if kind == "relu6":
            return (0.0, 6.0, 0.0)
        if kind == "leaky_relu":
            return (-inf, inf, args[0] if args else 0.01)
        if kind == "clip":
            return (args[0], args[1], 1.0)
    return (-inf, inf, 1.0)


def check_steps(steps: Sequence[str]) -> tuple[str, ...]:
    for step in steps:
        parse_step(step)
    return tuple(steps)


def fuse(op: Operator, steps: Sequence[str], channel_axes: Sequence[int]) -> Operator:
    """``op`` followed by ``steps`` (see the module doc); ``channel_axes``: the output's dimensions a bias is
    indexed by (``(1,)`` for a convolution's K, the last for a matrix product's N)."""
    steps = check_steps(steps)
    if not steps:
        return op
    if not op.output.op.reduce_axis:
        raise OperatorError(f"operator {op.name} has no reduction for an epilogue to follow")
    extras, fused = apply_te(op.output, steps, channel_axes)
    return replace(op, inputs=(*op.inputs, *extras), output=fused, epilogue=steps,
                   epilogue_axes=tuple(channel_axes), epilogue_inputs=len(extras),
                   epilogue_reference=lambda value, given: apply_numpy(steps, value, given, channel_axes),
                   epilogue_rebuild=partial(fuse, steps=steps, channel_axes=tuple(channel_axes)))


def apply_te(out: Any, steps: Sequence[str], channel_axes: Sequence[int], name: str = "E",
             prefix: str = "") -> tuple[list[Any], Any]:
    """The steps after the tensor ``out``: the placeholders they read (a bias, a residual; their names after
    ``prefix``) and the tensor ``name`` that applies them element by element."""
    import tvm
    from tvm import te

    steps = check_steps(steps)
    shape = [int(d) for d in out.shape]
    dtype = str(out.dtype)
    integer = dtype.startswith("int")
    extras: list[Any] = []
    for i, step in enumerate(steps):
        kind, _ = parse_step(step)
        if kind == "bias":
            extras.append(te.placeholder([shape[a] for a in channel_axes],
                                         name=prefix + (f"bias{i}" if i else "bias"), dtype=dtype))
        elif kind == "add":
            extras.append(te.placeholder(shape, name=prefix + (f"residual{i}" if i else "residual"), dtype=dtype))
        elif kind == "leaky_relu" and integer:
            raise OperatorError("leaky_relu is not an integer epilogue; use float32 or float16")

    def const(value: float) -> Any:
        return tvm.tirx.const(int(value) if integer else value, dtype)

    def body(*idx: Any) -> Any:
        value = out(*idx)
        extra = iter(extras)
        for step in steps:
            kind, args = parse_step(step)
            if kind == "bias":
                value = value + next(extra)[tuple(idx[a] for a in channel_axes)]
            elif kind == "add":
                value = value + next(extra)(*idx)
            elif kind == "relu":
                value = tvm.te.max(value, const(0))
            elif kind == "relu6":
                value = tvm.te.min(tvm.te.max(value, const(0)), const(6))
            elif kind == "clip":
                value = tvm.te.min(tvm.te.max(value, const(args[0])), const(args[1]))
            else:  # leaky_relu: the slope below zero
                value = tvm.tirx.Select(value > const(0), value, value * const(args[0] if args else 0.01))
        return value

    return extras, te.compute(shape, body, name=name, varargs_names=_axis_names(out))


def _axis_names(tensor: Any) -> list[str]:
    return [str(iv.var.name) for iv in tensor.op.axis]


def apply_numpy(steps: Sequence[str], value: np.ndarray, extras: Sequence[np.ndarray],
                channel_axes: Sequence[int]) -> np.ndarray:
    """The steps on a reference result (float64 for floats: the comparison's ground truth)."""
    extra = iter(extras)
    for step in steps:
        name, args = parse_step(step)
        if name == "bias":
            b = next(extra)
            shape = [1] * value.ndim
            for a, n in zip(channel_axes, b.shape, strict=True):
                shape[a] = n
            value = value + b.reshape(shape)
        elif name == "add":
            value = value + next(extra)
        elif name == "relu":
            value = np.maximum(value, 0)
        elif name == "relu6":
            value = np.clip(value, 0, 6)
        elif name == "clip":
            value = np.clip(value, args[0], args[1])
        else:
            value = np.where(value > 0, value, value * (args[0] if args else 0.01))
    return value

