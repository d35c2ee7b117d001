"""Applying a schedule point to TVM's ``s_tir.Schedule`` — a CPU point (direct, or by Winograd:
``gpu_cpu/winograd.py``) or a GPU point — building it and checking it numerically."""

from __future__ import annotations

from typing import Any

import numpy as np

from gpu_cpu.blocks import ScheduleError, epilogue_blocks, main_tensor, rejected
from gpu_cpu.gpu_block import schedule_gpu_main
from gpu_cpu.main_block import build_cpu, host_target, point_keys, reduce_loops, schedule_main, transpose_weights, \
    weight_blocks, weight_layouts
from gpu_cpu.winograd import TILE_KNOB, apply_winograd, product_point, winograd_weights
from gpu_cpu.winograd_gpu import apply_winograd_gpu
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point

# build_cpu, host_target, weight_layouts and reduce_loops are gpu_cpu.main_block's, named here too: the
# schedule's callers take them from here
__all__ = ["CPU_CODEGEN", "ScheduleError", "apply_cpu", "apply_gpu", "build_cpu", "build_cuda", "host_target",
           "pack_weights", "reduce_loops", "run_cpu", "weight_layouts"]


#: the revision of the code ``apply_cpu`` generates for a point: a time in the history measured for the same
#: point under another revision is not this point's (2: weights packed once ahead, ``weight_layouts``; 3: the
#: epilogue of a tile vectorised along another dimension than the output's innermost staged, ``_stage_epilogue``)
CPU_CODEGEN = "3"


def _prepare(op: Operator, point: Point, inline: bool | None = True) -> tuple[Any, Any, list[str]]:
    """A schedule of ``op`` and its main block; the producers (padding, expansion: element-wise) inlined, or
    else computed first over their whole output, in parallel; ``None``: left as they are, for the caller to
    inline where it stages their output. The epilogue's blocks are left to ``fuse_epilogue``."""
    import tvm
    from tvm import s_tir

    sch = s_tir.Schedule(tvm.IRModule({"main": op.prim_func()}))
    main_name = main_tensor(op).op.name
    after = set(epilogue_blocks(op))
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        if sch.get(block).name_hint == main_name or sch.get(block).name_hint in after:
            continue
        if inline is None:
            continue
        if inline:
            sch.compute_inline(block)
        else:
            loops = sch.get_loops(block)
            sch.parallel(sch.fuse(*loops[:-1]) if len(loops) > 2 else loops[0])
    return sch, sch.get_sblock(main_name), point_keys(op, point)


def apply_cpu(op: Operator, point: Point) -> Any:
    """The scheduled IRModule of ``op`` for ``point`` (see ``hetero_dse/space/cpu.py`` for the schedule's shape);
    a point with a Winograd tile runs the convolution by Winograd (``gpu_cpu/winograd.py``)."""
    if TILE_KNOB in point:
        return apply_winograd(op, int(point[TILE_KNOB]), product_point(point))
    sch, block, keys = _prepare(op, point, inline=bool(point.get("inline", 1)))
    try:
        prepacked = schedule_main(sch, block, op, point, keys)
    except Exception as exc:
        raise rejected(point, exc) from exc
    if not prepacked:
        return sch.mod
    # said in the module too (lowered_tir.py shows it): whoever calls it passes these weights transposed
    mod = sch.mod
    mod["main"] = mod["main"].with_attr("hetero_dse.packed_weights",
                                        {op.inputs[i].op.name: list(order) for i, order in prepacked.items()})
    if blocks := weight_blocks(op, point):  # then each blocked: [n / block, ..., block]
        mod["main"] = mod["main"].with_attr("hetero_dse.blocked_weights",
                                            {op.inputs[i].op.name: block for i, block in blocks.items()})
    return mod


def pack_weights(op: Operator, point: Point | dict[str, Any], inputs: list[Any]) -> list[Any]:
    """``inputs`` (numpy arrays or torch tensors, in the operator's order) as the kernel of ``point`` takes
    them: each weight of ``weight_layouts`` transposed (``transpose_weights``), the others as they are; for a
    Winograd point, the weights transformed (``gpu_cpu.winograd.winograd_weights``)."""
    if point is not None and TILE_KNOB in point:
        return [inputs[0], winograd_weights(op, point, inputs[1]), *inputs[2:]]
    return transpose_weights(op, point, inputs)


