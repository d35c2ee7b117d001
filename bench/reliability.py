"""Repeat the reliability audit's experiments (``../shared/notes/review-reliability.md``) against this tree.

    .venv/bin/python bench/reliability.py --json reliability.json            (about 15 minutes on 2 cores)

* **kill -9 of a measured search**, ``--kills`` times at a random moment: records lost (the count right after
  the kill against the count when the database is opened again), the database's integrity check, duplicate
  keys, and worker processes of the killed run still alive 5 s later.
* **concurrent searches on one database**: 4 CPU searches of different shapes at once; records lost (what
  their reports say they measured against what the database holds). Then the same kernel timed alone and
  by 4 processes at once: the spread of its median times (max / min), which the machine-wide lock keeps near 1.
* **interrupted FPGA sweeps**, ``--sweeps`` times: the YOLO-v1 set on vu9p, alternately float32 and int8
  with ``--force`` over the previous output, stopped by SIGINT or SIGKILL at a random moment; an output
  "looks complete but is not" when its report says complete and a project is missing or from another run,
  or when ``csim`` of it exits 0 without saying it is incomplete.

Not part of the test suite: it takes minutes and its figures depend on the machine. The second review's
surfaces (synth, reports, calibrate, model.py, history import, --rpc) are ``bench/hostile.py``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from hetero_dse.process import session_processes  # noqa: E402

CLI = [sys.executable, "-m", "hetero_dse"]


def count(db: Path) -> tuple[int, int, str]:
    """Records, distinct (workload, key) pairs and SQLite's integrity verdict."""
    if not db.exists():
        return 0, 0, "ok"
    with sqlite3.connect(db) as conn:
        verdict = conn.execute("PRAGMA integrity_check").fetchone()[0]
        try:
            n = conn.execute("SELECT count(*) FROM records").fetchone()[0]
            distinct = conn.execute("SELECT count(DISTINCT workload_id || ':' || point_key) FROM records").fetchone()[0]
        except sqlite3.OperationalError:  # killed before the tables were made
            n = distinct = 0
    return n, distinct, verdict


