"""A tensor-core point (``hetero_dse/space/tensorcore.py``) applied to TVM's ``s_tir.Schedule``.

The main block is normalised to ``C[s, i, j] += A[s, i, k] · B[s, j, k]`` (``reindex`` gathers a
convolution's windows into A: the implicit GEMM), padded to the block tile (``pad_einsum``), cut into fragments
(16×16, 32×8 or 8×32, by 16 of K) that become one MMA each, tiled into warps and thread blocks, and fed through
shared memory: each K chunk of A and B staged by the whole block with vector-wide loads (double-buffered with
two stages; with Ampere's ``cp.async``, up to four chunks in flight), loaded into fragments, multiplied on the
tensor cores, and the accumulators stored through shared memory to global memory with the epilogue (bias,
residual, activation) and the crop of the padding applied on the way out.

``emulate=True`` applies the same normalisation, padding, tiling, staging and pipeline (the K chunks' buffers as
many deep as the stages) without the tensor intrinsics and the GPU bindings, for TVM's CPU backend: the
transformation the GPU runs, checked numerically where there is no GPU.
"""

from __future__ import annotations

from typing import Any

from gpu_cpu.intrinsics import SHARED, wmma_intrinsics
from gpu_cpu.blocks import ScheduleError, epilogue_blocks, inline_producers, main_tensor, rejected
from hetero_dse.analysis import analyze
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point
from hetero_dse.space.tensorcore import (BY_INSTRUCTION, SKEW_FACTOR, async_copy, fragment_shape, gathered_inputs,
                                         split_k)

__all__ = ["apply_tensorcore", "is_tensor_core_point"]

WARP = 32


def is_tensor_core_point(point: Point) -> bool:
    return "mma" in point


def apply_tensorcore(op: Operator, point: Point, emulate: bool = False) -> Any:
    import tvm
    from tvm import s_tir
    from tvm.s_tir.dlight.gpu.matmul import get_index_map

    sch = s_tir.Schedule(tvm.IRModule({"main": op.prim_func()}))
    main_name = main_tensor(op).op.name
    after = set(epilogue_blocks(op))
    block = sch.get_sblock(main_name)
    try:
        # 1. the implicit GEMM: A, B and C re-laid as [s, i, k], [s, j, k], [s, i, j] (the gathers are blocks
        # of their own, into which the producers — the padding of a convolution — are inlined)
        reindexed = [sch.reindex(block, ("read", 0)), sch.reindex(block, ("read", 1)), sch.reindex(block, ("write", 0))]
        keep = {main_name, *after, *(sch.get(b).name_hint for b in reindexed)}
        for child in sch.get_child_blocks(sch.get_sblock("root")):
            if sch.get(child).name_hint not in keep and _is_producer(sch, child):
                sch.compute_inline(child)
        maps = get_index_map(sch.get(block))
        if maps is None:
            raise ScheduleError(f"{op.name} is not a GEMM TVM can normalise")
        block_map, a_map, b_map, c_map = maps
        sch.transform_layout(reindexed[0], ("write", 0), a_map)
        sch.transform_layout(reindexed[1], ("write", 0), b_map)
        sch.transform_layout(reindexed[2], ("read", 0), c_map)
        sch.transform_block_layout(block, block_map)
        wm, wn, fm, fn, kf = (int(point[k]) for k in ("warps_m", "warps_n", "frags_m", "frags_n", "k_frags"))
        frag_k = BY_INSTRUCTION[point["mma"]].k
        frag_m, frag_n = fragment_shape(point["mma"])
        split = split_k(point)
        # 2. alignment padding: every extent a multiple of the block tile (K of the tile times the splits)
        sch.pad_einsum(block, [1, frag_m * wm * fm, frag_n * wn * fn, frag_k * kf * split])
        partials = None
        if split > 1:
            # split-K: each split's blocks multiply their share of K into a float partial C[split, s, i, j]
            # (rfactor); what was the main block now sums the partials, in a kernel of its own
            batch, i, j, k = sch.get_loops(block)
            ks, k = sch.split(k, [split, None])
            partials, block = block, sch.rfactor(ks, 0)
            batch, i, j, ks, k = sch.get_loops(block)
            sch.reorder(ks, batch, i, j)
            sch.fuse(ks, batch)  # the splits are more batches to the template
        # 3. fragments, warps, blocks
        batch, i, j, k = sch.get_loops(block)
        i, ii = sch.split(i, [None, frag_m])
        j, jj = sch.split(j, [None, frag_n])
        k, kk = sch.split(k, [None, frag_k])
        sch.reorder(i, j, k, ii, jj, kk)
        outer = sch.blockize(ii)  # one MMA per iteration of what is left outside
        i0, i1, i2 = sch.split(i, [None, wm, fm])
        j0, j1, j2 = sch.split(j, [None, wn, fn])
        k0, k1 = sch.split(k, [None, kf])
        sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
        tiles = sch.fuse(i0, j0)
        warps = sch.fuse(i1, j1)
        if emulate:  # the loops as the GPU runs them, serial, every buffer global
            for index in (0, 1):
                _stage(sch, outer, index, k0, "global")
            _pipeline(sch, k0, point, on_gpu=False)
            if partials is not None:
                _sum_partials(sch, partials, bind=False)
            return sch.mod
        _on_tensor_cores(sch, op, point, block, outer, batch, tiles, warps, k0, k1, wm * wn)
        if partials is not None:
            _sum_partials(sch, partials)
    except ScheduleError:
        raise
    except Exception as exc:
        raise rejected(point, exc) from exc
    # build_cuda reads them: the tensor cores' module is lowered with a pass of its own left out, and one in
    main = sch.mod["main"].with_attr("hetero_dse.tensor_cores", 1)
    if async_copy(point):
        main = main.with_attr("hetero_dse.async_copy", 1)
    return tvm.IRModule({"main": main})


