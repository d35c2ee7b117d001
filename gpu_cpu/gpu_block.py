"""The GPU schedule of an operator's main block (FlexTensor §4.2 bound to CUDA): blocks, virtual threads and
threads from the spatial levels, the output tile in registers, each input staged in shared memory at the outer
reduce level and fetched cooperatively by the block's threads. ``gpu_cpu/schedule.py`` applies a whole point
with it; ``gpu_cpu/winograd_gpu.py`` applies it to the batched product inside a Winograd convolution."""

from __future__ import annotations

from typing import Any

import numpy as np

from gpu_cpu.blocks import inline_producers
from gpu_cpu.main_block import annotate_unroll, fuse_epilogue, split_loops
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point

__all__ = ["schedule_gpu_main"]


def schedule_gpu_main(sch: Any, block: Any, op: Operator, point: Point, keys: list[str], emulate: bool = False,
                      stage_producers: bool = True) -> Any:
    """``block`` (``op``'s main block in ``sch``) scheduled for ``point``; returns the loop bound to the block's
    threads. ``emulate``: the same loops, stages and inlining with every loop serial and every buffer global,
    for TVM's CPU backend. ``stage_producers``: the producers of an input (a padding) computed in its shared
    stage; False where another kernel computes the input (Winograd's transformed tiles)."""
    def bind(loop: Any, thread: str) -> None:
        if not emulate:
            sch.bind(loop, thread)

    shared_scope, local_scope = ("global", "global") if emulate else ("shared", "local")
    n_inputs = len(sch.get(block).reads)
    local = sch.cache_write(block, 0, local_scope)
    fuse_epilogue(sch, op)
    spatial, reduce = split_loops(sch, block, op, point, keys)
    order = [p[0] for p in spatial] + [p[1] for p in spatial] + [p[2] for p in spatial]
    order += [p[lvl] for lvl in range(len(reduce[0]) if reduce else 0) for p in reduce]
    order += [p[3] for p in spatial]
    sch.reorder(*order)
    bx = sch.fuse(*[p[0] for p in spatial])
    vx = sch.fuse(*[p[1] for p in spatial])
    tx = sch.fuse(*[p[2] for p in spatial])
    bind(bx, "blockIdx.x")
    bind(vx, "vthread.x")
    bind(tx, "threadIdx.x")
    sch.reverse_compute_at(local, tx)
    threads = int(np.prod([int(point[k][2]) for k in keys[: len(spatial)]]))
    if reduce:
        anchor = reduce[-1][0]  # the innermost loop of the outer reduce level
        depth = 3 + len(reduce)
        for i in range(n_inputs):
            shared = sch.cache_read(block, i, shared_scope)
            sch.compute_at(shared, anchor)
            if stage_producers:
                inline_producers(sch, shared)
            own = sch.get_loops(shared)[depth:]
            if own:
                fetch = sch.fuse(*own) if len(own) > 1 else own[0]
                _, lane = sch.split(fetch, factors=[None, threads])
                bind(lane, "threadIdx.x")
    if not emulate:
        annotate_unroll(sch, tx, point)
    return tx
