"""The GPU roofline against the H100: each measured best point of a recorded run, estimated by today's model.

    python bench/gpu_roofline_vs_measured.py bench/data/gpu_yolo_h100.json bench/data/gpu_yolo_h100_issue22.json \
        --ptxas --json bench/data/gpu_roofline_vs_h100.json

Needs no GPU: the measured figures are the runs' own (``bench/gpu_yolo.py`` on a lent H100), and the estimate is
what ``--target gpu`` prints on a machine without one. The ratio says how far to trust that estimate: above 1 it
promises more than the device gave. ``--ptxas``: each point's kernel is also generated and assembled by ptxas, and
estimated again with the registers ptxas gives a thread, as the report's row of a written kernel is (the search
ranks with the model's count).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models.gpu_roofline import estimate, estimate_tensor_cores  # noqa: E402
from hetero_dse.analysis import analyze  # noqa: E402
from hetero_dse.hardware.gpus import get_device  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402
from hetero_dse.space.gpu import GpuSpace  # noqa: E402
from hetero_dse.space.point import Point  # noqa: E402
from hetero_dse.space.tensorcore import BY_INSTRUCTION, TensorCoreSpace  # noqa: E402


def measured_rows(path: Path) -> list[dict]:
    """Every (layer, trials, best point, GFLOPS) a recorded run holds, with its file."""
    data = json.loads(path.read_text())
    runs = data.get("runs") or [data]
    return [{**row, "file": path.name, "run_trials": run.get("trials")} for run in runs for row in run["rows"]]


def compare(row: dict, device_name: str, ptxas: bool = False) -> dict:
    knobs = {k: tuple(v) if isinstance(v, list) else v for k, v in row["best_knobs"].items()}
    tensor_cores = "mma" in knobs
    dtype = BY_INSTRUCTION[knobs["mma"]].name if tensor_cores else "float32"
    op = get_builtin("conv2d").instantiate(shape=f"yolo:{row['layer']}").with_dtype(dtype)
    analysis, device = analyze(op), get_device(device_name)
    if tensor_cores:
        knobs.setdefault("split_k", 1)  # recorded before split-K was a knob
        space, roofline = TensorCoreSpace(analysis, device), estimate_tensor_cores
    else:
        space, roofline = GpuSpace(analysis, device), estimate
    point = Point(knobs)
    figures = roofline(space, point)
    estimated_gflops = analysis.flops / figures.seconds / 1e9
    out = {"file": row["file"], "layer": row["layer"], "dtype": dtype, "trials": row.get("trials"),
           "measured_gflops": row["ours_gflops"], "estimated_gflops": estimated_gflops,
           "estimate_over_measured": estimated_gflops / row["ours_gflops"], "bound": figures.bound,
           "model_registers": space.limits(point)["registers"]}
    if ptxas:
        from gpu_cpu.cuda_usage import ptxas_usage
        from gpu_cpu.schedule import apply_gpu, build_cuda

        _, source = build_cuda(apply_gpu(op, point), device, compile_here=False)
        usage = ptxas_usage(source, device.arch)
        if usage is not None:
            with_ptxas = roofline(space, point, usage["registers"])
            out.update(ptxas_registers=usage["registers"], ptxas_spill_bytes=usage["spill_bytes"],
                       estimate_over_measured_ptxas=analysis.flops / with_ptxas.seconds / 1e9 / row["ours_gflops"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", help="JSON files written by bench/gpu_yolo.py on an H100")
    parser.add_argument("--gpu", default="h100")
    parser.add_argument("--ptxas", action="store_true", help="estimate again with ptxas's registers (needs nvcc)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = [compare(row, args.gpu, args.ptxas) for path in args.runs for row in measured_rows(path)
            if row.get("best_knobs")]
    for r in rows:
        registers = (f"; {r['model_registers']} registers counted, ptxas {r['ptxas_registers']}: "
                     f"{r['estimate_over_measured_ptxas']:.2f}x" if "ptxas_registers" in r else "")
        print(f"{r['file']:<28} {r['layer']:>4} {r['dtype']:<8} {r['trials']!s:>4} trials: measured "
              f"{r['measured_gflops']:>8.0f} GFLOPS, estimated {r['estimated_gflops']:>8.0f} ({r['bound']}): "
              f"{r['estimate_over_measured']:.2f}x{registers}", flush=True)
    summary = {}
    for dtype in sorted({r["dtype"] for r in rows}):
        for key in ("estimate_over_measured", "estimate_over_measured_ptxas"):
            ratios = [r[key] for r in rows if r["dtype"] == dtype and key in r]
            if not ratios:
                continue
            name = dtype if key == "estimate_over_measured" else f"{dtype} with ptxas's registers"
            summary[name] = {"points": len(ratios), "min": min(ratios), "max": max(ratios),
                             "geomean": math.exp(sum(map(math.log, ratios)) / len(ratios))}
            print(f"{name}: {len(ratios)} points, estimate / measured {min(ratios):.2f}-{max(ratios):.2f}x, "
                  f"geometric mean {summary[name]['geomean']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"gpu": args.gpu, "rows": rows, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
