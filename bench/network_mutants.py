"""How many realistic defects of the network kernel's code the project's checks catch (issue 38): a mutation test
of the shared kernel, not part of the test suite.

    python bench/network_mutants.py --sample 300 --json bench/data/network_mutants.json

The designs are the small network's (``tests/small_net.py``: a conv on the image, depthwise, pointwise, a residual
block, a leaky ReLU, a linear layer) that the suite C-simulates: float32 and int8 on ZCU102's grid and depthwise
engine, and int8 with a Winograd F(4x4) engine on vu9p reading four weight ports; and float32 on the network of a
stride-2 depthwise layer (``small_net.Strided``). The mutants are universalmutator's
(``pip install universalmutator``: a language's operators, constants and statements replaced, deleted or negated,
line by line) of the project's ``src/kernel.cpp``, a seeded sample of them; pragma lines, comments and the trip
counters the test bench prints are not mutated (the pragmas have their own mutants, ``hetero_dse/testing/mutants.py``;
the counters are the check itself). Each mutant is written into a copy of the project and run through the checks the
tool has for a network project, in turn, the first to fail catching it; with the explorer's table, and where no
check catches it there, with ``small_net.retiled``'s tables (``--tables``: ``lanes``, channel tiles of one lane
group, row and column tiles that leave a partial last one; ``column``, tiles a column wide and as tall as the
buffers hold, every output channel in one: the paths the explorer's tables leave idle), as the suite runs them:

- ``compile``: the C-simulation does not compile (not a defect: such a mutant is left out of the figures);
- ``lint``: ``hetero_dse lint``'s network lint (``lint_network``) has a finding;
- ``csim``: the C-simulation fails: an output off the torch reference, an abort of the test doubles (a burst read
  past its request, a stream read empty), a crash, or a loop that does not end (``--run-s``);
- ``trips``: the C-simulation's trip counts of a process differ from the model's (``check_trips``);
- ``lint crashed``: the lint ended in an internal error (a defect of the lint, counted apart);
- ``survived``: every check passes. Some such mutants build the same hardware and compute the same values (an
  equivalent mutant: a bound that never binds); the rest are defects no check sees, listed for the reader.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the small network the suite C-simulates

#: lines not mutated: HLS directives (their own mutants), comments, includes, and the trip counters the test bench
#: prints (the trips check itself, not the design)
IGNORE = [r"^\s*#", r"^\s*//", r"hdse_count", r"hdse_trips", r"^\s*$"]

DESIGNS = {
    # on ZCU102 a word of 8 floats over two 128-bit ports a half each (arena_ports); "float32-one-port" the word of
    # one port, the code before it could spread (the earlier runs' "float32")
    "float32": dict(dtype="float32"),
    "float32-one-port": dict(dtype="float32", word=4),
    "int8": dict(dtype="int8"),
    "int8-winograd": dict(dtype="int8", algorithm="winograd", board="vu9p", lanes=(2,), tile=4, weight_ports=(4,)),
    # the network of a stride-2 depthwise layer (its taps' columns carried by the stride)
    "float32-stride-2": dict(dtype="float32", strided=2),
}

_MUTANT = re.compile(r"PROCESSING MUTANT: (\d+): (.*?)  ==>  (.*?)\.\.\.\(FROM: builtin:(\S+?):(\d+)\)\.\.\.VALID "
                     r"\[written to (\S+)\]")


def write_design(name: str, into: Path, retiled: str = "") -> Path:
    """The small network's project for design ``name`` (``DESIGNS``): with the explorer's table, or (``retiled``:
    ``lanes`` or ``column``) with ``small_net.retiled``'s, of one lane group a tile or of columns."""
    from small_net import small_design

    from hetero_dse.hls.network_project import write_network_project

    _, design, run, _, _ = small_design(**DESIGNS[name])
    if retiled:
        from small_net import retiled as retile

        design, run = retile(design, run, column=retiled == "column")
    return write_network_project(into / (name + (f"-{retiled}" if retiled else "")), design, run)


