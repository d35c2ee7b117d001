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
