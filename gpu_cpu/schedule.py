"""Applying a CPU schedule point to TVM's ``s_tir.Schedule``, building it and checking it numerically."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from gpu_cpu.blocks import ScheduleError, epilogue_blocks, inline_producers, main_tensor, rejected
from hetero_dse.errors import HeteroDSEError
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point
from hetero_dse.hardware.host import host_cores


#: the revision of the code ``apply_cpu`` generates for a point: a time in the history measured for the same
#: point under another revision is not this point's (2: weights packed once ahead, ``weight_layouts``)
CPU_CODEGEN = "2"


def host_target() -> dict[str, Any]:
    """The LLVM target of this machine: its CPU name (TVM rejects ``native``) and core count."""
    import tvm

    return {"kind": "llvm", "mcpu": str(tvm.target.codegen.llvm_get_system_cpu()), "num-cores": host_cores()}


def _prepare(op: Operator, point: Point, inline: bool | None = True) -> tuple[Any, Any, list[str]]:
    """A schedule of ``op`` and its main block; the producers (padding, expansion: element-wise) inlined, or
    else computed first over their whole output, in parallel; ``None``: left as they are, for the caller to
    inline where it stages their output. The epilogue's blocks are left to ``_fuse_epilogue``."""
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
    block = sch.get_sblock(main_name)
    keys = _split_keys(op)
    if {k for k in point if k.startswith("split.")} != set(keys):
        raise ScheduleError(f"{point} does not split the loops of {main_name} ({', '.join(keys)})")
    return sch, block, keys






def _fuse_epilogue(sch: Any, op: Operator) -> None:
    """The epilogue (bias, residual, activation) computed in the accumulator's write-back, first step first:
    each finished element goes through it on its way out, with no pass over the output of its own."""
    for name in epilogue_blocks(op):
        sch.reverse_compute_inline(sch.get_sblock(name))


def _split_keys(op: Operator) -> list[str]:
    """The split knob of each loop of the main node, in the loops' order. Looked up by name, not by their
    order in the point: a point read back from JSON (a hand-edited schedule.json, a database that sorts
    keys) keeps its values but not necessarily its order."""
    from hetero_dse.analysis import analyze

    return [f"split.{lp.name}" for lp in analyze(op).main.loops]


def _split(sch: Any, block: Any, op: Operator, point: Point,
           keys: list[str]) -> tuple[list[list[Any]], list[list[Any]]]:
    """Split every loop of the main block by its knob (``keys``, in the loops' order): (spatial loops' parts,
    reduce loops' parts)."""
    parts = [list(sch.split(loop, factors=[int(f) for f in point[key]]))
             for loop, key in zip(sch.get_loops(block), keys, strict=True)]
    spatial_n = len(main_tensor(op).op.axis)
    return parts[:spatial_n], parts[spatial_n:]


def _unroll(sch: Any, loop: Any, point: Point) -> None:
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


def apply_cpu(op: Operator, point: Point) -> Any:
    """The scheduled IRModule of ``op`` for ``point`` (see ``hetero_dse/space/cpu.py`` for the schedule's shape)."""
    sch, block, keys = _prepare(op, point, inline=bool(point.get("inline", 1)))
    spatial_names = [iv.var.name for iv in main_tensor(op).op.axis]
    try:
        vector = spatial_names.index(point["vector"]) if point.get("vector") in spatial_names else -1
        vector %= len(spatial_names)
        # accumulate into a buffer of the tile's size, written back once per tile: LLVM keeps its innermost
        # part (S3, vectorised and unrolled) in registers
        cache = sch.cache_write(block, 0, "global") if reduce_loops(op) else None
        if cache is not None:
            _fuse_epilogue(sch, op)
        prepacked = weight_layouts(op, point)
        taken = set()
        for i, region in enumerate(sch.get(block).reads):  # the weights read in the packed layout, as given
            index = _input_index(op, region.source.name)
            if index in prepacked:
                sch.transform_layout(block, ("read", i), _permute(list(prepacked[index])))
                taken.add(index)
        if taken != set(prepacked):  # every caller packs what weight_layouts says: a weight left out is wrong
            raise ScheduleError(f"the main block does not read weight input(s) {sorted(set(prepacked) - taken)}")
        packs = _packed_reads(sch, block, vector) if cache is not None else []
        spatial, reduce = _split(sch, block, op, point, keys)
        order, write_level = _cpu_order(spatial, reduce, int(point.get("order", 0)))
        registers = len(order) - len(spatial)
        inner = [p[-1] for i, p in enumerate(spatial) if i != vector] + [spatial[vector][-1]]
        sch.reorder(*order[:registers], *inner)
        outer = sch.fuse(*[p[0] for p in spatial])
        sch.parallel(outer)
        _unroll(sch, outer, point)
        if int(point[keys[vector]][-1]) > 1:
            sch.vectorize(spatial[vector][-1])
        if cache is not None:
            sch.reverse_compute_at(cache, outer if write_level == 0 else spatial[-1][write_level])
            for read, permutation in packs:  # each tile of the input packed once per outer reduce step
                sch.compute_at(read, reduce[-1][0])
                sch.transform_layout(read, ("write", 0), _permute(permutation))
            if vector != len(spatial) - 1:
                sch.transform_layout(block, ("write", 0), _permute(_last(len(spatial), vector)))
            # the zeroing of the accumulator once per tile, not a test in the innermost loop
            sch.decompose_reduction(block, reduce[0][0])
    except Exception as exc:
        raise rejected(point, exc) from exc
    if not prepacked:
        return sch.mod
    # said in the module too (lowered_tir.py shows it): whoever calls it passes these weights transposed
    mod = sch.mod
    mod["main"] = mod["main"].with_attr("hetero_dse.packed_weights",
                                        {op.inputs[i].op.name: list(order) for i, order in prepacked.items()})
    return mod


