"""Split-K on the tensor cores, by the H100 roofline: each YOLO-v1 layer's tensor-core space searched
exhaustively (every valid point estimated), its best with split-K against its best with K in one piece.

    python bench/gpu_split_k.py --dtype float16 --json bench/data/gpu_split_k_h100_roofline.json

Estimates, not measurements: what the model says split-K is worth where a layer's tiles are too few to fill
the SMs. Whether an H100 agrees is for a lease to say (tests/test_gpu_measure.py checks the numerics there).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models.gpu_roofline import estimate_tensor_cores  # noqa: E402
from hetero_dse.analysis import analyze  # noqa: E402
from hetero_dse.hardware.gpus import get_device  # noqa: E402
from hetero_dse.ops import get_builtin  # noqa: E402
from hetero_dse.space.tensorcore import TensorCoreSpace, split_k  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="C2,C4,C8,C13,C15")
    parser.add_argument("--dtype", default="float16", choices=("float16", "bfloat16", "int8"))
    parser.add_argument("--gpu", default="h100")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    device, rows = get_device(args.gpu), []
    for layer in args.layers.split(","):
        params = dict(get_builtin("conv2d").instantiate(shape=f"yolo:{layer}").params)
        op = get_builtin("conv2d").instantiate({**params, "dtype": args.dtype})
        space, start = TensorCoreSpace(analyze(op), device), time.perf_counter()
        every = np.indices(space.cardinalities).reshape(space.num_knobs, -1).T
        best: dict[bool, tuple[float, object]] = {}
        for row in every[space.valid(every)]:
            point = space.decode(row)
            seconds = estimate_tensor_cores(space, point).seconds
            split = split_k(point) > 1
            if split not in best or seconds < best[split][0]:
                best[split] = (seconds, point)
        whole, split = best[False], best.get(True, best[False])
        flops = analyze(op).flops
        one = estimate_tensor_cores(space, whole[1]).figures
        rows.append({"layer": layer, "m_n_k": [space.view.m, space.view.n, space.view.k],
                     "unsplit_blocks": one["blocks"], "unsplit_gflops": flops / whole[0] / 1e9,
                     "split_gflops": flops / split[0] / 1e9, "split_k": split_k(split[1]),
                     "speedup": whole[0] / min(whole[0], split[0]),
                     "unsplit_point": dict(whole[1]), "split_point": dict(split[1]),
                     "seconds": time.perf_counter() - start})
        r = rows[-1]
        print(f"{layer}: M×N×K {r['m_n_k']}: K whole {r['unsplit_gflops']:.0f} GFLOPS ({r['unsplit_blocks']} "
              f"blocks), split-K {r['split_k']} {r['split_gflops']:.0f}: {r['speedup']:.2f}x", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"gpu": args.gpu, "dtype": args.dtype, "basis": "roofline estimate",
                                         "rows": rows}, indent=2, default=str))


if __name__ == "__main__":
    main()
