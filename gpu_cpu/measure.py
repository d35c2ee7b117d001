"""Isolated measurement: every candidate is built and timed in a worker process with a timeout.

A build error, a crash of the measured kernel (a segfault kills the worker) or a hang (the timeout kills
it) comes back as a failed :class:`MeasureResult` carrying its message; the worker is replaced and the
search goes on. One worker at a time measures, so two measurements never share the device.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpu_cpu.conditions import is_loaded, timing
from gpu_cpu.stability import instability
from hetero_dse.hardware.host import use_host_cores
from hetero_dse.process import worker_pool

#: what a worker imports, once in the fork server its workers are forked from (``hetero_dse.process.worker_pool``):
#: TVM for the builds and timings, torch for the library's
WORKER_MODULES = ("tvm", "torch", "gpu_cpu.pipeline", "gpu_cpu.measure")

#: what a worker runs: (job) -> seconds per run, or a timing (``{"seconds", "repeats", "foreign_load"}``);
#: raising means the candidate failed
Job = Callable[[Any], "float | dict[str, Any]"]


def check_fits_in_memory(op: Any, where: str) -> None:
    """Refuse before any trial an operator whose tensors (drawn as float64, then cast) and reference would
    not fit in a quarter of this machine's memory: every trial would fail the same way."""
    import os

    from hetero_dse.errors import HeteroDSEError
    from hetero_dse.units import fmt_bytes

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if 3 * op.tensor_bytes > memory // 4:
        raise HeteroDSEError(f"{op.title}'s tensors take {fmt_bytes(op.tensor_bytes)}: too large to measure "
                             f"{where} on this machine ({fmt_bytes(memory)} of memory); choose a smaller shape")


@dataclass(frozen=True)
class MeasureResult:
    """Seconds per run of a candidate (the median of ``repeats``), or the reason it has none; the foreign
    load while it was timed (cores; None: not known) and whether that makes it untrustworthy."""

    seconds: float | None
    error: str | None = None
    wall_s: float = 0.0
    repeats: tuple[float, ...] = ()
    foreign_load: float | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.seconds is not None

    @property
    def loaded(self) -> bool:
        return is_loaded(self.foreign_load)

    @property
    def unstable(self) -> str | None:
        """Why the repeats are not one figure (two clusters, or spread wide), or None."""
        return instability(self.repeats)

    def timing(self) -> dict[str, Any]:
        """The figure with its spread and conditions, for schedule.json, the report and the history."""
        return {"median_s": self.seconds, "min_s": min(self.repeats) if self.repeats else self.seconds,
                "max_s": max(self.repeats) if self.repeats else self.seconds, "repeats": list(self.repeats),
                "foreign_load": None if self.foreign_load is None else round(self.foreign_load, 3),
                "loaded": self.loaded, "unstable": self.unstable}

    @classmethod
    def of(cls, value: float | dict[str, Any], wall_s: float = 0.0) -> MeasureResult:
        """A worker's answer: seconds alone, or a timing dict."""
        if isinstance(value, dict):
            return cls(float(value["seconds"]), None, wall_s, tuple(float(x) for x in value.get("repeats", ())),
                       value.get("foreign_load"))
        return cls(float(value), None, wall_s)


