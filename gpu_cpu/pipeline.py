"""Builds in parallel with measurement: candidates are compiled by a pool of builder processes (every core
but the one that measures) while a single worker times the ones already built.

Building (TVM lowering + LLVM or nvcc) takes seconds per candidate; for a GPU the host's cores are idle while
the device measures, so they build ahead. A CPU kernel is measured on every core (the target's
``num-cores``), so a build running beside it would steal a core from the kernel being timed: for the CPU the
pipeline is built with ``overlap=False`` and builds each candidate just before measuring it (measured on
YOLO-v1 C15: overlapping gained 3 % in wall time and changed which candidates timed out). Measurements stay
one at a time on the device. A builder that fails, crashes or hangs gives the
candidate a failed result (after it failed once more built alone, since a dead pool does not say which of
its builds killed it) and the rest of the batch is built again by a fresh pool.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from hetero_dse.hardware.host import use_host_cores
from gpu_cpu.measure import WORKER_MODULES, MeasureJob, MeasureResult, Measurer, error_text
from hetero_dse.process import worker_pool


def build_job(job: MeasureJob, directory: str) -> str:
    """Builder side: apply the point for the job's target, build, export; the module's path."""
    from gpu_cpu.schedule import apply_cpu, apply_gpu, build_cpu, build_cuda
    from hetero_dse.space.point import Point

    op = job.operator()
    point = Point(job.point)
    if job.target == "cuda":
        from hetero_dse.hardware.gpus import get_device, present_gpu

        # the device's limits were checked by the evaluator that made the job (hetero_dse/targets/gpu.py)
        device = present_gpu() or get_device(job.device)
        # on a GPU's machine TVM's runtime compiles the module as it is built, here in the builder
        executable, _ = build_cuda(apply_gpu(op, point), device, compile_here=present_gpu() is None)
    else:
        executable = build_cpu(apply_cpu(op, point))
    path = os.path.join(directory, f"{uuid.uuid4().hex}.so")
    executable.export_library(path)
    return path


def measure_built_job(payload: tuple[MeasureJob, str]) -> float:
    """Measurer side: load the built module (ours, or another tuner's best exported to a file), check it
    against the reference, time it."""
    import tvm

    from gpu_cpu.measure import check_and_time

    job, path = payload
    op = job.operator()
    module = tvm.runtime.load_module(path)
    return check_and_time(module, op, tvm.cuda(0) if job.target == "cuda" else tvm.cpu(0), job)


class Pipeline:
    """``evaluate(jobs)`` yields one result per job, in order, building ahead while measuring."""

    def __init__(self, timeout_s: float = 60.0, build_timeout_s: float = 120.0, builders: int | None = None,
                 build: Callable[[MeasureJob, str], str] = build_job,
                 measure: Callable[[tuple[MeasureJob, str]], float] = measure_built_job,
                 overlap: bool = True) -> None:
        use_host_cores()  # builders and measurers inherit the size of TVM's thread pool
        self.measurer = Measurer(timeout_s=timeout_s)
        self.build_timeout_s = build_timeout_s
        self.builders = builders or max(1, (os.cpu_count() or 2) - 1)
        self._build, self._measure = build, measure
        self.overlap = overlap
        self._pool: ProcessPoolExecutor | None = None
        self._dir = tempfile.mkdtemp(prefix="hetero_dse_build_")

    def _builder_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = worker_pool(self.builders, WORKER_MODULES)
        return self._pool

    def _discard_builders(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            for process in list(getattr(pool, "_processes", {}).values()):
                process.kill()
            pool.shutdown(wait=False, cancel_futures=True)

    def evaluate(self, jobs: Sequence[MeasureJob]) -> Iterator[MeasureResult]:
        pending: list[tuple[MeasureJob, Future[str]]] = []
        queue = list(jobs)
        # a crash or a hang takes the whole pool down with every build in it, so after one the rest of the
        # batch is built one job at a time: the next failure then belongs to the job that caused it
        isolated = not self.overlap
        while queue or pending:
            if not pending:
                pool = self._builder_pool()
                batch, queue = (queue[:1], queue[1:]) if isolated else (queue, [])
                pending = [(job, pool.submit(self._build, job, self._dir)) for job in batch]
            job, future = pending.pop(0)
            start = time.perf_counter()
            try:
                path = future.result(timeout=self.build_timeout_s)
            except (FutureTimeout, BrokenProcessPool) as exc:
                self._discard_builders()
                survivors = [j for j, _ in pending]
                pending = []
                if not isolated:  # not known whose fault: build this one again, alone
                    isolated = True
                    queue = [job, *survivors, *queue]
                    continue
                queue = survivors + queue
                why = (f"build timed out after {self.build_timeout_s:g} s" if isinstance(exc, FutureTimeout)
                       else "the build crashed its worker process")
                yield MeasureResult(None, why, time.perf_counter() - start)
                continue
            except Exception as exc:  # the build raised: TVM rejected the schedule, nvcc failed, ...
                yield MeasureResult(None, "build: " + error_text(exc), time.perf_counter() - start)
                continue
            try:
                result = self.measurer.run(self._measure, (job, path))
            finally:
                if os.path.exists(path):
                    os.unlink(path)
            yield result

    def close(self) -> None:
        self._discard_builders()
        self.measurer.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is not None:
            self.measurer.abort()
        self.close()