def weight_layouts(op: Operator, point: Point | dict[str, Any]) -> dict[int, tuple[int, ...]]:
    """The weights (``op.weights``: inputs constant at inference) the CPU kernel of ``point`` takes in a
    layout of its own: input index -> the order of its dimensions (numpy's ``transpose``), the dimension the
    vectorised loop indexes moved innermost. Packed once where the kernel is loaded (``pack_weights``), as
    TVM's layout-free buffers and oneDNN's prepacked weights are, instead of each tile packing its part on
    every run: weights ``W[k, c, r, s]`` of a convolution vectorised over ``k`` are taken as ``[c, r, s, k]``.
    Only a weight the main node reads directly (not through a producer) is taken so. Empty for an operator
    without weights or reduction, a point without splits (another tuner's module) and a tensor-core point."""
    if not op.weights or not reduce_loops(op) or "mma" in point or not any(str(k).startswith("split.") for k in point):
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
        if dim is not None:
            layouts[_input_index(op, access.tensor)] = tuple(_last(len(access.indices), dim))
    return layouts


def pack_weights(op: Operator, point: Point | dict[str, Any], inputs: list[Any]) -> list[Any]:
    """``inputs`` (numpy arrays or torch tensors, in the operator's order) as the kernel of ``point`` takes
    them: each weight of ``weight_layouts`` transposed and made contiguous, the others as they are."""
    layouts = weight_layouts(op, point)
    out = list(inputs)
    for index, order in layouts.items():
        a = inputs[index]
        out[index] = a.permute(*order).contiguous() if hasattr(a, "permute") else \
            np.ascontiguousarray(a.transpose(order))
    return out


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


def reduce_loops(op: Operator) -> int:
    return len(main_tensor(op).op.reduce_axis)


def build_cpu(mod: Any, target: dict[str, Any] | None = None) -> Any:
    import tvm

    return tvm.compile(mod, target=target or host_target())


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

    def bind(loop: Any, thread: str) -> None:
        if not emulate:
            sch.bind(loop, thread)

    shared_scope, local_scope = ("global", "global") if emulate else ("shared", "local")
    sch, block, keys = _prepare(op, point, inline=True if reduce_loops(op) == 0 else None)
    n_inputs = len(sch.get(block).reads)
    try:
        local = sch.cache_write(block, 0, local_scope)
        _fuse_epilogue(sch, op)
        spatial, reduce = _split(sch, block, op, point, keys)
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
                inline_producers(sch, shared)
                own = sch.get_loops(shared)[depth:]
                if own:
                    fetch = sch.fuse(*own) if len(own) > 1 else own[0]
                    _, lane = sch.split(fetch, factors=[None, threads])
                    bind(lane, "threadIdx.x")
        if not emulate:
            _unroll(sch, tx, point)
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


#: bytes of the CUDA types TVM declares shared arrays with
_CUDA_BYTES = {"float": 4, "half": 2, "nv_bfloat16": 2, "int": 4, "int8_t": 1, "signed char": 1, "char": 1,
               "double": 8, "short": 2, "int64_t": 8, "uint8_t": 1}


def staged_shared_bytes(op: Operator, point: Point, device: Any) -> int:
    """The static shared memory the CUDA code TVM generates for ``point`` declares (no nvcc: the source alone).
    The space counts the tiles' footprint, and for every built-in operator the two agree (tests/test_gpu_codegen.py);
    a custom operator's index arithmetic can still lead TVM's region analysis to stage more."""
    _, source = build_cuda(apply_gpu(op, point), device, compile_here=False)
    return declared_shared_bytes(source)


@functools.lru_cache(maxsize=512)
def ptxas_usage(source: str, arch: str) -> dict[str, int] | None:
    """What ptxas allots the kernel of a CUDA source for ``arch``: registers per thread and bytes spilled to
    local memory (``-Xptxas -v``); None where nvcc is missing or refuses the source. The roofline's own
    register count is the accumulators plus a constant, and ptxas gives an unrolled kernel several times that
    (YOLO-v1 C4: 219 registers where the model counted 32), which decides how many blocks share an SM."""
    import re
    import subprocess
    import tempfile

    from hetero_dse.hardware.gpus import cuda_toolkit

    try:
        nvcc = cuda_toolkit()
    except HeteroDSEError:
        return None
    with tempfile.TemporaryDirectory(prefix="hetero_dse_ptxas_") as tmp:
        cu = Path(tmp) / "kernel.cu"
        cu.write_text(source)
        run = subprocess.run([nvcc, f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-o", str(cu.with_suffix(".cubin")),
                              str(cu)], capture_output=True, text=True, timeout=300)
    used = re.search(r"Used (\d+) registers", run.stderr)
    if run.returncode != 0 or used is None:
        return None
    spilled = re.search(r"(\d+) bytes spill stores", run.stderr)
    return {"registers": int(used.group(1)), "spill_bytes": int(spilled.group(1)) if spilled else 0}


def declared_shared_bytes(source: str) -> int:
    """The static shared memory a CUDA source's ``__shared__`` arrays declare."""
    import re

    total = 0
    for ctype, size in re.findall(r"__shared__\s+(?:alignas\(\d+\)\s+)?([\w ]+?)\s+\w+\[(\d+)\]", source):
        total += _CUDA_BYTES.get(ctype.strip(), 4) * int(size)
    return total
