"""Each planned layer's time inside the executed network against its time alone, in one process: where a kernel
that wins alone loses once it runs between the others (its weights no longer in cache).

    .venv/bin/python bench/network_layers.py resnet18 OUT [--call hetero_dse|library] [--pool torch|tvm]

OUT is an ``explore --model NAME --target cpu`` output directory (its plan.json and report.json). ``--call``
forces every layer to our kernel or to the library's call; without it the plan's calls run. Each layer is timed
in 20 forward passes of the network (median), then 20 times alone on the input it saw there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    import torch

    from gpu_cpu.network import PlannedNetwork, _Layer
    from hetero_dse.model.capture import capture
    from hetero_dse.model.zoo import build

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("out", type=Path)
    parser.add_argument("--call", choices=("hetero_dse", "library"), default=None)
    parser.add_argument("--pool", choices=("torch", "tvm"), default="torch")
    args = parser.parse_args()
    model, x = build(args.model)
    graph = capture(model, x, args.model, profile=False)
    (plan,) = [d for d in json.loads((args.out / "plan.json").read_text())["devices"] if d["kind"] == "cpu"]
    if args.call:
        plan = {**plan, "layers": [{**e, "call": args.call, "module": e["our_module"] if args.call == "hetero_dse"
                                    else None} for e in plan["layers"]]}
    net = PlannedNetwork(graph, plan, args.out, pool=args.pool)
    inside: dict[str, list[float]] = {}
    seen: dict[str, tuple] = {}
    for name, layer in net.module.named_modules():
        if isinstance(layer, _Layer):
            def timed(*a, _run=layer.forward, _name=name):
                start = time.perf_counter()
                out = _run(*a)
                inside.setdefault(_name, []).append(time.perf_counter() - start)
                seen.setdefault(_name, a)
                return out

            layer.forward = timed
    torch.set_num_threads(2)
    with torch.no_grad():
        for _ in range(3):
            net(x)
        inside.clear()
        start = time.perf_counter()
        for _ in range(20):
            net(x)
        network = (time.perf_counter() - start) / 20
        total_in = total_alone = 0.0
        for name, layer in net.module.named_modules():
            if not isinstance(layer, _Layer):
                continue
            run = layer.forward.__kwdefaults__["_run"]
            alone = []
            for _ in range(20):
                start = time.perf_counter()
                run(*seen[name])
                alone.append(time.perf_counter() - start)
            mine, by_itself = statistics.median(inside[name]), statistics.median(alone)
            total_in, total_alone = total_in + mine, total_alone + by_itself
            print(f"{layer.label:>16} {'ours' if layer.ours else 'library':8} inside {mine * 1e3:7.3f} ms  alone "
                  f"{by_itself * 1e3:7.3f} ms  {mine / by_itself:.2f}x")
    print(f"network {network * 1e3:.2f} ms; its layers inside {total_in * 1e3:.2f} ms, "
          f"alone {total_alone * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
