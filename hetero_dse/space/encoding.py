"""Encoded points: a space's points as integer rows (one column per knob, the index of its value)."""

from __future__ import annotations

import numpy as np


def row_keys(rows: np.ndarray, cardinalities: np.ndarray) -> np.ndarray:
    """One integer per row, equal for equal rows: the mixed-radix number of the knob indices.

    A space with more points than one int64 holds hashes the rows instead (a collision would merge two
    points' records, which the searches tolerate).
    """
    rows = np.atleast_2d(rows)
    if int(np.prod(cardinalities.astype(object))) < 2**62:
        radix = np.cumprod(np.concatenate([[1], cardinalities[:-1]])).astype(np.int64)
        return rows @ radix
    return np.array([hash(r.tobytes()) for r in rows], dtype=np.int64)
