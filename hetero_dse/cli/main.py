"""``hetero_dse``: the command-line entry point.

Every user-facing failure is a :class:`HeteroDSEError` and ends as one line on stderr with exit code 1;
``--debug`` shows the traceback instead. Usage errors (an unknown option) are click's, exit code 2.
"""

from __future__ import annotations

import json
import logging
import sys

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
      hetero_dse explore --op conv2d --shape yolo:C8 --board vu9p --csim
                                                      best FPGA design, its HLS project, C-simulated
      hetero_dse explore --op gemm --target cpu       measured TVM schedules against torch
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


# The commands that explore (their module imports this one for ``cli`` and ``console``).
from hetero_dse.cli import explore as _explore  # noqa: E402,F401
from hetero_dse.cli import history as _history  # noqa: E402,F401
from hetero_dse.cli import synth as _synth  # noqa: E402,F401

if __name__ == "__main__":
    main()
