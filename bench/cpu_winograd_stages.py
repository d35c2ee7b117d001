"""Where a Winograd convolution's time goes on this CPU: the input transform, the batched product and the output
transform each built and timed alone (``gpu_cpu/winograd.py``), then the one function that runs all three,
and torch's convolution. The product runs its space's default point (nothing is searched).

    .venv/bin/python bench/cpu_winograd_stages.py 256-512-28-4 64-64-56-4     (C-K-HW-m)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def median_time(call, runs: int = 20, repeat: int = 7) -> float:
    call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(runs):
            call()
        times.append((time.perf_counter() - start) / runs)
    return float(np.median(times))


def stages(spec: str) -> None:
    import torch
    import tvm

    from gpu_cpu.schedule import apply_cpu, build_cpu
    from gpu_cpu.winograd import (WinogradKernel, host_lanes, input_transform, output_transform, product_operator,
                                  winograd_shape)
    from hetero_dse.analysis import analyze
    from hetero_dse.ops import get_builtin
    from hetero_dse.space.cpu import CpuSpace

    c, k, hw, m = (int(v) for v in spec.split("-"))
    op = get_builtin("conv2d").instantiate(dict(C=c, K=k, H=hw, W=hw, kernel=3, stride=1, padding=1))
    shape = winograd_shape(op, m)
    product = product_operator(shape)
    point = CpuSpace(analyze(product)).default_point()
    kernel = WinogradKernel(op, m, point)

    def entry(mod):
        module = build_cpu(mod).mod
        return module[module.entry_name]

    stage_in = entry(input_transform(shape, host_lanes()))
    stage_product = entry(apply_cpu(product, point))
    stage_out = entry(output_transform(shape, (), host_lanes()))
    inputs = op.random_inputs(0)
    dev = tvm.cpu(0)
    x = tvm.runtime.tensor(inputs[0], dev)
    u = tvm.runtime.tensor(kernel.weights(inputs[1]), dev)
    y = tvm.runtime.tensor(np.zeros([int(d) for d in op.output.shape], "float32"), dev)
    v = tvm.runtime.empty((shape.points, shape.tiles, shape.C), "float32", dev)
    mm = tvm.runtime.empty((shape.points, shape.tiles, shape.K), "float32", dev)
    xt, wt = torch.from_numpy(inputs[0]), torch.from_numpy(inputs[1])
    times = {"input": median_time(lambda: stage_in(x, v)), "product": median_time(lambda: stage_product(v, u, mm)),
             "output": median_time(lambda: stage_out(mm, y)), "one function": median_time(lambda: kernel(x, u, y)),
             "torch": median_time(lambda: torch.nn.functional.conv2d(xt, wt, padding=1))}
    print(f"F({m}x{m}) {c}->{k} {hw}x{hw}: " + ", ".join(f"{name} {s * 1e3:.3f} ms" for name, s in times.items())
          + f"; the product {times['product'] / (times['input'] + times['product'] + times['output']):.0%} "
          "of the three", flush=True)


def main() -> None:
    os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count()))
    for spec in sys.argv[1:]:
        stages(spec)


if __name__ == "__main__":
    main()
