"""The history database in front of any evaluator: points it holds are answered from it, every new result is
written to it the moment it exists (so a run killed at any point resumes where it stopped)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero_dse.explore.loop import Evaluation, Evaluator, OnRow
from hetero_dse.history import point_key
from hetero_dse.history.store import WorkloadHistory

__all__ = ["HistoryEvaluator"]


class HistoryEvaluator:
    """``inner`` behind ``history``: read-through and write-through, per row.

    The objective of an answered row is its stored time (``inf`` for a stored failure, its stored error the
    row's), so this fits evaluators whose objective is the time they record (measured trials). Answered rows
    carry no figures of ``inner``: ``figures`` holds the inner evaluation's figure of each row it evaluated and
    None for the rows answered (None in all where the inner evaluator gives no figure a row).
    ``answered`` counts the rows the history answered.
    """

    def __init__(self, inner: Evaluator, space: Any, history: WorkloadHistory) -> None:
        self.inner, self.space, self.history = inner, space, history
        self.answered = 0

    def evaluate(self, rows: np.ndarray, best: float | None, deadline: float | None,
                 on_row: OnRow | None = None) -> Evaluation:
        points = [self.space.decode(row) for row in rows]
        stored = self.history.known(points)
        # a time taken under foreign load is not an answer: the point is measured again and the new time kept
        answered = {i: stored[k] for i, k in enumerate(map(point_key, points))
                    if k in stored and not stored[k].loaded} if stored else {}
        fresh = [i for i in range(len(rows)) if i not in answered]
        objective = np.full(len(rows), np.inf)
        errors: list[str | None] = [None] * len(rows)
        told = 0  # rows told so far, in order: answered rows are told as the fresh rows around them finish

        def tell_until(stop: int) -> None:
            nonlocal told
            for i in range(told, stop):
                record = answered[i]
                self.answered += 1
                if record.ok:
                    objective[i] = record.seconds
                else:
                    errors[i] = record.error or "failed"
                if on_row is not None:
                    on_row(i, record.seconds, record.error, record.conditions)
            told = max(told, stop)

        def measured(j: int, seconds: float | None, error: str | None, timing: dict | None) -> None:
            nonlocal told
            i = fresh[j]
            tell_until(i)
            self.history.add(points[i], seconds, error, timing)
            if seconds is not None and error is None:
                objective[i] = seconds
            else:
                errors[i] = error or "failed"
            if on_row is not None:
                on_row(i, seconds, error, timing)
            told = i + 1

        evaluation = None
        end = len(rows)
        if fresh:
            evaluation = self.inner.evaluate(rows[fresh], best, deadline, on_row=measured)
            count = len(evaluation.objective)
            if count and told <= fresh[count - 1]:
                raise TypeError(f"{type(self.inner).__name__}.evaluate does not report its rows through on_row")
            if count < len(fresh):  # stopped at the deadline: rows from the first it did not reach are not spent
                end = fresh[count]
        tell_until(end)
        failed = errors[:end]
        return Evaluation(objective[:end], self._figures(evaluation, fresh, end),
                          failed if any(e is not None for e in failed) else None)

    @staticmethod
    def _figures(evaluation: Evaluation | None, fresh: list[int], end: int) -> list | None:
        """The inner evaluation's figures of each row (None for a row the history answered), where the inner
        evaluator gives one a row; else None."""
        figures = None if evaluation is None else evaluation.figures
        if not isinstance(figures, list) or len(figures) != len(evaluation.objective):
            return None
        out: list = [None] * end
        for j, value in enumerate(figures):
            out[fresh[j]] = value
        return out
