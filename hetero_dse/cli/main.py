"""``hetero_dse``: the command-line entry point.

Every user-facing failure is a :class:`HeteroDSEError` and ends as one line on stderr with exit code 1;
``--debug`` shows the traceback instead. Usage errors (an unknown option) are click's, exit code 2.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import click
from rich.console import Console

from hetero_dse import __version__
from hetero_dse.errors import HeteroDSEError

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130

# Markup off: operator bodies and accesses are full of brackets (A[i, k]) that rich would eat as tags.
# Piped output gets a wide page instead of rich's 80 columns, so tables stay one row per item.
console = Console(markup=False, highlight=False, width=None if sys.stdout.isatty() else 200)

_OPERATOR_OPTIONS = [
    click.argument("op_file", required=False, type=click.Path(dir_okay=True, path_type=str)),
    click.option("--op", "builtin", metavar="NAME",
                 help="A built-in operator instead of an op.py (see 'hetero_dse ops')."),
    click.option("--shape", metavar="SET[:NAME]", help="A named shape, e.g. yolo:C8, or a whole set, e.g. yolo."),
    click.option("--param", "params", metavar="NAME=VALUE", multiple=True,
                 help="Override a parameter, e.g. --param K=256 --param dtype=int8 (repeatable)."),
    click.option("--name", metavar="NAME", help="Only this operator of an op.py that defines several."),
]


def operator_options(fn):
    for option in reversed(_OPERATOR_OPTIONS):
        fn = option(fn)
    return fn


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="hetero_dse")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs instead of one-line errors.")
def cli(debug: bool) -> None:
    """Explore how to run a tensor operator best on FPGA boards, CPUs and GPUs.

    \b
    Start with:
      hetero_dse ops                                  the built-in operators
      hetero_dse analyze --op conv2d --shape yolo:C8  FlexTensor's static analysis of one layer
      hetero_dse analyze examples/gemm.py --param K=256
      hetero_dse boards                               the FPGA boards and their resources
    """
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


@cli.command()
@click.argument("name", required=False)
def ops(name: str | None) -> None:
    """List the built-in operators, or show one operator's parameters and shapes."""
    from hetero_dse.cli.render import operator_detail, ops_table
    from hetero_dse.ops import BUILTIN, get_builtin

    console.print(operator_detail(get_builtin(name)) if name else ops_table(list(BUILTIN.values())))


@cli.command()
@operator_options
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON instead of tables.")
def analyze(op_file: str | None, builtin: str | None, shape: str | None, params: tuple[str, ...], name: str | None,
            as_json: bool) -> None:
    """Static analysis (FlexTensor §4.1): loops, mini-graph, affine accesses, FLOPs and traffic.

    OP_FILE is a Python file whose operators are marked with @hetero_dse.operator.
    """
    from hetero_dse.analysis import analyze as run_analysis
    from hetero_dse.cli.render import accesses_table, analysis_header, nodes_table
    from hetero_dse.cli.targets import resolve_operators

    operators = resolve_operators(op_file, builtin, shape, params, name)
    analyses = [(op, run_analysis(op)) for op in operators]
    if as_json:
        click.echo(json.dumps([{"shape": op.shape_name, **a.to_dict()} for op, a in analyses], indent=2))
        return
    for op, a in analyses:
        console.print(analysis_header(a, op.shape_name))
        console.print(nodes_table(a))
        console.print(accesses_table(a))
        console.print()


@cli.command()
@click.argument("board", required=False)
def boards(board: str | None) -> None:
    """List the FPGA boards, or show one (a name or the path of a board YAML file) with its sources."""
    from hetero_dse.board import list_boards, load_board
    from hetero_dse.cli.render import board_detail, boards_table

    console.print(board_detail(load_board(board)) if board else boards_table(list_boards()))


#: Designs scored by simulated annealing when the user gives no budget (it converges well before; see BENCHMARKS.md).
DEFAULT_SA_BUDGET = 30_000


def _split_values(values: tuple[str, ...]) -> list[str]:
    """``("float32,int8", "int16")`` -> ``["float32", "int8", "int16"]``."""
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _parse_clocks(values: tuple[str, ...]) -> list[float]:
    clocks = []
    for v in _split_values(values):
        try:
            clocks.append(float(v))
        except ValueError:
            raise HeteroDSEError(f"--clock expects a frequency in MHz such as 250, got {v!r}") from None
    return clocks


