"""How long the layer pipeline's explorer takes for one network, board and data type (``explore_pipeline`` on the
network's distinct layers, as ``explore --model`` calls it for the report): the search alone, the network's
capture outside the time, the design's figures printed so that two trees can be held to the same design.

    python bench/fpga_pipeline_time.py mobilenet_v2 vu9p float32

Prints one line: the network, board and type, the design's images a second and clock, its kernels, and the
search's seconds. Time whole processes against each other (A B A B) for a ratio; this line says which design each
found.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models.fpga_pipeline import explore_pipeline  # noqa: E402
from hetero_dse.hardware.board import load_board  # noqa: E402
from hetero_dse.model.capture import capture  # noqa: E402
from hetero_dse.model.layer_shape import shape_of  # noqa: E402
from hetero_dse.model.zoo import build  # noqa: E402


def main() -> None:
    net, board, dtype = sys.argv[1:4]
    model, example = build(net)
    graph = capture(model, example, net, profile=False)
    shapes = [(shape_of(op, from_host=i == 0 and op.name == "conv2d"), layer.count)
              for i, (op, layer) in enumerate(zip(graph.operators(), graph.layers, strict=True))]
    start = time.perf_counter()
    design = explore_pipeline(shapes, load_board(board), dtype)
    seconds = time.perf_counter() - start
    kernels = len(getattr(design, "kernels", []))
    print(f"{net} {board} {dtype}: {design.fps:.3f} images a second at {design.achieved_mhz:.3f} MHz, "
          f"{kernels or 1} kernel{'s' * (kernels > 1)}; search {seconds:.2f} s")


if __name__ == "__main__":
    main()