def _sum_partials(sch: Any, partials: Any, bind: bool = True) -> None:
    """The second kernel of split-K: one thread per output element sums its partials, then applies the crop of
    the padding and the epilogue, the blocks between computed at the thread (no intermediate in DRAM).
    ``bind=False``: the same loops unbound, for TVM's CPU path."""
    chain = [partials]
    while consumers := sch.get_consumers(chain[-1]):
        chain.append(consumers[0])
    last = chain[-1]
    block_x, thread_x = sch.split(sch.fuse(*sch.get_loops(last)), [None, 8 * WARP])
    if bind:
        sch.bind(block_x, "blockIdx.x")
        sch.bind(thread_x, "threadIdx.x")
    for block in reversed(chain[:-1]):
        sch.compute_at(block, thread_x)
        sch.set_scope(block, 0, "local")  # one element per thread: a register


def _is_producer(sch: Any, block: Any) -> bool:
    """A block computed before the main one (the padding), not one after it."""
    return bool(sch.get_consumers(block))


def _chain_out(sch: Any, first: Any) -> None:
    """The write-back chain (the crop of the padding, the epilogue) inlined into ``first``'s consumers."""
    while True:
        consumers = sch.get_consumers(first)
        if not consumers:
            return
        try:
            sch.reverse_compute_inline(consumers[0])
        except Exception:  # noqa: BLE001 - a consumer that cannot be inlined stays a pass of its own
            return


