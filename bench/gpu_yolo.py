"""YOLO-v1 conv layers on the CUDA device present: our measured search vs torch (cuDNN) vs TVM MetaSchedule at
the same trial budget, all in one run so the ratios share the device's state.

    python bench/gpu_yolo.py --layers C2,C4,C8,C13,C15 --trials 32 --explorers tl,q --json bench_gpu.json
    python bench/gpu_yolo.py --dtype float16 --trials 128 --no-metaschedule --json bench_gpu_fp16.json
    python bench/gpu_yolo.py --trials 128 --no-metaschedule --json fp32.json --resume  # the next call goes on

``--dtype float16`` (or ``bfloat16``) searches the tensor-core space (float32 accumulation) against cuDNN on
inputs of that type.

Each layer: the GPU target's one flow with each explorer named (the first is "ours" in the ratios; every candidate built
by the builder pool, checked against the reference and timed on the GPU in a worker), torch's conv2d timed
with CUDA events in strict FP32 (the arithmetic our kernels do) and with TF32 allowed (torch's default for
convolutions), cuDNN's algorithm search on; and MetaSchedule's ``tune_tir`` with the same trials, its best
module timed as our candidates are. The JSON is rewritten after every layer, so a run cut short keeps the
layers it finished. Refuses to run without a GPU: the roofline estimate is not a measurement.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_cpu.baselines import time_torch_cuda  # noqa: E402
from hetero_dse.hardware.gpus import present_gpu  # noqa: E402
from hetero_dse.targets.base import Search  # noqa: E402
from hetero_dse.targets.flow import explore  # noqa: E402
from hetero_dse.targets.gpu import GpuTarget  # noqa: E402
from hetero_dse.analysis import analyze  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402

from yolo_common import curve_recorder, geomean, layer_row, metaschedule, parse_args  # noqa: E402


def main() -> None:
    args = parse_args(__doc__, explorers="tl", resumable=True)

    gpu = present_gpu()
    if gpu is None:
        sys.exit("no CUDA device is present: this bench measures, and the roofline estimate is not a measurement")
    explorers = args.explorers.split(",")
    rows: list[dict] = []
    summary: dict = {}
    if args.resume and args.json and args.json.exists():  # a lease's calls are 10 minutes: go on where one stopped
        kept = json.loads(args.json.read_text())
        if (kept.get("device"), kept.get("trials"), kept.get("dtype", "float32")) != (gpu.name, args.trials,
                                                                                      args.dtype):
            sys.exit(f"{args.json} holds another device, trial count or dtype: --resume continues the same run")
        rows = kept["rows"]
    done = {r["layer"] for r in rows}

    def save() -> None:
        if args.json:
            args.json.write_text(json.dumps({"device": gpu.name, "target": gpu.target, "trials": args.trials,
                                             "dtype": args.dtype, "rows": rows, **summary}, indent=2))

    for layer in args.layers.split(","):
        if layer in done:
            print(f"{layer}: in {args.json} already", flush=True)
            continue
        op = get_builtin("conv2d").instantiate(shape=f"yolo:{layer}").with_dtype(args.dtype)
        flops = analyze(op).flops
        curves, runs = {}, {}
        for name in explorers:
            curves[name], note = curve_recorder(flops)
            runs[name] = explore(op, GpuTarget(trials=args.trials), name, Search(seed=args.seed), progress=note)
        # float32: cuDNN strict and with TF32; float16: cuDNN on float16 (its tensor cores) in both columns
        torch_s, tf32_s = time_torch_cuda(op), time_torch_cuda(op, tf32=True)
        ms_s, ms_wall = (None, None) if args.no_metaschedule else metaschedule(op, args.trials, gpu.target)
        row = layer_row(layer, flops, explorers, runs, curves, torch_s, ms_s, ms_wall)
        failures = row["failed"] = sum(not t.result.ok for t in runs[explorers[0]].tune.trials)
        row["torch_tf32_gflops"] = flops / tf32_s / 1e9
        row["vs_torch_tf32"] = row["ours_gflops"] / row["torch_tf32_gflops"]
        rows.append(row)
        save()
        print(f"{layer}: {explorers[0]} {row['ours_gflops']:.0f} GFLOPS in {row['ours_wall_s']:.0f} s "
              f"({failures} failed)"
              + "".join(f", {n} {row['final'][n]:.0f}" for n in explorers[1:])
              + f"; torch FP32 {row['torch_gflops']:.0f}, TF32 {row['torch_tf32_gflops']:.0f}"
              + (f"; MetaSchedule {row['ms_gflops']:.0f} in {ms_wall:.0f} s" if ms_s else "")
              + f"; {row['vs_torch']:.2f}x torch" + (f", {row['vs_ms']:.2f}x MetaSchedule" if ms_s else ""),
              flush=True)
    summary.update({"geomean_vs_torch": geomean(r["vs_torch"] for r in rows),
                    "geomean_vs_torch_tf32": geomean(r["vs_torch_tf32"] for r in rows),
                    "geomean_vs_ms": geomean(r["vs_ms"] for r in rows), "complete": True})
    save()
    print(json.dumps({k: v for k, v in summary.items() if k != "complete"}))


if __name__ == "__main__":
    main()
