"""The network kernel's throughput design over a batch (``explore --model NET --board B --batch N``): each compute
unit's descriptor table a run of ``N`` images, each convolution once an image and each linear layer once over the
run (its weights read once, not ``N`` times), against the same search at batch 1 in the same run.

    python bench/fpga_batch.py [--nets vgg16:vu9p,yolo_v1:vu9p,resnet18:zcu102,mobilenet_v2:zcu102]
                               [--dtype int8] [--batches 1,4,8]

The figures are the model's (``explore_throughput``, as the tool calls it; on a part of several SLRs of unequal room
also ``explore_slr_kernels``, one kernel an SLR room, which the tool keeps where it runs more images a second); the
code of a batch's run is C-simulated on a small network in ``tests/test_network_batch.py``, a set of kernels in
``tests/test_network_kernels.py``, not here. GOPS are the network's (two operations
a multiply-add) times the images a second; "linear layers" is their share of a run's time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cost_models.fpga_network_kernels import explore_slr_kernels  # noqa: E402
from cost_models.fpga_network_units import explore_throughput, over_batch  # noqa: E402
from hetero_dse.hardware.board import load_board  # noqa: E402
from network_shapes import network_shapes  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default="vgg16:vu9p,yolo_v1:vu9p,resnet18:zcu102,mobilenet_v2:zcu102")
    parser.add_argument("--dtype", default="int8")
    parser.add_argument("--batches", default="1,4,8", help="images a run of a compute unit takes")
    parser.add_argument("--kernels", action="store_true", help="on parts of several SLRs, the set of kernels too")
    args = parser.parse_args()
    batches = [int(v) for v in args.batches.split(",")]
    print("| network | board | batch | compute units | DSPs | images a second | GOPS | × batch 1 | linear layers "
          "| search |\n" + "|---" * 10 + "|")
    for pair in args.nets.split(","):
        net, board_name = pair.split(":")
        board, layers = load_board(board_name), network_shapes(net)[1]
        gop = 2 * sum(s.macs * c for s, c in layers) / 1e9
        base = None
        for n in batches:
            start = time.perf_counter()
            d = explore_throughput(layers, board, args.dtype, images=n)
            took = time.perf_counter() - start
            base = base or d.fps
            linear = sum(p.count * p.cycles for p in d.layers if over_batch(p.shape) or p.shape.images > 1)
            share = linear / sum(p.count * p.cycles for p in d.layers)
            print(f"| {net} | {board_name} | {n} | {d.compute_units} | {d.resources['dsp']:,.0f} | {d.fps:,.1f} | "
                  f"{d.fps * gop:,.0f} | {d.fps / base:.2f} | {share:.0%} | {took:.0f} s |", flush=True)
            if args.kernels and board.slrs > 1:
                start = time.perf_counter()
                k = explore_slr_kernels(layers, board, args.dtype, images=n)
                if k is None:
                    print(f"| {net} | {board_name} | {n} | (no set: its SLRs' rooms give one kernel) |", flush=True)
                    continue
                units = " + ".join(f"{x.compute_units} × {x.resources['dsp'] / x.compute_units:,.0f}"
                                   for x in k.kernels)
                took = time.perf_counter() - start
                print(f"| {net} | {board_name} | {n} | kernels one an SLR room: {units} | {k.resources['dsp']:,.0f} | "
                      f"{k.fps:,.1f} | {k.fps * gop:,.0f} | {k.fps / base:.2f} | | {took:.0f} s |", flush=True)


if __name__ == "__main__":
    main()
