"""int8 as a network is deployed on the shared kernel: symmetric int8 weights with a scale per output channel,
int8 activations with a scale per tensor (calibrated on the run's own input: the largest magnitude torch's
float layer produces maps to 127), int32 sums, and requantisation in the write process's epilogue by integer
arithmetic only: ``(sum + bias) × multiplier >> shift`` per channel (rounded half up), the residual rescaled to
the output's scale the same way, a leaky slope in Q14, the activation's clamp in the output's integers. A max
pool (the layer pipeline's) keeps its input's integers and scale.

The reference is that same arithmetic on the same integers: each layer's convolution summed exactly (int8
products in float64, exact below 2^53) from the integer output its producer's reference made, so the kernel's
C-simulation is checked bit for bit; the dequantised result is set beside torch's float network as the
quantisation's own error (``NetworkRun.float_outputs``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from hetero_dse.errors import HeteroDSEError

__all__ = ["Q14", "quantize_run"]

#: the slope's fixed point: 2^14 is a slope of 1 (a signed 16-bit operand)
Q14 = 1 << 14
#: the requantising and residual multipliers are below 2^14, signed 16-bit operands (a 32 × 16 multiply a lane)
MULT_BITS = 14


def _scale(x: np.ndarray) -> float:
    peak = float(np.abs(x).max()) if x.size else 0.0
    return peak / 127.0 if peak > 0 else 1.0


def _quantize(x: np.ndarray, scale: Any) -> np.ndarray:
    return np.clip(np.round(x / scale), -127, 127).astype(np.int8)


def _fixed(ratio: np.ndarray) -> tuple[np.ndarray, int]:
    """Multipliers below 2^15 and one shift with multiplier / 2^shift == ``ratio`` as closely as they allow."""
    top = float(np.max(ratio))
    if not np.isfinite(top) or top <= 0:
        return np.zeros_like(ratio, dtype=np.int64), MULT_BITS
    shift = MULT_BITS - 1 - math.floor(math.log2(top))
    shift = max(1, min(shift, 46))
    return np.round(ratio * 2.0 ** shift).astype(np.int64), shift


def _requant(v: np.ndarray, mult: Any, shift: int) -> np.ndarray:
    return (v.astype(np.int64) * mult + (1 << (shift - 1))) >> shift


def _sum(layer: Any, x_q: np.ndarray, w_q: np.ndarray) -> np.ndarray:
    """The layer's exact integer sums (int64) on ``x_q``, laid out as its float reference."""
    import torch

    s = layer.placed.shape
    x = torch.from_numpy(x_q.astype(np.float64))
    w = torch.from_numpy(w_q.astype(np.float64))
    if w_q.ndim == 2:  # a linear layer: [K, features] on the input's features in torch's order
        out = x.reshape(-1, w.shape[1]) @ w.T
    else:
        out = torch.nn.functional.conv2d(x, w, stride=s.stride, padding=s.pad,
                                         groups=1 if s.engine == "grid" else s.C)
    return out.numpy().round().astype(np.int64)


def _max_pool(shape: Any, x_q: np.ndarray) -> np.ndarray:
    """A max pool of ``shape`` (``LayerShape``) on the integers ``x_q``, padded with the lowest value as torch."""
    import torch

    x = torch.from_numpy(x_q.astype(np.float64))
    y = torch.nn.functional.max_pool2d(x, shape.R, shape.stride, shape.pad)
    return y.numpy().astype(np.int8)


def quantize_run(run: Any) -> Any:
    """``run`` (float: weights, inputs, torch's references) as int8 on the shared kernel, with each layer's
    integer parameters and its bit-exact integer reference."""
    scales: dict[str, float] = {}
    values: dict[str, np.ndarray] = {}
    inputs = {}
    for name, x in run.inputs.items():
        scales[f"input:{name}"] = _scale(x)
        values[f"input:{name}"] = inputs[name] = _quantize(x, scales[f"input:{name}"])
    layers = []
    for i, r in enumerate(run.layers):
        s_x, x_q = scales[r.source], values[r.source]
        if r.placed.shape.engine == "maxpool":  # the largest of integers of one scale: exact, the scale kept
            y = _max_pool(r.placed.shape, x_q)
            scales[f"layer:{i}"], values[f"layer:{i}"] = s_x, y
            layers.append(replace(r, reference=y, quant={"scale": s_x}, float_reference=r.reference))
            continue
        s_y = _scale(r.reference)
        w = np.asarray(r.weight, dtype=np.float64)
        per = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
        s_w = np.where(per > 0, per / 127.0, 1.0)
        w_q = _quantize(w, s_w.reshape(-1, *([1] * (w.ndim - 1))))
        bias_q = np.round(np.asarray(r.bias, dtype=np.float64) / (s_x * s_w)).astype(np.int64)
        if np.abs(bias_q).max(initial=0) >= 2 ** 31:
            raise HeteroDSEError(f"layer {i} ({r.placed.shape.name}): its bias does not fit int32 at its scale")
        mult, shift = _fixed(s_x * s_w / s_y)
        acc = _sum(r, x_q, w_q)
        channels = (1, -1, 1, 1) if acc.ndim == 4 else (1, -1)  # a convolution's K, a linear layer's last axis
        v = _requant(acc + bias_q.reshape(channels), mult.reshape(channels), shift)
        res_mult, res_shift = 0, 1
        if r.residual is not None:
            (rm,), res_shift = _fixed(np.array([scales[r.residual] / s_y]))
            res_mult = int(rm)
            v = v + _requant(values[r.residual].astype(np.int64).reshape(v.shape), res_mult, res_shift)
        lo, hi, slope = r.activation
        slope_mult = int(round(slope * Q14))
        v = np.where(v < 0, (v * slope_mult + (Q14 >> 1)) >> 14, v)
        qlo = -128 if not np.isfinite(lo) else int(max(-128, round(lo / s_y)))
        qhi = 127 if not np.isfinite(hi) else int(min(127, round(hi / s_y)))
        y = np.clip(v, qlo, qhi).astype(np.int8)
        scales[f"layer:{i}"], values[f"layer:{i}"] = s_y, y
        quant = {"mult": mult, "shift": shift, "res_mult": res_mult, "res_shift": res_shift,
                 "slope_mult": slope_mult, "qlo": qlo, "qhi": qhi, "scale": s_y, "bias": bias_q}
        layers.append(replace(r, weight=w_q, bias=bias_q, reference=y, quant=quant, float_reference=r.reference))
    return replace(run, layers=layers, inputs=inputs,
                   reference_source=f"int8: the same integer arithmetic ({run.reference_source} for the scales)")