def _on_tensor_cores(sch: Any, op: Operator, point: Point, block: Any, outer: Any, batch: Any, tiles: Any,
                     warps: Any, k0: Any, k1: Any, num_warps: int) -> None:

    sch.bind(batch, "blockIdx.y")
    sch.bind(tiles, "blockIdx.x")
    sch.bind(warps, "threadIdx.y")
    vector, skew = int(point["vector"]), int(point["skew"])

    gathered = gathered_inputs(analyze(op))
    for index in (0, 1):
        # the block's K chunk of A or B in shared memory, fetched by every thread with vector-wide loads
        shared = _stage(sch, outer, index, k0, SHARED)
        width = vector
        if async_copy(point) and sch.get(shared).name_hint.split("_reindex")[0] in gathered:
            # element by element (1 or 2 bytes: below cp.async's 4), so TVM's async-copy pass leaves it a plain
            # load: it would turn a vector-wide gather into one contiguous cp.async of the wrong elements
            width = 1
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, ty, tx, vec = sch.split(fused, [None, num_warps, WARP, width])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(vec)
        if skew:
            sch.storage_align(shared, 0, axis=-2, factor=SKEW_FACTOR, offset=skew)
    arithmetic = BY_INSTRUCTION[point["mma"]]
    frag_m, frag_n = fragment_shape(point["mma"])
    intrinsics = wmma_intrinsics(arithmetic, frag_m, frag_n)
    fragments = [sch.cache_read(outer, 0, "wmma.matrix_a"), sch.cache_read(outer, 1, "wmma.matrix_b")]
    for fragment in fragments:
        sch.compute_at(fragment, k1)
    out_shared = sch.cache_write(outer, 0, SHARED)
    # (no storage_align here: TVM drops it on this stage, whose consumers are inlined into it below)
    store = sch.cache_write(outer, 0, "wmma.accumulator")
    sch.reverse_compute_at(store, warps)
    sch.reverse_compute_at(out_shared, warps)
    _tile(sch, store, frag_m, frag_n)
    init = sch.decompose_reduction(outer, k0)
    for fragment, rows, key in zip(fragments, (frag_m, frag_n), ("load_a", "load_b"), strict=True):
        sch.tensorize(_tile(sch, fragment, rows, arithmetic.k), intrinsics[key])  # rows of K
    sch.tensorize(sch.get_loops(sch.get_child_blocks(init)[0])[-2], intrinsics["init"])
    sch.tensorize(sch.get_loops(store)[-2], intrinsics["store"])
    sch.tensorize(sch.get_loops(block)[-3], intrinsics["compute"])
    _pipeline(sch, k0, point)
    _chain_out(sch, out_shared)
    fused = sch.fuse(*sch.get_loops(out_shared)[-2:])
    _, tx = sch.split(fused, [None, WARP])
    sch.bind(tx, "threadIdx.x")


def _stage(sch: Any, outer: Any, index: int, k0: Any, scope: str) -> Any:
    """The block's K chunk of input ``index`` (A or B) copied into ``scope`` once per step of ``k0``, the gather
    of A (im2col) and the padding computed in the copy."""
    staged = sch.cache_read(outer, index, scope)
    sch.compute_at(staged, k0)
    inline_producers(sch, staged)
    return staged


def _pipeline(sch: Any, k0: Any, point: Point, on_gpu: bool = True) -> None:
    """S stages: the copy of the chunk S - 1 ahead (its buffers S deep) is issued before this chunk's fragments
    are multiplied, so the loads of one overlap the MMAs of another. Plain copies pass through registers and land
    before the MMAs start (two stages are all they use); cp.async's land on their own, waited for
    (cp.async.wait_group) only when their chunk's turn comes. TVM's CPU path (``on_gpu=False``) runs the same
    multi-buffering with plain copies: serial, a copy has always landed, and LLVM has no cp.async waits."""
    stages = int(point["stages"])
    if stages > 1:
        sch.annotate(k0, "software_pipeline_stage", [0, 0, stages - 1])
        sch.annotate(k0, "software_pipeline_order", [0, 1, 2])
        if async_copy(point) and on_gpu:
            sch.annotate(k0, "software_pipeline_async_stages", [0])


def _tile(sch: Any, block: Any, rows: int, columns: int) -> Any:
    """The block's two innermost loops cut into ``rows`` × ``columns`` tiles; the tile's outer row loop (what a
    fragment intrinsic replaces)."""
    x, y = sch.get_loops(block)[-2:]
    x0, x1 = sch.split(x, [None, rows])
    y0, y1 = sch.split(y, [None, columns])
    sch.reorder(x0, y0, x1, y1)
    return x1