def run_cpu(executable: Any, op: Operator, inputs: list[np.ndarray], point: Point | None = None) -> np.ndarray:
    """The output of ``executable`` (built from ``apply_cpu(op, point)``) on the operator's ``inputs``, its
    weights packed as the point's kernel takes them. ``point`` None: a module taking every input as it is
    (a GPU schedule emulated on the CPU)."""
    import tvm

    dev = tvm.cpu(0)
    out = tvm.runtime.tensor(np.zeros([int(d) for d in op.output.shape], dtype=str(op.output.dtype)), dev)
    packed = pack_weights(op, point, inputs) if point is not None else inputs
    executable(*[tvm.runtime.tensor(a, dev) for a in packed], out)
    return out.numpy()


def apply_gpu(op: Operator, point: Point, emulate: bool = False) -> Any:
    """The scheduled IRModule of ``op`` for a GPU point (see ``GpuSpace``): blocks, virtual threads and
    threads bound from the spatial levels, the output tile in registers, inputs staged in shared memory at
    the outer reduce level and fetched cooperatively by the block's threads. A tensor-core point (its template's
    knobs, ``hetero_dse/space/tensorcore.py``) is applied by ``gpu_cpu/tensorcore.py``.

    ``emulate=True``: the same loops, stages and inlining with every loop serial and every buffer global, for
    TVM's CPU backend: the index arithmetic the GPU runs (the padding computed in the shared stage, the
    stages' regions, the epilogue in the write-back), checked numerically where there is no GPU."""
    if "mma" in point:
        from gpu_cpu.tensorcore import apply_tensorcore

        return apply_tensorcore(op, point, emulate=emulate)

    if TILE_KNOB in point:
        return apply_winograd_gpu(op, int(point[TILE_KNOB]), product_point(point), emulate=emulate)
    sch, block, keys = _prepare(op, point, inline=True if reduce_loops(op) == 0 else None)
    try:
        schedule_gpu_main(sch, block, op, point, keys, emulate=emulate)
    except Exception as exc:
        raise rejected(point, exc) from exc
    return sch.mod


def build_cuda(mod: Any, device: Any, compile_here: bool = True) -> tuple[Any, str]:
    """Build for the device's architecture -> (executable, CUDA source).

    Where TVM's CUDA runtime is loaded (a machine with a GPU), the module compiles its source as it is created,
    through the callback ``tvm.support.nvcc`` registers (NVRTC by default), and keeps the binary; on a machine
    without one it keeps the source alone (compiled where it is loaded), so a kernel nvcc rejects would pass for
    built. ``compile_here``: nvcc compiles the source for the device's architecture now (a cubin), its first
    error a ``ScheduleError``. Measuring on the GPU leaves it to TVM."""
    import tvm
    import tvm.support.nvcc  # registers tvm_callback_cuda_compile for the load on a GPU

    config = {}
    if "hetero_dse.tensor_cores" in (mod["main"].attrs or {}):
        # StorageRewrite would reuse a float16 stage's shared memory for the float32 write-back, and the
        # fragment intrinsics' typed pointers into it then fail to lower; the space keeps within the limits
        config["tirx.disable_storage_rewrite"] = True
    if "hetero_dse.async_copy" in (mod["main"].attrs or {}):  # the stages' copies become cp.async
        config["tirx.use_async_copy"] = True
    with tvm.transform.PassContext(config=config):
        executable = tvm.compile(mod, target=device.target)
    source = executable.mod.imports[0].inspect_source()
    if compile_here:
        try:
            with tvm.target.Target(device.target):  # nvcc's flags are read from the current target
                tvm.support.nvcc.compile_cuda(source, target_format="cubin", arch=device.arch, compiler="nvcc")
        except RuntimeError as exc:
            lines = str(exc).splitlines()
            errors = [line.strip() for line in lines
                      if ("error" in line or "fatal" in line) and ":" in line and not line.startswith("Compilation")]
            errors = errors or [line.strip() for line in lines if line.strip()] or ["(no message)"]
            raise ScheduleError(f"nvcc rejects the generated CUDA for {device.arch}: {errors[0]}") from None
    return executable, source
