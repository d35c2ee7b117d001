"""Winograd against direct convolution on this CPU (issue 40, item 3): each 3×3 stride-1 layer of ResNet-18 and
YOLO-v1 searched as direct convolution (the CPU space, ``--trials`` measured) and as F(2×2, 3×3) and F(4×4,
3×3) (``gpu_cpu/winograd.py``: the batched product searched by the same space with the same trials, the
transforms around it, all in one function), then the three versions and torch's convolution (oneDNN) re-timed
in alternating rounds in this process, each output checked against torch's.

    .venv/bin/python bench/cpu_winograd.py --layers resnet18 --trials 16 --json bench/data/cpu_winograd.json
    .venv/bin/python bench/cpu_winograd.py --layers R2=64-64-56,C8=256-512-28 --tiles 4
    .venv/bin/python bench/cpu_winograd.py --layers mobilenet_v2,G=128-128-28-32

A layer is NAME=C-K-HW[-GROUPS] (GROUPS = C = K: depthwise), or ``resnet18`` / ``yolo_v1`` / ``mobilenet_v2``
for all of that network's 3×3 stride-1 layers (MobileNet-V2's: its depthwise ones).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NETWORKS = {
    "resnet18": {"R-L2": (64, 64, 56), "R-L7": (128, 128, 28), "R-L11": (256, 256, 14), "R-L15": (512, 512, 7)},
    "yolo_v1": {"Y-C2": (64, 192, 112), "Y-C4": (128, 256, 56), "Y-C6": (256, 512, 56), "Y-C8": (256, 512, 28),
                "Y-C10": (512, 1024, 28), "Y-C12": (512, 1024, 14), "Y-C13": (1024, 1024, 14),
                "Y-C15": (1024, 1024, 7)},
    "mobilenet_v2": {f"M-D{c}": (c, c, hw, c) for c, hw in ((32, 112), (144, 56), (192, 28), (384, 14), (576, 14),
                                                            (960, 7))},
}


def layers(spec: str) -> dict[str, tuple[int, ...]]:
    """The layers ``spec`` names, in its order: a network's name (all its layers), one of their layers' names
    (R-L7, Y-C13, M-D144), or NAME=C-K-HW[-groups]."""
    named = {name: shape for network in NETWORKS.values() for name, shape in network.items()}
    out: dict[str, tuple[int, ...]] = {}
    for item in spec.split(","):
        if item in NETWORKS:
            out.update(NETWORKS[item])
        elif item in named:
            out[item] = named[item]
        else:
            name, shape = item.split("=")
            out[name] = tuple(int(v) for v in shape.split("-"))
    return out


def convolution(c: int, k: int, hw: int, groups: int = 1):
    """The layer's operator: a conv2d (its output (1, G, K / G, H, W) where grouped), or a depthwise one."""
    from hetero_dse.ops import get_builtin

    common = dict(C=c, H=hw, W=hw, kernel=3, stride=1, padding=1)
    if groups == c == k:
        return get_builtin("depthwise_conv2d").instantiate(dict(common, multiplier=1))
    return get_builtin("conv2d").instantiate(dict(common, K=k, groups=groups))


def search(op, trials: int, seed: int):
    from hetero_dse.analysis import analyze
    from hetero_dse.explore.settings import AUTO_MEASURED, make_explorer
    from hetero_dse.space.cpu import CpuSpace
    from hetero_dse.targets.cpu import tune_cpu

    space = CpuSpace(analyze(op))
    explorer = make_explorer(AUTO_MEASURED, space, seed)
    result = tune_cpu(op, space, explorer, trials=trials)
    return result.best.point, result.wall_s


def median_time(call, repeat: int = 15) -> float:
    call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def alternating_rounds(calls: dict, rounds: int, repeat: int = 15) -> dict[str, list[float]]:
    """Each call's ``median_time`` once a round, ``rounds`` rounds, the calls rotated by one a round so none is
    always timed first: per label, its rounds' seconds."""
    seconds: dict[str, list[float]] = {label: [] for label in calls}
    for r in range(rounds):
        for label in list(calls)[r % len(calls):] + list(calls)[:r % len(calls)]:
            seconds[label].append(median_time(calls[label], repeat))
    return seconds