def _prepare_out(out: Path, force: bool) -> None:
    """Refuse a non-empty output directory without --force; fail early if it cannot be written."""
    if out.exists() and not out.is_dir():
        raise HeteroDSEError(f"output path {out} is a file, not a directory; choose another with --out")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise HeteroDSEError(f"output directory {out} is not empty; add --force to overwrite it or choose another "
                             "with --out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".hetero_dse-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise HeteroDSEError(f"cannot write to output directory {out}: {exc.strerror or exc}") from None


@cli.command()
@operator_options
@click.option("--board", "boards_", metavar="NAME|PATH", multiple=True, required=True,
              help="FPGA board (see 'hetero_dse boards'), or a board YAML file; repeat for several.")
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=Path("hetero_dse_out"),
              show_default=True, help="Where the HLS projects and the report go.")
@click.option("--force", is_flag=True, help="Write into a non-empty output directory, replacing earlier results.")
@click.option("--top-k", default=10, show_default=True, type=click.IntRange(min=1), help="Designs kept per board.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the search and of the test data.")
@click.option("--dtype", "dtypes", multiple=True, metavar="TYPE[,TYPE]",
              help="Data types to explore (float32, int16, int8); default: the operator's.")
@click.option("--clock", "clocks", multiple=True, metavar="MHZ[,MHZ]",
              help="Clock targets to explore; default: the board's default clock.")
@click.option("--explorer", default="auto", show_default=True, type=click.Choice(["auto", "exhaustive", "sa"]),
              help="auto: exhaustive when the pruned space is small enough, simulated annealing otherwise.")
@click.option("--budget", type=click.IntRange(min=1), metavar="N",
              help=f"Designs to score at most (default: all for exhaustive, {DEFAULT_SA_BUDGET:,} for sa).")
@click.option("--time-budget", type=float, metavar="SECONDS", help="Stop each search after this long.")
@click.option("--io-optimal", is_flag=True,
              help="Prune conv tiles to the I/O lower bound's optimality condition x*y = R*z (seed 001).")
@click.option("--traffic-weight", default=0.01, show_default=True, type=click.FloatRange(min=0),
              help="Latency fraction a design may give up per compulsory-traffic of extra DDR bytes (0: latency only).")
