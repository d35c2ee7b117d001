"""How much of torch eager's convolution is its weights' reorder: each layer timed as torch eager calls it and
as torch's own inference path runs it with the weights prepacked once (``torch.jit.freeze`` then
``optimize_for_inference``, oneDNN's blocked weights folded into the graph), alternating, in one process.

    .venv/bin/python bench/torch_prepacked.py --layers yolo:C8,yolo:C12,resnet18:L9=256-256-14-3-1

Our CPU kernels take their weights packed ahead (``gpu_cpu.schedule.weight_layouts``); this says how much of
their gain over torch eager is the packing eager repeats on every call, which torch's frozen graph does not.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _params(spec: str) -> dict:
    """``yolo:C8`` (FlexTensor's table), or ``NAME=C-K-HW-kernel-stride`` for any other layer."""
    if "=" in spec:
        c, k, hw, kernel, stride = (int(v) for v in spec.split("=", 1)[1].split("-"))
        return dict(C=c, K=k, H=hw, W=hw, kernel=kernel, stride=stride, padding=kernel // 2)
    from hetero_dse.ops import get_builtin

    return dict(get_builtin("conv2d").instantiate(shape=spec).params)


def _time(call, x, runs: int = 20) -> float:
    import torch

    with torch.no_grad():
        for _ in range(3):
            call(x)
        start = time.perf_counter()
        for _ in range(runs):
            call(x)
    return (time.perf_counter() - start) / runs


def main() -> None:
    import torch

    from hetero_dse.hardware.host import host_cores

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="yolo:C8,yolo:C12,yolo:C15,yolo:C3")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(host_cores())
    for spec in args.layers.split(","):
        p = _params(spec)
        conv = torch.nn.Conv2d(p["C"], p["K"], p["kernel"], stride=p["stride"], padding=p["padding"],
                               bias=False).eval()
        x = torch.randn(1, p["C"], p["H"], p["W"])
        with torch.no_grad():
            frozen = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(conv)))
            assert torch.allclose(frozen(x), conv(x), rtol=1e-3, atol=1e-3)
        eager, packed = [], []
        for _ in range(args.rounds):
            eager.append(_time(conv, x))
            packed.append(_time(frozen, x))
        flops = 2 * p["C"] * p["K"] * p["kernel"] ** 2 * conv(x).shape[-1] * conv(x).shape[-2]
        e, f = statistics.median(eager), statistics.median(packed)
        print(f"{spec}: torch eager {e * 1e3:.3f} ms ({flops / e / 1e9:.0f} GFLOPS), weights prepacked "
              f"{f * 1e3:.3f} ms ({flops / f / 1e9:.0f} GFLOPS): eager / prepacked {e / f:.2f}x "
              f"(medians of {args.rounds} alternating rounds)", flush=True)


if __name__ == "__main__":
    main()
