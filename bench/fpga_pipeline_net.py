"""A whole network's layer pipeline as code (issue 38, item 5, and its goals): the network traced into its chain of
layers (``model/chain.py``: a max pool a stage, ResNet's downsampling 1×1 convolution a branch), its pipeline
explored for that chain (``cost_models/fpga_pipeline.py``), its project written
(``hetero_dse/hls/pipeline_project.py``), linted, and with ``--csim`` C-simulated on the network's image (two
frames) against its reference: float32 against torch, int8 bit for bit against the same integer arithmetic; with
``--dataflow`` C-simulated again as the device runs it (each process a thread, each FIFO as deep as declared: a FIFO
too shallow deadlocks). The zoo's networks have random weights; their batch norms take the image's statistics
(``calibrated``) so that the activations stay in range.

    python bench/fpga_pipeline_net.py --nets mobilenet_v2 --boards zcu102,zcu104,vu9p,u280 --dtypes int8 \\
        --csim --json bench/data/fpga_pipeline_net.json

Prints a row per network, board and type: images a second, GOPS, the clock, the slowest stage, the device's
use, the regroups, which stages read their weights from DDR, the lint's and the C-simulation's verdicts, and
the seconds each step took. The figures are the model's of the generated code; nothing here ran on an FPGA.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models.fpga_pipeline import explore_traced  # noqa: E402
from hetero_dse.errors import HeteroDSEError  # noqa: E402
from hetero_dse.hardware.board import RESOURCE_KINDS, load_board  # noqa: E402
from hetero_dse.hls.csim import csim  # noqa: E402
from hetero_dse.hls.lint import lint  # noqa: E402
from hetero_dse.hls.pipeline_project import check_pipeline_trips, write_pipeline_project  # noqa: E402
from hetero_dse.model.chain import trace_chain  # noqa: E402
from hetero_dse.model.zoo import build, calibrated  # noqa: E402


def run(net: str, board_name: str, dtype: str, out: Path, simulate: bool, dataflow: bool = False) -> dict:
    row: dict = {"net": net, "board": board_name, "dtype": dtype}
    start = time.perf_counter()
    model, example = build(net)
    model = calibrated(model, example)
    layers, image = trace_chain(model, example)
    design = explore_traced(layers, load_board(board_name), dtype)
    row["explore_s"] = round(time.perf_counter() - start, 1)
    p = design.to_json()
    row.update({k: p[k] for k in ("fps", "gops", "achieved_mhz", "bottleneck", "stages", "interval_cycles")})
    row["utilisation"] = {k: round(p["utilisation"][k], 3) for k in RESOURCE_KINDS}
    row["regroups"] = len(design.regroups)
    row["ddr_weights"] = [s.shape.name for s in design.stages if s.weights == "ddr"]
    row["kernels"] = p["kernels"]  # one an SLR where the pipeline is cut (none: one kernel)
    start = time.perf_counter()
    project = write_pipeline_project(out / f"{net}-{board_name}-{dtype}", design, layers, image, network=net)
    report = lint(project)
    row["lint"] = {"ok": report.ok, "findings": [str(f) for f in report.findings][:5],
                   "pragmas_checked": report.pragmas_checked}
    row["write_lint_s"] = round(time.perf_counter() - start, 1)
    if simulate:
        start = time.perf_counter()
        result = csim(project)
        row["csim"] = {"passed": result.passed, "mismatches": result.mismatches, "elements": result.elements,
                       "max_abs_error": result.max_abs_error,
                       "trips": check_pipeline_trips(project, result.output) or "every process ran the model's trips"}
        row["csim_s"] = round(time.perf_counter() - start, 1)
    if dataflow:  # as the device runs it: each process a thread, each FIFO as deep as declared
        start = time.perf_counter()
        try:
            result = csim(project, dataflow=True)
            row["dataflow"] = {"passed": result.passed, "mismatches": result.mismatches,
                               "trips": check_pipeline_trips(project, result.output) or "every process ran the "
                                                                                          "model's trips"}
        except HeteroDSEError as exc:  # a deadlock is said in one sentence
            row["dataflow"] = {"passed": False, "why": str(exc)}
        row["dataflow_s"] = round(time.perf_counter() - start, 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default="mobilenet_v2")
    parser.add_argument("--boards", default="zcu102,zcu104,vu9p,u280")
    parser.add_argument("--dtypes", default="int8")
    parser.add_argument("--csim", action="store_true", help="C-simulate each project (minutes each)")
    parser.add_argument("--dataflow", action="store_true", help="also C-simulate each as the device runs it: each "
                        "process a thread, each FIFO as deep as declared (a deadlock said)")
    parser.add_argument("--out", type=Path, help="where the projects go (default: a temporary directory)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        for net in args.nets.split(","):
            for board in args.boards.split(","):
                for dtype in args.dtypes.split(","):
                    try:
                        row = run(net, board, dtype, out, args.csim, args.dataflow)
                    except HeteroDSEError as exc:
                        row = {"net": net, "board": board, "dtype": dtype, "why": str(exc)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
