"""A run's progress as lines, where no bar can be drawn (output to a log file or a pipe, a CI job): a 15-minute
``explore --model resnet18`` into a log printed nothing until its end. Each search that lasts says when it
starts, how far it is at most every ``EVERY_S`` seconds, and how it ended; each step between searches says when
it starts and, where it took a while, when it ended. Lines go to stderr, with the time of day, so stdout keeps
the tables."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import click

from hetero_dse.units import fmt_seconds

__all__ = ["EVERY_S", "START_S", "LoggedSearch", "logged_step"]

#: seconds between two progress lines of one search: often enough to show a run is alive, rarely enough to read
EVERY_S = 30.0
#: a search says it started once it has run this long: one that ends (or fails) at once says so in one line
START_S = 1.0


def line(text: str) -> None:
    click.echo(f"[{time.strftime('%H:%M:%S')}] {text}", err=True)


class LoggedSearch:
    """One search's progress as lines: started, every ``EVERY_S`` seconds while it runs, finished or failed."""

    def __init__(self, title: str, total: int | None, unit: str) -> None:
        self.title, self.total, self.unit = title, total, unit
        self.start = self.last = time.monotonic()
        self.best: float | None = None
        self.announced = False

    def update(self, done: int, best: float | None) -> None:
        self.best = best if best else self.best
        now = time.monotonic()
        if not self.announced and now - self.start >= START_S:
            self.announced = True
            line(f"{self.title}: searching" + (f", at most {self.total:,} {self.unit}" if self.total else ""))
        if self.announced and now - self.last >= EVERY_S:
            self.last = now
            of = f"/{self.total:,}" if self.total else ""
            line(f"{self.title}: {done:,}{of} {self.unit}, best {self._best()}, {now - self.start:.0f} s")

    def finished(self, evaluations: int) -> None:
        line(f"{self.title}: done, {evaluations:,} {self.unit}, best {self._best()}, "
             f"{time.monotonic() - self.start:.0f} s")

    def failed(self) -> None:
        line(f"{self.title}: failed, {time.monotonic() - self.start:.0f} s")

    def _best(self) -> str:
        return fmt_seconds(self.best) if self.best else "—"


@contextmanager
def logged_step(text: str) -> Iterator[None]:
    """A step between searches (writing a project, running the plan as one network) as a line, and a second
    when it ends if it took more than a few seconds."""
    line(text)
    start = time.monotonic()
    try:
        yield
    except BaseException:
        line(f"{text}: stopped, {time.monotonic() - start:.0f} s")
        raise
    if time.monotonic() - start > 5.0:
        line(f"{text}: done, {time.monotonic() - start:.0f} s")
