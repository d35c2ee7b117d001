"""The history database: records kept whole and once, concurrent writers, JSON lines, and resumed searches
that measure no known point again."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from gpu_cpu.measure import MeasureResult
from hetero_dse.space.cpu import CpuSpace
from hetero_dse.evaluate.measured import tune
from hetero_dse.analysis import analyze
from hetero_dse.explore import make_explorer
from hetero_dse.history import HistoryDB, Record, Workload, WorkloadHistory, point_key
from hetero_dse.process import session_processes
from hetero_dse.testing.contracts import history_contract
from hetero_dse.ops import get_builtin
from hetero_dse.space.point import Point

WORKLOAD = Workload("gemm", "gemm[A:4x4:float32]{}", '{"kind": "llvm"}', {"hetero_dse": "test"})


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path, postgres_url):
    """The same suite on a SQLite file and on a PostgreSQL server, each test starting empty."""
    if request.param == "sqlite":
        return str(tmp_path / "h.sqlite")
    if postgres_url is None:
        pytest.skip("PostgreSQL is not installed here (scripts/bootstrap.sh installs it)")
    import sqlalchemy as sa

    from hetero_dse.history.schema import metadata

    engine = sa.create_engine(postgres_url)
    metadata.drop_all(engine)
    engine.dispose()
    return postgres_url


@pytest.fixture
def db(db_url):
    return HistoryDB(db_url)


def test_every_backend_keeps_the_history_contract(db):
    history_contract(db)


def test_records_round_trip_and_are_kept_once(db):
    wid = db.workload_id(WORKLOAD)
    assert db.workload_id(WORKLOAD) == wid
    a = Record(Point(a=1, split=(2, 3)), 2e-3, source="q", timestamp=10.0)
    assert Record.from_json(json.loads(json.dumps(a.to_json()))) == a
    assert Workload.from_json(WORKLOAD.to_json()) == WORKLOAD and Workload.from_json(WORKLOAD.to_json()).key
    assert db.add(wid, a)
    assert not db.add(wid, Record(a.point, 9.0))  # the first measurement stays
    db.add(wid, Record(Point(a=2, split=(6, 1)), None, "build failed"))
    db.add(wid, Record(Point(a=3, split=(1, 6)), 1e-3))
    assert [r.seconds for r in db.records(wid)] == [1e-3, 2e-3, None]  # fastest first, failures last
    (listed,) = db.workloads()
    assert (listed["records"], listed["failed"], listed["best_seconds"]) == (3, 1, 1e-3)
    found = db.lookup(wid, [a.point, Point(a=9, split=(6, 1))])
    assert list(found) == [point_key(a.point)] and found[point_key(a.point)].seconds == 2e-3


def test_export_import_and_prune(db, tmp_path):
    wid = db.workload_id(WORKLOAD)
    for i in range(5):
        db.add(wid, Record(Point(a=i), (i + 1) * 1e-3))
    db.add(wid, Record(Point(a=99), None, "timeout"))
    lines = list(db.export())
    other = HistoryDB(str(tmp_path / "other.sqlite"))
    assert other.import_lines(lines) == (6, 0) and other.import_lines(lines) == (0, 6)
    assert sorted(lines) == sorted(other.export())
    assert other.prune(2) == 3 and [r.seconds for r in other.records(other.workloads()[0]["id"])] == [1e-3, 2e-3, None]
    assert other.prune(2, drop_failed=True) == 1 and other.count() == 2
    with pytest.raises(Exception, match="nothing imported: line 2: not a record"):
        other.import_lines([lines[0], "{not json"])


def _writer(url: str, first: int, count: int) -> None:
    store = HistoryDB(url)
    wid = store.workload_id(WORKLOAD)  # every writer adds the same workload at once
    for i in range(first, first + count):
        store.add(wid, Record(Point(a=i), 1e-3 * (i + 1), source=f"writer{first}"))


def test_concurrent_writers_lose_nothing(db_url):
    url = db_url
    HistoryDB(url)  # created once, as the first exploration would
    ctx = multiprocessing.get_context("spawn")
    writers = [ctx.Process(target=_writer, args=(url, 1000 * w, 60)) for w in range(4)]
    for p in writers:
        p.start()
    for p in writers:
        p.join(120)
        assert p.exitcode == 0
    store = HistoryDB(url)
    assert store.count() == 240 and len(store.workloads()) == 1


def test_a_resumed_search_measures_no_known_point(db):
    space = CpuSpace(analyze(get_builtin("conv2d").instantiate(shape="small:s1")), vector_bits=512)
    measured: list[list[str]] = [[], []]

    def evaluator(run: int, stop_after: int | None):
        def evaluate(points, best):
            for p in points:
                if stop_after is not None and len(measured[run]) == stop_after:
                    raise KeyboardInterrupt  # Ctrl-C in the middle of a batch
                measured[run].append(point_key(p))
                yield MeasureResult(1e-3 * (1 + sum(map(sum, (p[k] for k in p if k.startswith("split."))))))
        return evaluate

    memo = WorkloadHistory(db, WORKLOAD, "q")
    first = tune(space, make_explorer("q", space, 3, starts=4), evaluator(0, 7), trials=20, history=memo)
    assert first.interrupted and db.count() == 7
    second = tune(space, make_explorer("q", space, 3, starts=4), evaluator(1, None), trials=20, history=memo)
    assert len(second.trials) == 20 and second.answered == 7  # same seed, same first proposals
    assert not set(measured[0]) & set(measured[1])
    assert db.count() == 20


@pytest.mark.slow
def test_a_killed_cpu_exploration_leaves_no_worker_and_the_same_command_resumes(tmp_path):
    """Review finding D5: after kill -9 of the tool its workers lived on for minutes, one finishing a
    measurement at 83 % CPU. D11: the same command then needed --force."""
    store = tmp_path / "h.sqlite"
    args = [sys.executable, "-m", "hetero_dse", "explore", "--op", "gemm", "--shape", "small:s1", "--target", "cpu",
            "--trials", "10", "--db", str(store), "--out", str(tmp_path / "a")]
    run = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 240
    killed_at = 0
    while time.time() < deadline and run.poll() is None:
        time.sleep(0.5)
        if store.exists() and (killed_at := HistoryDB(str(store)).count()) >= 3:
            assert len(session_processes(run.pid)) > 1, "the run should have workers by now"
            os.kill(run.pid, signal.SIGKILL)  # kill -9 of the tool alone, as a user would
            break
    run.wait(30)
    assert 3 <= killed_at < 10, "the first run should be killed part-way"
    alive = session_processes(run.pid)
    for _ in range(50):  # 5 s
        if not alive:
            break
        time.sleep(0.1)
        alive = session_processes(run.pid)
    if alive:
        os.killpg(run.pid, signal.SIGKILL)
    assert alive == [], "workers outlived the tool"
    killed_at = HistoryDB(str(store)).count()
    done = subprocess.run(args, capture_output=True, text=True, timeout=600)  # the same command, no --force
    assert done.returncode == 0, done.stderr
    (record,) = json.loads((tmp_path / "a" / "report.json").read_text())["cpu"]
    # every trial of the second run was answered from the history or measured and stored: none measured twice
    assert record["answered_from_history"] >= 1
    assert HistoryDB(str(store)).count() == killed_at + record["trials"] - record["answered_from_history"]
    assert np.isfinite(record["best"]["seconds"])


def _signal_a_search(tmp_path: Path, send) -> subprocess.Popen:
    """A 100-trial CPU search of a 256³ gemm in a session of its own, ``send(process)`` once it has stored 2
    records (a long search: in the full suite the poll saw 2 records of a 20-trial search of a tiny gemm only
    after it had finished)."""
    store = tmp_path / "h.sqlite"
    args = [sys.executable, "-m", "hetero_dse", "explore", "--op", "gemm", "--param", "M=256", "--param", "N=256",
            "--param", "K=256", "--target", "cpu", "--trials", "100", "--db", str(store), "--out", str(tmp_path / "o")]
    # a run inherits an ignored SIGINT (as from `nohup` or a shell's `&`), and then Python never turns it into
    # KeyboardInterrupt: in the full suite something before this test left it ignored in pytest's process
    run = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 240
    while time.time() < deadline and run.poll() is None:
        time.sleep(0.5)
        if store.exists() and HistoryDB(str(store)).count() >= 2:
            send(run)
            break
    else:
        out, err = run.communicate(timeout=60)
        raise AssertionError(f"the search ended (exit {run.returncode}) before it could be signalled: {err[-500:]}")
    return run


def test_sigterm_stops_a_cpu_search_like_ctrl_c(tmp_path):
    """Review finding D5: SIGTERM (timeout, CI cancellation, docker stop) ended the run with no report and
    left its workers; now it is Ctrl-C: what was measured written, the report marked incomplete, exit 130."""
    run = _signal_a_search(tmp_path, lambda process: process.terminate())
    out, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["complete"] is False and report["cpu"][0]["trials"] >= 2
    time.sleep(1)
    alive = session_processes(run.pid)
    if alive:
        os.killpg(run.pid, signal.SIGKILL)
    assert alive == []


# --------------------------------------------------------------------- what the history-based tuners read
def _conv(c: int, k: int, target: str = '{"kind": "llvm"}') -> Workload:
    return Workload("conv2d", f"conv2d[C={c},K={k}]", target, {"hetero_dse": "test"},
                    {"loops": {"k": k, "c": c, "y": 7}, "flops": 2 * c * k * 49})


def test_related_workloads_share_operator_target_and_loops(db):
    other_loops = Workload("conv2d", "conv2d[other]", '{"kind": "llvm"}', {}, {"loops": {"k": 4}, "flops": 8})
    other_op = Workload("gemm", "gemm[...]", '{"kind": "llvm"}', {}, {"loops": {"k": 4, "c": 4, "y": 7}})
    for w in (_conv(64, 128), _conv(32, 64), _conv(64, 128, "fpga vu9p"), other_loops, other_op):
        wid = db.workload_id(w)
        assert db.add_many(wid, [Record(Point(t=i), (i + 1) * 1e-3) for i in range(3)]) == 3
        assert db.add_many(wid, [Record(Point(t=0), 1.0), Record(Point(t=9), None, "crash")]) == 1
    related = db.related(_conv(61, 127))
    assert [w.signature for w, _ in related] == ["conv2d[C=64,K=128]", "conv2d[C=32,K=64]"]
    for w, records in related:
        assert w.extents == {"k": int(w.signature.split("K=")[1][:-1]), "c": w.extents["c"], "y": 7}
        assert [r.seconds for r in records] == [1e-3, 2e-3, 3e-3]  # best first, failures left out


def test_a_database_from_before_workload_specs_is_migrated(tmp_path):
    import sqlalchemy as sa

    path = tmp_path / "old.sqlite"
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:  # the first release's schema: no spec column
        conn.execute(sa.text("CREATE TABLE workloads (id INTEGER PRIMARY KEY, key VARCHAR(32) NOT NULL UNIQUE, "
                             "operator VARCHAR(200) NOT NULL, signature TEXT NOT NULL, target TEXT NOT NULL, "
                             "versions TEXT NOT NULL)"))
        conn.execute(sa.text("INSERT INTO workloads VALUES (1, :key, 'conv2d', 'conv2d[C=64,K=128]', "
                             "'{\"kind\": \"llvm\"}', '{\"hetero_dse\": \"test\"}')"), {"key": _conv(64, 128).key})
    engine.dispose()
    db = HistoryDB(str(path))
    assert db.workload(1).spec == {}
    assert db.workload_id(_conv(64, 128)) == 1  # the same workload, now with its spec
    assert db.workload(1).extents == {"k": 128, "c": 64, "y": 7}


def test_records_keyed_by_their_knobs_order_are_rekeyed_once_and_imported_twins_dropped(db_url):
    """Review finding D2: keys hashed the knobs in their order, an export sorted them, so an imported history
    answered nothing and importing an export into its own database doubled it. A database from before is
    re-keyed when opened; a point stored under both orders is kept once (the first)."""
    import sqlalchemy as sa

    from hetero_dse.history.records import unsorted_point_key
    from hetero_dse.history.schema import meta, records
    from hetero_dse.history.store import as_url

    db = HistoryDB(db_url)
    wid = db.workload_id(WORKLOAD)
    as_searched, as_imported = Point(split=(2, 3), a=1), Point(a=1, split=(2, 3))
    other = Point(split=(6, 1), a=2)
    engine = sa.create_engine(as_url(db_url))
    with engine.begin() as conn:  # what an older version wrote: unsorted keys, the same point twice
        conn.execute(meta.delete())
        for i, (point, seconds) in enumerate(((as_searched, 1e-3), (other, 2e-3), (as_imported, 1e-3))):
            conn.execute(records.insert().values(workload_id=wid, point_key=unsorted_point_key(point),
                                                 point=point.dumps(), seconds=seconds, error=None, source="old",
                                                 timestamp=1.7e9 + i))
    engine.dispose()
    db.close()
    again = HistoryDB(db_url)
    held = again.records(wid)
    assert [(r.point, r.seconds) for r in held] == [(as_searched, 1e-3), (other, 2e-3)]
    assert set(again.lookup(wid, [as_imported, other])) == {point_key(as_imported), point_key(other)}
    lines = list(again.export())
    assert again.import_lines(lines) == (0, 2)
    again.close()
    assert len(HistoryDB(db_url).records(wid)) == 2  # opened again: nothing more to re-key


@pytest.mark.parametrize("tuner", ["gga", "tl"])
def test_history_tuners_start_from_other_shapes_and_store_what_they_measure(db, tuner):
    from hetero_dse.history import workload_spec
    from hetero_dse.history.match import Prior

    def setup(k: int):
        op = get_builtin("conv2d").instantiate({"K": k}, shape="small:s1")
        analysis = analyze(op)
        space = CpuSpace(analysis, vector_bits=512)
        workload = Workload(op.name, op.signature(), '{"kind": "llvm"}', {"hetero_dse": "test"},
                            workload_spec(analysis))
        return space, workload

    def evaluate(points, best):
        for p in points:
            yield MeasureResult(1e-3 * (1 + sum(map(sum, (p[k] for k in p if k.startswith("split."))))))

    old_space, old = setup(8)
    tune(old_space, make_explorer("q", old_space, 0, starts=4), evaluate, trials=24,
         history=WorkloadHistory(db, old, "q"))
    space, new = setup(12)
    prior = Prior.load(db, new)
    assert len(prior) == 24 and prior.match() == pytest.approx((6 + 3 / 4) / 7)  # K: 1, 2, 4 of 8's 1, 2, 4, 8
    explorer = make_explorer(tuner, space, 0, prior=prior)
    if tuner == "gga":  # the first generation: the space's default points, then the history's best, adapted
        defaults = [space.encode(p) for p in space.default_points()]
        ranked = [r for r in prior.candidates(space, 16) if not any(np.array_equal(r, d) for d in defaults)]
        assert defaults and ranked
        first = explorer.propose()
        assert np.array_equal(first[: len(defaults) + len(ranked)], np.array(defaults + ranked)[:16])
        explorer = make_explorer(tuner, space, 0, prior=prior)
    result = tune(space, explorer, evaluate, trials=16, history=WorkloadHistory(db, new, tuner))
    assert result.explorer == tuner and len(result.trials) == 16
    (stored,) = [w for w in db.workloads() if w["signature"] == new.signature]
    assert stored["records"] == 16 and {r.source for r in db.records(stored["id"])} == {tuner}


def test_synthesis_results_are_kept_once_per_design_part_clock_tool_and_steps(db):
    key = ("0" * 32, "xcvu9p-flgb2104-2-i", 250.0, "2023.2", "csynth")
    assert db.synthesis(*key) is None
    db.add_synthesis(*key, "failed", {"reason": "crashed", "log_tail": "ERROR"})
    assert db.synthesis(*key)["status"] == "failed"
    # run again: the new result replaces the failed one
    db.add_synthesis(*key, "ok", {"report": {"resources": {"dsp": 320}}})
    got = db.synthesis(*key)
    assert got["status"] == "ok" and got["result"]["report"]["resources"]["dsp"] == 320
    # another tool version or other steps are other rows
    assert db.synthesis(key[0], key[1], key[2], "2024.1", "csynth") is None
    assert db.synthesis(key[0], key[1], key[2], key[3], "csynth cosim") is None


# ------------------------------------------------------------------ review findings D9, D10, D12, D15
def _exported(tmp_path, count: int = 3) -> tuple[Path, list[str]]:
    db = HistoryDB(str(tmp_path / "src.sqlite"))
    wid = db.workload_id(Workload(WORKLOAD.operator, WORKLOAD.signature, WORKLOAD.target, WORKLOAD.versions,
                                  {"loops": {"i": 4, "j": 4, "k": 4}, "flops": 128}))
    for i in range(count):
        db.add(wid, Record(Point(split=(i + 1, 1), a=i), (i + 1) * 1e-3))
    lines = list(db.export())
    db.close()
    return tmp_path / "src.sqlite", lines


def test_an_import_with_a_bad_line_adds_nothing_and_names_the_line(cli, tmp_path):
    _, lines = _exported(tmp_path)
    forged = json.loads(lines[1])
    cases = {"negative": -1.0, "nan": float("nan"), "text": "fast", "too fast": 1e-15}  # 128 FLOP in 1 fs
    for name, seconds in cases.items():
        forged["record"]["seconds"] = seconds
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join([lines[0], json.dumps(forged), lines[2]]) + "\n")
        target = tmp_path / f"{name}.sqlite"
        r = cli("history", "import", path, "--db", target)
        assert r.code == 1 and "nothing imported: line 2:" in r.err and "Traceback" not in r.err, (name, r.err)
        assert HistoryDB(str(target)).count() == 0, name
    # knobs the workload's space cannot hold (its loops are i, j, k of 4 iterations)
    knob_cases = {"unroll": ({"unroll": 12345}, "is not one of"), "split": ({"split.i": [3, 1]}, "does not split"),
                  "loop": ({"split.z": [4]}, "has no loop z"), "tile": ({"tile.i": 8}, "is not a tile"),
                  "block": ({"block": 5}, "knob block=5 is not one of 0, 1")}
    for name, (knobs, reason) in knob_cases.items():
        forged = json.loads(lines[1])
        forged["record"]["point"] = {**forged["record"]["point"], **knobs}
        path = tmp_path / f"knob_{name}.jsonl"
        path.write_text("\n".join([lines[0], json.dumps(forged), lines[2]]) + "\n")
        r = cli("history", "import", path, "--db", tmp_path / f"knob_{name}.sqlite")
        assert r.code == 1 and "nothing imported: line 2:" in r.err and reason in r.err, (name, r.err)
    (tmp_path / "latin1.jsonl").write_bytes("caf\xe9".encode("latin-1"))
    r = cli("history", "import", tmp_path / "latin1.jsonl", "--db", tmp_path / "l.sqlite")
    assert r.code == 1 and "is not UTF-8 text" in r.err


def test_export_never_overwrites_the_database_or_another_file(cli, tmp_path):
    src, _ = _exported(tmp_path)
    r = cli("history", "export", src, "--db", src)
    assert r.code == 1 and "is the database being exported" in r.err
    assert HistoryDB(str(src)).count() == 3  # still a database
    other = tmp_path / "notes.txt"
    other.write_text("keep me\n")
    r = cli("history", "export", other, "--db", src)
    assert r.code == 1 and "exists; add --force" in r.err and other.read_text() == "keep me\n"
    assert cli("history", "export", other, "--db", src, "--force").code == 0
    assert len(other.read_text().splitlines()) == 3
    blocked = tmp_path / "a_file"  # a directory that cannot be made, whoever runs the test (root writes anywhere)
    blocked.write_text("")
    r = cli("history", "export", blocked / "x.jsonl", "--db", src)
    assert r.code == 1 and "cannot write" in r.err and "Traceback" not in r.err and len(r.err.splitlines()) == 1


def test_reading_commands_never_create_a_database_and_a_file_that_is_not_one_is_refused(cli, tmp_path):
    typo = tmp_path / "typo" / "dir" / "h.sqlite"
    r = cli("history", "list", "--db", typo)
    assert r.code == 1 and "there is no history database at" in r.err and not (tmp_path / "typo").exists()
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n")
    for args in (("history", "list"), ("history", "import", notes)):
        r = cli(*args, "--db", notes)
        assert r.code == 1 and "is not a SQLite database" in r.err and "internal error" not in r.err, args
    assert notes.read_text() == "not a database\n"


def test_ctrl_c_at_the_terminal_prints_no_traceback_from_the_workers(tmp_path):
    """Review finding D11: a terminal Ctrl-C (SIGINT to the whole process group) printed two 20-line
    KeyboardInterrupt tracebacks from idle worker processes before 'interrupted'."""
    run = _signal_a_search(tmp_path, lambda process: os.killpg(process.pid, signal.SIGINT))  # a terminal's Ctrl-C
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130 and "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert json.loads((tmp_path / "o" / "report.json").read_text())["complete"] is False


def test_a_rerun_of_a_finished_cpu_search_measures_nothing_new(cli, tmp_path):
    """Review finding D15: a rerun chose another explorer (the guided GA, seeded by the run's own records)
    and measured about 7 new points each time, so reruns never reached 'nothing left to measure'. The
    prior now leaves the workload's own records out: the rerun makes the same proposals, all answered."""
    store = tmp_path / "h.sqlite"
    args = ("explore", "--op", "gemm", "--shape", "small:s1", "--target", "cpu", "--trials", "6", "--db", store)
    assert cli(*args, "--out", tmp_path / "a").code == 0
    held = HistoryDB(str(store)).count()
    assert cli(*args, "--out", tmp_path / "b").code == 0
    (first,) = json.loads((tmp_path / "a" / "report.json").read_text())["cpu"]
    (again,) = json.loads((tmp_path / "b" / "report.json").read_text())["cpu"]
    assert again["explorer"] == first["explorer"] == "tl"
    assert again["answered_from_history"] == again["trials"] == 6 and HistoryDB(str(store)).count() == held
    # the same search: the same finalists, at the times the history holds; the one kept is the fastest timed
    # again now, so between two of about the same speed either run may keep either
    assert [(f["knobs"], f["searched_seconds"]) for f in again["finalists"]] == \
        [(f["knobs"], f["searched_seconds"]) for f in first["finalists"]]
    assert again["best"]["knobs"] in [f["knobs"] for f in first["finalists"]]
    # a real search's records pass the import's checks (their knobs fit the workload's loops)
    assert HistoryDB(str(tmp_path / "copy.sqlite")).import_lines(HistoryDB(str(store)).export()) == (held, 0)


def test_processes_opening_a_new_database_at_once_all_succeed(tmp_path):
    """Found by the kill test in a fresh clone: the tool and a reader opening a new SQLite file at the same
    moment, one failed with 'table workloads already exists' (checked, then created, by both)."""
    store = tmp_path / "new.sqlite"
    code = ("import sys; from hetero_dse.history import HistoryDB\n"
            "db = HistoryDB(sys.argv[1]); print(db.count())\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(store)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(6)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, [err for _, err in results]
    assert all(out.strip() == "0" for out, _ in results)


def test_a_new_database_held_by_another_process_waits_for_it_instead_of_failing(tmp_path):
    """The case behind a fresh clone's 'database is locked' on open: turning a new file to WAL needs it to itself,
    and SQLite does not wait on the busy timeout for that; opening it while another connection holds a lock must
    wait until the lock is let go."""
    store = tmp_path / "held.sqlite"
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("CREATE TABLE other (x)")
    holder.execute("BEGIN IMMEDIATE")  # a writer's lock: the child can read the file, not convert it
    holder.execute("INSERT INTO other VALUES (1)")
    code = ("import sys; from hetero_dse.history import HistoryDB\n"
            "print('imported', flush=True); db = HistoryDB(sys.argv[1]); print(db.count())\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(store)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "imported\n", proc.communicate()
    time.sleep(1.0)  # the child is waiting on the lock by now (it fails at once without the retry)
    assert proc.poll() is None, proc.communicate()
    holder.execute("COMMIT")
    holder.close()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.strip() == "0"
    assert sqlite3.connect(store).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
