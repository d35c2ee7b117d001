"""Two thread pools against one, on the smallest case that shows it: a 196×128×256 product (TVM, parallel over
rows, vectorised) called between two torch convolutions (64 channels, 56×56, 3×3), in one process.

    .venv/bin/python bench/one_pool_product.py torch          # our loops on torch's OpenMP team
    .venv/bin/python bench/one_pool_product.py tvm            # on TVM's own pool (the design before)
    .venv/bin/python bench/one_pool_product.py tvm torch      # both, in one process

Prints, three times for each pool named, the mean time of our product and of torch's convolution over 50
alternations (ms).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    os.environ.setdefault("TVM_NUM_THREADS", "2")
    import torch
    import tvm
    from tvm import s_tir, te

    from gpu_cpu.one_pool import use_pool
    from gpu_cpu.schedule import host_target

    m, k, n = 196, 128, 256
    a_t, b_t = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), "k")
    c_t = te.compute((m, n), lambda i, j: te.sum(a_t[i, r] * b_t[r, j], axis=r), name="C")

    def build():
        sch = s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a_t, b_t, c_t])}))
        i, j, kk = sch.get_loops(sch.get_sblock("C"))
        io, ii = sch.split(i, [None, 14])
        sch.parallel(io)
        jo, ji = sch.split(j, [None, 16])
        sch.reorder(io, jo, ii, kk, ji)
        sch.vectorize(ji)
        return tvm.compile(sch.mod, target=host_target())

    a, b, c = torch.randn(m, k), torch.randn(k, n), torch.empty(m, n)
    args = [tvm.runtime.from_dlpack(t) for t in (a, b, c)]
    x, w = torch.randn(1, 64, 56, 56), torch.randn(64, 64, 3, 3)
    torch.set_num_threads(2)
    kernels = {}
    for kind in sys.argv[1:] or ["torch"]:
        use_pool(kind)
        kernel = build()
        kernel(*args)  # a JIT module binds its parallel loops to the pool registered at its first run
        kernels[kind] = kernel
    for _ in range(3):
        for kind, kernel in kernels.items():
            ours = theirs = 0.0
            for _ in range(50):
                start = time.perf_counter()
                torch.nn.functional.conv2d(x, w, padding=1)
                middle = time.perf_counter()
                kernel(*args)
                ours += time.perf_counter() - middle
                theirs += middle - start
            print(f"{kind} pool: our product {ours / 50 * 1e3:.3f} ms, torch's convolution {theirs / 50 * 1e3:.3f} ms",
                  flush=True)


if __name__ == "__main__":
    main()
