"""A 3×3 stride-1 convolution on the GPU by Winograd's F(m×m, 3×3): the CPU's three stages
(``gpu_cpu/winograd.py``, the same tensor expressions) as three CUDA kernels of one function, V and M in the
device's workspace between them:

1. the input transform: one thread a (tile, channel), channels the fastest index. A thread loads its α×α patch
   of X once into registers (its lanes' patches lie in other channel planes: the gathered side, which the
   roofline charges a 32-byte sector and an L1 pass an access, ``transform_seconds``), then writes its α²
   points of V, a warp one run at each point;
2. the batched product over the α² points, scheduled by the GPU space's point of ``winograd_product`` as any
   contraction (``gpu_cpu/gpu_block.py``): V and U staged through shared memory;
3. the output transform and the layer's epilogue: one thread a (tile, output channel), its α² sums of M loaded
   once in runs, its m×m outputs written (the scattered side).

Each α×α tile is held in registers (local scope, loops unrolled); ``transform_kernels`` counts what the code does
for the roofline. The weights are transformed once ahead (``transform_weights``: U[e, c, k]) and read as they
are: the GPU product stages them, so nothing is packed. ``explore --target gpu`` searches each tile's product
beside direct convolution and keeps the fastest (``GpuTarget.alternatives``)."""

from __future__ import annotations

from typing import Any

from cost_models.gpu_roofline import GpuEstimate, TransformKernel, transform_seconds, winograd_estimate
from gpu_cpu.blocks import rejected
from gpu_cpu.gpu_block import schedule_gpu_main
from gpu_cpu.main_block import point_keys
from gpu_cpu.winograd import TILE_KNOB, WinogradShape, winograd_function, winograd_shape
from hetero_dse.epilogue import parse_step
from hetero_dse.errors import HeteroDSEError
from hetero_dse.operator import Operator
from hetero_dse.ops.winograd import transforms
from hetero_dse.space.point import Point

__all__ = ["TRANSFORM_THREADS", "apply_winograd_gpu", "gpu_weights", "transform_kernels"]

#: threads a block of each transform kernel: a transform has no reuse to tile for, only lanes to fill
TRANSFORM_THREADS = 128


def apply_winograd_gpu(op: Operator, m: int, point: Point, emulate: bool = False) -> Any:
    """The scheduled IRModule of ``op`` by F(m×m, 3×3) for the GPU (X, U, the epilogue's inputs, Y), its product
    scheduled by ``point`` (a point of ``product_operator``'s GPU space). ``emulate``: every loop serial and
    every buffer global, for TVM's CPU backend (the GPU's index arithmetic checked where there is no GPU)."""
    if (groups := winograd_shape(op, m).groups) > 1:
        raise HeteroDSEError(f"Winograd on the GPU takes a convolution of one group; {op.title} has {groups} "
                             "(the CPU's Winograd takes it)")
    sch, shape, product, out = winograd_function(op, m, patches=True)  # a thread loads its own patch
    try:
        _schedule_input(sch, shape, emulate)
        _schedule_output(sch, shape, out, emulate)
        # V comes from the first kernel: the product's shared stages read it, they do not recompute it
        schedule_gpu_main(sch, sch.get_sblock("M"), product, point, point_keys(product, point), emulate=emulate,
                          stage_producers=False)
    except Exception as exc:  # a point of another shape's product: a candidate failure, as apply_gpu says it
        raise rejected(point, exc) from exc
    mod = sch.mod
    mod["main"] = mod["main"].with_attr("hetero_dse.winograd", {"tile": m, "weights": "U = G W Gᵀ per point, "
                                        "[point, C, K] (gpu_cpu.winograd.transform_weights)"})
    return mod


def _threads(sch: Any, loop: Any, emulate: bool) -> Any:
    """``loop`` split over blocks of ``TRANSFORM_THREADS`` threads; the thread loop."""
    block_loop, thread = sch.split(loop, [None, TRANSFORM_THREADS])
    if not emulate:
        sch.bind(block_loop, "blockIdx.x")
        sch.bind(thread, "threadIdx.x")
    return thread


def _in_registers(sch: Any, name: str, loop: Any, emulate: bool) -> None:
    """Block ``name`` (a transform's first side, one tile's rows × columns) computed under ``loop`` in local
    memory, its loops unrolled: the registers of the thread."""
    block = sch.get_sblock(name)
    sch.compute_at(block, loop)
    if not emulate:
        sch.set_scope(block, 0, "local")
    for inner in sch.get_loops(block)[-2:]:
        sch.unroll(inner)


