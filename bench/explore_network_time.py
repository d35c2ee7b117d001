"""One network explore as a whole process, for timing against another checkout or other weight ports: builds and
captures the network, explores its shared FPGA kernel, prints the latency (time the command from outside).

    python bench/explore_network_time.py resnet18 zcu102 int8 --weight-ports 1,2,3,4 [--root OTHER_CHECKOUT] [--units]

``--units``: the compute units' search at batch > 1 too (``explore_throughput``), as ``explore --model`` runs it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("net")
    parser.add_argument("board")
    parser.add_argument("dtype")
    parser.add_argument("--weight-ports", default="1,2", help="the weights' ports a design may read at once")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the checkout whose explorer runs (another commit's worktree, to compare)")
    parser.add_argument("--units", action="store_true", help="the compute units' search too")
    args = parser.parse_args()
    sys.path.insert(0, str(args.root))
    from cost_models.fpga_network_design import explore_network
    from hetero_dse.hardware.board import load_board
    from hetero_dse.model.capture import capture
    from hetero_dse.model.layer_shape import shape_of
    from hetero_dse.model.zoo import build

    model, example = build(args.net)
    graph = capture(model, example, args.net, profile=False)
    shapes = [(shape_of(op, from_host=i == 0 and op.name == "conv2d"), layer.count)
              for i, (op, layer) in enumerate(zip(graph.operators(), graph.layers, strict=True))]
    ports = tuple(int(v) for v in args.weight_ports.split(","))
    design = explore_network(shapes, load_board(args.board), args.dtype, weight_ports=ports)
    print(f"{args.net} {args.board} {args.dtype}: {1e3 * design.latency_s:.3f} ms, weights on {design.w_ports} ports")
    if args.units:
        from cost_models.fpga_network_units import explore_throughput

        units = explore_throughput(shapes, load_board(args.board), args.dtype, weight_ports=ports)
        print(f"{units.compute_units} compute units: {units.compute_units / units.latency_s:.1f} images a second")


if __name__ == "__main__":
    main()
