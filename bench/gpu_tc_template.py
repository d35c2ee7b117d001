"""The tensor-core template's newer knobs, by the H100 roofline: each layer's tensor-core space searched
exhaustively (every valid point estimated), its best with square 16×16 fragments and K in one piece (the
template before split-K and the tall/wide fragments) against its best with split-K, with the 32×8 / 8×32
fragments, and with both.

    python bench/gpu_tc_template.py --dtype float16 --json bench/data/gpu_tc_template_h100_roofline.json

Estimates, not measurements: what the model says the knobs are worth. Whether an H100 agrees is for a lease
to say (tests/test_gpu_measure.py checks the numerics there).
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
from hetero_dse.space.tensorcore import TensorCoreSpace, fragment_shape, split_k  # noqa: E402

#: YOLO-v1's layers, and two narrow GEMMs (an N of 24; an M of 8, a batch of eight through a classifier)
SHAPES = {**{c: ("conv2d", {"shape": f"yolo:{c}"}) for c in ("C1", "C2", "C4", "C8", "C13", "C15")},
          "gemm 4096x24x512": ("gemm", {"M": 4096, "N": 24, "K": 512}),
          "gemm 8x1000x512": ("gemm", {"M": 8, "N": 1000, "K": 512})}


def operator(name: str, dtype: str):
    kind, params = SHAPES[name]
    op = get_builtin(kind).instantiate(**params) if "shape" in params else get_builtin(kind).instantiate(params)
    return op.with_dtype(dtype)


def gain(best: dict, *keys: tuple[bool, bool]) -> float:
    """The base template's best time over the best with the knobs ``keys`` name allowed as well."""
    return best[(False, False)][0] / min(best[k][0] for k in ((False, False), *keys) if k in best)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default=",".join(SHAPES))
    parser.add_argument("--dtype", default="float16", choices=("float16", "bfloat16", "int8"))
    parser.add_argument("--gpu", default="h100")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    device, rows = get_device(args.gpu), []
    for name in args.layers.split(","):
        op = operator(name, args.dtype)
        space, start = TensorCoreSpace(analyze(op), device), time.perf_counter()
        every = np.indices(space.cardinalities).reshape(space.num_knobs, -1).T
        best: dict[tuple[bool, bool], tuple[float, object]] = {}  # (split-K, tall or wide) -> best
        for row in every[space.valid(every)]:
            point = space.decode(row)
            key = (split_k(point) > 1, fragment_shape(point["mma"]) != (16, 16))
            seconds = estimate_tensor_cores(space, point).seconds
            if key not in best or seconds < best[key][0]:
                best[key] = (seconds, point)
        base = best[(False, False)][0]
        overall = min(best.values(), key=lambda b: b[0])
        rows.append({"layer": name, "m_n_k": [space.view.m, space.view.n, space.view.k],
                     "base_gflops": analyze(op).flops / base / 1e9,
                     "base_blocks": estimate_tensor_cores(space, best[(False, False)][1]).figures["blocks"],
                     "split_k": gain(best, (True, False)), "tall_wide": gain(best, (False, True)),
                     "both": gain(best, (True, False), (False, True), (True, True)),
                     "best_point": dict(overall[1]), "seconds": time.perf_counter() - start})
        r = rows[-1]
        print(f"{name}: M×N×K {r['m_n_k']}: square, K whole {r['base_gflops']:.0f} GFLOPS ({r['base_blocks']} "
              f"blocks); split-K {r['split_k']:.2f}x, tall/wide {r['tall_wide']:.2f}x, both {r['both']:.2f}x; "
              f"best {overall[1]['mma']}, split {split_k(overall[1])}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"gpu": args.gpu, "dtype": args.dtype, "basis": "roofline estimate",
                                         "rows": rows}, indent=2, default=str))


if __name__ == "__main__":
    main()