def checked_errors(name: str, calls: dict, out, want: np.ndarray) -> dict[str, float]:
    """Each call's largest error into ``out`` against ``want``, relative to its largest magnitude; the bench
    ends in one sentence where one is wrong (an output it leaves unwritten included: ``out`` starts as NaN)."""
    errors = {}
    for label, call in calls.items():
        out.copyfrom(np.full(want.shape, np.nan, "float32"))
        call()
        errors[label] = float(np.abs(out.numpy() - want).max() / np.abs(want).max())
        if not errors[label] < 1e-3:  # NaN included
            sys.exit(f"{name}: {label} computes a wrong result (error {errors[label]:.1e} of the output's magnitude)")
    return errors


def measure(name: str, shape: tuple[int, ...], tiles: list[int], trials: int, rounds: int, seed: int) -> dict:
    import torch
    import tvm

    from gpu_cpu.schedule import apply_cpu, build_cpu, pack_weights
    from gpu_cpu.winograd import WinogradKernel, product_operator, winograd_shape

    c, k, hw, groups = (*shape, 1)[:4]
    op = convolution(c, k, hw, groups)
    inputs = op.random_inputs(seed)
    want = torch.nn.functional.conv2d(torch.from_numpy(inputs[0]), torch.from_numpy(inputs[1]), padding=1,
                                      groups=groups).numpy().reshape([int(d) for d in op.output.shape])
    dev = tvm.cpu(0)
    out = tvm.runtime.tensor(np.zeros(want.shape, "float32"), dev)
    x = tvm.runtime.tensor(inputs[0], dev)
    calls, searched = {}, {}

    point, searched["direct"] = search(op, trials, seed)
    direct = build_cpu(apply_cpu(op, point))
    w = tvm.runtime.tensor(np.ascontiguousarray(pack_weights(op, point, inputs)[1]), dev)
    calls["direct"] = lambda: direct(x, w, out)
    for m in tiles:
        product_point, searched[f"F{m}"] = search(product_operator(winograd_shape(op, m)), trials, seed)
        kernel = WinogradKernel(op, m, product_point)
        u = tvm.runtime.tensor(kernel.weights(inputs[1]), dev)
        calls[f"F{m}"] = lambda kernel=kernel, u=u: kernel(x, u, out)
    errors = checked_errors(name, calls, out, want)
    xt, wt = torch.from_numpy(inputs[0]), torch.from_numpy(inputs[1])
    calls["torch"] = lambda: torch.nn.functional.conv2d(xt, wt, padding=1, groups=groups)
    seconds = alternating_rounds(calls, rounds)
    flops = 2 * c * k // groups * 9 * hw * hw
    row = {"layer": name, "C": c, "K": k, "HW": hw, "groups": groups, "trials": trials, "search_s": searched,
           "max_error": errors,
           "seconds": {label: float(np.median(v)) for label, v in seconds.items()},
           "rounds_s": seconds,
           # per round, torch's time over ours: the median of the rounds' ratios
           "over_torch": {label: float(np.median(np.array(seconds["torch"]) / np.array(v)))
                          for label, v in seconds.items() if label != "torch"}}
    row["over_direct"] = {label: float(np.median(np.array(seconds["direct"]) / np.array(seconds[label])))
                          for label in calls if label.startswith("F")}
    best = min((label for label in calls if label != "torch"), key=lambda label: row["seconds"][label])
    row["chosen"] = best
    print(f"{name} {c}->{k} {hw}x{hw}" + (f" in {groups} groups" if groups > 1 else "") + ": " + ", ".join(
        f"{label} {row['seconds'][label] * 1e3:.3f} ms ({flops / row['seconds'][label] / 1e9:.0f} GFLOPS"
        + (f", {row['over_torch'][label]:.2f}x torch, err {errors[label]:.1e}" if label != "torch" else "") + ")"
        for label in calls) + f"; fastest of ours {best}", flush=True)
    return row


def main() -> None:
    os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count()))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="resnet18,yolo_v1")
    parser.add_argument("--tiles", default="2,4", help="Winograd output tiles m of F(m×m, 3×3)")
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    tiles = [int(m) for m in args.tiles.split(",")]
    rows = []
    for name, shape in layers(args.layers).items():
        rows.append(measure(name, shape, tiles, args.trials, args.rounds, args.seed))
        if args.json:  # after each layer: an interrupted run keeps what it measured
            args.json.write_text(json.dumps(rows, indent=2))
    ratios = [max(r["over_torch"].values()) for r in rows]
    direct = [r["over_torch"]["direct"] for r in rows]
    print(f"geometric mean over torch: direct {np.exp(np.mean(np.log(direct))):.2f}x, the faster of direct and "
          f"Winograd {np.exp(np.mean(np.log(ratios))):.2f}x over {len(rows)} layers")


if __name__ == "__main__":
    main()
