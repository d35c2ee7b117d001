"""Synthesize HLS projects with Vitis, one job a project, farmed out on Dask.

A job runs the project's own ``run_hls.tcl`` (``vitis-run --mode hls --tcl`` from 2023.2 on, ``vitis_hls
-f`` before) with the steps asked (``HDSE_STEPS``), in the project's directory, under a wall-clock limit,
and reads back what the tool wrote: ``csynth.xml`` and the module reports, the Verilog (pyverilog), the log,
the co-simulation and the implementation reports. Jobs run on a Dask cluster: a ``LocalCluster`` of
``--jobs`` worker processes by default, or the scheduler a team started on the machines that have the
licences (``dask scheduler`` / ``dask worker tcp://host:8786``). Nothing else queues work.

Every finished job is stored the moment it returns, in the history database (one row per design, part,
clock, tool version and steps) and as ``synth.json`` in its project, so a rerun skips what is done, a team
shares results, and Ctrl-C or a lost worker loses only what was running. A job past its limit, a tool that
crashed, a worker that died: each is recorded as failed with the log's tail, and the rest go on.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import math
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hetero_dse.atomic import atomic_write_text, open_new
from hetero_dse.hls.readback import read_back_within
from hetero_dse.hls.supervise import supervised
from hetero_dse.hls.vitis import STEPS, SynthError, SynthTool, find_tool, parse_steps

__all__ = ["JOB_TIMEOUT_S", "STEPS", "SYNTH_STATUSES", "SynthError", "SynthJob", "SynthTool", "find_projects",
           "find_tool", "parse_steps", "run_job", "synthesize", "validate_outcomes"]

#: what a job's synth.json can say of it: its tool ran through, failed (or was lost), or ran out of time
SYNTH_STATUSES = ("ok", "failed", "timeout")
#: The wall-clock limit of one job unless the user gives another (place and route of a large part takes hours).
JOB_TIMEOUT_S = 6 * 3600.0
#: how much of a tool's log a failed job keeps: its last lines, from its last bytes, each line cut short
LOG_TAIL_BYTES = 64 * 1024
LOG_LINE_CHARS = 500
LOG_TAIL_LINES = 40


# -------------------------------------------------------------------------------------------- jobs
def find_projects(paths: Sequence[str | Path], networks: list[Path] | None = None) -> list[Path]:
    """HLS projects (a directory with ``run_hls.tcl`` and ``design.json``) among ``paths``, each a project
    or a directory holding projects (an ``explore`` output: every single-layer project in it; its network
    kernels, which this does not read back, go into ``networks`` where given)."""
    from hetero_dse.hls.network_lint import is_network_project

    projects: list[Path] = []
    skipped: list[Path] = []
    for p in map(Path, paths):
        if not p.is_dir():
            raise SynthError(f"{p} is not a directory")
        if (p / "run_hls.tcl").is_file() and (p / "design.json").is_file():
            projects.append(p)
            continue
        found = sorted(q.parent for q in p.rglob("run_hls.tcl") if (q.parent / "design.json").is_file()
                       and ".partial" not in q.parent.parts[-1])
        if not found:
            raise SynthError(f"{p} holds no HLS project written by hetero_dse (no run_hls.tcl with a design.json)")
        kernels = [q for q in found if is_network_project(q)]
        skipped += kernels
        projects += [q for q in found if q not in kernels]
    if networks is not None:
        networks += skipped
    if skipped and not projects:
        raise SynthError(f"{', '.join(map(str, paths))} hold only network kernels ({len(skipped)}), which `hetero_dse "
                         "synth` does not read back: synthesise each with its own `make csynth`")
    unique = list(dict.fromkeys(p.resolve() for p in projects))
    return unique


@dataclass(frozen=True)
class SynthJob:
    """One project to synthesize, with what identifies its result."""

    project: str
    steps: tuple[str, ...]
    timeout_s: float
    tool: SynthTool
    design_key: str
    part: str
    clock_mhz: float

    @classmethod
    def of(cls, project: Path, steps: Sequence[str], timeout_s: float, tool: SynthTool) -> SynthJob:
        from hetero_dse.history.records import point_key
        from hetero_dse.space.point import Point

        try:
            record = json.loads((project / "design.json").read_text())
            if isinstance(record, dict) and "network" in record:
                raise SynthError(f"{project} is a whole network's kernel: synthesise it with its own `make csynth`; "
                                 "`hetero_dse synth` reads back single-layer designs only, and does not yet set a "
                                 "network kernel's report beside its model")
            knobs = record["knobs"]
            part = record.get("part") or record["board"]
            clock = float(knobs["clock_mhz"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            raise SynthError(f"{project}/design.json is not a design record written by hetero_dse explore") from None
        if not (math.isfinite(clock) and 0 < clock <= 2000):
            raise SynthError(f"{project}/design.json asks for a clock of {knobs['clock_mhz']!r} MHz; a design's "
                             "clock is a number of MHz above 0 (explore writes it)")
        if not isinstance(part, str) or not _PART.fullmatch(part):
            raise SynthError(f"{project}/design.json names the part {part!r}, which is not a part number "
                             "(letters, digits and dashes, such as xcvu9p-flgb2104-2-i)")
        key = point_key(Point({"operator": record.get("signature", record.get("operator", "")), **knobs}))
        return cls(str(project), tuple(steps), float(timeout_s), tool, key, part, clock)


#: a part number (or a board name, in older records) as it may reach the tool's Tcl
_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


#: The tools this process is running: a worker that is closed (Ctrl-C, the cluster shut down) takes them
#: down with it rather than leaving hours of synthesis running unowned.
_RUNNING: set[subprocess.Popen] = set()


def _kill_running() -> None:
    for proc in list(_RUNNING):
        _kill(proc)


atexit.register(_kill_running)


def run_job(job: SynthJob) -> dict[str, Any]:
    """Run one synthesis (on a Dask worker or here) and read back what the tool wrote. Whatever goes wrong is
    this job's failure, said in its result: an exception would leave the worker to print its traceback (and
    the job's arguments) on the user's terminal."""
    try:
        return _run_job(job)
    except Exception as exc:  # a project folder that cannot be written, a tool that cannot be waited for
        return {"status": "failed", "reason": f"{type(exc).__name__}: {str(exc)[:LOG_LINE_CHARS]}", "wall_s": 0.0,
                "log_tail": ""}


def _run_job(job: SynthJob) -> dict[str, Any]:
    project = Path(job.project)
    log_path = project / "synth.log"
    env = {**os.environ, "HDSE_STEPS": " ".join(job.steps)}
    start = time.time()
    status = "ok"
    with open_new(log_path) as log:  # never through a link left in the project
        try:
            proc = subprocess.Popen(supervised(job.tool.command()), cwd=project, stdout=log,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True)
        except OSError as exc:
            return {"status": "failed", "reason": f"could not start {job.tool.path}: {exc.strerror}",
                    "wall_s": 0.0, "log_tail": ""}
        _RUNNING.add(proc)
        try:
            code = proc.wait(timeout=job.timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            code, status = None, "timeout"
        finally:
            _RUNNING.discard(proc)
    result: dict[str, Any] = {"status": status, "returncode": code, "wall_s": time.time() - start,
                              "steps": list(job.steps), "tool_version": job.tool.version}
    result["log_tail"] = _tail(log_path)
    if status == "timeout":
        result["reason"] = f"stopped after the {job.timeout_s:.0f} s limit"
        return result
    if code != 0:
        result.update(status="failed", reason=f"{job.tool.kind} exited with code {code}")
        return result
    result.update(read_back_within(project, job.timeout_s))
    if result.get("reason"):
        result["status"] = "failed"
    return result


def _kill(proc: subprocess.Popen) -> None:
    """The tool and everything it started (Vitis runs a tree of processes)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def _tail(path: Path) -> str:
    """The log's last lines, read from its last 64 KB (a tool's log can be hundreds of MB)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - LOG_TAIL_BYTES))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(line[:LOG_LINE_CHARS] for line in text.splitlines()[-LOG_TAIL_LINES:])


# ----------------------------------------------------------------------------------------- farming
@dataclass
class Outcome:
    project: str
    status: str  # ok, failed, timeout, skipped (done before), cancelled
    result: dict[str, Any]


def synthesize(jobs: Sequence[SynthJob], *, store: Any = None, scheduler: str | None = None, workers: int = 1,
               rerun: bool = False, on_event: Callable[[str, SynthJob, dict | None], None] | None = None,
               cluster_options: dict[str, Any] | None = None) -> list[Outcome]:
    """Run ``jobs`` on Dask and record each as it finishes (``store``: a HistoryDB, and ``synth.json`` in the
    project). Jobs done before (found in ``store`` with status ok) are skipped unless ``rerun``.
    ``on_event(kind, job, result)`` is told "skipped", "started", "done" for the progress display.
    Ctrl-C cancels what is queued or running and is raised again; what finished is recorded already."""
    import logging

    if not logging.getLogger().isEnabledFor(logging.DEBUG):
        for name in ("distributed", "tornado"):
            logging.getLogger(name).setLevel(logging.ERROR)
    notify = on_event or (lambda *_: None)
    outcomes: list[Outcome] = []
    todo = []
    locks: list[int] = []
    try:
        for job in jobs:
            # a project another synth run is working on is its to finish: each job runs once
            lock = _lock_project(Path(job.project))
            if lock is None:
                result = {"status": "skipped", "reason": "another hetero_dse synth run is synthesizing this project"}
                outcomes.append(Outcome(job.project, "busy", result))
                notify("skipped", job, result)
                continue
            locks.append(lock)
            known = store.synthesis(job.design_key, job.part, job.clock_mhz, job.tool.version,
                                    " ".join(job.steps)) if store is not None else None
            if known is not None and known["status"] == "ok" and not rerun:
                outcomes.append(Outcome(job.project, "skipped", known["result"]))
                _write_project_record(job, known["result"])
                notify("skipped", job, known["result"])
            else:
                todo.append(job)
        if todo:
            _run_jobs(todo, store, scheduler, min(workers, len(todo)), cluster_options, notify, outcomes)
    finally:
        for fd in locks:
            os.close(fd)  # closing the descriptor releases its lock
    return outcomes


def _lock_project(project: Path) -> int | None:
    """The project's synthesis lock (``.hetero_dse-synth.lock``, never through a link), or None where another
    process holds it."""
    try:
        fd = os.open(project / ".hetero_dse-synth.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o644)
    except OSError as exc:
        raise SynthError(f"cannot lock {project} for synthesis: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _run_jobs(todo: list[SynthJob], store: Any, scheduler: str | None, workers: int,
              cluster_options: dict[str, Any] | None, notify: Callable, outcomes: list[Outcome]) -> None:
    import dask
    from distributed import as_completed

    # a job whose tool takes its worker down is tried on one more worker, then recorded as failed
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        client, cluster = _connect(scheduler, workers, cluster_options)
        try:
            futures = {}
            for job in todo:
                futures[client.submit(run_job, job, pure=False, retries=0)] = job
                notify("started", job, None)
            try:
                for future in as_completed(list(futures)):
                    job = futures[future]
                    try:
                        result = future.result()
                    except Exception as exc:  # a worker lost, or the job raised: recorded, the rest go on
                        result = {"status": "failed", "reason": _lost(exc),
                                  "log_tail": _tail(Path(job.project) / "synth.log")}
                    _record(store, job, result)
                    outcomes.append(Outcome(job.project, result["status"], result))
                    notify("done", job, result)
            except KeyboardInterrupt:
                for future, job in futures.items():
                    if not future.done():
                        future.cancel()
                        outcomes.append(Outcome(job.project, "cancelled", {}))
                raise
        finally:
            client.close()
            if cluster is not None:
                cluster.close()


def _connect(scheduler: str | None, workers: int, options: dict[str, Any] | None):
    """A client of the scheduler given, or of a local cluster of ``workers`` processes (and that cluster)."""
    import logging

    from distributed import Client, LocalCluster

    # Dask's own INFO lines (scheduler at, nanny closing, ...) are not the user's business: warnings stay,
    # and --debug (the root logger at DEBUG) shows everything
    if not logging.getLogger().isEnabledFor(logging.DEBUG):
        logging.getLogger("distributed").setLevel(logging.WARNING)
    if scheduler:
        try:
            return Client(scheduler, timeout="20s"), None
        except (OSError, TimeoutError, ValueError) as exc:  # ValueError: not an address (no port, a bad scheme)
            raise SynthError(f"cannot reach the Dask scheduler at {scheduler} ({exc}); start it with 'dask "
                             "scheduler' and the workers with 'dask worker <address>' on the machines with "
                             "Vitis") from None
    # the scheduler's web server always starts: on a free loopback port, never the fixed 8787 another cluster
    # (another synth run, a second test worker) may hold
    cluster = LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=True,
                           dashboard_address="127.0.0.1:0", **(options or {}))
    client = Client(cluster)
    if not logging.getLogger().isEnabledFor(logging.DEBUG):
        client.run(_quiet_worker)
    return client, cluster


def _quiet_worker() -> None:
    """On each local worker: at the end of a run a worker whose scheduler closed first logs its heartbeat's
    traceback (seen on a loaded machine). A job's own failure reaches the summary; --debug shows all."""
    import logging

    for name in ("distributed", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _lost(exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "KilledWorker":
        return "the worker running it was lost (killed or out of memory)"
    return f"the job failed on its worker: {name}: {exc}"


def _record(store: Any, job: SynthJob, result: dict[str, Any]) -> None:
    """The project's ``synth.json`` first (a file of its own), then the history database; a database that
    refuses the row costs that row, said in the result, never the results still to come."""
    try:
        _write_project_record(job, result)
    except OSError as exc:
        result.setdefault("notes", []).append(f"synth.json could not be written: {exc.strerror or exc}")
    if store is not None:
        try:
            store.add_synthesis(job.design_key, job.part, job.clock_mhz, job.tool.version, " ".join(job.steps),
                                result["status"], result)
        except Exception as exc:  # noqa: BLE001 - any database error: this row's, recorded in synth.json
            note = f"not recorded in the history database: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            result.setdefault("notes", []).append(note)
            with contextlib.suppress(OSError):
                _write_project_record(job, result)


def _write_project_record(job: SynthJob, result: dict[str, Any]) -> None:
    """``synth.json`` in the project, written whole (a temporary file renamed into place)."""
    atomic_write_text(Path(job.project) / "synth.json",
                      json.dumps({"tool_version": job.tool.version, "steps": list(job.steps), **result}, indent=2))


def validate_outcomes(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    """Predicted against synthesized for every outcome that has a report: ``validation.json`` written in
    its project (whole: a temporary file renamed into place); returns one summary a project
    (``project``, ``status``, ``reason``, ``log_tail``, ``validation``)."""
    from hetero_dse.hls.validate import validate

    summaries = []
    for outcome in outcomes:
        project = Path(outcome.project)
        summary: dict[str, Any] = {"project": str(project), "status": outcome.status,
                                   "reason": outcome.result.get("reason"), "log_tail": outcome.result.get("log_tail"),
                                   "validation": None}
        if outcome.result.get("status") == "ok":
            try:
                record = json.loads((project / "design.json").read_text())
                check = validate(record, outcome.result)
                atomic_write_text(project / "validation.json", json.dumps(check, indent=2))
            except (OSError, ValueError, KeyError, TypeError) as exc:  # that project's, not the others'
                summary.update(status="failed", reason=f"not validated: {type(exc).__name__}: {exc}")
            else:
                summary["validation"] = check
        summaries.append(summary)
    return summaries
