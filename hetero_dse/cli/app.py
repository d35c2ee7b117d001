"""The ``hetero_dse`` command group, its console and the options several commands share.

The commands live in modules of their own (``main.py``: ops, analyze, boards; ``explore.py``,
``history.py``, ``synth.py``), each importing this module; ``main.py`` imports them all, so imports run
one way: app ← commands ← main.
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Callable, Sequence

import click
from rich.console import Console
from rich.text import Text

from hetero_dse import __version__

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


def warn(message: str) -> None:
    """One line on the console: ``warning: message`` (the message printed as it is, brackets and all)."""
    console.print(Text.assemble(("warning", "yellow"), f": {message}"))


class Finite(click.FloatRange):
    """A float option that must be a finite number (click's ranges let ``nan`` through)."""

    name = "finite float"

    def convert(self, value, param, ctx):  # noqa: ANN001 -- click's signature
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class Registered(click.ParamType):
    """A name from a registry (the kinds of device, the explorers), checked when the option is read: a plugin's,
    registered after the CLI was imported, is a choice too."""

    def __init__(self, name: str, names: Callable[[], Sequence[str]]) -> None:
        self.name, self.names = name, names

    def get_metavar(self, param, ctx=None):  # noqa: ANN001 -- click's signature
        return "[" + "|".join(self.names()) + "]"

    def convert(self, value, param, ctx):  # noqa: ANN001 -- click's signature
        if value not in self.names():
            self.fail(f"{value!r} is not one of {', '.join(self.names())}", param, ctx)
        return value


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
      hetero_dse synth out/ --jobs 4                  synthesize the projects with Vitis (where installed)
    """
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
