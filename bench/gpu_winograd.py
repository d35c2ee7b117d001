"""Winograd against direct convolution on a GPU's roofline (issue 40, items 2 and 3): each 3×3 stride-1 layer of
ResNet-18 and YOLO-v1 searched by ``explore --target gpu`` as a user runs it without a GPU (the roofline of the
named device, ``--budget`` estimates a search: direct convolution, and the batched product of F(2×2, 3×3) and
F(4×4, 3×3)), the algorithm it keeps, and each algorithm's estimate; then each Winograd product searched again
within seed 001's §5.3 domain (``Dataflow.winograd``, the domain a measured search uses) to show what it prunes.

    .venv/bin/python bench/gpu_winograd.py --layers resnet18,yolo_v1 --json bench/data/gpu_winograd.json

No GPU is used: every figure is the roofline model's (``cost_models/gpu_roofline.py``), never checked against a
device for Winograd; a layer is NAME=C-K-HW, or ``resnet18`` / ``yolo_v1`` for all of that network's layers.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models.gpu_roofline import estimate, transform_seconds  # noqa: E402
from gpu_cpu.winograd import algorithm_name, product_operator, winograd_shape  # noqa: E402
from gpu_cpu.winograd_gpu import transform_kernels, whole_estimate  # noqa: E402
from hetero_dse.analysis import analyze  # noqa: E402
from hetero_dse.evaluate.estimate import RooflineEvaluator  # noqa: E402
from hetero_dse.evaluate.measured import TrialLog, fastest  # noqa: E402
from hetero_dse.explore.loop import run_search  # noqa: E402
from hetero_dse.explore.settings import make_explorer  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402
from hetero_dse.space.gpu import Dataflow, GpuSpace  # noqa: E402
from hetero_dse.targets.base import Search  # noqa: E402
from hetero_dse.targets.flow import explore  # noqa: E402
from hetero_dse.targets.gpu import GpuTarget  # noqa: E402

from cpu_winograd import layers  # noqa: E402


def in_domain(op, m: int, target: GpuTarget, budget: int, seed: int) -> dict:
    """The product of F(m×m) searched within §5.3's domain by the same explorer and budget; the whole
    convolution's estimate at its best (its product's occupancy from ptxas's registers, as ``explore``'s)."""
    device = target.gpu
    product = product_operator(winograd_shape(op, m))
    space = GpuSpace(analyze(product), device, domain=True, dataflow=Dataflow.winograd(m))
    evaluator = RooflineEvaluator(product, space, device, estimate)
    log = TrialLog(evaluator, space, None)
    run_search(space, make_explorer("sa", space, seed, starts=32), log, budget=budget)
    best = fastest(log.trials)
    if best is None:
        return {"domain_active": space.domain, "seconds": None}
    whole = whole_estimate(device, op, m, estimate(space, best.point, target.registers(product, best.point)))
    return {"domain_active": space.domain, "space_size": space.size, "product_s": best.result.seconds,
            "seconds": whole.seconds, "point": best.point.to_json()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="resnet18,yolo_v1")
    parser.add_argument("--gpu", default="h100")
    parser.add_argument("--budget", type=int, default=4096, help="estimates a search (the GPU target's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for name, (c, k, hw, *groups) in layers(args.layers).items():
        if groups and groups[0] > 1:
            print(f"{name}: a convolution of {groups[0]} groups, which Winograd on the GPU does not take", flush=True)
            continue
        op = get_builtin("conv2d").instantiate(dict(C=c, K=k, H=hw, W=hw, kernel=3, stride=1, padding=1))
        target = GpuTarget(args.gpu)
        start = time.perf_counter()
        t = explore(op, target, "auto", Search(seed=args.seed, budget=args.budget))
        wall = time.perf_counter() - start
        by = {a["algorithm"]: a for a in t.algorithms}
        direct = by["direct"]["seconds"]
        row = {"layer": name, "C": c, "K": k, "HW": hw, "chosen": t.algorithm, "wall_s": wall,
               "direct_s": direct, "flops": t.flops}
        for m in (2, 4):
            label = algorithm_name(m)
            if label not in by:
                continue
            row[f"F{m}_s"] = by[label]["seconds"]
            row[f"F{m}_product_s"] = by[label]["searched_seconds"]
            row[f"F{m}_over_direct"] = direct / by[label]["seconds"]
            row[f"F{m}_domain"] = in_domain(op, m, target, args.budget, args.seed)
            searched = next(x for x in t.searched if x.alternative.label == label)
            row[f"F{m}_point"] = next(x.point for x in searched.trials if x.result.seconds == by[label][
                "searched_seconds"]).to_json()
            row[f"F{m}_transforms_s"] = sum(transform_seconds(target.gpu, k).seconds
                                            for k in transform_kernels(op, m).values())
        best = min(by.values(), key=lambda a: a["seconds"])
        row["best_over_direct"] = direct / best["seconds"]
        row["direct_tflops"] = t.flops / direct / 1e12
        row["direct_point"] = t.trials and next(x.point for x in t.trials if x.result.seconds == by["direct"][
            "searched_seconds"]).to_json()
        rows.append(row)
        print(f"{name:6} {c:5}->{k:<5} {hw:4}  direct {direct * 1e6:7.1f} us  "
              + "  ".join(f"F{m} {row[f'F{m}_s'] * 1e6:7.1f} us ({row[f'F{m}_over_direct']:.2f}x; "
                          f"transforms {row[f'F{m}_transforms_s'] * 1e6:5.1f} us; "
                          f"domain {row[f'F{m}_domain']['seconds'] * 1e6:7.1f} us)"
                          for m in (2, 4) if f"F{m}_s" in row)
              + f"  chosen {t.algorithm}  [{wall:.0f} s]", flush=True)
        if args.json:
            args.json.write_text(json.dumps({"command": " ".join(sys.argv), "gpu": args.gpu, "rows": rows},
                                            indent=1) + "\n")
    ratios = [r["best_over_direct"] for r in rows]
    print(f"geometric mean, best of the three over direct: {math.exp(np.mean(np.log(ratios))):.2f}x "
          f"(chosen Winograd on {sum(r['chosen'] != 'direct' for r in rows)} of {len(rows)})")


if __name__ == "__main__":
    main()
