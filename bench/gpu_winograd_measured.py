"""Winograd against direct convolution and cuDNN, measured on the CUDA device present (issue 40, item 3).

Each 3×3 stride-1 layer is searched as ``explore --target gpu`` searches it where a GPU measures: direct
convolution, and the batched product of F(2×2, 3×3) and of F(4×4, 3×3) in seed 001's §5.3 domain, ``--trials``
measured trials each (every candidate built, checked against the reference and timed on the GPU). Then each
algorithm's best is timed again as the whole convolution, one right after the other (Winograd: its three kernels,
the weights transformed ahead as a network's are), and the fastest kept (``GpuTarget._choose``). cuDNN is timed in
the same run through torch with CUDA events, in strict FP32 (the arithmetic ours does) and with TF32.

    python3 bench/gpu_winograd_measured.py --layers R-L15,R-L11,R-L7,R-L2 --trials 32 --json out.json
    python3 bench/gpu_winograd_measured.py --layers yolo_v1 --trials 32 --json out.json --resume

A layer is a name of ``bench/cpu_winograd.py``'s two networks (R-L2 … R-L15, Y-C2 … Y-C15), a network's name
for all its layers, or NAME=C-K-HW. The JSON is rewritten after every layer, so a run cut short keeps the layers
it finished; a layer whose search fails is recorded with its error and the run goes on. Refuses to run without a
GPU: the roofline's estimates are ``bench/gpu_winograd.py``'s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_cpu.baselines import time_torch_cuda  # noqa: E402
from gpu_cpu.winograd import algorithm_name  # noqa: E402
from hetero_dse.evaluate.measured import fastest  # noqa: E402
from hetero_dse.hardware.gpus import present_gpu  # noqa: E402
from hetero_dse.targets.base import Search  # noqa: E402
from hetero_dse.targets.flow import explore  # noqa: E402
from hetero_dse.targets.gpu import GpuTarget  # noqa: E402

from cpu_winograd import convolution, layers  # noqa: E402
from yolo_common import ResumableRun, geomean, us  # noqa: E402


def layer_row(name: str, shape: tuple[int, ...], trials: int, seed: int) -> dict:
    """One layer searched with each algorithm, timed as the convolution, against cuDNN."""
    c, k, hw = shape[:3]
    op = convolution(c, k, hw)
    start = time.perf_counter()
    t = explore(op, GpuTarget(trials=trials, algorithm="auto"), "tl", Search(seed=seed))
    wall = time.perf_counter() - start
    row: dict = {"layer": name, "C": c, "K": k, "HW": hw, "flops": t.flops, "wall_s": wall,
                 "chosen": t.algorithm, "failed": {"direct": sum(not x.result.ok for x in t.trials)}}
    for s in t.searched:
        row["failed"][s.alternative.label] = sum(not x.result.ok for x in s.trials)
        if s.why:
            row.setdefault("not_searched", {})[s.alternative.label] = s.why
    for a in t.algorithms:
        key = a["algorithm"]
        row[key] = {"seconds": a["seconds"], "gflops": t.flops / a["seconds"] / 1e9 if a["seconds"] else None,
                    "searched_seconds": a["searched_seconds"], "searched": a["searched"], "error": a["error"],
                    "unstable": a["unstable"], "chosen": a["chosen"]}
    bests = {x.alternative.label: fastest(x.trials) for x in t.searched}
    row["points"] = {label: best.point.to_json() for label, best in bests.items() if best is not None}
    if (direct := fastest(t.trials)) is not None:
        row["points"]["direct"] = direct.point.to_json()
    row["cudnn_fp32_s"] = t.library.seconds if t.library is not None else time_torch_cuda(op)
    row["cudnn_tf32_s"] = time_torch_cuda(op, tf32=True)
    timed = {a["algorithm"]: a["seconds"] for a in t.algorithms if a["seconds"]}
    if not timed:
        return row
    best = min(timed.values())
    if "direct" in timed:
        row["best_over_direct"] = timed["direct"] / best
    if row["cudnn_fp32_s"]:
        row["best_over_cudnn_fp32"] = row["cudnn_fp32_s"] / best
        row["best_over_cudnn_tf32"] = (row["cudnn_tf32_s"] or float("nan")) / best
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="R-L15,R-L11,R-L7,R-L2,Y-C13,Y-C15,Y-C8,Y-C4")
    parser.add_argument("--trials", type=int, default=32, help="measured trials for each algorithm's search")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--resume", action="store_true", help="keep the layers --json holds; run the rest")
    args = parser.parse_args()
    gpu = present_gpu()
    if gpu is None:
        sys.exit("no CUDA device is present: this bench measures; bench/gpu_winograd.py gives the roofline's figures")
    run = ResumableRun(args.json, args.resume, {"device": gpu.name, "trials": args.trials}, "device or trial count",
                       "layer")
    for name, shape in layers(args.layers).items():
        if name in run.done:
            continue
        if len(shape) > 3 and shape[3] > 1:  # as bench/gpu_winograd.py: the GPU's Winograd takes one group
            print(f"{name}: a convolution of {shape[3]} groups, which Winograd on the GPU does not take", flush=True)
            continue
        row = run.measure(name, lambda: layer_row(name, shape, args.trials, args.seed))  # noqa: B023 - called now
        if row is None:
            continue
        print(f"{name:6} {row['C']:5}->{row['K']:<5} {row['HW']:4} "
              + "  ".join(f"{a} {us(row[a]['seconds'])}" for a in ("direct", *map(algorithm_name, (2, 4))) if a in row)
              + f"  cuDNN fp32 {us(row['cudnn_fp32_s'])}, tf32 {us(row['cudnn_tf32_s'])}; chosen {row['chosen']}, "
              + f"{row.get('best_over_direct', 0):.2f}x direct, {row.get('best_over_cudnn_fp32', 0):.2f}x cuDNN fp32"
              + f"; failed trials {row['failed']} [{row['wall_s']:.0f} s]", flush=True)
    ok = [r for r in run.rows if "error" not in r]
    run.finish(geomean_best_over_direct=geomean(r.get("best_over_direct") for r in ok),
               geomean_best_over_cudnn_fp32=geomean(r.get("best_over_cudnn_fp32") for r in ok))
    summary = run.summary
    print(json.dumps({k: v for k, v in summary.items() if k != "complete"}))


if __name__ == "__main__":
    main()
