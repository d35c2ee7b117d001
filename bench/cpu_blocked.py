"""Blocked weights on this CPU (issue 39, item 2): each layer searched twice with the same explorer, seed and
trials, once in the CPU space with the ``block`` knob (the packed weight's vectorised dimension n laid out as
[n / block, ..., block], ``gpu_cpu.main_block.weight_blocks``) and once without it (the space before the
knob); then both bests and torch's call re-timed in alternating rounds in this process, each output checked
against torch's.

    .venv/bin/python bench/cpu_blocked.py --layers all --trials 16 --json bench/data/cpu_blocked.json

A layer is one of ``LAYERS`` (YOLO-v1's and ResNet-18's linear layers, YOLO-v1's 1×1 layers and a 3×3 one,
ResNet-18's stride-2 3×3), with its network's epilogue. A linear layer's library figure is torch's call for the
operator (``addmm``, the plan's library call) and ``F.linear`` on the weight as the network holds it (eager).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpu_winograd import alternating_rounds, checked_errors  # noqa: E402

LEAKY = ("bias", "leaky_relu(0.1)")
CONV = dict(batch=1, stride=1, padding=0, dilation=1, groups=1, kernel=1)
LAYERS = {
    "Y-L16": ("gemm", dict(M=1, N=4096, K=50176), LEAKY),
    "Y-L17": ("gemm", dict(M=1, N=1470, K=4096), ("bias",)),
    "R-L16": ("gemm", dict(M=1, N=1000, K=512), ("bias",)),
    "Y-L1": ("conv2d", dict(CONV, C=3, K=64, H=448, W=448, kernel=7, stride=2, padding=3), LEAKY),
    "Y-L1-bare": ("conv2d", dict(CONV, C=3, K=64, H=448, W=448, kernel=7, stride=2, padding=3), ()),
    "Y-L14": ("conv2d", dict(CONV, C=1024, K=1024, H=14, W=14, kernel=3, stride=2, padding=1), LEAKY),
    "R-L1": ("conv2d", dict(CONV, C=3, K=64, H=224, W=224, kernel=7, stride=2, padding=3), ("bias", "relu")),
    "R-L13": ("conv2d", dict(CONV, C=512, K=512, H=7, W=7, kernel=3, padding=1), ("bias", "add", "relu")),
    "R-L15": ("conv2d", dict(CONV, C=512, K=512, H=7, W=7, kernel=3, padding=1), ("bias", "relu")),
    "Y-L5": ("conv2d", dict(CONV, C=256, K=256, H=56, W=56), LEAKY),
    "Y-L9": ("conv2d", dict(CONV, C=512, K=512, H=28, W=28), LEAKY),
    "Y-L11": ("conv2d", dict(CONV, C=1024, K=512, H=14, W=14), LEAKY),
    "Y-L8": ("conv2d", dict(CONV, C=256, K=512, H=28, W=28, kernel=3, padding=1), LEAKY),
    "R-L4": ("conv2d", dict(CONV, C=64, K=128, H=56, W=56, kernel=3, padding=1, stride=2), ("bias", "relu")),
}


def unblocked(space):
    """``space`` as it was before the knob: ``block`` fixed at 0 (a point then leaves it out)."""
    space.choices["block"] = (0,)
    space.cardinalities[space.knob_names.index("block")] = 1
    return space


def search(op, trials: int, seed: int, blocked: bool):
    from hetero_dse.analysis import analyze
    from hetero_dse.explore.settings import AUTO_MEASURED, make_explorer
    from hetero_dse.space.cpu import CpuSpace
    from hetero_dse.targets.cpu import tune_cpu

    space = CpuSpace(analyze(op))
    if not blocked:
        space = unblocked(space)
    result = tune_cpu(op, space, make_explorer(AUTO_MEASURED, space, seed), trials=trials)
    return result.best.point, result.wall_s


def measure(name: str, trials: int, rounds: int, seed: int) -> dict:
    import torch
    import tvm

    from gpu_cpu.baselines import torch_call
    from gpu_cpu.schedule import apply_cpu, build_cpu, pack_weights
    from hetero_dse.epilogue import fuse
    from hetero_dse.ops import get_builtin

    kind, params, steps = LAYERS[name]
    base = get_builtin(kind).instantiate(params)
    op = fuse(base, steps, (1,))  # the bias along the output channels: N of a gemm, K of a convolution
    inputs = op.random_inputs(seed)
    torch_inputs = [torch.from_numpy(a) for a in inputs]
    library = torch_call(op)
    want = library(dict(op.params), *torch_inputs).numpy()
    dev = tvm.cpu(0)
    out = tvm.runtime.tensor(np.zeros(want.shape, "float32"), dev)
    calls, searched, points = {}, {}, {}
    for label, blocked in (("blocked", True), ("unblocked", False)):
        point, searched[label] = search(op, trials, seed, blocked)
        points[label] = point.to_json()
        executable = build_cpu(apply_cpu(op, point))
        args = [tvm.runtime.tensor(np.ascontiguousarray(a), dev) for a in pack_weights(op, point, inputs)]
        calls[label] = lambda executable=executable, args=args: executable(*args, out)
    errors = checked_errors(name, calls, out, want)
    calls["torch"] = lambda: library(dict(op.params), *torch_inputs)
    if kind == "gemm":  # the eager network's call: the weight as nn.Linear holds it, N×K
        a, b, bias = torch_inputs[0], torch_inputs[1].t().contiguous(), torch_inputs[2]
        calls["torch_linear"] = lambda: torch.nn.functional.leaky_relu(torch.nn.functional.linear(a, b, bias), 0.1) \
            if "leaky_relu(0.1)" in steps else torch.nn.functional.linear(a, b, bias)
    seconds = alternating_rounds(calls, rounds, repeat=5 if kind == "gemm" else 15)
    row = {"layer": name, "operator": kind, "params": params, "epilogue": list(steps), "trials": trials,
           "search_s": searched, "points": points, "max_error": errors,
           "seconds": {label: float(np.median(v)) for label, v in seconds.items()}, "rounds_s": seconds,
           "over_torch": {label: float(np.median(np.array(seconds["torch"]) / np.array(seconds[label])))
                          for label in ("blocked", "unblocked")},
           "blocked_over_unblocked": float(np.median(np.array(seconds["unblocked"]) / np.array(seconds["blocked"])))}
    if "torch_linear" in seconds:
        linear = np.array(seconds["torch_linear"])
        row["over_torch_linear"] = {label: float(np.median(linear / np.array(seconds[label])))
                                    for label in ("blocked", "unblocked")}
    times = ", ".join(f"{label} {row['seconds'][label] * 1e3:.3f} ms" for label in calls)
    print(f"{name} {kind} {params}: {times}"
          + f"; blocked {row['over_torch']['blocked']:.2f}x torch (block={points['blocked'].get('block', 0)}), "
          f"unblocked {row['over_torch']['unblocked']:.2f}x, blocked/unblocked {row['blocked_over_unblocked']:.2f}x",
          flush=True)
    return row


def main() -> None:
    os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count()))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="all", help=f"comma-separated, of {', '.join(LAYERS)}; or all")
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    names = list(LAYERS) if args.layers == "all" else args.layers.split(",")
    rows = []
    for name in names:
        rows.append(measure(name, args.trials, args.rounds, args.seed))
        if args.json:  # after each layer: an interrupted run keeps what it measured
            args.json.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1) + "\n")
    ratios = [r["over_torch"]["blocked"] for r in rows]
    print(f"geometric mean over torch: blocked {np.exp(np.mean(np.log(ratios))):.2f}x, unblocked "
          f"{np.exp(np.mean(np.log([r['over_torch']['unblocked'] for r in rows]))):.2f}x")


if __name__ == "__main__":
    main()