def generate(project: Path, into: Path, ignore_lines: Sequence[str] = IGNORE) -> list[dict]:
    """universalmutator's mutants of the project's kernel (none of the lines ``ignore_lines`` match): each its line,
    the rule that made it and its file."""
    mutate = shutil.which("mutate", path=str(Path(sys.executable).parent)) or shutil.which("mutate")
    if mutate is None:
        raise SystemExit("this bench needs universalmutator: pip install universalmutator")
    into.mkdir(parents=True, exist_ok=True)
    ignore = into / "ignore.txt"
    ignore.write_text("\n".join(ignore_lines) + "\n")
    out = subprocess.run([mutate, str(project / "src" / "kernel.cpp"), "cpp", "--noCheck", "--showRules",
                          "--ignore", str(ignore), "--mutantDir", str(into)], capture_output=True, text=True,
                         check=True, cwd=into).stdout
    return [{"line": int(m[1]), "before": m[2].strip(), "after": m[3].strip(), "rule": f"{m[4]}:{m[5]}",
             "file": m[6] if Path(m[6]).is_absolute() else str(into / m[6])} for m in _MUTANT.finditer(out)]


def function_lines(source: str, names: list[str]) -> set[int]:
    """The lines (1-based) of the generated functions ``names`` in ``source``, each from ``static void name(`` to
    its closing brace at column 0."""
    lines: set[int] = set()
    for name in names:
        start = source.find(f"static void {name}(")
        if start < 0:
            raise SystemExit(f"the kernel has no function {name}")
        first = source.count("\n", 0, start) + 1
        lines |= set(range(first, source.count("\n", 0, source.find("\n}\n", start) + 2) + 1))
    return lines


def sample_mutants(project: Path, into: Path, sample: int, seed: int, functions: str | None = None,
                   ignore_lines: Sequence[str] = IGNORE) -> tuple[list[dict], list[dict]]:
    """The project's kernel's mutants (``generate``), those inside ``functions`` where given (comma-separated), and
    a seeded sample of ``sample`` of them (0: every one): (all made, those chosen)."""
    made = generate(project, into, ignore_lines)
    if functions:
        inside = function_lines((project / "src" / "kernel.cpp").read_text(), functions.split(","))
        made = [m for m in made if m["line"] in inside]
    return made, random.Random(seed).sample(made, sample) if 0 < sample < len(made) else made


def csim_then_lint(copy: Path, lint: Callable[[Path], Any]) -> tuple[str | None, Any]:
    """The checks every kind of project runs first, on the mutated ``copy``: its C-simulation (a mutant that does
    not compile is "compile") and ``lint`` ("lint" where it finds or refuses; its own internal error "lint crashed:
    ..."). (the verdict, None) where either decides; else (None, the C-simulation's result, None where it ended in
    an error of its own)."""
    import hetero_dse.hls.csim as csim_module
    from hetero_dse.errors import HeteroDSEError
    from hetero_dse.hls.lint.record import LintError

    try:
        result = csim_module.csim(copy)
    except HeteroDSEError as exc:
        if "does not compile" in str(exc):
            return "compile", None
        result = None
    try:
        if not lint(copy).ok:
            return "lint", None
    except LintError:  # refused in one sentence: caught
        return "lint", None
    except Exception as exc:  # noqa: BLE001 - the lint's own defect, counted apart
        return f"lint crashed: {type(exc).__name__}: {exc}", None
    return None, result


def tally(chosen: list[dict], verdicts: list[str]) -> dict[str, Any]:
    """The verdicts of the ``chosen`` mutants counted: ``counts`` by verdict (the lint's crashes as one),
    ``crashes`` by message, ``valid`` (those that compile), ``caught`` and the ``survivors``."""
    crashes = Counter(v for v in verdicts if v.startswith("lint crashed"))
    counts = Counter("lint crashed" if v.startswith("lint crashed") else v for v in verdicts)
    valid = len(chosen) - counts["compile"]
    survivors = [{k: m[k] for k in ("line", "before", "after", "rule")}
                 for m, v in zip(chosen, verdicts, strict=True) if v == "survived"]
    return {"counts": counts, "crashes": crashes, "valid": valid, "survivors": survivors,
            "caught": valid - counts["survived"] - counts["lint crashed"]}


def print_survivors(t: dict[str, Any]) -> None:
    """The lint's crashes and the surviving mutants of a ``tally``, a line each."""
    for crash, n in t["crashes"].items():
        print(f"  {crash} ({n})")
    for s in t["survivors"]:
        print(f"  survived, line {s['line']}: {s['before']}  ==>  {s['after']}")


