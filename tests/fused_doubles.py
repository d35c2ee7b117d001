"""Test doubles of the fused kernel's worker job (``gpu_cpu.b2b_measure.fused_point_job``), importable by the
worker process a ``Measurer`` spawns: a point that hangs the device and one that crashes its process."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from gpu_cpu.b2b_measure import FusedJob, fused_point_job, ranked_points


def hangs_then_crashes(job: FusedJob) -> dict[str, Any]:
    """The template's best-estimated point hangs, its second kills its worker as a fault on the device does (a
    segfault); every other point is built, checked and timed as ``fused_point_job`` does."""
    ranked = [p for p, _ in ranked_points(job.pair, job.device)]
    if job.point == ranked[0]:
        time.sleep(3600)
    if job.point == ranked[1]:
        os.kill(os.getpid(), signal.SIGSEGV)
    return fused_point_job(job)
