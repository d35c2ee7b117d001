"""A 3×3 stride-1 convolution on the CPU by Winograd's F(m×m, 3×3) (``hetero_dse/ops/winograd.py``), as
three kernels run one after the other:

1. the input transform ``V[e, p, c] = (Bᵀ d B)[e]`` of each α×α input tile ``d`` (tile ``p``, channel ``c``),
   read from the input once transposed channel-last with its padding (so the vector of channels is one load);
2. the batched product ``M[e] = V[e] · U[e]`` over the α² points: an operator of its own
   (``winograd_product``), searched by the CPU space like any matrix product;
3. the output transform ``Aᵀ M A`` of each tile, the layer's epilogue (bias, residual, activation) fused.

The weights are transformed once ahead (``U = G g Gᵀ``, ``transform_weights``), as packed weights are. The
transforms are sums of the matrices' non-zero entries written out term by term (a ±1 costs no multiply):
LLVM cannot drop a float multiply by zero, and the matrix form ran 1296 multiply-adds a tile and channel for
F(4×4)'s input where these sums need at most 288. Within a tile every point's sum is unrolled, so the sums
a row of Bᵀ shares across the points are computed once (the separable form, Bᵀ d then · B).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from hetero_dse.epilogue import apply_te
from hetero_dse.errors import HeteroDSEError
from hetero_dse.operator import Operator
from hetero_dse.ops.winograd import transforms, winograd_product
from hetero_dse.space.point import Point

__all__ = ["WinogradShape", "WinogradKernel", "input_transform", "output_transform", "product_operator",
           "transform_weights", "winograd_shape"]


@dataclass(frozen=True)
class WinogradShape:
    """A convolution's sizes as F(m×m, 3×3) tiles it: C → K channels, an H×W input padded by ``padding``."""

    C: int
    K: int
    H: int
    W: int
    padding: int
    m: int
    r: int = 3

    @property
    def alpha(self) -> int:
        return self.m + self.r - 1

    @property
    def out_h(self) -> int:
        return self.H + 2 * self.padding - self.r + 1

    @property
    def out_w(self) -> int:
        return self.W + 2 * self.padding - self.r + 1

    @property
    def tiles_h(self) -> int:
        return -(-self.out_h // self.m)

    @property
    def tiles_w(self) -> int:
        return -(-self.out_w // self.m)

    @property
    def tiles(self) -> int:
        return self.tiles_h * self.tiles_w

    @property
    def points(self) -> int:
        """α²: the products a tile and channel takes."""
        return self.alpha * self.alpha


def winograd_shape(op: Operator, m: int) -> WinogradShape:
    """``op`` (a captured or built-in conv2d) as F(m×m, 3×3) tiles it; one sentence where it cannot be."""
    p = op.params
    if op.name != "conv2d":
        raise HeteroDSEError(f"Winograd on the CPU takes a conv2d, not {op.name}")
    wrong = [f"{name} {p.get(name)}" for name, want in (("kernel", 3), ("stride", 1), ("dilation", 1), ("groups", 1),
                                                        ("batch", 1)) if int(p.get(name, want)) != want]
    if str(p.get("dtype", "float32")) != "float32":
        wrong.append(f"dtype {p['dtype']}")
    if wrong:
        raise HeteroDSEError(f"Winograd F({m}×{m}, 3×3) on the CPU takes a float32 3×3 stride-1 convolution of one "
                             f"image and one group; {op.title} has {', '.join(wrong)}")
    return WinogradShape(int(p["C"]), int(p["K"]), int(p["H"]), int(p["W"]), int(p["padding"]), m)


def _combination(coefficients: list[Fraction], terms: list[Any]) -> Any:
    """Σ coefficient · term over the non-zero coefficients, a ±1 without its multiply."""
    import tvm

    total = None
    for coefficient, term in zip(coefficients, terms, strict=True):
        if coefficient == 0:
            continue
        if abs(coefficient) == 1:
            value, negative = term, coefficient < 0
        else:
            value, negative = term * tvm.tirx.const(float(abs(coefficient)), "float32"), coefficient < 0
        if total is None:
            total = -value if negative else value
        else:
            total = total - value if negative else total + value
    return total if total is not None else tvm.tirx.const(0.0, "float32")


def _select(index: Any, values: list[Any]) -> Any:
    """``values[index]`` for a loop variable ``index``: a chain of selects that folds to one value where the
    loop is unrolled."""
    import tvm

    chosen = values[-1]
    for k in range(len(values) - 2, -1, -1):
        chosen = tvm.tirx.Select(index == k, values[k], chosen)
    return chosen


def _two_sided(left: tuple, right: tuple, tile: Any, row: int, col: int) -> Any:
    """(L · tile · Rᵀ)[row, col] as sums of non-zero terms: Σ_j R[col, j] · (Σ_i L[row, i] · tile(i, j))."""
    inner = [_combination([left[row][i] for i in range(len(left[row]))], [tile(i, j) for i in range(len(left[row]))])
             for j in range(len(right[col]))]
    return _combination(list(right[col]), inner)


def input_transform(shape: WinogradShape, lanes: int) -> Any:
    """The scheduled IRModule of X (1×C×H×W) → V (α²×tiles×C): the input transposed channel-last with its
    padding, one pass, then each tile's Bᵀ d B in two sides (Bᵀ d a row at a time, then its rows · B), held in
    registers, ``lanes`` channels a vector."""
    import tvm
    from tvm import s_tir, te

    s, bt = shape, transforms(shape.m, shape.r).BT
    a, pad = s.alpha, s.padding
    rows, cols = s.tiles_h * s.m + s.r - 1, s.tiles_w * s.m + s.r - 1
    X = te.placeholder((1, s.C, s.H, s.W), name="X")
    # the padded input, channel-last: a tile's channels one vector load
    Xt = te.compute((rows, cols, s.C), lambda y, x, c: te.if_then_else(
        te.all(y >= pad, y < s.H + pad, x >= pad, x < s.W + pad), X[0, c, y - pad, x - pad], 0.0), name="Xt")

    def left(e1: Any, p: Any, j: Any, c: Any) -> Any:  # (Bᵀ d)[e1, j] of tile p
        ty, tx = p // s.tiles_w, p % s.tiles_w
        return _select(e1, [_combination(list(bt[row]), [Xt[ty * s.m + i, tx * s.m + j, c] for i in range(a)])
                            for row in range(a)])

    T = te.compute((a, s.tiles, a, s.C), left, name="T")
    V = te.compute((s.points, s.tiles, s.C), lambda e, p, c: _select(
        e % a, [_combination(list(bt[col]), [T[e // a, p, j, c] for j in range(a)]) for col in range(a)]), name="V")
    sch = s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([X, V])}))
    y, x, c = sch.get_loops(sch.get_sblock("Xt"))
    sch.parallel(y)
    e, p, c = sch.get_loops(sch.get_sblock("V"))
    e1, e2 = sch.split(e, [a, a])
    co, ci = sch.split(c, [None, _lanes(s.C, lanes)])
    sch.reorder(p, co, e1, e2, ci)
    tile = sch.fuse(p, co)
    sch.parallel(tile)
    for loop in (e1, e2):
        sch.unroll(loop)
    sch.vectorize(ci)
    t = sch.get_sblock("T")
    sch.compute_at(t, tile)
    sch.set_scope(t, 0, "local")
    te1, tj, tc = sch.get_loops(t)[-3:]  # the tile's one p is no loop
    sch.unroll(te1)
    sch.unroll(tj)
    sch.vectorize(tc)
    return sch.mod


def output_transform(shape: WinogradShape, steps: tuple[str, ...], lanes: int) -> Any:
    """The scheduled IRModule of M (α²×tiles×K) [, bias, residual] → Y (1×K×out_h×out_w): each tile's Aᵀ M A in
    two sides (M · A a row at a time, held in registers, then Aᵀ ·), then ``steps`` (the layer's epilogue) on
    each element as it is written, ``lanes`` channels a vector; a ragged last tile's extra outputs not written."""
    import tvm
    from tvm import s_tir, te

    s, at = shape, transforms(shape.m, shape.r).AT
    a = s.alpha
    M = te.placeholder((s.points, s.tiles, s.K), name="M")
    S = te.compute((a, s.tiles, s.m, s.K), lambda r1, p, xi, k: _select(
        xi, [_combination(list(at[col]), [M[r1 * a + j, p, k] for j in range(a)]) for col in range(s.m)]), name="S")

    def element(n: Any, k: Any, y: Any, x: Any) -> Any:
        p = (y // s.m) * s.tiles_w + x // s.m
        return _select(y % s.m, [_combination(list(at[row]), [S[i, p, x % s.m, k] for i in range(a)])
                                 for row in range(s.m)])

    Y = te.compute((1, s.K, s.out_h, s.out_w), element, name="Y")
    extras, out = apply_te(Y, steps, (1,)) if steps else ([], Y)
    sch = s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([M, *extras, out])}))
    if steps:
        sch.reverse_compute_inline(sch.get_sblock(out.op.name))
    block = sch.get_sblock("Y")
    n, k, y, x = sch.get_loops(block)
    ty, yi = sch.split(y, [s.tiles_h, s.m])
    tx, xi = sch.split(x, [s.tiles_w, s.m])
    ko, ki = sch.split(k, [None, _lanes(s.K, lanes)])
    sch.reorder(ty, tx, ko, yi, xi, ki)
    sch.parallel(sch.fuse(n, ty, tx))
    sch.unroll(yi)
    sch.unroll(xi)
    sch.vectorize(ki)
    rows = sch.get_sblock("S")
    sch.compute_at(rows, ko)
    sch.set_scope(rows, 0, "local")
    r1, sxi, sk = sch.get_loops(rows)[-3:]  # the tile's one p is no loop
    sch.unroll(r1)
    sch.unroll(sxi)
    sch.vectorize(sk)
    return sch.mod


def _lanes(channels: int, lanes: int) -> int:
    """The vector's width on ``channels``: the machine's lanes where they divide it, else the largest divisor."""
    return max(d for d in range(1, lanes + 1) if channels % d == 0)


def product_operator(shape: WinogradShape) -> Operator:
    """The batched product over the α² points, as the CPU space searches it."""
    return winograd_product.instantiate(dict(E=shape.points, P=shape.tiles, C=shape.C, K=shape.K))


def transform_weights(w: np.ndarray, m: int) -> np.ndarray:
    """``U[e, c, k] = (G g Gᵀ)[e]`` of the weights ``w`` (K×C×3×3), in float64 then rounded to float32."""
    g = transforms(m, w.shape[-1]).arrays()[1]
    u = np.einsum("ai,kcij,bj->abck", g, np.asarray(w, dtype=np.float64), g)
    return np.ascontiguousarray(u.reshape(g.shape[0] ** 2, w.shape[1], w.shape[0]), dtype=np.float32)


class WinogradKernel:
    """``op`` run by F(m×m, 3×3) on this CPU: the three kernels built, the product from ``point`` (a point of
    ``product_operator``'s CPU space). Called with the convolution's own inputs (X, U already transformed and
    packed by ``weights``, then the epilogue's) and its output, as TVM tensors."""

    def __init__(self, op: Operator, m: int, point: Point, lanes: int = 16) -> None:
        from gpu_cpu.schedule import apply_cpu, build_cpu

        self.op, self.point = op, point
        self.shape = s = winograd_shape(op, m)
        self.product = product_operator(s)
        self._input = _entry(build_cpu(input_transform(s, lanes)))
        self._product = _entry(build_cpu(apply_cpu(self.product, point)))
        self._output = _entry(build_cpu(output_transform(s, tuple(op.epilogue), lanes)))
        self._scratch: tuple[Any, Any] | None = None

    def weights(self, w: np.ndarray) -> np.ndarray:
        """The layer's weights (K×C×3×3) as the product reads them: transformed, then packed for ``point``."""
        from gpu_cpu.schedule import pack_weights

        return pack_weights(self.product, self.point, [None, transform_weights(np.asarray(w), self.shape.m)])[1]

    def __call__(self, x: Any, u: Any, *rest: Any) -> None:
        import tvm

        if self._scratch is None:  # V and M, made once: the kernel is called again and again
            dev = tvm.cpu(0)
            self._scratch = tuple(tvm.runtime.empty([int(d) for d in t.shape], "float32", dev)
                                  for t in (self.product.inputs[0], self.product.output))
        v, m = self._scratch
        self._input(x, v)
        self._product(v, u, m)
        self._output(m, *rest)

    def run(self, inputs: list[np.ndarray]) -> np.ndarray:
        """The output on numpy ``inputs`` (the operator's order, weights as they are): for checks."""
        import tvm

        dev = tvm.cpu(0)
        out = tvm.runtime.tensor(np.zeros([int(d) for d in self.op.output.shape], "float32"), dev)
        given = [inputs[0], self.weights(inputs[1]), *inputs[2:]]
        self(*[tvm.runtime.tensor(np.ascontiguousarray(a), dev) for a in given], out)
        return out.numpy()


def _entry(executable: Any) -> Any:
    module = executable.mod if hasattr(executable, "mod") else executable
    return module[module.entry_name]
