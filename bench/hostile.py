"""The second reliability review's hostile inputs and faults (``../shared/notes/review-reliability-2.md``), run
against a tree and each outcome classified (issue 36; not part of the test suite).

    .venv/bin/python bench/hostile.py --json bench/data/hostile_issue36.json
    PYTHONPATH=<another tree> .venv/bin/python bench/hostile.py --tree <another tree>     # an earlier tree

Every case runs the CLI (``python -m hetero_dse``, or a few lines of Python for a library-level surface) in a
fresh folder, with the tests' TEST DOUBLE of vitis_hls on PATH (no synthesis runs here). An outcome is:

* **escape**: a file outside what the command may touch changed (content or mode), or a secret's text reached
  its output;
* **data loss**: a result the command had made is missing, or an input was overwritten;
* **hang**: the command did not end within its limit (killed);
* **process left**: a process the command started still runs after it ended;
* **internal error**: a traceback or "internal error";
* **silent**: exit 0 where the input must be refused, or an exit without a word;
* **clean**: the expected exit, and on refusal one sentence.

Most cases are variations of the tests' (tests/test_containment.py), not the same inputs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Case:
    name: str
    surface: str
    #: builds the inputs in the folder given; returns the command (after ``python -m hetero_dse``, or
    #: ``["-c", code]`` for Python) and extra environment
    setup: Callable[[Path], tuple[list[str], dict[str, str]]]
    refuse: bool = True  # the input must be refused (a non-zero exit, one sentence)
    timeout: float = 60.0
    #: after the run: a string naming data lost or an escape, else None
    after: Callable[[Path, subprocess.CompletedProcess | None], str | None] | None = None
    python: bool = False
    victims: list[str] = field(default_factory=list)
    #: run on a tmpfs (at ``full``) filled to its last byte, in a private mount namespace (``unshare -rm``)
    full_disk: bool = False


# ------------------------------------------------------------------------------------------ helpers
def victim(work: Path) -> Path:
    path = work / "victim.txt"
    path.write_text("precious\n")
    path.chmod(0o600)
    return path


def board(work: Path, **change) -> Path:
    import yaml

    raw = yaml.safe_load((ROOT / "boards" / "vu9p.yaml").read_text())
    raw.update(change)
    path = work / "board.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def csynth(work: Path, body: str, head: str = "<?xml version='1.0' encoding='UTF-8'?>") -> Path:
    path = work / "csynth.xml"
    path.write_text(f"{head}\n<profile><ReportVersion><Version>2023.2</Version></ReportVersion>"
                    f"<PerformanceEstimates/>{body}</profile>")
    return path


def history_line(**change) -> str:
    record = {"point": {"tile.i": 8}, "seconds": 1e-3, "source": "q", "timestamp": 1.7e9, **change}
    return json.dumps({"workload": {"operator": "gemm", "signature": "gemm[64]", "target": "llvm"},
                       "record": record})


def calibration(work: Path, **change) -> Path:
    import yaml

    data = {"part": "xcvu9p-flgb2104-2-i", "tool_version": "2023.2", "designs": 4,
            "arithmetic": {"float32": {"dsp_mul": 2.0}}, "fixed": {}, "fmax_derate": 0.9, **change}
    path = work / "cal.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def model_py(work: Path, body: str) -> Path:
    path = work / "model.py"
    path.write_text("import torch\ndef model():\n    return Net()\ndef example_input():\n"
                    "    return torch.randn(1, 3, 8, 8)\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
                    "        return x\n" + body)
    return path


def report_run(work: Path, name: str, rows=None) -> Path:
    run = work / name
    run.mkdir()
    rows = rows if rows is not None else [  # one row of an operator run, as explore writes it
        {"kind": "cpu", "operator": "gemm", "shape": name, "device": "cpu0", "basis": "measured", "seconds": 1e-3,
         "gflops": 10.0, "peak_fraction": None, "bound": None, "library_seconds": 2e-3, "explorer": "q",
         "evaluations": 8, "answered": 0, "failures": 0, "wall_s": 1.0, "interrupted": False,
         "directory": f"{name}/cpu", "why_unwritten": None, "check": "pass", "detail": "",
         "speedup_over_library": 2.0, "intensity": 20.0, "bandwidth_gbps": None}]
    (run / "report.json").write_text(json.dumps({"complete": True, "rows": rows, "errors": []}))
    return run


def unchanged(path: Path, text: str = "precious\n", mode: int = 0o600):
    def check(_work: Path, _r) -> str | None:
        if path.is_symlink():
            target = path.resolve()
        else:
            target = path
        if target.read_text() != text or (target.stat().st_mode & 0o777) != mode:
            return "escape: the victim file changed"
        return None
    return check


def silent_server() -> int:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held = []

    def run():
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=run, daemon=True).start()
    return listener.getsockname()[1]


# -------------------------------------------------------------------------------------------- cases
def cases(project: Path, port: int) -> list[Case]:
    out: list[Case] = []

    def add(name, surface, setup, **kw):
        out.append(Case(name, surface, setup, **kw))

    # boards: strings that reach Tcl, Make and C++
    add("board part with a Tcl command", "board", lambda w: (["boards", str(board(w, part="xcvu9p\n[exec id]"))], {}))
    add("board part with a semicolon", "board", lambda w: (["boards", str(board(w, part="xcvu9p;rm -rf x"))], {}))
    add("board platform with $(...)", "board", lambda w: (["boards", str(board(w, platform="u2 $(id)"))], {}))
    add("board description with a line break", "board",
        lambda w: (["boards", str(board(w, description="VU9P\n#error x"))], {}))
    add("board file: alias bomb", "board", lambda w: (["boards", str(_bomb(w / "b.yaml"))], {}))
    # calibration files
    for label, change in (("dsp_mul -3", {"arithmetic": {"float32": {"dsp_mul": -3.0}}}),
                          ("lut_add inf", {"arithmetic": {"float32": {"lut_add": float("inf")}}}),
                          ("fmax_derate 7", {"fmax_derate": 7.0}), ("fixed lut_base -1", {"fixed": {"lut_base": -1.0}}),
                          ("arithmetic a string", {"arithmetic": "fast"})):
        add(f"calibration {label}", "calibration",
            lambda w, c=change: (["explore", "--op", "gemm", "--shape", "small:s1", "--board", "vu9p", "--budget",
                                  "20", "--calibration", str(calibration(w, **c)), "--out", str(w / "o")], {}))
    add("calibration: alias bomb", "calibration",
        lambda w: (["explore", "--op", "gemm", "--shape", "small:s1", "--board", "vu9p", "--budget", "20",
                    "--calibration", str(_bomb(w / "c.yaml")), "--out", str(w / "o")], {}))
    # synthesis reports
    add("csynth: 22 nested modules", "report", lambda w: (["synth", "report", str(csynth(w, "".join(
        f"<ModuleInformation><Module><Name>m{i}</Name>" for i in range(22)) + "</Module></ModuleInformation>" * 22))],
        {}), refuse=False, timeout=60)
    add("csynth: external entity", "report", lambda w: (["synth", "report", str(csynth(
        w, "<UserAssignments><Part>&s;</Part></UserAssignments>",
        "<?xml version='1.0'?>\n<!DOCTYPE profile [<!ENTITY s SYSTEM 'file:///etc/hostname'>]>"))], {}))
    add("csynth: entity expansion", "report", lambda w: (["synth", "report", str(csynth(
        w, "<Name>&c;</Name>", "<?xml version='1.0'?>\n<!DOCTYPE profile [<!ENTITY a 'aaaaaaaaaa'>"
        "<!ENTITY b '&a;&a;&a;&a;&a;&a;&a;&a;'><!ENTITY c '&b;&b;&b;&b;&b;&b;&b;&b;'>]>"))], {}))
    add("csynth: 4,000 nested elements", "report",
        lambda w: (["synth", "report", str(csynth(w, "<x>" * 4000 + "</x>" * 4000))], {}))
    add("csynth: a 40-digit latency", "report", lambda w: (["synth", "report", str(csynth(
        w, "<PerformanceEstimates><SummaryOfOverallLatency><Worst-caseLatency>" + "9" * 40
        + "</Worst-caseLatency></SummaryOfOverallLatency></PerformanceEstimates>"))], {}), refuse=False)
    add("csynth: encoding x-unknown", "report", lambda w: (["synth", "report", str(csynth(
        w, "", "<?xml version='1.0' encoding='x-unknown-8'?>"))], {}))
    # history import
    for label, change in (("a 1e-14 s time", {"seconds": 1e-14}), ("a 1e300 s time", {"seconds": 1e300}),
                          ("timestamp 1e300", {"timestamp": 1e300}), ("timestamp -5e17", {"timestamp": -5e17}),
                          ("a time and an error", {"error": "x"}), ("5,000 knobs", {"point": {
                              f"k{i}": i for i in range(5000)}}), ("a NUL in the source", {"source": "q\x00"}),
                          ("a bidi override in the error", {"seconds": None, "error": "ok\u202e"})):
        def setup(w, c=change):
            (w / "in.jsonl").write_text(history_line(**c) + "\n")
            return ["history", "import", str(w / "in.jsonl"), "--db", str(w / "h.sqlite")], {}
        add(f"history import: {label}", "history", setup)
    add("history import: /dev/zero", "history",
        lambda w: (["history", "import", "/dev/zero", "--db", str(w / "h.sqlite")], {}), timeout=60)

    def export_through_link(w):
        v = victim(w)
        (w / "h.sqlite").touch()
        (w / "e.jsonl").symlink_to(v)
        return ["history", "export", str(w / "e.jsonl"), "--force", "--db", str(w / "h.sqlite")], {}
    add("history export through a symlink", "history", export_through_link, refuse=False,
        after=lambda w, r: unchanged(w / "victim.txt")(w, r))

    def export_partial_link(w):
        v = victim(w)
        (w / "h.sqlite").touch()
        (w / "e.jsonl.partial").symlink_to(v)  # where an export used to write before renaming
        return ["history", "export", str(w / "e.jsonl"), "--db", str(w / "h.sqlite")], {}
    add("history export: its .partial a symlink", "history", export_partial_link, refuse=False,
        after=lambda w, r: unchanged(w / "victim.txt")(w, r))
    # report
    add("report A B --out A", "report",
        lambda w: (["report", str(report_run(w, "a")), str(report_run(w, "b")), "--out", str(w / "a")], {}),
        after=lambda w, r: None if len(json.loads((w / "a" / "report.json").read_text())["rows"]) == 1
        else "data loss: A's own report.json was replaced by the merge")
    add("report rows of numbers", "report", lambda w: (["report", str(report_run(w, "a", [1, 2]))], {}))
    add("report rows without keys", "report", lambda w: (["report", str(report_run(w, "a", [{}]))], {}))
    add("report --out a file", "report", lambda w: (
        ["report", str(report_run(w, "a")), str(report_run(w, "b")), "--out", str(_touch(w / "f"))], {}))
    # numbers in options and the environment
    add("synth --timeout nan", "options", lambda w: (["synth", str(project), "--timeout", "nan"], {}))
    add("synth --threshold nan", "options", lambda w: (["synth", str(project), "--threshold", "nan", "--strict"], {}))
    add("synth --timeout inf", "options", lambda w: (["synth", str(project), "--timeout", "inf"], {}))
    add("HETERO_DSE_LOADED_CORES=nan", "options", lambda w: (["boards"], {"HETERO_DSE_LOADED_CORES": "nan"}))
    add("HETERO_DSE_LOADED_CORES=-1", "options", lambda w: (["boards"], {"HETERO_DSE_LOADED_CORES": "-1"}))
    # rpc
    add("--rpc to a silent server", "rpc", lambda w: (
        ["explore", "--op", "gemm", "--shape", "small:s1", "--target", "cpu", "--rpc", f"127.0.0.1:{port}",
         "--out", str(w / "o")], {}), timeout=90)
    add("--rpc to a silent tracker", "rpc", lambda w: (
        ["explore", "--op", "gemm", "--shape", "small:s1", "--target", "cpu", "--rpc", f"127.0.0.1:{port}",
         "--rpc-key", "v100", "--out", str(w / "o")], {}), timeout=90)
    add("--rpc host of 300 characters", "rpc", lambda w: (
        ["explore", "--op", "gemm", "--shape", "small:s1", "--target", "cpu", "--rpc", "h" * 300 + ":9190",
         "--out", str(w / "o")], {}))
    # model.py
    add("model.py: os._exit(0)", "model", lambda w: (["model", str(model_py(w, "import os\nos._exit(0)\n"))], {}))
    add("model.py: os._exit(3) in forward", "model", lambda w: (["model", str(model_py(
        w, "import os\nNet.forward = lambda self, x: os._exit(3)\n"))], {}))
    add("model.py: a BaseException", "model", lambda w: (["model", str(model_py(
        w, "class Halt(BaseException):\n    pass\nraise Halt('x')\n"))], {}))
    add("model.py: SIGALRM ignored and forward sleeps", "model", lambda w: (["model", str(model_py(
        w, "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
           "Net.forward = lambda self, x: time.sleep(3600)\n"))], {}), timeout=200)
    # synth
    def bad_record(w):
        out = w / "out"
        shutil.copytree(project.parents[3], out)  # <explored>/<op>/<op_shape>/<board>/hls: both explorations
        projects = sorted(p.parent for p in out.rglob("run_hls.tcl"))
        record = json.loads((projects[-1] / "design.json").read_text())
        record["knobs"]["clock_mhz"] = "nan"
        (projects[-1] / "design.json").write_text(json.dumps(record))
        return ["synth", str(out), "--db", str(w / "h.sqlite")], {}

    def good_recorded(w, _r):
        projects = sorted(p.parent for p in (w / "out").rglob("run_hls.tcl"))
        return None if (projects[0] / "synth.json").is_file() else "data loss: the good project's result is missing"
    add("synth: one design.json with clock nan", "synth", bad_record, after=good_recorded, timeout=180)

    def log_link(w):
        out = w / "p"
        shutil.copytree(project, out)
        v = victim(w)
        (out / "synth.log").unlink(missing_ok=True)
        (out / "synth.log").symlink_to(v)
        return ["synth", str(out), "--db", str(w / "h.sqlite")], {}
    add("synth: synth.log a symlink", "synth", log_link, refuse=False,
        after=lambda w, r: unchanged(w / "victim.txt")(w, r), timeout=180)
    add("synth --scheduler garbage", "synth", lambda w: (["synth", str(project), "--scheduler", "garbage"], {}))
    # library-level surfaces
    add("measurement lock a symlink", "lock", lambda w: (["-c", (
        "import os, sys; os.environ['HETERO_DSE_MEASURE_LOCK'] = sys.argv[1]\n"
        "from gpu_cpu.conditions import timing\nwith timing():\n    pass\n"), str(_link(w, "lock"))], {}),
        refuse=False, python=True, after=lambda w, r: unchanged(w / "victim.txt")(w, r))
    add("RTL including /etc/passwd", "report", lambda w: (["-c", (
        "import sys\nfrom hetero_dse.hls.rtl import read_rtl, RtlError\n"
        "try:\n    print(read_rtl(sys.argv[1]))\nexcept RtlError as e:\n    print('refused:', e); sys.exit(1)\n"),
        str(_rtl(w))], {}), python=True,
        after=lambda w, r: "escape: /etc/passwd reached the output" if r is not None and "root" in r.stdout else None)
    _second_round(add, project)
    return out


def _second_round(add, project: Path) -> None:
    """Cases found after the first before/after runs (this file's second table): figures that are not figures
    in a calibration's inputs, devices and pipes where outputs and reports go, a forged Q-network, a worker's
    failure, knobs of another space, and a full disk under every writer."""
    for label, change in (("dsp 'many'", {"dsp": "many"}), ("lut NaN", {"lut": float("nan")}),
                          ("clock -4 ns", {"clock": -4.0}), ("status [1]", {"status": [1]})):
        def setup(w, c=change):
            root = _results(w)
            synth = root / "p1" / "synth.json"
            data = json.loads(synth.read_text())
            if "status" in c:
                data["status"] = c["status"]
            elif "clock" in c:
                data["report"]["estimated_clock_ns"] = c["clock"]
            else:
                data["report"]["resources"].update(c)
            synth.write_text(json.dumps(data))
            return ["calibrate", str(root), "-o", str(w / "c.yaml")], {}
        add(f"calibrate: a synth.json with {label}", "calibration", setup)

    def export_to_pipe(w):
        (w / "h.sqlite").touch()
        os.mkfifo(w / "pipe")  # what /dev/full is to root: a rename onto it replaces the device
        return ["history", "export", str(w / "pipe"), "--force", "--db", str(w / "h.sqlite")], {}
    add("history export --force onto a pipe", "history", export_to_pipe,
        after=lambda w, r: None if stat.S_ISFIFO(os.lstat(w / "pipe").st_mode) else "escape: the pipe was replaced")
    for label, point in (("knobs of another space", [{"tile.i": 8}, {"tile.x": 3, "evil": 1}]),
                         ("a knob of infinity", [{"tile.i": float("inf")}]),
                         ("a knob of nested lists", [{"tile.i": [[1, 2]]}])):
        def setup(w, points=point):
            (w / "in.jsonl").write_text("".join(history_line(point=p) + "\n" for p in points))
            return ["history", "import", str(w / "in.jsonl"), "--db", str(w / "h.sqlite")], {}
        add(f"history import: {label}", "history", setup)

    def forged_network(w):
        code = ("import os, sys, torch\nclass P:\n    def __reduce__(self):\n"
                f"        return os.system, ('touch {w / 'ran'}',)\n"
                "torch.save({'format': 2, 'directions': [], 'features': 0, 'network': P()}, sys.argv[1])\n")
        subprocess.run([sys.executable, "-c", code, str(w / "q.pt")], check=True)
        return ["explore", "--op", "gemm", "--shape", "small:s1", "--board", "vu9p", "--explorer", "q", "--budget",
                "20", "--q-state", str(w / "q.pt"), "--out", str(w / "o")], {}
    add("explore --q-state: a network file that runs a command", "model", forged_network, timeout=120,
        after=lambda w, r: "escape: the file's command ran" if (w / "ran").exists() else None)

    def piped_report(w):
        solution = w / "s" / "solution1"
        shutil.copytree(ROOT / "tests" / "data" / "hls_reports" / "vitis_2023" / "solution1", solution)
        os.mkfifo(solution / "syn" / "report" / "zz_csynth.xml")
        return ["synth", "report", str(solution)], {}
    add("synth report: a module report that is a pipe", "report", piped_report, refuse=False, timeout=30)

    def log_folder(w):
        out = w / "p"
        shutil.copytree(project, out)
        (out / "synth.log").unlink(missing_ok=True)
        (out / "synth.log").mkdir()
        return ["synth", str(out), "--jobs", "2", "--db", str(w / "h.sqlite")], {}
    add("synth: the job fails on its worker (synth.log a folder)", "synth", log_folder, timeout=180)
    # a full disk (a tmpfs filled to its last byte, in a private mount namespace)
    full = {"explore": lambda w: ["explore", "--op", "gemm", "--shape", "small:s1", "--board", "vu9p", "--budget",
                                  "20", "--out", str(w / "full" / "o")],
            "calibrate": lambda w: ["calibrate", str(_results(w)), "-o", str(w / "full" / "c.yaml")],
            "report": lambda w: ["report", str(report_run(w, "a")), str(report_run(w, "b")), "--out",
                                 str(w / "full" / "m")],
            "history export": lambda w: ["history", "export", str(w / "full" / "e.jsonl"), "--db",
                                         str(_history(w))],
            "the history database": lambda w: ["explore", "--op", "gemm", "--shape", "small:s1", "--board", "vu9p",
                                               "--budget", "20", "--out", str(w / "o"), "--db",
                                               str(w / "full" / "h.sqlite")]}
    for label, command in full.items():
        add(f"full disk: {label}", "full disk", lambda w, c=command: (c(w), {}), full_disk=True, timeout=120,
            after=_nothing_half_written)


def _results(work: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_calibrate import synthetic_results

    return synthetic_results(work / "results", count=4)


def _history(work: Path) -> Path:
    db = work / "export.sqlite"
    code = ("import sys\nfrom hetero_dse.history import HistoryDB\n"
            f"HistoryDB(sys.argv[1]).import_lines([{history_line()!r}])\n")
    subprocess.run([sys.executable, "-c", code, str(db)], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return db


def _nothing_half_written(work: Path, _r) -> str | None:
    """What the command left on the full disk (read inside its namespace: the tmpfs is gone after it)."""
    listed = (work / "left.txt").read_text().split() if (work / "left.txt").is_file() else []
    left = sorted(name for name in listed if name not in ("fill", "h.sqlite"))
    return f"data loss: left on the full disk: {', '.join(left)}" if left else None


def _touch(path: Path) -> Path:
    path.write_text("")
    return path


def _link(work: Path, name: str) -> Path:
    (work / name).symlink_to(victim(work))
    return work / name


def _rtl(work: Path) -> Path:
    d = work / "verilog"
    d.mkdir()
    (d / "top.v").write_text('module top(input clk);\n`include "/etc/passwd"\nendmodule\n')
    return d


def _bomb(path: Path) -> Path:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    path.write_text("\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------------------------- runner
def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30))


def _procs_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if marker.encode() in cmd or marker.encode() in environ:
            found.append(int(entry))
    return found


def run_case(case: Case, tree: Path, fake: Path, work: Path) -> dict:
    command, extra = case.setup(work)
    marker = f"HOSTILE_CASE={work.name}"
    env = {**os.environ, "PYTHONPATH": str(tree), "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}",
           "FAKE_VITIS_PYTHON": sys.executable, "HOSTILE_CASE": work.name,
           "HETERO_DSE_DB": str(work / "default.sqlite"), **extra}  # never the user's own history
    argv = [sys.executable, *command] if case.python else [sys.executable, "-m", "hetero_dse", *command]
    if case.full_disk:
        (work / "full").mkdir(exist_ok=True)
        argv = ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {work / 'full'} && "
                f"(dd if=/dev/zero of={work / 'full' / 'fill'} bs=1k 2>/dev/null; true) && \"$0\" \"$@\"; "
                f"code=$?; ls -A {work / 'full'} > {work / 'left.txt'}; exit $code", *argv]
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_limit_memory)
    try:
        stdout, stderr = proc.communicate(timeout=case.timeout)
        result = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        result = None
    wall = time.monotonic() - start
    time.sleep(1.0)
    left = _procs_with(marker.split("=")[1])
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    problem = case.after(work, result) if case.after else None
    if result is None:
        outcome = "hang"
    elif problem and problem.startswith("escape"):
        outcome = "escape"
    elif problem and problem.startswith("data loss"):
        outcome = "data loss"
    elif "Traceback" in result.stderr or "internal error" in result.stderr:
        outcome = "internal error"
    elif left:
        outcome = "process left"
    elif case.refuse and result.returncode == 0:
        outcome = "silent"
    elif case.refuse and result.returncode < 0:
        outcome = "internal error"  # killed by a signal (out of memory)
    elif case.refuse and not (result.stderr.strip() or result.stdout.strip()):
        outcome = "silent"  # refused without a word (user code that ended the process)
    elif not case.refuse and result.returncode != 0 and not result.stderr.strip():
        outcome = "silent"
    else:
        outcome = "clean"
    said = (result.stderr.strip().splitlines() or [""])[-1][:160] if result is not None else ""
    return {"case": case.name, "surface": case.surface, "outcome": outcome, "exit": None if result is None
            else result.returncode, "wall_s": round(wall, 1), "said": said, "note": problem}


def project_for(tree: Path, fake: Path, work: Path) -> Path:
    env = {**os.environ, "PYTHONPATH": str(tree), "HETERO_DSE_DB": str(work / "explore.sqlite")}
    for op in ("gemm", "gemv"):
        subprocess.run([sys.executable, "-m", "hetero_dse", "explore", "--op", op, "--shape", "small:s1",
                        "--board", "vu9p", "--budget", "50", "--out", str(work / "explored" / op)], env=env,
                       check=True, capture_output=True)
    return sorted(p.parent for p in (work / "explored" / "gemm").rglob("run_hls.tcl"))[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="the tree to run (its tests/fake_vitis too)")
    parser.add_argument("--only", help="run the cases whose name contains this")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    tree = args.tree.resolve()
    fake = tree / "tests" / "fake_vitis"
    port = silent_server()
    rows = []
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        base = Path(tmp)
        project = project_for(tree, fake, base)
        for i, case in enumerate(cases(project, port)):
            if args.only and args.only not in case.name:
                continue
            work = base / f"case{i:02d}"
            work.mkdir()
            row = run_case(case, tree, fake, work)
            rows.append(row)
            print(f"{row['outcome']:15s} {row['wall_s']:6.1f}s  {case.surface:11s} {case.name}  | {row['said']}",
                  flush=True)
    counts = Counter(r["outcome"] for r in rows)
    print("\n" + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + f" (of {len(rows)})")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
                                         "tree": str(tree), "counts": counts, "cases": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
