"""What HybridDNN's 3,375.7 GOPS on VU9P (issue 38) would take of the network kernel at batch > 1: two levers the
kernel does not have, measured by its model, each alone and both together (a what-if, not a design).

    python bench/fpga_goal_levers.py [--net vgg16] [--board vu9p] [--dtype int8] [--batches 1,4,8,16]

- **One compute unit an SLR, each sized to its own SLR's room** (``slr_room``: what the shell leaves, less the
  usable share). Today's units are one kernel instantiated ``n`` times, each of an even share, so on a part whose
  shell takes part of one SLR the units are sized to the smallest SLR, or fewer are placed (VGG-16 on vu9p: two).
  Vitis can link different kernels into one xclbin, one an SLR; each is the network kernel explored for its SLR's
  room, on its own images, with its share of the memory channels.
- **Linear layers over a batch** (built: ``explore --batch N``, ``fpga_network_units.batched``). At batch 1 a linear
  layer reads each weight once an image (VGG-16's first one: 98 MiB of int8 weights, a quarter of a unit's time).
  Run over ``N`` images at once (the host lays the ``N`` flattened inputs side by side as ``N`` pixels:
  ``network_run.per_image``), its weights are read once for all ``N``.

The figures are the model's; no project is written and nothing is C-simulated (the batch's code is, on a small
network: ``tests/test_network_batch.py``). GOPS are the network's (two
operations a multiply-add, its unpadded layers') times the images a second.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cost_models.fpga_network_design import explore_network  # noqa: E402
from cost_models.fpga_network_units import batched, explore_throughput  # noqa: E402
from cost_models.fpga_slrs import room_usable, slr_room  # noqa: E402
from hetero_dse.hardware.board import Board, load_board  # noqa: E402
from network_shapes import network_shapes  # noqa: E402

#: HybridDNN (Ye et al., DAC 2020): VGG-16 on a VU9P
HYBRIDDNN_GOPS = 3375.7


def slr_boards(board: Board) -> list[Board]:
    """The board as each of its SLRs' rooms (``slr_room``) leaves a kernel: ``usable`` that share of the part."""
    return [replace(board, usable=room_usable(board, room)) for room in slr_room(board)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--net", default="vgg16")
    parser.add_argument("--board", default="vu9p")
    parser.add_argument("--dtype", default="int8")
    parser.add_argument("--batches", default="1,4,8,16", help="images a linear layer runs over at once")
    args = parser.parse_args()
    board, layers = load_board(args.board), network_shapes(args.net)[1]
    gop = 2 * sum(s.macs * c for s, c in layers) / 1e9
    print(f"{args.net} on {args.board} in {args.dtype}: {gop:.2f} GOP an image; HybridDNN's {HYBRIDDNN_GOPS:,} GOPS "
          f"is {HYBRIDDNN_GOPS / gop:.1f} images a second\n")
    print("| compute units | linear layers over | units' DSP | MHz | images a second | GOPS | of HybridDNN | search |\n"
          + "|---" * 8 + "|")
    slrs = slr_boards(board) if board.slrs > 1 else []
    for n in (int(v) for v in args.batches.split(",")):
        start = time.perf_counter()
        units = explore_throughput(layers, board, args.dtype, images=n)  # the tool's --batch n
        fps = units.fps
        print(f"| {units.compute_units} of an even share (today's) | {n} | {units.resources['dsp']:,.0f} | "
              f"{units.achieved_mhz:.0f} | {fps:.1f} | {fps * gop:,.0f} | {fps * gop / HYBRIDDNN_GOPS:.0%} | "
              f"{time.perf_counter() - start:.0f} s |", flush=True)
        if not slrs:
            continue
        start, found = time.perf_counter(), []
        for slr_board in slrs:
            found.append(explore_network(batched(layers, n), slr_board, args.dtype, units=len(slrs)))
        fps = sum(n / d.latency_s for d in found)
        dsps = " + ".join(f"{d.resources['dsp']:,.0f}" for d in found)
        print(f"| one an SLR, each its room | {n} | {dsps} | "
              f"{'/'.join(f'{d.achieved_mhz:.0f}' for d in found)} | {fps:.1f} | {fps * gop:,.0f} | "
              f"{fps * gop / HYBRIDDNN_GOPS:.0%} | {time.perf_counter() - start:.0f} s |", flush=True)


if __name__ == "__main__":
    main()
