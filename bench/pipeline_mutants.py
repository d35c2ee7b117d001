"""How many realistic defects of the layer pipeline's code the project's checks catch (issue 38, item 5): a mutation
test of the layer-pipelined kernel (``hls_templates/pipeline/``), as ``network_mutants.py`` is of the shared one; not
part of the test suite.

    python bench/pipeline_mutants.py --sample 150 --json bench/data/pipeline_mutants.json

The designs are the small network's pipeline that the suite C-simulates (``tests/test_pipeline_kernel.py``'s
``project``: a conv on the image, depthwise, pointwise, a residual block, a linear layer, one stage each, two images
streamed): float32 and int8 on ZCU102 as the explorer balances it, and int8 with ``RAGGED``'s lanes (every tensor in
part folds, five regroups, the classifier's weights from DDR). The mutants are universalmutator's of the project's
``src/kernel.cpp`` (pragmas, comments and the trip counters not mutated, as ``network_mutants.py``), a seeded sample.
Each is run through the checks the tool has for a pipeline project, in turn, the first to fail catching it:

- ``compile``: the C-simulation does not compile (not a defect: left out of the figures);
- ``lint``: ``hetero_dse lint`` (``lint_pipeline``) has a finding, or refuses the project;
- ``csim``: the sequential C-simulation fails (an output off torch's, int8 bit for bit; a crash; a loop that does
  not end within ``--run-s``);
- ``dataflow``: the C-simulation as the device runs it fails (each process a thread, each FIFO as deep as its type
  declares: a deadlock, an output off);
- ``trips``: a process's trip counts differ from the model's (``check_pipeline_trips``);
- ``lint crashed``: the lint ended in an internal error (counted apart);
- ``survived``: every check passes; listed for the reader (some are equivalent: a bound that never binds).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the small network and its pipeline, as the suite builds them
sys.path.insert(0, str(ROOT / "bench"))

from network_mutants import IGNORE, csim_then_lint, print_survivors, sample_mutants, tally  # noqa: E402

DESIGNS = ("float32", "int8", "int8-ragged")
#: besides the shared kernel's: the pipeline's trip counters (``HDSE_COUNT(hdse_mac_trips[2])``), the check itself
PIPELINE_IGNORE = [*IGNORE, r"HDSE_COUNT", r"hdse_\w*trips"]


def write_design(name: str, into: Path) -> Path:
    """The small network's pipeline project for design ``name`` (``DESIGNS``), as the suite writes it."""
    from small_net import traced
    from test_pipeline_kernel import _ragged

    from cost_models.fpga_pipeline import explore_traced
    from hetero_dse.hardware.board import load_board
    from hetero_dse.hls.pipeline_project import write_pipeline_project

    dtype = name.split("-")[0]
    layers, image, _, _ = traced()
    design = explore_traced(layers, load_board("zcu102"), dtype)
    if name.endswith("ragged"):
        design = _ragged(design)
    return write_pipeline_project(into / name / "hls", design, layers, image, network="small")


def judge(args: tuple[str, dict, float]) -> str:
    """Which check catches one mutant (the module doc's verdicts)."""
    import hetero_dse.hls.csim as csim_module
    from hetero_dse.errors import HeteroDSEError
    from hetero_dse.hls.lint import lint
    from hetero_dse.hls.pipeline_project import check_pipeline_trips

    project, mutant, run_s = args
    csim_module.run_timeout = lambda _project: run_s
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "hls"
        shutil.copytree(project, copy, ignore=shutil.ignore_patterns("build"))
        shutil.copy(mutant["file"], copy / "src" / "kernel.cpp")
        verdict, result = csim_then_lint(copy, lint)
        if verdict is not None:
            return verdict
        if result is None or not result.passed:
            return "csim"
        try:
            flow = csim_module.csim(copy, dataflow=True)
        except HeteroDSEError:  # a deadlock, said in one sentence
            return "dataflow"
        if not flow.passed:
            return "dataflow"
        return "trips" if check_pipeline_trips(copy, result.output) or check_pipeline_trips(copy, flow.output) \
            else "survived"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--designs", default=",".join(DESIGNS), help=f"of {', '.join(DESIGNS)}")
    parser.add_argument("--sample", type=int, default=150, help="mutants a design (seeded); 0: every one")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--run-s", type=float, default=20.0,
                        help="seconds a C-simulation may run (the unmutated ones take a second or two)")
    parser.add_argument("--functions", help="only the mutants inside these functions of the kernel (comma-separated)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.designs.split(","):
            start = time.perf_counter()
            project = write_design(name, Path(tmp))
            kernel = {"file": str(project / "src" / "kernel.cpp")}
            assert judge((str(project), kernel, args.run_s)) == "survived"  # the checks pass the kernel as written
            made, chosen = sample_mutants(project, Path(tmp) / f"{name}-mutants", args.sample, args.seed,
                                          args.functions, PIPELINE_IGNORE)
            with ProcessPoolExecutor(args.jobs) as pool:
                verdicts = list(pool.map(judge, [(str(project), m, args.run_s) for m in chosen]))
            t = tally(chosen, verdicts)
            counts, valid, caught = t["counts"], t["valid"], t["caught"]
            print(f"{name}: {len(made)} mutants, {len(chosen)} tried, {counts['compile']} do not compile; of {valid}: "
                  f"lint {counts['lint']}, csim {counts['csim']}, dataflow {counts['dataflow']}, trips "
                  f"{counts['trips']}, lint crashed {counts['lint crashed']}, survived {counts['survived']}: "
                  f"{caught / max(valid, 1):.1%} caught ({time.perf_counter() - start:.0f} s)", flush=True)
            print_survivors(t)
            rows.append({"design": name, **({"functions": args.functions} if args.functions else {}),
                         "mutants": len(made), "tried": len(chosen), "verdicts": dict(counts), "caught": caught,
                         "valid": valid, "survivors": t["survivors"], "crashes": dict(t["crashes"])})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
