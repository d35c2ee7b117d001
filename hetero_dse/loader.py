"""Loading a user's op.py: import it as a module and collect the operators it marks with ``@operator``."""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path

from hetero_dse.errors import HeteroDSEError, OperatorError
from hetero_dse.guard import time_limit
from hetero_dse.operator import OperatorDef


#: seconds importing an op.py may take (TVM's own import is done by then; defining operators takes milliseconds)
IMPORT_TIMEOUT_S = 60


def load_operators(path: str | Path) -> list[OperatorDef]:
    """Import ``path`` and return the operators it defines, in definition order.

    Raises:
        OperatorError: the file is missing, unreadable, has a syntax error, fails on import,
            or marks no operator.
    """
    path = Path(path)
    if not path.exists():
        raise OperatorError(f"op file {path} does not exist")
    if path.is_dir():
        raise OperatorError(f"op file {path} is a directory; give the path of a Python file")
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise OperatorError(f"op file {path} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        code = compile(source, str(path), "exec")
    except SyntaxError as exc:
        raise OperatorError(f"op file {path} has a syntax error at line {exc.lineno}: {exc.msg}") from None

    module_name = f"hetero_dse_user_op_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_loader(module_name, loader=None, origin=str(path))
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(path)
    sys.modules[module_name] = module  # dataclasses and pickling look modules up by name
    try:
        with time_limit(IMPORT_TIMEOUT_S, f"it did not finish importing in {IMPORT_TIMEOUT_S} s (a loop "
                                          "that never ends, or a call that blocks, at import?)"):
            exec(code, module.__dict__)
    except SystemExit as exc:
        raise OperatorError(f"op file {path} called sys.exit({exc.code!r}) while importing; an op file only "
                            "defines operators") from None
    except HeteroDSEError as exc:
        raise OperatorError(f"op file {path}: {exc}") from None
    except Exception as exc:
        raise OperatorError(f"op file {path} failed while importing, at line {_user_line(exc, path)}: "
                            f"{type(exc).__name__}: {exc}") from exc

    found = [v for v in vars(module).values() if isinstance(v, OperatorDef)]
    if not found:
        raise OperatorError(f"op file {path} defines no operator; mark a function that returns its tensors with "
                            "@hetero_dse.operator (see examples/gemm.py)")
    return found


def select(ops: list[OperatorDef], name: str | None, path: str | Path) -> list[OperatorDef]:
    """Keep the operator called ``name`` (all of them when ``name`` is None)."""
    if name is None:
        return ops
    chosen = [op for op in ops if op.name == name]
    if not chosen:
        raise OperatorError(f"op file {path} has no operator {name!r}; it has: {', '.join(op.name for op in ops)}")
    return chosen


def _user_line(exc: BaseException, path: Path) -> str:
    """Line of the user's file where the import failed (the innermost frame in that file)."""
    line = "?"
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename) == path:
            line = str(frame.lineno)
    return line
