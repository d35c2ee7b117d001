"""Running the user's code (op.py, its builders) so that it cannot hang the tool silently: a time limit."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from hetero_dse.errors import OperatorError

__all__ = ["time_limit"]


@contextmanager
def time_limit(seconds: float, message: str) -> Iterator[None]:
    """Raise ``OperatorError(message)`` if the block runs longer than ``seconds`` (a Python loop or a sleep;
    code blocked inside a C call is stopped when it returns to Python). Only the main thread can take the
    alarm; elsewhere the block runs without a limit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(_signum: int, _frame: object) -> None:
        raise OperatorError(message)

    previous = signal.signal(signal.SIGALRM, expire)
    outer_delay, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_delay:  # an enclosing limit keeps running (less the time spent here, which is not tracked)
            signal.setitimer(signal.ITIMER_REAL, outer_delay)
