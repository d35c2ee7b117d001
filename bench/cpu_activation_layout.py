"""Blocked activations (NCHW[x]c) on this CPU before the space has them (issue 39, item 2): one layer's CPU point
built twice, its activations as the network passes them today (NCHW) and with its image and its output laid out
NCHW[x]c (TVM's ``transform_layout`` on the function's parameters, the loops left as the point put them), against
torch in alternating rounds in this process, each output checked.

    .venv/bin/python bench/cpu_activation_layout.py Y-L5 Y-L8 1x1:96-576-14
    .venv/bin/python bench/cpu_activation_layout.py Y-L5 --block 16 --knobs '{"split.rc": [1, 16, 16]}'

A layer is ``bench/cpu_points.py``'s (``LAYERS`` of ``bench/cpu_blocked.py``, ``1x1:C-K-HW``, ``3x3:C-K-HW``); the
point is the space's default (with ``--knobs`` replaced). This asks whether the layout alone pays, at a point
searched for NCHW: a layout in the space would be searched with its own points, and chosen across the network.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpu_points import against_torch, layer  # noqa: E402


def blocked_layout(x: int):
    """NCHW -> NCHW[x]c: (n, c, h, w) -> (n, c / x, h, w, c % x)."""
    return lambda n, c, h, w: [n, c // x, h, w, c % x]


def to_blocked(a: np.ndarray, x: int) -> np.ndarray:
    n, c, h, w = a.shape
    return np.ascontiguousarray(a.reshape(n, c // x, x, h, w).transpose(0, 1, 3, 4, 2))


def from_blocked(a: np.ndarray) -> np.ndarray:
    n, cb, h, w, x = a.shape
    return a.transpose(0, 1, 4, 2, 3).reshape(n, cb * x, h, w)


def with_blocked_activations(mod, op, x: int):
    """``mod`` (a scheduled CPU module of ``op``) taking its image and giving its output NCHW[x]c."""
    from tvm import s_tir

    sch = s_tir.Schedule(mod)
    for name, kind in ((op.inputs[0].op.name, "read"), (op.output.op.name, "write")):
        for block in sch.get_child_blocks(sch.get_sblock("root")):
            stmt = sch.get(block)
            regions = stmt.reads if kind == "read" else stmt.writes
            index = next((i for i, r in enumerate(regions) if r.source.name == name), None)
            if index is not None:
                sch.transform_layout(block, (kind, index), blocked_layout(x))
                break
        else:
            sys.exit(f"no block {kind}s {name}")
    return sch.mod


def measure(name: str, x: int, knobs: dict, rounds: int) -> dict | None:
    import torch
    import tvm

    from gpu_cpu.baselines import torch_call
    from gpu_cpu.schedule import apply_cpu, build_cpu, pack_weights
    from hetero_dse.analysis import analyze
    from hetero_dse.space.cpu import CpuSpace
    from hetero_dse.space.point import Point

    op = layer(name)
    shape = [int(d) for d in op.output.shape]
    if len(shape) != 4 or shape[1] % x or int(op.inputs[0].shape[1]) % x:
        print(f"{name}: skipped, its channels are not a multiple of {x}", flush=True)
        return None
    point = Point({**CpuSpace(analyze(op)).default_point().to_json(), **knobs})
    mod = apply_cpu(op, point)
    nchw, blocked = build_cpu(mod), build_cpu(with_blocked_activations(mod, op, x))
    inputs = op.random_inputs(1)
    library = torch_call(op)
    torch_inputs = [torch.from_numpy(a) for a in inputs]
    want = library(dict(op.params), *torch_inputs).numpy()
    dev = tvm.cpu(0)
    given = [tvm.runtime.tensor(np.ascontiguousarray(a), dev) for a in pack_weights(op, point, inputs)]
    given_blocked = [tvm.runtime.tensor(to_blocked(inputs[0], x), dev), *given[1:]]
    out = tvm.runtime.tensor(np.full(want.shape, np.nan, "float32"), dev)
    out_blocked = tvm.runtime.tensor(np.full(to_blocked(want, x).shape, np.nan, "float32"), dev)
    calls = {"NCHW": lambda: nchw(*given, out), f"NCHW{x}c": lambda: blocked(*given_blocked, out_blocked),
             "torch": lambda: library(dict(op.params), *torch_inputs)}
    calls["NCHW"]()
    calls[f"NCHW{x}c"]()
    scale = float(np.abs(want).max())
    errors = {"NCHW": float(np.abs(out.numpy() - want).max()) / scale,
              f"NCHW{x}c": float(np.abs(from_blocked(out_blocked.numpy()) - want).max()) / scale}
    if not all(e < 1e-4 for e in errors.values()):  # NaN included: an output left unwritten
        sys.exit(f"{name}: a layout computes a wrong result ({errors})")
    print(f"{name} {json.dumps(point.to_json())}")
    seconds = against_torch(calls, rounds)
    return {"layer": name, "block": x, "point": point.to_json(), "max_error": errors,
            "seconds": {label: float(np.median(v)) for label, v in seconds.items()}, "rounds_s": seconds}


def main() -> None:
    os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count()))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("layers", nargs="+")
    parser.add_argument("--block", type=int, default=16, help="channels a block: the vector's lanes (AVX-512: 16)")
    parser.add_argument("--knobs", default="{}", help="JSON knobs replacing the default point's")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = [row for name in args.layers if (row := measure(name, args.block, json.loads(args.knobs), args.rounds))]
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
