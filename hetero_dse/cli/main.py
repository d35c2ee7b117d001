"""``hetero_dse``: the command-line entry point.

Every user-facing failure is a :class:`HeteroDSEError` and ends as one line on stderr with exit code 1;
``--debug`` shows the traceback instead. Usage errors (an unknown option, a value out of range) are one line
too, with click's exit code 2. Ctrl-C and SIGTERM (what ``timeout``, CI cancellation and ``docker stop``
send) stop a run the same way: workers stopped, what was found written with the report marked incomplete,
exit code 130.
"""

from __future__ import annotations

import json
import signal
import sys

import click

from hetero_dse.cli import check as _check  # noqa: F401  (registers its commands)
from hetero_dse.cli import explore as _explore  # noqa: F401
from hetero_dse.cli import history as _history  # noqa: F401
from hetero_dse.cli import model as _model  # noqa: F401
from hetero_dse.cli import report as _report  # noqa: F401
from hetero_dse.cli import synth as _synth  # noqa: F401
from hetero_dse.cli.app import EXIT_ERROR, EXIT_INTERRUPTED, cli, console, operator_options
from hetero_dse.errors import HeteroDSEError, storage_error

@cli.command()
@click.argument("name", required=False)
def ops(name: str | None) -> None:
    """List the built-in operators, or show one operator's parameters and shapes."""
    from hetero_dse.cli.render import operator_detail, ops_table
    from hetero_dse.ops import BUILTIN, get_builtin

    console.print(operator_detail(get_builtin(name)) if name else ops_table(list(BUILTIN.values())))


@cli.command()
@operator_options
@click.option("--model", "model_name", default=None, metavar="NAME|model.py",
              help="A network's distinct layers instead (a built-in: resnet18, yolo_v1, mobilenet_v2, vgg16; or a "
                   "model.py), each with its epilogue.")
@click.option("--layer", "layers", type=click.IntRange(min=1), multiple=True, metavar="N",
              help="Only the network's layer N (as 'hetero_dse model' numbers them; repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON instead of tables.")
def analyze(op_file: str | None, builtin: str | None, shape: str | None, params: tuple[str, ...], name: str | None,
            model_name: str | None, layers: tuple[int, ...], as_json: bool) -> None:
    """Static analysis (FlexTensor §4.1): loops, mini-graph, affine accesses, FLOPs and traffic; an operator's
    tensors and the epilogue fused after its reduction (bias, residual add, activation).

    OP_FILE is a Python file whose operators are marked with @hetero_dse.operator.

    \b
    Examples:
      hetero_dse analyze --op conv2d --shape yolo:C8
      hetero_dse analyze --model resnet18 --layer 3
    """
    from hetero_dse.analysis import analyze as run_analysis
    from hetero_dse.cli.render import accesses_table, analysis_header, nodes_table, tensors_json
    from hetero_dse.cli.targets import resolve_operators

    if model_name is not None:
        operators = _network_layers(model_name, layers, op_file or builtin or shape or params or name)
    elif layers:
        raise HeteroDSEError("--layer picks a network's layer: give the network with --model")
    else:
        operators = resolve_operators(op_file, builtin, shape, params, name)
    analyses = [(op, run_analysis(op)) for op in operators]
    if as_json:
        click.echo(json.dumps([{"shape": op.shape_name, **a.to_dict(), "epilogue": list(op.epilogue),
                                "tensors": tensors_json(op)} for op, a in analyses], indent=2))
        return
    for op, a in analyses:
        console.print(analysis_header(a, op.shape_name, op))
        console.print(nodes_table(a))
        console.print(accesses_table(a))
        console.print()


def _network_layers(model_name: str, layers: tuple[int, ...], operator_given: object) -> list:
    """The distinct layers of a network (``--model``) as operators with their epilogues; ``layers`` (1-based)
    picks some."""
    from hetero_dse.model.capture import capture
    from hetero_dse.model.zoo import build

    if operator_given:
        raise HeteroDSEError("--model analyses a network's layers: give it without an operator (--op, an op.py, "
                             "--shape, --param, --name)")
    model, example = build(model_name)
    operators = capture(model, example, model_name, profile=False).operators()
    wrong = [n for n in layers if n > len(operators)]
    if wrong:
        raise HeteroDSEError(f"{model_name} has {len(operators)} distinct layers; there is no layer {wrong[0]} "
                             "(see 'hetero_dse model')")
    return [operators[n - 1] for n in layers] if layers else operators


@cli.command()
@click.argument("board", required=False)
def boards(board: str | None) -> None:
    """List the FPGA boards, or show one (a name or the path of a board YAML file) with its sources."""
    from hetero_dse.hardware.board import list_boards, load_board
    from hetero_dse.cli.render import board_detail, boards_table

    console.print(board_detail(load_board(board)) if board else boards_table(list_boards()))


def _check_environment() -> None:
    """The environment variables that set numbers, read once up front: a bad one is one sentence before any
    work starts, not a failure (or a silently ignored setting) in the middle of a search."""
    from gpu_cpu.conditions import loaded_cores

    loaded_cores()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry: run the CLI, turning user errors into one line and an exit code."""
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        _check_environment()
        code = cli.main(args=args, prog_name="hetero_dse", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("hetero_dse: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if isinstance(exc, click.UsageError) and ctx is not None else ""
        click.echo(f"hetero_dse: error: {' '.join(exc.format_message().split())}{hint}", err=True)
        sys.exit(exc.exit_code)
    except HeteroDSEError as exc:
        if debug:
            raise
        click.echo(f"hetero_dse: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    except KeyboardInterrupt:
        click.echo("hetero_dse: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except OSError as exc:
        if debug:
            raise
        said = storage_error(exc)  # a full disk met outside the writers that say what they were writing
        if said is None and not exc.filename:  # no file to name: a bug, said as one
            click.echo(f"hetero_dse: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the "
                       "traceback)", err=True)
            sys.exit(EXIT_ERROR)
        click.echo(f"hetero_dse: error: {said}" if said else f"hetero_dse: error: {exc.strerror or exc}: "
                   f"{exc.filename}", err=True)
        sys.exit(EXIT_ERROR)
    except Exception as exc:  # a bug: say so in one line, keep the traceback for --debug
        if debug:
            raise
        click.echo(f"hetero_dse: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
                   err=True)
        sys.exit(EXIT_ERROR)
    finally:
        signal.signal(signal.SIGTERM, previous)
    sys.exit(code if isinstance(code, int) else 0)


def _terminate(_signum: int, _frame: object) -> None:
    """SIGTERM as Ctrl-C: the run stops where Ctrl-C would stop it and keeps what it found."""
    raise KeyboardInterrupt



if __name__ == "__main__":
    main()
