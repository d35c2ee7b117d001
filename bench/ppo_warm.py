"""PPO warm against cold on a layer it has not seen (issue 41): a policy trained on some YOLO-v1 layers on the FPGA
model, then searches of unseen layers started from it and from scratch, by the evaluations each needs to come
within 5 % and 1 % of the best design either found.

    python bench/ppo_warm.py --train C3,C5,C7 --unseen C8,C10,C13 --seeds 5 --budget 8000 \\
        --json bench/data/ppo_warm.json

The layers are YOLO-v1's on vu9p in float32 at the board's default clock, scored by the analytical model (as
``bench/explorers_fpga.py``); the policy carries over because every conv2d layer has the same knobs and
directions. Training runs each training layer once for ``--budget`` evaluations, in order, one policy through
them; the warm runs load it (and do not save back), the cold ones start from a fresh network; all with the
explorer's default walkers on the model. Three kinds a layer and seed: ``cold``; ``warm``, the saved state whole
(the trunk and value, and the last training layer's best designs adapted to the layer as the first proposals);
``policy``, the networks loaded but no designs carried (what the policy alone brings).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from explorers_fpga import Tracing, evaluations_to, layer_space  # noqa: E402
from hetero_dse.explore.settings import MODEL_STARTS, make_explorer  # noqa: E402
from hetero_dse.hardware.board import load_board  # noqa: E402
from hetero_dse.targets.fpga_search import search  # noqa: E402


KINDS = ("cold", "warm", "policy")


def run(space, model, seed: int, budget: int, policy: Path, kind: str) -> tuple[list[float], float]:
    traced = Tracing(model)
    explorer = make_explorer("ppo", space, seed, starts=MODEL_STARTS["ppo"])
    if kind != "cold":
        explorer.load(policy)
    if kind == "policy":
        explorer.carried = explorer.carried[:0]
    t0 = time.perf_counter()
    search(space, traced, explorer, budget=budget)
    return traced.curve, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="vu9p")
    parser.add_argument("--train", default="C3,C5,C7")
    parser.add_argument("--unseen", default="C8,C10,C13")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    board = load_board(args.board)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        policy = Path(tmp) / "policy.pt"
        for layer in args.train.split(","):
            space, model = layer_space(layer, board)
            explorer = make_explorer("ppo", space, 0, starts=MODEL_STARTS["ppo"])
            if policy.is_file():
                explorer.load(policy)
            search(space, model, explorer, budget=args.budget)
            explorer.save(policy)
            print(f"trained on {layer}: {explorer.updates} updates", flush=True)
        for layer in args.unseen.split(","):
            space, model = layer_space(layer, board)
            runs = {(kind, seed): run(space, model, seed, args.budget, policy, kind)
                    for kind in KINDS for seed in range(args.seeds)}
            best = min(curve[-1] for curve, _ in runs.values())
            for (kind, seed), (curve, wall) in runs.items():
                rows.append({"layer": layer, "kind": kind, "seed": seed, "wall_s": wall,
                             "final_gap": curve[-1] / best - 1, "to_5pct": evaluations_to(curve, best * 1.05),
                             "to_1pct": evaluations_to(curve, best * 1.01)})
            for kind in KINDS:
                mine = [r for r in rows if r["layer"] == layer and r["kind"] == kind]
                med = {k: float(np.median([args.budget if r[k] is None else r[k] for r in mine]))
                       for k in ("to_5pct", "to_1pct")}
                print(f"| {layer} | {kind} | {med['to_5pct']:,.0f} | {med['to_1pct']:,.0f} | "
                      f"{sum(r['to_1pct'] is None for r in mine)}/{len(mine)} | "
                      f"{100 * np.median([r['final_gap'] for r in mine]):.2f} % |", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"board": board.name, "budget": args.budget, "train": args.train,
                                         "runs": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
