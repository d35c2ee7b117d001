"""A 3×3 stride-1 convolution on the CPU by Winograd's F(m×m, 3×3) (``hetero_dse/ops/winograd.py``), in three
stages, built as one function (``apply_winograd``; V and M in its workspace) or each alone (for timing them):

1. the input transform ``V[e, p, c] = (Bᵀ d B)[e]`` of each α×α input tile ``d`` (tile ``p``, channel ``c``),
   read from the input once transposed channel-last with its padding (so the vector of channels is one load);
2. the batched product ``M[e] = V[e] · U[e]`` over the α² points: an operator of its own
   (``winograd_product``), searched by the CPU space like any matrix product; for a grouped or depthwise
   convolution a product a point and group, V, U and M with a group dimension (``winograd_group_product``,
   ``gpu_cpu/winograd_shape.py``);
3. the output transform ``Aᵀ M A`` of each tile, the layer's epilogue (bias, residual, activation) fused.

The weights are transformed once ahead (``U = G g Gᵀ``, ``transform_weights``), as packed weights are. The
transforms are sums of the matrices' non-zero entries written out term by term (a ±1 costs no multiply):
LLVM cannot drop a float multiply by zero, and the matrix form ran 1296 multiply-adds a tile and channel for
F(4×4)'s input where these sums need at most 288. Each transform is computed in two sides (Bᵀ d a row at a
time, held in registers, then · B), its points unrolled.

``explore`` on the CPU searches each tile's product beside direct convolution and keeps the fastest function
(``CpuTarget.alternatives``); ``bench/cpu_winograd.py`` times each against direct convolution and torch.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from gpu_cpu.blocks import rejected
from gpu_cpu.main_block import build_cpu, packed_shape, schedule_main, transpose_weights, weight_blocks, \
    weight_layouts
from gpu_cpu.winograd_shape import WinogradShape, product_operator, transform_weights, winograd_shape
from hetero_dse.epilogue import apply_te
from hetero_dse.operator import Operator
from hetero_dse.ops.winograd import TILE_KNOB, batched_product, transforms
from hetero_dse.space.point import Point

__all__ = ["TILE_KNOB", "WinogradShape", "WinogradKernel", "algorithm_name", "apply_winograd", "bias_axes",
           "input_transform", "output_transform", "product_operator", "product_point", "transform_weights",
           "transformed_weights", "u_layout", "winograd_function", "winograd_point", "winograd_shape",
           "winograd_weights"]


def _combination(coefficients: list[Fraction], terms: list[Any]) -> Any:
    """Σ coefficient · term over the non-zero coefficients, a ±1 without its multiply."""
    import tvm

    total = None
    for coefficient, term in zip(coefficients, terms, strict=True):
        if coefficient == 0:
            continue
        negative = coefficient < 0
        value = term if abs(coefficient) == 1 else term * tvm.tirx.const(float(abs(coefficient)), "float32")
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


def _input_tensors(shape: WinogradShape, X: Any, patches: bool = False) -> Any:
    """V (α²×tiles×C) of X (1×C×H×W): the input transposed channel-last with its padding (``Xt``: a tile's
    channels one vector load), then each tile's Bᵀ d B in two sides (``T``: Bᵀ d a row at a time, then · B).
    ``patches``: ``Xt`` is each tile's α×α patch instead (tiles×α×α×C, the overlap repeated), so a thread of the
    GPU's transform loads its own patch once (``gpu_cpu/winograd_gpu.py``)."""
    from tvm import te

    s, bt = shape, transforms(shape.m, shape.r).BT
    a, pad = s.alpha, s.padding

    def padded(y: Any, x: Any, c: Any) -> Any:
        return te.if_then_else(te.all(y >= pad, y < s.H + pad, x >= pad, x < s.W + pad), X[0, c, y - pad, x - pad],
                               0.0)

    if patches:
        Xt = te.compute((s.tiles, a, a, s.C), lambda p, i, j, c: padded(
            (p // s.tiles_w) * s.m + i, (p % s.tiles_w) * s.m + j, c), name="Xt")

        def at(p: Any, i: int, j: Any, c: Any) -> Any:
            return Xt[p, i, j, c]
    else:
        rows, cols = s.tiles_h * s.m + s.r - 1, s.tiles_w * s.m + s.r - 1
        Xt = te.compute((rows, cols, s.C), padded, name="Xt")

        def at(p: Any, i: int, j: Any, c: Any) -> Any:
            return Xt[(p // s.tiles_w) * s.m + i, (p % s.tiles_w) * s.m + j, c]

    def left(e1: Any, p: Any, j: Any, c: Any) -> Any:  # (Bᵀ d)[e1, j] of tile p
        return _select(e1, [_combination(list(bt[row]), [at(p, i, j, c) for i in range(a)]) for row in range(a)])

    T = te.compute((a, s.tiles, a, s.C), left, name="T")

    def point(e: Any, p: Any, c: Any) -> Any:
        return _select(e % a, [_combination(list(bt[col]), [T[e // a, p, j, c] for j in range(a)]) for col in range(a)])

    if s.groups > 1:  # [point, tile, group, channel of the group]: the group product's operand as it is
        return te.compute((s.points, s.tiles, s.groups, s.group_in),
                          lambda e, p, g, c: point(e, p, g * s.group_in + c), name="V")
    return te.compute((s.points, s.tiles, s.C), point, name="V")


def _schedule_input(sch: Any, shape: WinogradShape, lanes: int) -> None:
    """Blocks Xt, T, V: the transposition parallel over rows; the transform parallel over tiles and channel
    vectors, a tile's rows of Bᵀ d in registers, its points unrolled."""
    a = shape.alpha
    y, _, _ = sch.get_loops(sch.get_sblock("Xt"))
    sch.parallel(y)
    e, p, *channel = sch.get_loops(sch.get_sblock("V"))
    group, c, width = _channel_loops(channel, shape.C, shape.group_in, lanes)
    e1, e2 = sch.split(e, [a, a])
    co, ci = sch.split(c, [None, width])
    sch.reorder(p, *group, co, e1, e2, ci)
    tile = sch.fuse(p, *group, co)
    sch.parallel(tile)
    for loop in (e1, e2):
        sch.unroll(loop)
    sch.vectorize(ci)
    _in_registers(sch, "T", tile)


def _output_tensors(shape: WinogradShape, M: Any, steps: tuple[str, ...],
                    axes: tuple[int, ...] | None = None) -> tuple[list[Any], Any]:
    """Y (``shape.output_shape``) of M (α²×tiles×K, or α²×tiles×groups×K/groups): each tile's Aᵀ M A in two
    sides (``S``: M · A a row at a time, then Aᵀ ·), a ragged last tile's extra outputs not computed; then
    ``steps``, a bias along ``axes``. (The epilogue's inputs, the output.)"""
    from tvm import te

    s, at = shape, transforms(shape.m, shape.r).AT
    a = s.alpha

    channels = [int(d) for d in M.shape[2:]]  # K, or groups and K / groups: M's own, so no lane spans two

    def side(r1: Any, p: Any, xi: Any, *k: Any) -> Any:
        return _select(xi, [_combination(list(at[col]), [M[(r1 * a + j, p, *k)] for j in range(a)])
                            for col in range(s.m)])

    S = te.compute((a, s.tiles, s.m, *channels), side, name="S")

    def element(k: tuple[Any, ...], y: Any, x: Any) -> Any:
        p = (y // s.m) * s.tiles_w + x // s.m
        return _select(y % s.m, [_combination(list(at[row]), [S[(i, p, x % s.m, *k)] for i in range(a)])
                                 for row in range(s.m)])

    if s.grouped_output:
        Y = te.compute(s.output_shape, lambda n, g, k, y, x: element((g, k), y, x), name="Y")
    elif s.groups > 1:  # a depthwise layer of one filter a channel: its channel k is group k's one
        Y = te.compute(s.output_shape, lambda n, k, y, x: element((k, 0), y, x), name="Y")
    else:
        Y = te.compute(s.output_shape, lambda n, k, y, x: element((k,), y, x), name="Y")
    return apply_te(Y, steps, axes or bias_axes(shape)) if steps else ([], Y)


def _schedule_output(sch: Any, shape: WinogradShape, out: Any, lanes: int) -> None:
    """Blocks S, Y and the epilogue ``out``: parallel over tiles, the epilogue in Y's write, a tile's rows of
    M · A in registers, its outputs unrolled, ``lanes`` channels a vector."""
    if out.op.name != "Y":
        sch.reverse_compute_inline(sch.get_sblock(out.op.name))
    n, *channel, y, x = sch.get_loops(sch.get_sblock("Y"))
    group, k, width = _channel_loops(channel, shape.K, shape.group_out, lanes)
    ty, yi = sch.split(y, [shape.tiles_h, shape.m])
    tx, xi = sch.split(x, [shape.tiles_w, shape.m])
    ko, ki = sch.split(k, [None, width])
    sch.reorder(ty, tx, *group, ko, yi, xi, ki)
    sch.parallel(sch.fuse(n, ty, tx))
    sch.unroll(yi)
    sch.unroll(xi)
    sch.vectorize(ki)
    _in_registers(sch, "S", ko)


def _channel_loops(loops: list[Any], channels: int, per_group: int, lanes: int) -> tuple[list[Any], Any, int]:
    """Of a block's channel loops (k; or group, k of the group), the outer ones, the one vectorised and its
    width: a group's channels where it has several (a vector never spans two groups, whose product and weights
    differ), else the groups (a depthwise layer's channels, its one channel a group no loop of its own)."""
    if len(loops) == 1:
        return [], loops[0], _lanes(channels, lanes)
    group, inner = loops
    if per_group > 1:
        return [group], inner, _lanes(per_group, lanes)
    return [inner], group, _lanes(channels, lanes)


def _in_registers(sch: Any, name: str, loop: Any) -> None:
    """Block ``name`` (a transform's first side: rows × columns × a vector of channels, for one tile) computed
    under ``loop`` into a local buffer, its rows and columns unrolled: LLVM keeps it in registers."""
    block = sch.get_sblock(name)
    sch.compute_at(block, loop)
    sch.set_scope(block, 0, "local")
    loops = sch.get_loops(block)
    at = next(i for i, lp in enumerate(loops) if sch.get(lp).same_as(sch.get(loop)))
    # the loops compute_at made below ``loop``: a unit extent makes none (the tile's one p; a vector of one
    # channel), so counting from the innermost would reach ``loop`` itself and unroll the parallel tiles
    rows, cols, *lanes = loops[at + 1:]
    sch.unroll(rows)
    sch.unroll(cols)
    for lane in lanes:
        sch.vectorize(lane)


def input_transform(shape: WinogradShape, lanes: int) -> Any:
    """The scheduled IRModule of the input transform alone, X (1×C×H×W) → V (α²×tiles×C)."""
    import tvm
    from tvm import s_tir, te

    X = te.placeholder((1, shape.C, shape.H, shape.W), name="X")
    sch = s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([X, _input_tensors(shape, X)])}))
    _schedule_input(sch, shape, lanes)
    return sch.mod


def output_transform(shape: WinogradShape, steps: tuple[str, ...], lanes: int) -> Any:
    """The scheduled IRModule of the output transform alone, M (the product's output) [, bias, residual] → Y."""
    import tvm
    from tvm import s_tir, te

    M = te.placeholder([int(d) for d in product_operator(shape).output.shape], name="M")
    extras, out = _output_tensors(shape, M, steps)
    sch = s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([M, *extras, out])}))
    _schedule_output(sch, shape, out, lanes)
    return sch.mod


def winograd_function(op: Operator, m: int, patches: bool = False) -> tuple[Any, WinogradShape, Operator, Any]:
    """``op`` by F(m×m, 3×3) as one unscheduled function (X, U, the epilogue's inputs, Y): the input transform
    (``patches``: each tile's patch, ``_input_tensors``), the product (block ``M``, the loops ``product_operator``'s
    point names), the output transform. Its schedule, the shape, the product operator and the output tensor."""
    import tvm
    from tvm import s_tir, te

    shape = winograd_shape(op, m)
    X = te.placeholder((1, shape.C, shape.H, shape.W), name="X")
    U = te.placeholder([int(d) for d in product_operator(shape).inputs[1].shape], name="U")
    M = batched_product(_input_tensors(shape, X, patches=patches), U)
    extras, out = _output_tensors(shape, M, tuple(op.epilogue), tuple(op.epilogue_axes) or None)
    sch = s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([X, U, *extras, out])}))
    return sch, shape, product_operator(shape), out


def apply_winograd(op: Operator, m: int, point: Point, lanes: int | None = None) -> Any:
    """The scheduled IRModule of ``op`` by F(m×m, 3×3) as one function (``winograd_function``): the input
    transform, the product as ``point`` schedules ``product_operator``'s, the output transform; V and M in the
    function's workspace. U is ``transform_weights``' then packed as ``point`` says (``WinogradKernel.weights``)."""
    sch, shape, product, out = winograd_function(op, m)
    lanes = lanes or host_lanes()
    try:
        _schedule_input(sch, shape, lanes)
        _schedule_output(sch, shape, out, lanes)
        schedule_main(sch, sch.get_sblock("M"), product, point)
    except Exception as exc:  # a point of another shape's product: a candidate failure, as apply_cpu says it
        raise rejected(point, exc) from exc
    # said in the module too (lowered_tir.py shows it): whoever calls it passes the weights transformed
    mod = sch.mod
    mod["main"] = mod["main"].with_attr("hetero_dse.winograd", {"tile": m, "weights": f"U = G W Gᵀ per point, "
                                        f"{u_layout(shape)}, packed as the product's knobs say (winograd_weights)"})
    return mod


def bias_axes(shape: WinogradShape) -> tuple[int, ...]:
    """The output's dimensions a bias is indexed by where the operator does not say: its channels."""
    return (1, 2) if shape.grouped_output else (1,)


def u_layout(shape: WinogradShape) -> str:
    """How ``transform_weights`` lays U out, in words."""
    return "[point, C, K]" if shape.groups == 1 else "[point, group, C / group, K / group]"


def _lanes(channels: int, lanes: int) -> int:
    """The vector's width on ``channels``: the largest power of two up to ``lanes`` that divides them."""
    width = 1
    while width * 2 <= lanes and channels % (width * 2) == 0:
        width *= 2
    return width


def host_lanes() -> int:
    """float32 lanes of this machine's vectors (16 with AVX-512, 8 with AVX2)."""
    from hetero_dse.hardware.host import host_vector_bits

    return host_vector_bits() // 32


class WinogradKernel:
    """``op`` run by F(m×m, 3×3) on this CPU, built as one function (``apply_winograd``), its product from
    ``point`` (a point of ``product_operator``'s CPU space). Called with the convolution's own inputs (X, U
    already transformed and packed by ``weights``, then the epilogue's) and its output, as TVM tensors."""

    def __init__(self, op: Operator, m: int, point: Point, lanes: int | None = None) -> None:
        self.op, self.point = op, point
        self.shape = winograd_shape(op, m)
        self.product = product_operator(self.shape)
        self.executable = build_cpu(apply_winograd(op, m, point, lanes))
        self._run = _entry(self.executable)

    def weights(self, w: np.ndarray) -> np.ndarray:
        """The layer's weights (K×C/groups×3×3) as the product reads them: transformed, then packed for
        ``point``."""
        return winograd_weights(self.op, winograd_point(self.shape.m, self.point), w)

    def __call__(self, x: Any, u: Any, *rest: Any) -> None:
        self._run(x, u, *rest)

    def run(self, inputs: list[np.ndarray]) -> np.ndarray:
        """The output on numpy ``inputs`` (the operator's order, weights as they are): for checks."""
        import tvm

        dev = tvm.cpu(0)
        out = tvm.runtime.tensor(np.zeros([int(d) for d in self.op.output.shape], "float32"), dev)
        given = [inputs[0], self.weights(inputs[1]), *inputs[2:]]
        self(*[tvm.runtime.tensor(np.ascontiguousarray(a), dev) for a in given], out)
        return out.numpy()


def algorithm_name(m: int) -> str:
    """How a report names F(m×m, 3×3)."""
    return f"Winograd F({m}×{m}, 3×3)"


def winograd_point(m: int, product: Point | dict[str, Any]) -> Point:
    """The convolution's CPU point that runs it by F(m×m, 3×3) with the product scheduled by ``product``."""
    return Point({TILE_KNOB: int(m), **product})


def product_point(point: Point | dict[str, Any]) -> Point:
    """The product's point within a convolution's Winograd point."""
    return Point({k: v for k, v in point.items() if k != TILE_KNOB})


def winograd_weights(op: Operator, point: Point | dict[str, Any], w: Any) -> Any:
    """The weights ``w`` (K×C×3×3: numpy, or a torch tensor, returned as one) as the Winograd kernel of
    ``point`` reads them: transformed (``transform_weights``), then packed for the product's point."""
    shape = winograd_shape(op, int(point[TILE_KNOB]))
    inner = product_point(point)
    torch_given = hasattr(w, "detach")  # torch's tensor in, torch's tensor out (the network's layers hold them)
    given = w.detach().cpu().numpy() if torch_given else np.asarray(w)  # a network's weight keeps its grad
    u = transpose_weights(product_operator(shape), inner, [None, transform_weights(given, shape.m, shape.groups)])[1]
    if torch_given:
        import torch

        return torch.from_numpy(u).clone()  # torch's allocation: aligned as TVM asks
    return u


def transformed_weights(op: Operator, point: Point | dict[str, Any]) -> dict[str, Any]:
    """What the module of a Winograd ``point`` takes in place of its weight, for ``schedule.json``."""
    shape = winograd_shape(op, int(point[TILE_KNOB]))
    name = op.inputs[1].op.name
    product = product_operator(shape)
    inner = product_point(point)
    order = weight_layouts(product, inner).get(1, tuple(range(len(product.inputs[1].shape))))
    block = weight_blocks(product, inner).get(1)
    blocked = f", its last dimension then blocked by {block} ([n / {block}, ..., {block}])" if block else ""
    return {name: {"winograd": shape.m, "transpose": list(order), **({"block": block} if block else {}),
                   "shape": packed_shape([int(d) for d in product.inputs[1].shape], order, block),
                   "how": f"gpu_cpu.winograd.winograd_weights(op, knobs, {name}): G {name} Gᵀ at each of the "
                          f"{shape.points} points, laid out {u_layout(shape)}, then transposed {tuple(order)}"
                          f"{blocked}"}}


def _entry(executable: Any) -> Any:
    module = executable.mod if hasattr(executable, "mod") else executable
    return module[module.entry_name]
