"""The model against the TEST DOUBLE of Vitis HLS on the review's layers (issue 35; no synthesis runs here).

    python bench/fpga_stand_in.py [--json out.json]

The six layers of bench/fpga_review_designs.py are explored with explore's defaults and written as projects;
the test double (tests/fake_vitis), which schedules the *code* (never design.json's predictions), is run on
each with csynth and cosim, and the validation compares its figures with the model's: latency in cycles
(co-simulated), every labelled loop's II and trip count, DSP, BRAM18K, LUT, FF, banks, port widths, cores.
The double is not Vitis: its agreement says the code and the model describe the same machine, not that
Vitis will build it so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from hetero_dse.hardware.board import load_board
from hetero_dse.hls.project import write_project
from hetero_dse.hls.readback import read_back
from hetero_dse.hls.validate import validate
from hetero_dse.targets.flow import explore
from hetero_dse.targets.fpga import FpgaTarget

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fpga_review_designs import LAYERS, review_operator  # noqa: E402

DOUBLE = Path(__file__).resolve().parents[1] / "tests" / "fake_vitis" / "vitis_hls"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    out = []
    print("| layer | latency (cycles): model | double | error | exact figures equal | DSP | BRAM18K | LUT error "
          "| FF error |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (op_name, params, steps, board_name) in LAYERS.items():
            op = review_operator(op_name, params, steps)
            board = load_board(board_name)
            e = explore(op, FpgaTarget(board))
            op_d, analysis = e.best_operator()
            point, design = e.best_design
            project = write_project(Path(tmp) / name.split()[0], op_d, analysis, point, design, board)
            env = {**os.environ, "FAKE_VITIS_PYTHON": sys.executable, "HDSE_STEPS": "csynth cosim"}
            subprocess.run([str(DOUBLE), "-f", "run_hls.tcl"], cwd=project, env=env, check=True,
                           capture_output=True, timeout=600)
            check = validate(json.loads((project / "design.json").read_text()), {"status": "ok",
                                                                                  **read_back(project)})
            rows = {row["figure"]: row for row in check["figures"]}
            latency = next(r for k, r in rows.items() if k.startswith("latency (cycles)"))
            exact = [r for r in check["figures"] if r.get("exact")]
            equal = sum(r["error"] == 0 for r in exact)
            out.append({"layer": name, "figures": check["figures"]})
            print(f"| {name} | {latency['predicted']:,.0f} | {latency['reported']:,} | {100 * latency['error']:+.1f} % "
                  f"| {equal}/{len(exact)} | {rows['DSP']['error']:+.3f} | {rows['BRAM18K']['error']:+.3f} | "
                  f"{100 * rows['LUT']['error']:+.1f} % | {100 * rows['FF']['error']:+.1f} % |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