def _schedule_input(sch: Any, shape: WinogradShape, emulate: bool) -> None:
    """X → V, a thread a (tile, channel): the thread's α×α patch of X (``Xt``, its padding a zero) loaded once
    into registers, then Bᵀ d (``T``) and · B from there."""
    e, p, c = sch.get_loops(sch.get_sblock("V"))
    e1, e2 = sch.split(e, [shape.alpha, shape.alpha])
    sch.reorder(p, c, e1, e2)
    thread = _threads(sch, sch.fuse(p, c), emulate)
    sch.unroll(e1)
    sch.unroll(e2)
    _in_registers(sch, "T", thread, emulate)
    # after T, its one consumer: α² loads a thread, where inlined Xt loaded X again for every term of Bᵀ d
    patch = sch.get_sblock("Xt")
    sch.compute_at(patch, thread)
    if not emulate:
        sch.set_scope(patch, 0, "local")
    for inner in sch.get_loops(patch)[-2:]:  # the patch's rows and columns (its one tile and channel: no loop)
        sch.unroll(inner)


def _schedule_output(sch: Any, shape: WinogradShape, out: Any, emulate: bool) -> None:
    """M → Y and the epilogue, in Y's write: a thread a (tile, output channel), the channel the fastest."""
    if out.op.name != "Y":
        sch.reverse_compute_inline(sch.get_sblock(out.op.name))
    n, k, y, x = sch.get_loops(sch.get_sblock("Y"))
    ty, yi = sch.split(y, [shape.tiles_h, shape.m])
    tx, xi = sch.split(x, [shape.tiles_w, shape.m])
    sch.reorder(n, ty, tx, k, yi, xi)
    thread = _threads(sch, sch.fuse(n, ty, tx, k), emulate)
    sch.unroll(yi)
    sch.unroll(xi)
    _in_registers(sch, "S", thread, emulate)
    # the thread's α² sums of M loaded once into registers: M · A read each again for every term otherwise
    sums = sch.cache_read(sch.get_sblock("S"), 0, "global" if emulate else "local")
    sch.compute_at(sums, thread)
    for inner in sch.get_loops(sums)[-1:]:
        sch.unroll(inner)


def gpu_weights(op: Operator, point: Point | dict[str, Any]) -> dict[str, Any]:
    """What the GPU module of a Winograd ``point`` takes in place of its weight, for ``schedule.json``."""
    shape = winograd_shape(op, int(point[TILE_KNOB]))
    name = op.inputs[1].op.name
    return {name: {"winograd": shape.m, "shape": [shape.points, shape.C, shape.K],
                   "how": f"gpu_cpu.winograd.transform_weights({name}, {shape.m}): G {name} Gᵀ at each of the "
                          f"{shape.points} points, laid out [point, C, K]"}}


def _sum_flops(rows: Any) -> int:
    """The FLOPs of one sum per row of a transform matrix, as ``gpu_cpu.winograd`` writes them: an add per
    non-zero term after the first, a multiply per term other than ±1."""
    return sum(max(0, sum(v != 0 for v in row) - 1) + sum(v not in (0, 1, -1) for v in row) for row in rows)


def transform_kernels(op: Operator, m: int) -> dict[str, TransformKernel]:
    """The two transform kernels of ``op`` by F(m×m, 3×3), counted from the code ``apply_winograd_gpu`` writes
    (``tests/test_gpu_winograd.py`` counts the loads and stores in its CUDA): the input transform's two sides
    (Bᵀ d, then · B: α sums of each row of Bᵀ a side), its patch's α² reads of X a thread, each lane another
    channel's plane (gathered), V's α² points written in runs; the output transform's two sides (M · A: α sums
    of each row of Aᵀ; Aᵀ ·: m), M's α² points read in runs, its m² outputs (and a residual's m² reads)
    scattered, a bias read once in runs, one FLOP per element per epilogue step."""
    shape = winograd_shape(op, m)
    t, a, word = transforms(m, shape.r), shape.alpha, 4
    inputs = shape.tiles * shape.C
    outputs = shape.tiles * shape.K
    steps = [parse_step(step)[0] for step in op.epilogue]
    scattered_out = m * m * (1 + steps.count("add"))
    return {
        "input_transform": TransformKernel("input_transform", inputs, 2 * a * _sum_flops(t.BT) * inputs,
                                           shape.points * inputs * word, a * a * inputs, TRANSFORM_THREADS),
        "output_transform": TransformKernel(
            "output_transform", outputs, ((a + m) * _sum_flops(t.AT) + m * m * len(steps)) * outputs,
            (shape.points + steps.count("bias")) * outputs * word, scattered_out * outputs, TRANSFORM_THREADS)}


def whole_estimate(device: Any, op: Operator, m: int, product: GpuEstimate) -> GpuEstimate:
    """The roofline of ``op`` by F(m×m, 3×3) on ``device``: its product's estimate (``product``) and the two
    transform kernels' (``transform_kernels``), one after the other."""
    kernels = {name: transform_seconds(device, k) for name, k in transform_kernels(op, m).items()}
    return winograd_estimate(product, kernels)
