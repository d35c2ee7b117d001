"""What a generated CUDA kernel uses, read from its source and from ptxas: the shared memory its arrays
declare, the registers and spilled bytes ptxas allots (the roofline's limits checked against the code)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from gpu_cpu.schedule import apply_gpu, build_cuda
from hetero_dse.errors import HeteroDSEError
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point

__all__ = ["declared_shared_bytes", "ptxas_usage", "staged_shared_bytes"]


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