class Measurer:
    """Runs jobs one at a time in a worker process (``worker_pool``), replacing it after a crash or a timeout."""

    def __init__(self, timeout_s: float = 60.0) -> None:
        use_host_cores()  # its worker takes the size of TVM's thread pool from the environment
        self.timeout_s = timeout_s
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # forked from the fork server, not from this process: a forked TVM runtime (threads, CUDA contexts) is
            # not safe to use, and the server never started one
            self._pool = worker_pool(1, WORKER_MODULES)
        return self._pool

    def _discard(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def run(self, job: Job, payload: Any) -> MeasureResult:
        start = time.perf_counter()
        future = self._executor().submit(job, payload)
        try:
            value = future.result(timeout=self.timeout_s)
        except FutureTimeout:
            self._discard()
            return MeasureResult(None, f"timed out after {self.timeout_s:g} s", time.perf_counter() - start)
        except BrokenProcessPool:
            self._discard()
            return MeasureResult(None, "the measured kernel crashed its worker process (e.g. a segfault)",
                                 time.perf_counter() - start)
        except Exception as exc:  # the job raised: a build error or a wrong result, reported as data
            return MeasureResult(None, error_text(exc), time.perf_counter() - start)
        return MeasureResult.of(value, time.perf_counter() - start)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> Measurer:
        return self

    def abort(self) -> None:
        """Kill the worker now (an interrupted search does not wait for the candidate being timed)."""
        self._discard()

    def __exit__(self, *exc: object) -> None:
        self._discard() if exc[0] is not None else self.close()


def error_text(exc: BaseException) -> str:
    """``Type: first line of the message``: what a failed trial records."""
    text = str(exc)
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


#: timings taken again when foreign work loaded the machine (another search's build, say), a growing pause
#: apart; the least loaded is kept, flagged if it still was
LOADED_RETRIES, LOADED_BACKOFF_S = 3, 0.5

#: the least milliseconds one timed repeat lasts, per target. GPU: a kernel of tens of microseconds timed
#: three times is mostly launch jitter. CPU: one schedule timed in fresh workers minutes apart moved by up to
#: 1.47x with three runs a repeat and 1.29x with 40 ms (coefficient of variation 13 % -> 10 %, at no cost a
#: search could see; bench/cpu_timing_noise.py, BENCHMARKS.md)
MIN_REPEAT_MS = {"cuda": 10, "llvm": 40}


@dataclass(frozen=True)
class MeasureJob:
    """What a worker needs to build and time one candidate, on the CPU or the GPU (all picklable)."""

    source: str  # "builtin", or the path of the op.py that defines the operator
    name: str
    params: dict[str, Any]
    point: dict[str, Any]
    number: int = 3
    repeat: int = 3
    #: the least milliseconds one repeat lasts (TVM raises ``number`` to reach it); None: the target's
    #: ``MIN_REPEAT_MS``
    min_repeat_ms: int | None = None
    check: bool = True
    target: str = "llvm"  # or "cuda"
    #: a first run slower than this is the answer, untimed further: a candidate several times slower than the
    #: best so far does not need nine more runs to be known as slow
    cutoff_s: float | None = None
    device: str = "h100"  # the named GPU whose limits apply when no GPU is present
    #: the steps fused after the operator's reduction, and the output dimensions its bias is indexed by
    epilogue: tuple[str, ...] = ()
    epilogue_axes: tuple[int, ...] = ()

    @classmethod
    def of(cls, op: Any, source: str, point: dict[str, Any], **kwargs: Any) -> MeasureJob:
        """The job that rebuilds ``op`` as it is, its epilogue included, in a worker."""
        return cls(source, op.definition.name, dict(op.params), point, epilogue=tuple(op.epilogue),
                   epilogue_axes=tuple(op.epilogue_axes), **kwargs)

    def operator(self) -> Any:
        return rebuild_operator(self.source, self.name, self.params, self.epilogue, self.epilogue_axes)


def measure_cpu_job(job: MeasureJob) -> float:
    """Worker side: rebuild the operator, apply the point, build, check against the reference, time it."""
    import tvm

    from gpu_cpu.schedule import apply_cpu, build_cpu
    from hetero_dse.space.point import Point

    op = job.operator()
    return check_and_time(build_cpu(apply_cpu(op, Point(job.point))).mod, op, tvm.cpu(0), job)


def torch_cpu_job(job: MeasureJob) -> dict[str, Any]:
    """Worker side: the timing of the operator's torch call on the CPU, under the same conditions as ours."""
    from gpu_cpu.baselines import time_torch_cpu

    op = job.operator()
    samples: list[float] = []
    with timing() as conditions:
        seconds = time_torch_cpu(op, samples=samples)
    if seconds is None:
        raise ValueError(f"torch has no call for {op.name}")
    return {"seconds": seconds, "repeats": samples, "foreign_load": conditions.foreign_load}


def time_torch_isolated(op: Any, source: str, timeout_s: float = 300.0) -> MeasureResult | None:
    """Seconds per run of ``op``'s torch call, timed in a worker process of its own as every candidate is.

    The searching process also holds XGBoost's OpenMP threads (the cost models) and TVM's thread pool:
    timed there, torch's figures on YOLO-v1 layers fell 2-4x in some runs (C15: 8.9 GFLOPS against 33-37)
    for no cause found, while a fresh process is what every candidate is timed in. None when torch has no
    call for ``op`` or its run failed (the search's results are kept either way; the report then has no
    library figure)."""
    from gpu_cpu.baselines import torch_call

    if torch_call(op) is None:
        return None
    with Measurer(timeout_s) as measurer:
        result = measurer.run(torch_cpu_job, MeasureJob.of(op, source, {}))
    return result if result.ok else None


def check_and_time(module: Any, op: Any, dev: Any, job: MeasureJob) -> float | dict[str, Any]:
    """Run the built ``module`` once on ``dev`` against the reference, then its timing: the median time per
    run of ``repeat`` repeats, each of them, and the foreign load meanwhile (under the machine's lock)."""
    import tvm

    from hetero_dse.ops.winograd import TILE_KNOB, result_problem

    inputs = op.random_inputs(0)
    given = inputs
    if job.target == "llvm":  # our CPU kernels take the weights packed once, ahead (gpu_cpu.schedule)
        from gpu_cpu.schedule import pack_weights

        given = pack_weights(op, job.point, inputs)
    elif TILE_KNOB in job.point:  # a GPU Winograd kernel takes them transformed (G W Gᵀ), as they are otherwise
        from gpu_cpu.winograd import transform_weights

        given = [inputs[0], transform_weights(inputs[1], int(job.point[TILE_KNOB])), *inputs[2:]]
    args = [tvm.runtime.tensor(a, dev) for a in given]
    out = tvm.runtime.tensor(np.zeros([int(d) for d in op.output.shape], dtype=str(op.output.dtype)), dev)
    start = time.perf_counter()
    module[module.entry_name](*args, out)
    dev.sync()  # a GPU launch returns before the kernel ends
    first = time.perf_counter() - start
    if job.check:
        want = op.reference(inputs)
        problem = None if want is None else result_problem(out.numpy(), want, op.dtype, TILE_KNOB in job.point)
        if problem:
            raise ValueError(f"the scheduled kernel's result {problem}")
    if job.cutoff_s is not None:
        if job.target == "cuda":  # the first launch also loaded the kernel: probe once more, on the device's timer
            first = float(module.time_evaluator(module.entry_name, dev, number=1, repeat=1)(*args, out).mean)
        if first > job.cutoff_s:
            return first
    return time_module(module, dev, [*args, out], job.number, job.repeat,
                       MIN_REPEAT_MS.get(job.target, 0) if job.min_repeat_ms is None else job.min_repeat_ms)


def time_module(module: Any, dev: Any, args: list[Any], number: int, repeat: int, min_repeat_ms: int
                ) -> dict[str, Any]:
    """The built ``module``'s entry run on ``args`` (its output last) on ``dev``, timed as every candidate is: the
    median seconds a run of ``repeat`` repeats of ``number`` runs (at least ``min_repeat_ms`` each), each repeat,
    and the foreign load meanwhile; under the machine's measurement lock, again after a pause while foreign work
    loaded the machine, the least loaded kept."""
    # one more repeat than asked, dropped: the first repeat of a fresh timer ran up to 20x slower than the
    # others (gemm 256^3: 3.0 ms against 0.15 ms in 11 of 20 timings, bench/reliability.py), enough to move
    # the median of three
    timer = module.time_evaluator(module.entry_name, dev, number=number, repeat=repeat + 1,
                                  min_repeat_ms=min_repeat_ms)
    best: dict[str, Any] | None = None
    for attempt in range(LOADED_RETRIES + 1):
        if attempt:
            time.sleep(LOADED_BACKOFF_S * attempt)  # out of the lock: another search's timing goes first
        with timing() as conditions:
            results = [float(x) for x in timer(*args).results][1:]
        timed = {"seconds": float(np.median(results)), "repeats": results, "foreign_load": conditions.foreign_load}
        if best is None or (timed["foreign_load"] or 0.0) < (best["foreign_load"] or 0.0):
            best = timed
        if not conditions.loaded:
            break
    return best


def rebuild_operator(source: str, name: str, params: dict[str, Any], epilogue: tuple[str, ...] | list[str] = (),
                     epilogue_axes: tuple[int, ...] | list[int] = ()) -> Any:
    """An operator from where it was defined (``"builtin"`` or an op.py path), its name and its parameters, with
    the epilogue it had fused (``hetero_dse.epilogue``)."""
    from pathlib import Path

    if source != "builtin":
        from hetero_dse.loader import load_operators

        definitions = {d.name: d for d in load_operators(Path(source))}
        definition = definitions[name]
    else:
        from hetero_dse.ops import get_builtin

        definition = get_builtin(name)
    op = definition.instantiate(params)
    if epilogue:
        from hetero_dse.epilogue import fuse

        op = fuse(op, tuple(epilogue), tuple(epilogue_axes))
    return op
