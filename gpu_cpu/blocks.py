"""An operator's blocks as TVM's scheduler sees them, shared by every schedule template (the CPU/GPU splits in
``schedule.py``, the tensor cores in ``tensorcore.py``, the fused pair in ``b2b.py``): the main reduction, the
epilogue's element-wise blocks after it, and a rejected point as a candidate failure rather than a crash."""

from __future__ import annotations

from typing import Any

from hetero_dse.errors import HeteroDSEError
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point

__all__ = ["ScheduleError", "epilogue_blocks", "inline_producers", "main_tensor", "rejected"]


class ScheduleError(HeteroDSEError):
    """A schedule point that TVM rejects for this operator."""


def main_tensor(op: Operator) -> Any:
    """The reduction's output tensor (the epilogue, if any, comes after it)."""
    from hetero_dse.analysis import split_epilogue

    return split_epilogue(op.output)[0]


def epilogue_blocks(op: Operator) -> list[str]:
    """The names of the epilogue's blocks, first step first."""
    from hetero_dse.analysis import split_epilogue

    return [str(node.name) for node in split_epilogue(op.output)[1]]


def rejected(point: Point, exc: Exception) -> ScheduleError:
    """TVM's ScheduleError and friends: a candidate failure, not a crash."""
    return ScheduleError(f"TVM rejects {point}: {str(exc).splitlines()[0]}")


def inline_producers(sch: Any, block: Any) -> None:
    """Every block that feeds ``block`` (a padding, a gather) computed where ``block`` reads it."""
    while producers := sch.get_producers(block):
        sch.compute_inline(producers[0])