@click.option("--csim", "run_csim", is_flag=True, help="C-simulate each best design with g++ after writing it.")
def explore(op_file: str | None, builtin: str | None, shape: str | None, params: tuple[str, ...], name: str | None,
            boards_: tuple[str, ...], out: Path, force: bool, top_k: int, seed: int, dtypes: tuple[str, ...],
            clocks: tuple[str, ...], explorer: str, budget: int | None, time_budget: float | None, io_optimal: bool,
            traffic_weight: float, run_csim: bool) -> None:
    """Find the best three-stage FPGA accelerator for an operator and write its Vitis HLS project.

    \b
    Examples:
      hetero_dse explore --op conv2d --shape yolo:C1 --board vu9p
      hetero_dse explore examples/gemm.py --board u280 --dtype float32,int8 --csim
    """
    from hetero_dse.board import load_board
    from hetero_dse.cli.render import explorations_table
    from hetero_dse.cli.targets import resolve_operators
    from hetero_dse.fpga_flow import check_clocks, check_dtypes
    from hetero_dse.fpga_flow import explore as run_explore
    from hetero_dse.space.fpga import SpaceOptions

    if time_budget is not None and time_budget <= 0:
        raise HeteroDSEError(f"--time-budget must be positive, got {time_budget:g} seconds")
    operators = resolve_operators(op_file, builtin, shape, params, name)
    boards_loaded = [load_board(b) for b in boards_]
    dtype_list, clock_list = _split_values(dtypes), _parse_clocks(clocks)
    for op in operators:  # every bad input is reported before any search starts
        check_dtypes(op, dtype_list)
    for board in boards_loaded:
        check_clocks(board, clock_list)
    _prepare_out(out, force)

    explorations, interrupted = [], False
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from hetero_dse.units import fmt_seconds

    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,.0f} designs"),
                  TextColumn("best {task.fields[best]}"), TimeElapsedColumn(), console=console,
                  transient=not console.is_terminal) as bar:
        for op in operators:
            for board in boards_loaded:
                label = f"{op.name}{' ' + op.shape_name if op.shape_name else ''} on {board.name}"
                task = bar.add_task(label, total=budget, best="—")

                def progress(done: int, best: float, task: int = task) -> None:
                    bar.update(task, completed=done, best=fmt_seconds(best))

                e = run_explore(op, board, dtypes=dtype_list, clocks=clock_list,
                                options=SpaceOptions(io_optimal=io_optimal), explorer=explorer, seed=seed,
                                budget=budget, time_budget_s=time_budget, top_k=top_k, progress=progress,
                                default_sa_budget=DEFAULT_SA_BUDGET, traffic_weight=traffic_weight)
                bar.update(task, total=e.result.evaluations, completed=e.result.evaluations)
                explorations.append(e)
                if e.result.interrupted:
                    interrupted = True
                    break
            if interrupted:
                break

    projects, csims = _write_outputs(out, explorations, seed, run_csim)
    console.print(explorations_table(explorations, csims))
    console.print(f"Report: {out / 'report.md'} · HLS projects under {out}/<operator>/<board>/hls")
    if interrupted:
        click.echo("hetero_dse: interrupted; the report holds the designs found before the stop", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if any(not c["passed"] for c in csims.values()):
        raise HeteroDSEError("C-simulation failed for " + ", ".join(
            projects[i] for i, c in csims.items() if not c["passed"]) + " (see report.md)")


def _write_outputs(out: Path, explorations: list, seed: int, run_csim: bool) -> tuple[dict, dict]:
    """HLS project of each best design (and its C-simulation), then the reports; Ctrl-C keeps what is done."""
    from hetero_dse.hls.csim import csim as run_csim_on
    from hetero_dse.hls.project import write_project
    from hetero_dse.report import write_reports

    projects: dict[int, str] = {}
    csims: dict[int, dict] = {}
    interrupted = any(e.result.interrupted for e in explorations)
    try:
        for i, e in enumerate(explorations):
            if not e.designs:
                continue
            op, analysis = e.best_operator()
            point, design = e.best
            directory = write_project(out / e.label / e.board.name / "hls", op, analysis, point, design, e.board,
                                      seed=seed)
            projects[i] = str(directory.relative_to(out))
            if run_csim:
                with console.status(f"C-simulating {projects[i]}"):
                    result = run_csim_on(directory)
                csims[i] = {"passed": result.passed, "mismatches": result.mismatches,
                            "max_abs_error": result.max_abs_error, "elements": result.elements,
                            "headers": result.headers}
    except KeyboardInterrupt:
        interrupted = True
    write_reports(out, explorations, projects, csims, interrupted)
    if interrupted and not any(e.result.interrupted for e in explorations):
        raise KeyboardInterrupt
    return projects, csims


@cli.command("csim")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
def csim_command(directory: Path) -> None:
    """C-simulate generated HLS projects with g++ (DIRECTORY: one 'hls' project or an explore output)."""
    from hetero_dse.hls.csim import csim as run_csim_on

    if (directory / "src" / "kernel.cpp").is_file():
        projects = [directory]
    else:
        projects = sorted(p.parent.parent for p in directory.glob("**/hls/src/kernel.cpp"))
        projects = [p for p in projects if not p.name.endswith(".partial")]
    if not projects:
        raise HeteroDSEError(f"no HLS project under {directory}: expected src/kernel.cpp, or <op>/<board>/hls "
                             "directories written by 'hetero_dse explore'")
    failed = []
    for project in projects:
        with console.status(f"C-simulating {project}"):
            result = run_csim_on(project)
        verdict = "PASS" if result.passed else "FAIL"
        console.print(f"{verdict}  {project}  elements={result.elements:,} mismatches={result.mismatches:,} "
                      f"max_abs_error={result.max_abs_error:.3g} (headers: {result.headers})")
        if not result.passed:
            failed.append(str(project))
    if failed:
        raise HeteroDSEError(f"C-simulation failed for {', '.join(failed)}")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry: run the CLI, turning user errors into one line and an exit code."""
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    try:
        code = cli.main(args=args, prog_name="hetero_dse", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("hetero_dse: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except HeteroDSEError as exc:
        if debug:
            raise
        click.echo(f"hetero_dse: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    except KeyboardInterrupt:
        click.echo("hetero_dse: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:  # a bug: say so in one line, keep the traceback for --debug
        if debug:
            raise
        click.echo(f"hetero_dse: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
                   err=True)
        sys.exit(EXIT_ERROR)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
