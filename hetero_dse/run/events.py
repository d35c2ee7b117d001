"""What a run tells whoever started it, as it goes: the engine calls these, the CLI draws them (a progress bar,
a status line, tables); a script or a test takes :class:`Quiet`, which draws nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

__all__ = ["Quiet", "RunEvents", "SearchProgress"]


class SearchProgress(Protocol):
    """One search's line of progress."""

    def update(self, done: int, best: float | None) -> None:
        """``done`` points evaluated, the best objective so far (seconds; None: none yet)."""

    def finished(self, evaluations: int) -> None: ...

    def failed(self) -> None: ...


class RunEvents(Protocol):
    @contextmanager
    def searching(self) -> Iterator[None]:
        """Around every search of the run (a progress display lives this long)."""

    def search(self, title: str, total: int | None, unit: str) -> SearchProgress:
        """A search starts: ``title`` (operator, layer number, device), at most ``total`` ``unit`` (None: not
        known ahead, an exhaustive search)."""

    @contextmanager
    def status(self, text: str) -> Iterator[None]:
        """Work of a few seconds without progress to count (writing a project, fusing, synthesizing)."""

    def say(self, text: str) -> None:
        """A line for the person running it (work done once, going on from an interrupted run)."""

    def warn(self, text: str) -> None: ...

    def validated(self, project: str, validation: dict[str, Any], skipped: bool) -> None:
        """A synthesized design against its prediction (``validation.json``'s figures)."""


class _QuietSearch:
    def update(self, done: int, best: float | None) -> None:
        pass

    def finished(self, evaluations: int) -> None:
        pass

    def failed(self) -> None:
        pass


class Quiet:
    """Events that draw nothing; warnings are kept in ``warnings`` (a script reads them after the run)."""

    def __init__(self, say: Callable[[str], None] | None = None) -> None:
        self.warnings: list[str] = []
        self._say = say

    @contextmanager
    def searching(self) -> Iterator[None]:
        yield

    def search(self, title: str, total: int | None, unit: str) -> SearchProgress:
        return _QuietSearch()

    @contextmanager
    def status(self, text: str) -> Iterator[None]:
        yield

    def say(self, text: str) -> None:
        if self._say is not None:
            self._say(text)

    def warn(self, text: str) -> None:
        self.warnings.append(text)

    def validated(self, project: str, validation: dict[str, Any], skipped: bool) -> None:
        pass
