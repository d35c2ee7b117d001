"""The CPU schedule of an operator's main block — its loops split, ordered, vectorised and run in parallel,
the accumulator held per tile, the weights read in a layout packed ahead — and the steps of it the GPU's
schedule shares; this host's LLVM target and the build for it. ``gpu_cpu/schedule.py`` applies a whole point
with it; ``gpu_cpu/winograd.py`` applies it to the product inside a Winograd convolution."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from gpu_cpu.blocks import ScheduleError, epilogue_blocks, main_tensor
from hetero_dse.hardware.host import host_cores
from hetero_dse.operator import Operator
from hetero_dse.ops.winograd import TILE_KNOB
from hetero_dse.space.point import Point

__all__ = ["annotate_unroll", "build_cpu", "fuse_epilogue", "host_target", "packed_shape", "point_keys",
           "reduce_loops", "schedule_main", "split_keys", "split_loops", "stages_epilogue", "transpose_weights",
           "weight_blocks", "weight_layouts"]


def host_target() -> dict[str, Any]:
    """The LLVM target of this machine: its CPU name (TVM rejects ``native``) and core count."""
    import tvm

    return {"kind": "llvm", "mcpu": str(tvm.target.codegen.llvm_get_system_cpu()), "num-cores": host_cores()}


def fuse_epilogue(sch: Any, op: Operator) -> None:
    """The epilogue (bias, residual, activation) computed in the accumulator's write-back, first step first:
    each finished element goes through it on its way out, with no pass over the output of its own."""
    for name in epilogue_blocks(op):
        sch.reverse_compute_inline(sch.get_sblock(name))


def split_keys(op: Operator) -> list[str]:
    """The split knob of each loop of the main node, in the loops' order. Looked up by name, not by their
    order in the point: a point read back from JSON (a hand-edited schedule.json, a database that sorts
    keys) keeps its values but not necessarily its order."""
    from hetero_dse.analysis import analyze

    return [f"split.{lp.name}" for lp in analyze(op).main.loops]


def point_keys(op: Operator, point: Point) -> list[str]:
    """``split_keys(op)``, where ``point`` splits exactly those loops; else a ScheduleError that says so."""
    keys = split_keys(op)
    if {k for k in point if k.startswith("split.")} != set(keys):
        raise ScheduleError(f"{point} does not split the loops of {main_tensor(op).op.name} ({', '.join(keys)})")
    return keys


def split_loops(sch: Any, block: Any, op: Operator, point: Point,
                keys: list[str]) -> tuple[list[list[Any]], list[list[Any]]]:
    """Split every loop of the main block by its knob (``keys``, in the loops' order): (spatial loops' parts,
    reduce loops' parts)."""
    parts = [list(sch.split(loop, factors=[int(f) for f in point[key]]))
             for loop, key in zip(sch.get_loops(block), keys, strict=True)]
    spatial_n = len(main_tensor(op).op.axis)
    return parts[:spatial_n], parts[spatial_n:]


def annotate_unroll(sch: Any, loop: Any, point: Point) -> None:
    if point["unroll"]:
        sch.annotate(loop, "pragma_auto_unroll_max_step", int(point["unroll"]))
        sch.annotate(loop, "pragma_unroll_explicit", 1)


def _cpu_order(spatial: list[list[Any]], reduce: list[list[Any]], order: int) -> tuple[list[Any], int]:
    """The loops outer to inner for ``order`` (see ``CpuSpace``) and the spatial level after which the
    accumulated tile is written back (the innermost spatial level still outside every reduce loop)."""
    def level(parts: list[list[Any]], i: int) -> list[Any]:
        return [p[i] for p in parts if i < len(p)]

    if order == 0:  # S0 S1 R0 S2 R1 R2 S3
        return (level(spatial, 0) + level(spatial, 1) + level(reduce, 0) + level(spatial, 2) + level(reduce, 1)
                + level(reduce, 2) + level(spatial, 3)), 1
    # S0 R0 S1 R1 S2 R2 S3: FlexTensor's interleaving; spatial has one level more, so S3 comes last
    depth = max(len(p) for p in spatial + reduce)
    return [loop for i in range(depth) for loop in level(spatial, i) + level(reduce, i)], 0


def schedule_main(sch: Any, block: Any, op: Operator, point: Point,
                  keys: list[str] | None = None) -> dict[int, tuple[int, ...]]:
    """``point`` applied to ``block`` of ``sch``: ``op``'s main block, or a block with its loops and reads in
    another function (the product inside a Winograd convolution, ``gpu_cpu/winograd.py``). The weights it
    reads packed (``weight_layouts``). ``keys``: ``point_keys(op, point)``, where the caller has them already."""
    keys = keys or point_keys(op, point)
    spatial_names = [iv.var.name for iv in main_tensor(op).op.axis]
    vector = spatial_names.index(point["vector"]) if point.get("vector") in spatial_names else -1
    vector %= len(spatial_names)
    # accumulate into a buffer of the tile's size, written back once per tile: LLVM keeps its innermost
    # part (S3, vectorised; its short loop unrolled by LLVM where no unroll is asked for) in registers
    cache = sch.cache_write(block, 0, "global") if reduce_loops(op) else None
    if cache is not None:
        fuse_epilogue(sch, op)
    prepacked = weight_layouts(op, point)
    blocks = weight_blocks(op, point)
    taken = set()
    for i, region in enumerate(sch.get(block).reads):  # the weights read in the packed layout, as given
        index = _input_index(op, region.source.name)
        if index in prepacked:
            for step in _layout(list(prepacked[index]), blocks.get(index)):
                sch.transform_layout(block, ("read", i), step)
            taken.add(index)
    if taken != set(prepacked):  # every caller packs what weight_layouts says: a weight left out is wrong
        raise ScheduleError(f"the main block does not read weight input(s) {sorted(set(prepacked) - taken)}")
    packs = _packed_reads(sch, block, vector) if cache is not None else []
    spatial, reduce = split_loops(sch, block, op, point, keys)
    order, write_level = _cpu_order(spatial, reduce, int(point.get("order", 0)))
    registers = len(order) - len(spatial)
    inner = [p[-1] for i, p in enumerate(spatial) if i != vector] + [spatial[vector][-1]]
    sch.reorder(*order[:registers], *inner)
    outer = sch.fuse(*[p[0] for p in spatial])
    sch.parallel(outer)
    annotate_unroll(sch, outer, point)
    if int(point[keys[vector]][-1]) > 1:
        sch.vectorize(spatial[vector][-1])
    if cache is not None:
        sch.reverse_compute_at(cache, outer if write_level == 0 else spatial[-1][write_level])
        for read, permutation in packs:  # each tile of the input packed once per outer reduce step
            sch.compute_at(read, reduce[-1][0])
            sch.transform_layout(read, ("write", 0), _permute(permutation))
        if vector != len(spatial) - 1:
            sch.transform_layout(block, ("write", 0), _permute(_last(len(spatial), vector)))
            if stages_epilogue(op, point):
                tile = [math.prod(int(f) for f in point[k][write_level + 1:]) for k in keys[:len(spatial)]]
                _stage_epilogue(sch, cache, outer if write_level == 0 else spatial[-1][write_level], tile, vector)
        # the zeroing of the accumulator once per tile, not a test in the innermost loop
        sch.decompose_reduction(block, reduce[0][0])
    return prepacked


def stages_epilogue(op: Operator, point: Point) -> bool:
    """Whether ``point``'s kernel of ``op`` computes its epilogue in a staging tile (``_stage_epilogue``): an
    epilogue, and a vectorised loop other than the output's innermost."""
    names = [iv.var.name for iv in main_tensor(op).op.axis]
    return bool(epilogue_blocks(op)) and point.get("vector") in names[:-1] and bool(reduce_loops(op))


def _stage_epilogue(sch: Any, write_back: Any, at: Any, tile: list[int], vector: int) -> None:
    """The epilogue (bias, activation) of a tile vectorised along a dimension other than the output's innermost
    (a convolution's output channels) computed on whole vectors in a staging tile laid out as the accumulator
    is, then copied out in the output's order. In the write-back itself, whose loops follow the output's order,
    it ran an element at a time: YOLO-v1's 7×7 stride-2 first layer (3 → 64 at 448², AVX-512) took 6.45 ms
    with bias and leaky ReLU, 4.89 ms without; staged, 4.89 ms with them (torch 5.2). ``tile``: the extent of
    each output dimension written back per tile. Left unstaged where the write-back's loops are not the tile's
    (one loop per dimension of extent above 1, in the output's order)."""
    kept = [d for d, extent in enumerate(tile) if extent > 1]
    loops = sch.get_loops(write_back)
    at_stmt = sch.get(at)
    depth = next((i for i, lp in enumerate(loops) if sch.get(lp).same_as(at_stmt)), None)
    generated = loops[depth + 1:] if depth is not None else []
    if vector not in kept or [int(sch.get(lp).extent) for lp in generated] != [tile[d] for d in kept]:
        return
    copy = sch.cache_write(write_back, 0, "global")
    sch.transform_layout(write_back, ("write", 0), _permute(_last(len(tile), vector)))
    sch.reverse_compute_at(copy, at)
    lane = generated[kept.index(vector)]
    sch.reorder(*[lp for lp in generated if lp is not lane], lane)
    sch.vectorize(lane)


def weight_layouts(op: Operator, point: Point | dict[str, Any]) -> dict[int, tuple[int, ...]]:
    """The weights (``op.weights``: inputs constant at inference) the CPU kernel of ``point`` takes in a
    layout of its own: input index -> the order of its dimensions (numpy's ``transpose``), the dimension the
    vectorised loop indexes moved innermost. Packed once where the kernel is loaded (``pack_weights``), as
    TVM's layout-free buffers and oneDNN's prepacked weights are, instead of each tile packing its part on
    every run: weights ``W[k, c, r, s]`` of a convolution vectorised over ``k`` are taken as ``[c, r, s, k]``.
    Only a weight the main node reads directly (not through a producer) is taken so. Empty for an operator
    without weights or reduction, a point without splits (another tuner's module), a tensor-core point and a
    Winograd point (its weights are transformed, ``pack_weights``)."""
    if (not op.weights or not reduce_loops(op) or "mma" in point or TILE_KNOB in point
            or not any(str(k).startswith("split.") for k in point)):
        return {}
    from hetero_dse.analysis import analyze

    analysis = analyze(op)
    spatial = [lp.name for lp in analysis.main.spatial]
    vector = point.get("vector") if point.get("vector") in spatial else spatial[-1]
    layouts = {}
    for access in analysis.reads:
        if not access.from_input or access.tensor not in op.weights:
            continue
        dim = access.packed_dim(vector)
        if dim is None and point.get("block") and len(access.dims(vector)) == 1:
            dim = access.dims(vector)[0]  # innermost already: blocked all the same (``weight_blocks``)
        if dim is not None:
            layouts[_input_index(op, access.tensor)] = tuple(_last(len(access.indices), dim))
    return layouts


def weight_blocks(op: Operator, point: Point | dict[str, Any]) -> dict[int, int]:
    """The packed weights (``weight_layouts``) a point with ``block`` takes blocked: input index -> the block,
    the vectorised loop's extent within one parallel iteration (its split's factors below the outermost). The
    packed layout's innermost dimension ``n`` is then split as ``[n / block, ..., block]``: a parallel iteration
    reads its weights as one contiguous run (oneDNN's ``OIhw16o``-style blocked weights), where the plain packed
    layout has it read ``block`` elements of every row of the whole weight. Empty without ``block``, or where
    one block would be the whole dimension."""
    if not point.get("block") or not weight_layouts(op, point):  # nothing packed (a Winograd point's own)
        return {}
    from hetero_dse.analysis import analyze
    from hetero_dse.space.cpu import blocked_weights

    analysis = analyze(op)
    spatial = [lp.name for lp in analysis.main.spatial]
    vector = point.get("vector") if point.get("vector") in spatial else spatial[-1]
    blocked = blocked_weights(analysis, vector, [int(f) for f in point.get(f"split.{vector}", ())])
    return {i: blocked[name] for i, name in enumerate(t.op.name for t in op.inputs) if name in blocked}


def transpose_weights(op: Operator, point: Point | dict[str, Any], inputs: list[Any]) -> list[Any]:
    """``inputs`` with each weight of ``weight_layouts`` transposed (and blocked, ``weight_blocks``) and made
    contiguous (numpy arrays or torch tensors alike), the others as they are."""
    out = list(inputs)
    blocks = weight_blocks(op, point)
    for index, order in weight_layouts(op, point).items():
        a = inputs[index]
        torch_given = hasattr(a, "permute")
        a = a.permute(*order) if torch_given else a.transpose(order)
        if index in blocks:  # [..., n] -> [n / block, ..., block]
            a = a.reshape(*a.shape[:-1], a.shape[-1] // blocks[index], blocks[index])
            a = a.movedim(-2, 0) if torch_given else np.moveaxis(a, -2, 0)
        out[index] = a.contiguous() if torch_given else np.ascontiguousarray(a)
    return out


def packed_shape(shape: Sequence[int], order: Sequence[int], block: int | None) -> list[int]:
    """A weight's shape once packed: its dimensions in ``order``, the last split by ``block`` where blocked."""
    dims = [int(shape[d]) for d in order]
    return [dims[-1] // block, *dims[:-1], block] if block else dims


def _input_index(op: Operator, name: str) -> int | None:
    names = [t.op.name for t in op.inputs]
    return names.index(name) if name in names else None


def _packed_reads(sch: Any, block: Any, vector: int) -> list[tuple[Any, list[int]]]:
    """Cache blocks for the inputs whose dimension indexed by the vectorised loop is not their innermost,
    with the permutation that makes it so (a weight already given so is not packed again)."""
    block_stmt = sch.get(block)
    var = block_stmt.iter_vars[vector].var
    packs = []
    for i, region in enumerate(block_stmt.reads):
        dims = [d for d, r in enumerate(region.region) if _uses(r.min, var)]
        ndim = len(region.region)
        if len(dims) == 1 and dims[0] != ndim - 1:
            packs.append((i, _last(ndim, dims[0])))
    return [(sch.cache_read(block, i, "global"), perm) for i, perm in packs]


def _uses(expr: Any, var: Any) -> bool:
    from tvm.tirx.analysis import undefined_vars

    return any(v.same_as(var) for v in undefined_vars(expr))


def _last(ndim: int, dim: int) -> list[int]:
    """The dimension order that moves ``dim`` innermost, the others in their order."""
    return [d for d in range(ndim) if d != dim] + [dim]


def _permute(order: list[int]) -> Any:
    from tvm import tirx

    return tirx.IndexMap.from_func(lambda *idx: [idx[d] for d in order], ndim=len(order))


def _layout(order: list[int], block: int | None) -> list[Any]:
    """The index maps that take a weight to its packed layout, one after the other: its dimensions in
    ``order``; blocked, the last then split into ``[n // block]`` first and ``[n % block]`` last
    (``transpose_weights`` lays the numbers out the same). Two maps, as TVM inverts a split and a permutation
    each alone but not the two in one."""
    if not block:
        return [_permute(order)]

    def split(*idx: Any) -> list[Any]:  # a function, not an IndexMap: TVM types its block in the buffer's index
        return [*[idx[d] for d in order[:-1]], idx[order[-1]] // block, idx[order[-1]] % block]

    ndim = len(order)
    return [split, _permute([ndim - 1, *range(ndim - 1), ndim])]


def reduce_loops(op: Operator) -> int:
    return len(main_tensor(op).op.reduce_axis)


def build_cpu(mod: Any, target: dict[str, Any] | None = None) -> Any:
    import tvm

    return tvm.compile(mod, target=target or host_target())
