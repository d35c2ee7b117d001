"""Persistent back-to-back GEMM fusion on a named GPU's roofline: for each pair, the two GEMMs searched apart
(the estimated GPU flow, simulated annealing, the same trials each) against the fused kernel's best point,
and the choice ``gpu_cpu.b2b.choose`` makes. Every figure is an estimate; no GPU runs here.

    python bench/gpu_b2b.py --gpu h100 --trials 64 --json bench/data/gpu_b2b_h100_roofline.json

The pairs: a ResNet/RepVGG-style pair of 1×1 convolutions on 56×56 pixels (64 → 64 → 64 channels), the same on
14×14 (256 → 64 → 256, a bottleneck's squeeze and expand), a transformer MLP at 4096 tokens (768 → 3072 →
768) and with a narrow hidden layer (768 → 64 → 768), and YOLO-v1's two fully connected layers at batch 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_cpu.b2b import GemmPair, choose  # noqa: E402
from hetero_dse.hardware.gpus import get_device  # noqa: E402
from hetero_dse.targets.flow import explore  # noqa: E402
from hetero_dse.targets.gpu import GpuTarget  # noqa: E402

PAIRS = {
    "1x1 pair 56x56 64-64-64": GemmPair(56 * 56, 64, 64, 64),
    "1x1 pair 14x14 256-64-256": GemmPair(14 * 14, 256, 64, 256),
    "MLP 4096 tokens 768-3072-768": GemmPair(4096, 768, 3072, 768),
    "MLP 4096 tokens 768-64-768": GemmPair(4096, 768, 64, 768),
    "YOLO-v1 fc pair, batch 1": GemmPair(1, 7 * 7 * 1024, 4096, 1470),
    # MobileNet-V2's pairs of 1x1 convolutions with their epilogues (batch norm folded into a bias), as GEMMs:
    # pixels as rows, where the network's NCHW tensors hold them as columns
    "MobileNet-V2 blocks 0-1 112x112 32-16-96": GemmPair(112 * 112, 32, 16, 96, ("bias",), ("bias", "relu6")),
    "MobileNet-V2 blocks 2-3 56x56 144-24-144": GemmPair(56 * 56, 144, 24, 144, ("bias", "add"), ("bias", "relu6")),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", default="h100")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    device = get_device(args.gpu)
    rows = []
    for name, pair in PAIRS.items():
        unfused = tuple(explore(op, GpuTarget(args.gpu, trials=args.trials), "sa").best_seconds
                        for op in pair.unfused())
        c = choose(pair, unfused, device)
        rows.append({"pair": name, "m": pair.m, "k": pair.k, "n0": pair.n0, "n1": pair.n1,
                     "unfused_us": [s * 1e6 for s in unfused], "fused_us": c.fused.seconds * 1e6 if c.fused else None,
                     "fused_bound": c.fused.bound if c.fused else None,
                     "fused_point": dict(c.point) if c.point else None, "fuse": c.fuse, "speedup": c.speedup})
        r = rows[-1]
        print(f"{name}: unfused {sum(r['unfused_us']):.1f} us ({r['unfused_us'][0]:.1f} + {r['unfused_us'][1]:.1f}); "
              + (f"fused {r['fused_us']:.1f} us ({r['fused_bound']}-bound, {r['fused_point']}), "
                 f"{r['speedup']:.2f}x: {'fuse' if r['fuse'] else 'keep two kernels'}" if c.fused
                 else "no fused point fits the device: keep two kernels"), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"device": device.name, "trials": args.trials, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
