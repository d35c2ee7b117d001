"""Applying a CPU schedule point to TVM's ``s_tir.Schedule``, building it and checking it numerically."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from hetero_dse.errors import HeteroDSEError
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point


class ScheduleError(HeteroDSEError):
    """A schedule point that TVM rejects for this operator."""


def host_target() -> dict[str, Any]:
    """The LLVM target of this machine: its CPU name (TVM rejects ``native``) and core count."""
    import tvm

    return {"kind": "llvm", "mcpu": str(tvm.target.codegen.llvm_get_system_cpu()), "num-cores": os.cpu_count() or 1}


def apply_cpu(op: Operator, point: Point) -> Any:
    """The scheduled IRModule of ``op`` for ``point`` (see ``gpu_cpu/space.py`` for the schedule's shape)."""
    import tvm
    from tvm import s_tir

    sch = s_tir.Schedule(tvm.IRModule({"main": op.prim_func()}))
    main_name = op.output.op.name
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        name = sch.get(block).name_hint
        if name != main_name:
            sch.compute_inline(block)  # producers (padding, expansion) are element-wise
    block = sch.get_sblock(main_name)
    loops = sch.get_loops(block)
    spatial_n = len(op.output.op.axis)
    # split knobs follow the main node's loops in order (their names are the analysis's, deduplicated)
    split_keys = [k for k in point if k.startswith("split.")]
    if len(split_keys) != len(loops):
        raise ScheduleError(f"{point} has {len(split_keys)} split knobs for {len(loops)} loops of {main_name}")
    parts: list[list[Any]] = []
    for loop, key in zip(loops, split_keys, strict=True):
        parts.append(list(sch.split(loop, factors=[int(f) for f in point[key]])))
    spatial, reduce = parts[:spatial_n], parts[spatial_n:]
    s_levels = len(spatial[0]) if spatial else 0
    r_levels = len(reduce[0]) if reduce else 0
    order: list[Any] = []
    for level in range(max(s_levels, r_levels)):
        order += [p[level] for p in spatial if level < s_levels]
        order += [p[level] for p in reduce if level < r_levels]
    # the innermost spatial level goes last so that it can be vectorised
    if s_levels > r_levels:
        order = [x for x in order if not any(x is p[-1] for p in spatial)] + [p[-1] for p in spatial]
    try:
        sch.reorder(*order)
        if spatial:
            outer = sch.fuse(*[p[0] for p in spatial])
            sch.parallel(outer)
            if point["unroll"]:
                sch.annotate(outer, "pragma_auto_unroll_max_step", int(point["unroll"]))
                sch.annotate(outer, "pragma_unroll_explicit", 1)
            innermost = spatial[-1][-1]
            if int(point[split_keys[spatial_n - 1]][-1]) > 1:
                sch.vectorize(innermost)
    except Exception as exc:  # TVM's ScheduleError and friends: a candidate failure, not a crash
        raise ScheduleError(f"TVM rejects {point}: {str(exc).splitlines()[0]}") from exc
    return sch.mod


def build_cpu(mod: Any, target: dict[str, Any] | None = None) -> Any:
    import tvm

    return tvm.compile(mod, target=target or host_target())


def run_cpu(executable: Any, op: Operator, inputs: list[np.ndarray]) -> np.ndarray:
    import tvm

    dev = tvm.cpu(0)
    out = tvm.runtime.tensor(np.zeros([int(d) for d in op.output.shape], dtype=str(op.output.dtype)), dev)
    executable(*[tvm.runtime.tensor(a, dev) for a in inputs], out)
    return out.numpy()


def apply_gpu(op: Operator, point: Point) -> Any:
    """The scheduled IRModule of ``op`` for a GPU point (see ``GpuSpace``): blocks, virtual threads and
    threads bound from the spatial levels, the output tile in registers, inputs staged in shared memory at
    the outer reduce level and fetched cooperatively by the block's threads."""
    import tvm
    from tvm import s_tir

    sch = s_tir.Schedule(tvm.IRModule({"main": op.prim_func()}))
    main_name = op.output.op.name
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        if sch.get(block).name_hint != main_name:
            sch.compute_inline(block)
    block = sch.get_sblock(main_name)
    n_inputs = len(sch.get(block).reads)
    try:
        local = sch.cache_write(block, 0, "local")
        loops = sch.get_loops(block)
        split_keys = [k for k in point if k.startswith("split.")]
        spatial_n = len(op.output.op.axis)
        parts = [list(sch.split(loop, factors=[int(f) for f in point[key]]))
                 for loop, key in zip(loops, split_keys, strict=True)]
        spatial, reduce = parts[:spatial_n], parts[spatial_n:]
        order = [p[0] for p in spatial] + [p[1] for p in spatial] + [p[2] for p in spatial]
        order += [p[lvl] for lvl in range(len(reduce[0]) if reduce else 0) for p in reduce]
        order += [p[3] for p in spatial]
        sch.reorder(*order)
        bx = sch.fuse(*[p[0] for p in spatial])
        vx = sch.fuse(*[p[1] for p in spatial])
        tx = sch.fuse(*[p[2] for p in spatial])
        sch.bind(bx, "blockIdx.x")
        sch.bind(vx, "vthread.x")
        sch.bind(tx, "threadIdx.x")
        sch.reverse_compute_at(local, tx)
        threads = int(np.prod([int(point[k][2]) for k in split_keys[:spatial_n]]))
        if reduce:
            anchor = reduce[-1][0]  # the innermost loop of the outer reduce level
            depth = 3 + len(reduce)
            for i in range(n_inputs):
                shared = sch.cache_read(block, i, "shared")
                sch.compute_at(shared, anchor)
                own = sch.get_loops(shared)[depth:]
                if own:
                    fetch = sch.fuse(*own) if len(own) > 1 else own[0]
                    _, lane = sch.split(fetch, factors=[None, threads])
                    sch.bind(lane, "threadIdx.x")
        if point["unroll"]:
            sch.annotate(tx, "pragma_auto_unroll_max_step", int(point["unroll"]))
            sch.annotate(tx, "pragma_unroll_explicit", 1)
    except Exception as exc:  # TVM's ScheduleError and friends: a candidate failure, not a crash
        raise ScheduleError(f"TVM rejects {point}: {str(exc).splitlines()[0]}") from exc
    return sch.mod


def build_cuda(mod: Any, device: Any) -> tuple[Any, str]:
    """Build for the device's architecture (nvcc is called by TVM; no GPU needed) -> (executable, CUDA source)."""
    import tvm

    executable = tvm.compile(mod, target=device.target)
    return executable, executable.mod.imports[0].inspect_source()