def judge(args: tuple[list[str], dict, float]) -> str:
    """Which check catches one mutant (the module doc's verdicts), on the first project (the explorer's table), else
    on the second (the same kernel mutated, running ``small_net.retiled``'s table: "... (retiled)")."""
    projects, mutant, run_s = args
    for n, project in enumerate(projects):
        verdict = _judge(project, mutant, run_s)
        if verdict != "survived" or n == len(projects) - 1:
            return verdict + " (retiled)" * (n > 0 and verdict not in ("compile", "survived"))
    return "survived"


def _judge(project: str, mutant: dict, run_s: float) -> str:
    import hetero_dse.hls.csim as csim_module
    from hetero_dse.hls.network_lint import lint_network
    from hetero_dse.hls.network_project import check_trips

    csim_module.run_timeout = lambda _project: run_s
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "p"
        shutil.copytree(project, copy, ignore=shutil.ignore_patterns("build"))
        shutil.copy(mutant["file"], copy / "src" / "kernel.cpp")
        if mutant.get("header"):  # the mutated kernel's own header (the retiled table's sizes its arrays alike)
            shutil.copy(mutant["header"], copy / "src" / "kernel.h")
        verdict, result = csim_then_lint(copy, lint_network)
        if verdict is not None:
            return verdict
        if result is None or not result.passed:
            return "csim"
        return "trips" if check_trips(copy, result.output) else "survived"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--designs", default=",".join(DESIGNS), help=f"of {', '.join(DESIGNS)}")
    parser.add_argument("--sample", type=int, default=300, help="mutants a design (seeded); 0: every one")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--run-s", type=float, default=20.0,
                        help="seconds a C-simulation may run (the unmutated ones take under one)")
    parser.add_argument("--tables", default="lanes,column",
                        help="small_net.retiled's tables run where the explorer's catches nothing (lanes, column; the "
                             "runs before the column table: lanes)")
    parser.add_argument("--explorer-table", action="store_true",
                        help="the explorer's table only (a tree without small_net.retiled)")
    parser.add_argument("--functions", help="only the mutants inside these functions of the kernel (comma-separated, "
                                            "e.g. dw_read_in,dw_compute)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.designs.split(","):
            start = time.perf_counter()
            project = write_design(name, Path(tmp))
            tables = [] if args.explorer_table else [t for t in args.tables.split(",") if t]
            projects = [str(project)] + [str(write_design(name, Path(tmp), t)) for t in tables]
            kernel = {"file": str(project / "src" / "kernel.cpp"), "header": str(project / "src" / "kernel.h")}
            assert judge((projects, kernel, args.run_s)) == "survived"  # the kernel runs both tables
            made, chosen = sample_mutants(project, Path(tmp) / f"{name}-mutants", args.sample, args.seed,
                                          args.functions)
            chosen = [dict(m, header=kernel["header"]) for m in chosen]
            with ProcessPoolExecutor(args.jobs) as pool:
                verdicts = list(pool.map(judge, [(projects, m, args.run_s) for m in chosen]))
            t = tally(chosen, verdicts)
            counts, valid, caught = t["counts"], t["valid"], t["caught"]
            retiled = sum(n for v, n in counts.items() if v.endswith("(retiled)"))
            print(f"{name}: {len(made)} mutants, {len(chosen)} tried, {counts['compile']} do not compile; of {valid}: "
                  f"lint {counts['lint']}, csim {counts['csim']}, trips {counts['trips']}"
                  + ("" if not tables else f", then on the retiled tables {retiled} ("
                     + ", ".join(f"{v.split()[0]} {counts[v]}" for v in sorted(counts) if v.endswith("(retiled)"))
                     + ")")
                  + f", lint crashed {counts['lint crashed']}, survived {counts['survived']}: "
                  f"{caught / max(valid, 1):.1%} caught ({time.perf_counter() - start:.0f} s)", flush=True)
            print_survivors(t)
            rows.append({"design": name, "tables": ", ".join(["explorer", *tables]),
                         **({"functions": args.functions} if args.functions else {}),
                         "mutants": len(made), "tried": len(chosen), "verdicts": dict(counts),
                         "caught": caught, "valid": valid, "survivors": t["survivors"],
                         "crashes": dict(t["crashes"])})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
