"""Given CPU points of one layer against torch, in alternating rounds in this process, each output checked: the
space's default point and variants of it (knobs replaced by JSON), for the figures a search does not give.

    .venv/bin/python bench/cpu_points.py Y-L16 '{"block": 0}' '{"split.j": [32, 1, 1, 128]}'
    .venv/bin/python bench/cpu_points.py 1x1:256-256-56 '{"split.k": [8, 1, 1, 32], "order": 0}'
    .venv/bin/python bench/cpu_points.py 3x3:256-512-28 --winograd 4 '{"order": 1, "unroll": 64}'
    .venv/bin/python bench/cpu_points.py resnet18:L6 '{"split.i": [1, 1, 28, 1], "split.j": [1, 1, 4, 7]}'

A layer is one of ``bench/cpu_blocked.py``'s ``LAYERS`` (with its network's epilogue), a built-in network's
distinct layer as ``explore --model`` names it (``resnet18:L6``, captured from the zoo), or ``1x1:C-K-HW`` /
``3x3:C-K-HW`` (a pointwise or 3×3 stride-1 convolution with bias and leaky ReLU). ``--winograd M``: the layer
run by F(M×M, 3×3), its points the product's (``gpu_cpu/winograd.py``), the default its space's default.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpu_blocked import CONV, LAYERS, LEAKY  # noqa: E402
from cpu_winograd import alternating_rounds, checked_errors  # noqa: E402


def layer(name: str):
    from hetero_dse.epilogue import fuse
    from hetero_dse.ops import get_builtin

    network, _, index = name.partition(":L")
    if index.isdigit():
        from hetero_dse.model.capture import capture
        from hetero_dse.model.zoo import build

        operators = capture(*build(network), network, profile=False).operators()
        if not 1 <= int(index) <= len(operators):
            sys.exit(f"{name}: {network} has layers L1 to L{len(operators)}")
        return operators[int(index) - 1]
    if name[:4] in ("1x1:", "3x3:"):
        c, k, hw = (int(v) for v in name[4:].split("-"))
        kernel = int(name[0])
        kind, params, steps = "conv2d", dict(CONV, C=c, K=k, H=hw, W=hw, kernel=kernel, padding=kernel // 2), LEAKY
    else:
        kind, params, steps = LAYERS[name]
    return fuse(get_builtin(kind).instantiate(params), steps, (1,))


def main() -> None:
    os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count()))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("layer")
    parser.add_argument("variants", nargs="*", help="JSON objects of knobs replacing the default point's")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--winograd", type=int, choices=(2, 4, 6), help="run the layer by F(M×M, 3×3)")
    args = parser.parse_intermixed_args()  # the layer, its variants and --winograd in any order
    import torch
    import tvm

    from hetero_dse.hardware.allocator import serve_from_heap

    serve_from_heap()  # torch's outputs from the heap, as the tool times it (hetero_dse/hardware/allocator.py)
    from gpu_cpu.baselines import torch_call
    from gpu_cpu.schedule import apply_cpu, build_cpu, pack_weights
    from hetero_dse.analysis import analyze
    from gpu_cpu.winograd import product_operator, winograd_point, winograd_shape
    from hetero_dse.space.cpu import CpuSpace
    from hetero_dse.space.point import Point

    op = layer(args.layer)
    # a Winograd point is the product's point and the tile: the product's space judges and completes it
    space = CpuSpace(analyze(product_operator(winograd_shape(op, args.winograd)) if args.winograd else op))
    default = space.default_point()
    if default is None:
        sys.exit(f"{args.layer}: the space has no default point")
    whole = (lambda p: winograd_point(args.winograd, p)) if args.winograd else (lambda p: p)
    points = {"default": default}
    for i, spec in enumerate(args.variants):
        points[f"variant {i + 1}"] = Point({**default.to_json(), **json.loads(spec)})
    inputs = op.random_inputs(1)
    torch_inputs = [torch.from_numpy(a) for a in inputs]
    library = torch_call(op)
    want = library(dict(op.params), *torch_inputs).numpy()
    dev = tvm.cpu(0)
    out = tvm.runtime.tensor(np.zeros(want.shape, "float32"), dev)
    calls = {}
    for label, point in points.items():
        print(f"{label}: {json.dumps(point.to_json())}; pruned by: {space.violations(point) or 'nothing'}")
        executable = build_cpu(apply_cpu(op, whole(point)))
        given = [tvm.runtime.tensor(np.ascontiguousarray(a), dev) for a in pack_weights(op, whole(point), inputs)]
        calls[label] = lambda executable=executable, given=given: executable(*given, out)
    checked_errors(args.layer, calls, out, want)
    calls["torch"] = lambda: library(dict(op.params), *torch_inputs)
    against_torch(calls, args.rounds)


def against_torch(calls: dict, rounds: int) -> dict[str, list[float]]:
    """``calls`` (one of them "torch") timed in alternating rounds, each printed with its median over the
    rounds and the median of the rounds' ratios to torch's; per label, its rounds' seconds."""
    seconds = alternating_rounds(calls, rounds, repeat=10)
    theirs = np.array(seconds["torch"])
    for label, v in seconds.items():
        print(f"{label:>10}: {np.median(v) * 1e3:.3f} ms (rounds {min(v) * 1e3:.3f}-{max(v) * 1e3:.3f}), "
              f"{np.median(theirs / np.array(v)):.2f}x torch", flush=True)
    return seconds


if __name__ == "__main__":
    main()
