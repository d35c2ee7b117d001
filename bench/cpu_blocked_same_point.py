"""The block knob alone: each best point that ``bench/cpu_blocked.py`` found (its JSON), timed as found and with
``block`` toggled (the same splits, order and vector loop, the weights blocked or not), in alternating rounds in
this process, both outputs checked against each other. Only points whose toggle is a point of the space (a
weight to block along its vectorised loop) are timed.

    .venv/bin/python bench/cpu_blocked_same_point.py bench/data/cpu_blocked.json bench/data/cpu_blocked_first.json \\
        --json bench/data/cpu_blocked_same_point.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpu_blocked import LAYERS  # noqa: E402
from cpu_winograd import alternating_rounds  # noqa: E402


def main() -> None:
    import tvm

    from gpu_cpu.main_block import weight_blocks
    from gpu_cpu.schedule import apply_cpu, build_cpu, pack_weights
    from hetero_dse.analysis import analyze
    from hetero_dse.epilogue import fuse
    from hetero_dse.ops import get_builtin
    from hetero_dse.space.cpu import CpuSpace
    from hetero_dse.space.point import Point

    os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count()))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    dev = tvm.cpu(0)
    rows = []
    for run in args.runs:
        for found in json.loads(run.read_text())["rows"]:
            kind, params, steps = LAYERS[found["layer"]]
            op = fuse(get_builtin(kind).instantiate(params), steps, (1,))
            space = CpuSpace(analyze(op))
            inputs = op.random_inputs(0)
            for space_name, knobs in found["points"].items():
                point = Point(knobs)
                blocked = point.replace(block=1)
                plain = Point({k: v for k, v in point.items() if k != "block"})
                if space.violations(blocked) or not weight_blocks(op, blocked):
                    continue
                calls, outs = {}, {}
                for label, p in (("plain", plain), ("blocked", blocked)):
                    executable = build_cpu(apply_cpu(op, p))
                    tensors = [tvm.runtime.tensor(np.ascontiguousarray(a), dev) for a in pack_weights(op, p, inputs)]
                    outs[label] = tvm.runtime.tensor(np.zeros([int(d) for d in op.output.shape], "float32"), dev)
                    calls[label] = lambda e=executable, t=tensors, o=outs[label]: e(*t, o)
                    calls[label]()
                if not np.allclose(outs["plain"].numpy(), outs["blocked"].numpy(), rtol=1e-3, atol=1e-3):
                    sys.exit(f"{found['layer']}: the blocked kernel computes another result")
                seconds = alternating_rounds(calls, args.rounds, repeat=5 if kind == "gemm" else 15)
                ratio = float(np.median(np.array(seconds["plain"]) / np.array(seconds["blocked"])))
                row = {"run": run.name, "layer": found["layer"], "found_in": space_name, "point": plain.to_json(),
                       "block": weight_blocks(op, blocked), "seconds": {k: float(np.median(v)) for k, v in
                                                                         seconds.items()},
                       "blocked_over_plain": ratio}
                rows.append(row)
                ms = {k: f"{v * 1e3:.3f} ms" for k, v in row["seconds"].items()}
                print(f"{run.name} {found['layer']} ({space_name}'s best): plain {ms['plain']}, blocked "
                      f"{ms['blocked']}: {ratio:.2f}x", flush=True)
                if args.json:
                    args.json.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1) + "\n")
    ratios = [r["blocked_over_plain"] for r in rows]
    print(f"{len(rows)} points: blocked over plain, geometric mean {np.exp(np.mean(np.log(ratios))):.2f}x, "
          f"{min(ratios):.2f}-{max(ratios):.2f}x")


if __name__ == "__main__":
    main()
