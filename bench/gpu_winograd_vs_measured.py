"""The GPU roofline's Winograd estimate against an H200: each algorithm's best point, as a lent H200 measured it
(``bench/gpu_winograd_measured.py``), estimated by today's model on the same device.

    python bench/gpu_winograd_vs_measured.py bench/data/gpu_winograd_h200.json bench/data/gpu_winograd_h200_b.json \
        --json bench/data/gpu_winograd_vs_h200.json

Needs no GPU. For direct convolution the estimate is the roofline of its point; for Winograd F(m×m, 3×3), its
batched product's roofline plus its two transform kernels' (``winograd_estimate``), with the model's register
count, as ``explore --target gpu`` ranks points where no GPU is present (the report's row of a written kernel
takes ptxas's). The ratio, measured time over estimated (the same as estimated speed over measured, the
orientation of ``ESTIMATE_OVER_H100``), says how optimistic the model is for each algorithm at points a device
ran: if it were more optimistic for one algorithm than another, the roofline's choice between them would lean
that way.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models.gpu_roofline import estimate  # noqa: E402
from gpu_cpu.winograd import product_operator, winograd_shape  # noqa: E402
from gpu_cpu.winograd_gpu import whole_estimate  # noqa: E402
from hetero_dse.analysis import analyze  # noqa: E402
from hetero_dse.hardware.gpus import get_device  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402
from hetero_dse.space.gpu import GpuSpace  # noqa: E402
from hetero_dse.space.point import Point  # noqa: E402

#: the algorithms' labels in the recorded runs, and their output tile (0: direct convolution)
TILES = {"direct": 0, "Winograd F(2×2, 3×3)": 2, "Winograd F(4×4, 3×3)": 4}


def estimated_seconds(row: dict, label: str, device_name: str) -> float:
    """The model's time for ``row``'s layer at its recorded best point of ``label``, on ``device_name``."""
    op = get_builtin("conv2d").instantiate(dict(C=row["C"], K=row["K"], H=row["HW"], W=row["HW"], kernel=3,
                                                stride=1, padding=1))
    device = get_device(device_name)
    point = Point({k: tuple(v) if isinstance(v, list) else v for k, v in row["points"][label].items()})
    m = TILES[label]
    if not m:
        space = GpuSpace(analyze(op), device)
        return estimate(space, point, space.limits(point)["registers"]).seconds
    space = GpuSpace(analyze(product_operator(winograd_shape(op, m))), device)
    return whole_estimate(device, op, m, estimate(space, point, space.limits(point)["registers"])).seconds


def compared(paths: list[Path], device_name: str) -> list[dict]:
    """Each (layer, algorithm) a recorded run measured and holds the point of, with the model's time for it."""
    out = []
    for path in paths:
        for row in json.loads(path.read_text())["rows"]:
            for label in TILES:
                measured = (row.get(label) or {}).get("seconds")
                if measured is None or label not in row.get("points", {}):
                    continue  # a failed search, or a kernel the check refused
                seconds = estimated_seconds(row, label, device_name)
                out.append({"file": path.name, "layer": row["layer"], "algorithm": label, "measured_s": measured,
                            "estimated_s": seconds, "measured_over_estimated": measured / seconds})
    return out


def summary(rows: list[dict]) -> dict[str, tuple[float, float, float]]:
    """Per algorithm: (lowest, highest, geometric mean) of measured over estimated, rounded as quoted."""
    out = {}
    for label in TILES:
        ratios = [r["measured_over_estimated"] for r in rows if r["algorithm"] == label]
        if ratios:
            mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
            out[label] = (round(min(ratios), 2), round(max(ratios), 2), round(mean, 2))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--gpu", default="h200", help="the device the runs measured, whose roofline estimates")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = compared(args.runs, args.gpu)
    for r in rows:
        print(f"{r['layer']:6} {r['algorithm']:22} measured {r['measured_s'] * 1e6:7.1f} us  "
              f"estimated {r['estimated_s'] * 1e6:7.1f} us  measured/estimated {r['measured_over_estimated']:.2f}")
    for label, (low, high, mean) in summary(rows).items():
        print(f"{label:22} measured/estimated {low:.2f}-{high:.2f} (geometric mean {mean:.2f})")
    if args.json:
        args.json.write_text(json.dumps({"command": " ".join(sys.argv), "gpu": args.gpu, "rows": rows,
                                         "summary": summary(rows)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