def kills(work: Path, times: int, rng: random.Random) -> dict:
    db = work / "kill.sqlite"
    rows = []
    for i in range(times):
        out = work / f"kill{i}"
        run = subprocess.Popen([*CLI, "explore", "--op", "gemm", "--param", "M=256", "--param", "N=256", "--param",
                                "K=256", "--target", "cpu", "--trials", "200", "--seed", str(i), "--db", str(db),
                                "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True, cwd=ROOT)
        time.sleep(rng.uniform(8, 25))
        workers = len(session_processes(run.pid)) - 1
        os.kill(run.pid, signal.SIGKILL)
        run.wait(30)
        at_kill = count(db)
        time.sleep(5)
        orphans = session_processes(run.pid)
        if orphans:
            os.killpg(run.pid, signal.SIGKILL)
        reopened = count(db)
        rows.append({"run": i, "workers_at_kill": workers, "records_at_kill": at_kill[0],
                     "records_reopened": reopened[0], "lost": at_kill[0] - reopened[0],
                     "duplicates": reopened[0] - reopened[1], "integrity": reopened[2],
                     "orphans_after_5s": len(orphans)})
        print(f"kill {i}: {rows[-1]}", flush=True)
    return {"runs": rows, "records_lost": sum(r["lost"] for r in rows),
            "integrity_failures": sum(r["integrity"] != "ok" for r in rows),
            "duplicates": sum(r["duplicates"] for r in rows),
            "runs_with_orphans": sum(r["orphans_after_5s"] > 0 for r in rows)}


def concurrent(work: Path) -> dict:
    db = work / "conc.sqlite"
    runs = []
    for size in (64, 96, 128, 160):
        out = work / f"conc{size}"
        runs.append((out, subprocess.Popen([*CLI, "explore", "--op", "gemm", "--param", f"M={size}", "--param",
                                            f"N={size}", "--param", f"K={size}", "--target", "cpu", "--trials", "8",
                                            "--db", str(db), "--out", str(out)], stdout=subprocess.DEVNULL,
                                           stderr=subprocess.PIPE, text=True, cwd=ROOT)))
    measured = 0
    for out, run in runs:
        _, err = run.communicate(timeout=900)
        if run.returncode != 0:
            raise RuntimeError(f"a concurrent search failed: {err}")
        (record,) = json.loads((out / "report.json").read_text())["cpu"]
        measured += record["trials"] - record["answered_from_history"]
    held, distinct, verdict = count(db)
    spread = kernel_spread(work)
    return {"searches": 4, "measured": measured, "records": held, "records_lost": measured - held,
            "duplicates": held - distinct, "integrity": verdict, **spread}


TIMER = """
import json, sys
from gpu_cpu.measure import MeasureJob, Measurer, measure_cpu_job
from hetero_dse.analysis import analyze
from hetero_dse.ops import get_builtin
from hetero_dse.space.cpu import CpuSpace
op = get_builtin("gemm").instantiate({"M": 256, "N": 256, "K": 256})
point = CpuSpace(analyze(op)).default_point()
out = []
with Measurer(timeout_s=300) as m:
    for _ in range(int(sys.argv[1])):
        r = m.run(measure_cpu_job, MeasureJob("builtin", "gemm", dict(op.params), point.to_json()))
        out.append([r.seconds, r.foreign_load, r.loaded])
print(json.dumps(out))
"""


def kernel_spread(work: Path) -> dict:
    """The same kernel's median time alone, then in 4 processes at once."""
    def timers(n: int, rounds: int) -> list[list[float]]:
        procs = [subprocess.Popen([sys.executable, "-c", TIMER, str(rounds)], stdout=subprocess.PIPE, text=True,
                                  cwd=ROOT) for _ in range(n)]
        return [json.loads(p.communicate(timeout=900)[0]) for p in procs]

    alone = timers(1, 6)[0]
    together = [x for run in timers(4, 6) for x in run]

    def median(rows: list) -> float:
        return statistics.median(r[0] for r in rows)

    trusted = [r for r in together if not r[2]]
    return {"alone": alone, "concurrent": together, "flagged_alone": sum(r[2] for r in alone),
            "flagged_concurrent": len(together) - len(trusted),
            "median_concurrent_over_alone": median(together) / median(alone),
            "worst_concurrent_over_alone_median": max(r[0] for r in together) / median(alone),
            "worst_unflagged_concurrent_over_alone_median": (max(r[0] for r in trusted) / median(alone)
                                                             if trusted else None)}


def sweeps(work: Path, times: int, rng: random.Random) -> dict:
    out = work / "sweep"
    db = work / "sweep.sqlite"
    rows = []
    for i in range(times):
        dtype = "float32" if i % 2 == 0 else "int8"
        run = subprocess.Popen([*CLI, "explore", "--op", "conv2d", "--shape", "yolo", "--board", "vu9p", "--dtype",
                                dtype, "--budget", "3000", "--db", str(db), "--out", str(out), "--force"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, cwd=ROOT)
        how = rng.choice(["INT", "KILL"])
        time.sleep(rng.uniform(6, 22))
        if run.poll() is None:
            os.kill(run.pid, signal.SIGINT if how == "INT" else signal.SIGKILL)
        else:
            how = "finished"
        run.wait(60)
        for pid in session_processes(run.pid):
            os.kill(pid, signal.SIGKILL)
        verdict = looks_complete_but_is_not(out, dtype)
        rows.append({"run": i, "dtype": dtype, "stopped_by": how, **verdict})
        print(f"sweep {i}: {rows[-1]}", flush=True)
    return {"runs": rows, "looks_complete_but_is_not": sum(r["deceptive"] for r in rows)}


def looks_complete_but_is_not(out: Path, dtype: str) -> dict:
    report_path = out / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    problems = []
    if report is not None and report["complete"]:
        for e in report["explorations"]:
            design = out / (e["project"] or "missing") / "design.json"
            if not design.exists():
                problems.append(f"{e['shape']}: no project")
            elif json.loads(design.read_text())["knobs"]["dtype"] != dtype:
                problems.append(f"{e['shape']}: a project of another run")
        if len(report["explorations"]) != 15:
            problems.append(f"{len(report['explorations'])} of 15 layers")
    csim = subprocess.run([*CLI, "csim", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=1800) \
        if any(out.glob("*/vu9p/hls")) else None
    incomplete = report is None or not report["complete"]
    if csim is not None and incomplete and csim.returncode == 0 and "interrupted run" not in csim.stdout:
        problems.append("csim passed an incomplete output without a word")
    return {"report": None if report is None else ("complete" if report["complete"] else "incomplete"),
            "csim_rc": None if csim is None else csim.returncode, "problems": problems, "deceptive": bool(problems)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--sweeps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=["kills", "concurrent", "sweeps"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    results = {}
    with tempfile.TemporaryDirectory(prefix="hetero_dse_reliability_") as tmp:
        work = Path(tmp)
        os.environ["HETERO_DSE_DB"] = str(work / "default.sqlite")
        if args.only in (None, "kills"):
            results["kills"] = kills(work, args.kills, rng)
        if args.only in (None, "concurrent"):
            results["concurrent"] = concurrent(work)
        if args.only in (None, "sweeps"):
            results["sweeps"] = sweeps(work, args.sweeps, rng)
    summary = {k: {m: v for m, v in r.items() if m != "runs"} for k, r in results.items()}
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
