"""Back-to-back GEMM fusion measured on the CUDA device present: for each pair, its two layers searched as
``explore --target gpu`` searches where a GPU measures (``--trials`` measured trials each, every candidate built,
checked and timed in a worker), against the fused kernel's ``--fused`` best-estimated points, each built, checked
against the pair's reference and timed as the candidates are (``gpu_cpu/b2b_measure.py``); cuBLAS/cuDNN through
torch for the two layers, in strict FP32 (the arithmetic ours does) and with TF32.

    python3 bench/gpu_b2b_measured.py --trials 32 --fused 32 --json out.json
    python3 bench/gpu_b2b_measured.py --pairs "1x1 pair 56x56 64-64-64" --json out.json --resume

The pairs are ``bench/gpu_b2b.py``'s (its roofline figures beside these). Per pair: the layers' measured best
(their sum: the unfused pair), the fused kernel's measured best and the point the roofline ranks first, measured
too (where that point comes in the measured order says whether the estimate orders the template's points).
The JSON is rewritten after every pair, so a run cut short keeps the pairs it finished. Refuses to run without
a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_b2b import PAIRS  # noqa: E402
from gpu_cpu.b2b_measure import fastest_fused, measure_fused  # noqa: E402
from gpu_cpu.baselines import time_torch_cuda  # noqa: E402
from hetero_dse.evaluate.measured import fastest  # noqa: E402
from hetero_dse.hardware.gpus import present_gpu  # noqa: E402
from hetero_dse.targets.base import Search  # noqa: E402
from hetero_dse.targets.flow import explore  # noqa: E402
from hetero_dse.targets.gpu import GpuTarget  # noqa: E402

from yolo_common import ResumableRun, geomean, us  # noqa: E402

#: the pairs measured unless named: every pair the fused template has a point for but the transformer MLP with
#: a 3072-wide hidden layer, whose rows of T take 12 KB each (the roofline: 24x slower fused)
DEFAULT = ("1x1 pair 56x56 64-64-64", "1x1 pair 14x14 256-64-256", "MobileNet-V2 blocks 0-1 112x112 32-16-96",
           "MobileNet-V2 blocks 2-3 56x56 144-24-144", "MLP 4096 tokens 768-64-768")


def pair_row(name: str, trials: int, fused: int, seed: int, gpu) -> dict:
    pair = PAIRS[name]
    row: dict = {"pair": name, "M": pair.m, "K": pair.k, "N0": pair.n0, "N1": pair.n1, "flops": pair.flops,
                 "first": list(pair.first), "second": list(pair.second), "layers": []}
    for op in pair.unfused():
        start = time.perf_counter()
        t = explore(op, GpuTarget(trials=trials), "tl", Search(seed=seed))
        best = fastest(t.trials)
        row["layers"].append({"layer": op.shape_name, "seconds": t.best_seconds, "wall_s": time.perf_counter() - start,
                              "point": best.point.to_json() if best else None,
                              "failed": sum(not x.result.ok for x in t.trials),
                              "torch_fp32_s": t.library.seconds if t.library is not None else time_torch_cuda(op),
                              "torch_tf32_s": time_torch_cuda(op, tf32=True)})
    start = time.perf_counter()
    measured = measure_fused(pair, gpu, fused)
    row["fused_wall_s"] = time.perf_counter() - start
    row["fused_trials"] = [t.to_json() for t in measured]
    seconds = [layer["seconds"] for layer in row["layers"]]
    row["unfused_s"] = sum(seconds) if all(seconds) else None
    torch_fp32 = [layer["torch_fp32_s"] for layer in row["layers"]]
    row["torch_fp32_s"] = sum(torch_fp32) if all(torch_fp32) else None
    torch_tf32 = [layer["torch_tf32_s"] for layer in row["layers"]]
    row["torch_tf32_s"] = sum(torch_tf32) if all(torch_tf32) else None
    best = fastest_fused(measured)
    if best is None:
        row["fused_s"] = None
        return row
    row["fused_s"], row["fused_point"], row["fused_estimate_s"] = best.seconds, dict(best.point), best.estimate_s
    first = measured[0]  # the roofline's first choice
    order = sorted(t.seconds for t in measured if t.seconds is not None)
    row["estimate_first"] = {**first.to_json(),
                             "measured_rank": 1 + order.index(first.seconds) if first.seconds else None}
    if row["unfused_s"]:
        row["fused_speedup"] = row["unfused_s"] / best.seconds
    if row["torch_fp32_s"]:
        row["best_over_torch_fp32"] = row["torch_fp32_s"] / min(best.seconds, row["unfused_s"] or best.seconds)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", default=",".join(DEFAULT), help="names of bench/gpu_b2b.py's pairs, by commas")
    parser.add_argument("--trials", type=int, default=32, help="measured trials for each layer's search")
    parser.add_argument("--fused", type=int, default=32, help="the fused template's points measured, best first")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--resume", action="store_true", help="keep the pairs --json holds; run the rest")
    args = parser.parse_args()
    names = [n.strip() for n in args.pairs.split(",") if n.strip()]
    if unknown := [n for n in names if n not in PAIRS]:
        sys.exit(f"no pair named {unknown[0]!r}: bench/gpu_b2b.py has {', '.join(PAIRS)}")
    gpu = present_gpu()
    if gpu is None:
        sys.exit("no CUDA device is present: this bench measures; bench/gpu_b2b.py gives the roofline's figures")
    run = ResumableRun(args.json, args.resume, {"device": gpu.name, "trials": args.trials, "fused": args.fused},
                       "device or trial count", "pair")
    for name in names:
        if name in run.done:
            continue
        row = run.measure(name, lambda: pair_row(name, args.trials, args.fused, args.seed, gpu))  # noqa: B023
        if row is None:
            continue
        first = row.get("estimate_first") or {}
        failed = sum(t["seconds"] is None for t in row["fused_trials"])
        print(f"{name}: layers {' + '.join(us(x['seconds']) for x in row['layers'])} = {us(row['unfused_s'])}; "
              f"fused {us(row['fused_s'])} at {row.get('fused_point')} ({row.get('fused_speedup', 0):.2f}x the "
              f"layers; estimate's first {us(first.get('seconds'))}, measured rank {first.get('measured_rank')}, "
              f"{failed} of {len(row['fused_trials'])} points failed); torch fp32 {us(row['torch_fp32_s'])}, tf32 "
              f"{us(row['torch_tf32_s'])} [{sum(x['wall_s'] for x in row['layers']) + row['fused_wall_s']:.0f} s]",
              flush=True)
    run.finish(geomean_fused_speedup=geomean(r.get("fused_speedup") for r in run.rows if "error" not in r))
    summary = run.summary
    print(json.dumps({k: v for k, v in summary.items() if k != "complete"}))


if __name__ == "__main__":
    main()
