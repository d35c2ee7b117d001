"""How many realistic defects the HLS lint catches (issue 35's mutation test; not part of the test suite).

    python bench/lint_mutants.py                 # the review's six projects, every mutant of every site
    python bench/lint_mutants.py --builtins      # ... and every built-in operator's best design, float32 and int8
    python bench/lint_mutants.py --json out.json
    PYTHONPATH=<another tree> python bench/lint_mutants.py      # that tree's lint on its own projects

The projects are the ones the second HLS review read (YOLO-v1 C1 and C8 on vu9p, an int8 GEMM 1024^3 on
u280, a depthwise layer of 144 channels 56x56 on zcu104, ResNet-18's L12 and L13 with their bias, residual
and ReLU), explored with explore's defaults. Every mutant of ``hetero_dse.testing.mutants`` (one defect at a
time in kernel.cpp or kernel.h, design.json untouched) is written into a copy and linted; a mutant is caught
when the lint has a finding. The tests (tests/test_lint.py) mutate other, smaller projects, one site a kind.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from hetero_dse.hardware.board import load_board
from hetero_dse.hls.lint import LintError, lint
from hetero_dse.hls.project import write_project
from hetero_dse.ops import BUILTIN, get_builtin
from hetero_dse.targets.base import Search
from hetero_dse.targets.flow import explore
from hetero_dse.targets.fpga import FpgaTarget
try:
    from hetero_dse.testing.mutants import apply, mutants
except ImportError:  # an earlier tree (PYTHONPATH=<tree>) has no mutants of its own: this tree's (standard library)
    import importlib.util

    def _load(name: str):
        spec = importlib.util.spec_from_file_location(
            f"hetero_dse.testing.{name}", Path(__file__).resolve().parents[1] / "hetero_dse" / "testing" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        # dataclasses look their module up, and the modules loaded after it import from it by this name
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module

    for _name in ("mutant_source", "pragma_mutants", "datapath_mutants"):  # what mutants.py imports, first
        _load(_name)
    _module = _load("mutants")
    apply, mutants = _module.apply, _module.mutants

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fpga_review_designs import LAYERS, review_operator  # noqa: E402

#: the review's layers (bench/fpga_review_designs.py), by the names of their project folders (which also seed
#: --per-kind's sample)
REVIEW = {slug: LAYERS[title] for slug, title in (
    ("yolo_C8_vu9p", "YOLO-v1 C8 (vu9p)"), ("yolo_C1_vu9p", "YOLO-v1 C1 (vu9p)"),
    ("gemm_int8_u280", "int8 GEMM 1024^3 (u280)"), ("depthwise_zcu104", "depthwise 144x56x56 (zcu104)"),
    ("resnet18_L12_vu9p", "ResNet-18 L12 (vu9p)"), ("resnet18_L13_vu9p", "ResNet-18 L13 (vu9p)"))}


def write(out: Path, name: str, op, board_name: str, budget: int | None = None) -> Path:
    board = load_board(board_name)
    e = explore(op, FpgaTarget(board), search=Search(budget=budget, top_k=1) if budget else Search(top_k=1))
    op_d, analysis = e.best_operator()
    point, design = e.best_design
    return write_project(out / name, op_d, analysis, point, design, board)


def projects(out: Path, builtins: bool) -> dict[str, Path]:
    written = {}
    for name, (op_name, params, steps, board) in REVIEW.items():
        written[name] = write(out, name, review_operator(op_name, params, steps), board)
    if builtins:
        for op_name in sorted(BUILTIN):
            for dtype in ("float32", "int8"):
                op = get_builtin(op_name).instantiate({"dtype": dtype})
                written[f"{op_name}_{dtype}"] = write(out, f"{op_name}_{dtype}", op, "vu9p", budget=2000)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--builtins", action="store_true", help="also every built-in operator, float32 and int8")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--per-kind", type=int, metavar="N",
                        help="at most N mutants of each kind a project, drawn with a fixed seed (for a slow lint)")
    args = parser.parse_args()
    caught, total, missed, clean = Counter(), Counter(), [], {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        written = projects(Path(tmp) / "projects", args.builtins)
        made = time.perf_counter() - t0
        for name, project in written.items():
            try:
                clean[name] = lint(project).ok
            except LintError:
                clean[name] = False
            found = mutants(project)
            if args.per_kind:
                rng = random.Random(name)
                by_kind: dict[str, list] = {}
                for m in found:
                    by_kind.setdefault(m.kind, []).append(m)
                found = [m for kind in sorted(by_kind) for m in rng.sample(by_kind[kind],
                                                                            min(args.per_kind, len(by_kind[kind])))]
            for m in found:
                try:
                    found = not lint(apply(project, m, Path(tmp) / "mutant")).ok
                except LintError:
                    found = True  # the mutant does not parse: nothing reaches synthesis
                caught[m.kind] += found
                total[m.kind] += 1
                if not found:
                    missed.append(f"{name}: {m}")
    seconds = time.perf_counter() - t0 - made
    n, c = sum(total.values()), sum(caught.values())
    print(f"{'kind':24s} caught/mutants")
    for kind in sorted(total):
        print(f"{kind:24s} {caught[kind]}/{total[kind]}")
    print(f"all: {c}/{n} = {100 * c / n:.1f} % caught, on {len(written)} projects (clean before: "
          f"{sum(clean.values())}/{len(clean)}); {n / seconds:.1f} mutants linted a second")
    for line in missed:
        print("missed:", line)
    if args.json:
        args.json.write_text(json.dumps({
            "host": platform.node(), "projects": sorted(written), "clean": clean,
            "kinds": {k: {"caught": caught[k], "mutants": total[k]} for k in sorted(total)},
            "caught": c, "mutants": n, "missed": missed, "seconds": seconds}, indent=2) + "\n")


if __name__ == "__main__":
    main()
