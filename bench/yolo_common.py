"""What the YOLO-v1 benches on the CPU and the GPU share: the best-so-far curve of a search, the trial at
which a curve reaches a figure, a layer's row of figures, the geometric mean of the ratios, MetaSchedule; and what
the benches measuring on a lent GPU share: a run of rows that survives a call cut short, microseconds printed."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


def parse_args(doc: str, explorers: str, resumable: bool = False) -> argparse.Namespace:
    """The options both YOLO-v1 benches take."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--layers", default="C2,C4,C8,C13,C15")
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--explorers", default=explorers, help="comma-separated; the first is compared with the rest")
    parser.add_argument("--no-metaschedule", action="store_true")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16", "int8"),
                        help="the layers' input type (float16 and int8 run on the tensor cores)")
    parser.add_argument("--json", type=Path)
    if resumable:
        parser.add_argument("--resume", action="store_true",
                            help="keep the layers --json holds from an earlier run of the same settings; run the rest")
    return parser.parse_args()


def curve_recorder(flops: float) -> tuple[list[tuple[float, float]], Callable[[int, float | None], None]]:
    """A list of (wall seconds since now, best GFLOPS so far) per trial and the progress callback filling it."""
    curve: list[tuple[float, float]] = []
    t0 = time.perf_counter()

    def note(done: int, best: float | None) -> None:
        curve.append((time.perf_counter() - t0, flops / best / 1e9 if best else 0.0))

    return curve, note


def reach(curve: list[tuple[float, float]], gflops: float) -> int | None:
    """The first trial (1-based) whose best so far is at least ``gflops``; None if never."""
    return next((i + 1 for i, (_, g) in enumerate(curve) if g >= gflops), None)


def time_to_reach(curve: list[tuple[float, float]], gflops: float) -> float | None:
    """The wall seconds at which ``curve`` first reaches ``gflops``; None if never."""
    return next((t for t, g in curve if g >= gflops), None)


def geomean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v]
    return math.exp(sum(map(math.log, present)) / len(present)) if present else None


def layer_row(layer: str, flops: float, explorers: list[str], runs: dict, curves: dict, torch_s: float,
              ms_s: float | None, ms_wall: float | None) -> dict:
    """One layer's figures: the first explorer's best against torch, MetaSchedule and the other explorers
    (trials to 95 % and 100 % of each one's final, and the trials that one took itself; the wall time to
    MetaSchedule's final and its share of MetaSchedule's tuning time)."""
    ours = runs[explorers[0]]
    best = ours.tune.best
    row = {"layer": layer, "flops": flops, "trials": len(ours.tune.trials), "explorer": explorers[0],
           "ours_gflops": flops / best.result.seconds / 1e9, "ours_wall_s": ours.tune.wall_s,
           "torch_gflops": flops / torch_s / 1e9,
           "ms_gflops": flops / ms_s / 1e9 if ms_s else None, "ms_wall_s": ms_wall,
           "best_knobs": best.point.to_json(), "curves": curves,
           "final": {n: c[-1][1] for n, c in curves.items()}}
    row["vs_torch"] = row["ours_gflops"] / row["torch_gflops"]
    row["vs_ms"] = row["ours_gflops"] / row["ms_gflops"] if ms_s else None
    mine = curves[explorers[0]]
    for other in explorers[1:]:
        final = curves[other][-1][1]
        row[f"trials_to_{other}"] = {f"{int(f * 100)}%": reach(mine, f * final) for f in (0.95, 1.0)}
        row[f"{other}_trials_to_own_final"] = reach(curves[other], final)
    if ms_s:
        hit = time_to_reach(mine, row["ms_gflops"])
        row["time_to_ms_final_s"] = hit
        row["time_to_ms_final_over_ms_wall"] = hit / ms_wall if hit is not None else None
    return row


def metaschedule(op, trials: int, target: dict) -> tuple[float, float]:
    """(seconds per run of MetaSchedule's best, tuning wall seconds) for ``op`` on ``target`` (the host CPU or
    the CUDA device present), its best module timed in a worker process as our candidates are."""
    import tempfile

    import tvm
    from tvm.s_tir import meta_schedule as ms

    from gpu_cpu.measure import MeasureJob, Measurer
    from gpu_cpu.pipeline import measure_built_job

    cuda = target["kind"] == "cuda"
    mod = tvm.IRModule({"main": op.prim_func()})
    if cuda:  # MetaSchedule's GPU rules read the device's limits from the target
        from hetero_dse.hardware.gpus import present_gpu

        gpu = present_gpu()
        target = {**target, "max_threads_per_block": gpu.max_threads_per_block, "thread_warp_size": 32,
                  "max_shared_memory_per_block": gpu.shared_memory_per_block, "registers_per_block": 65536}
    tvm_target = tvm.target.Target(target, host={"kind": "llvm"}) if cuda else tvm.target.Target(target)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as work_dir:
        # the builder's worker pool takes ~70 s to answer its first build on this machine's TVM wheel: the
        # default 30 s timeout fails every candidate
        db = ms.tune_tir(mod, tvm_target, work_dir, max_trials_global=trials, num_trials_per_iter=min(trials, 32),
                         builder=ms.builder.LocalBuilder(timeout_sec=300))
        sch = ms.tir_integration.compile_tir(db, mod, tvm_target)
        wall = time.perf_counter() - start
        # timed in a worker process as our candidates and torch are, checked against the reference first
        path = str(Path(work_dir) / "metaschedule_best.so")
        tvm.compile(sch.mod, target=tvm_target).export_library(path)
        job = MeasureJob("builtin", op.name, dict(op.params), {}, target="cuda" if cuda else "llvm")
        with Measurer(timeout_s=300) as measurer:
            result = measurer.run(measure_built_job, (job, path))
    if not result.ok:
        raise RuntimeError(f"MetaSchedule's best module of {op.name} failed: {result.error}")
    return result.seconds, wall


def us(seconds: float | None) -> str:
    return "failed" if not seconds else f"{seconds * 1e6:.1f} us"


class ResumableRun:
    """A measuring bench's rows, the JSON at ``path`` rewritten after every item, so that a run cut short (a lent
    GPU's call ends) keeps what it finished. With ``resume`` the rows a run of the same ``identity`` (``what`` names
    its fields in the refusal) left there without an error are kept, their ``key`` in ``done``."""

    def __init__(self, path: Path | None, resume: bool, identity: dict[str, Any], what: str, key: str) -> None:
        self.path, self.key = path, key
        self.header = {"command": " ".join(sys.argv), **identity}
        self.rows: list[dict] = []
        self.summary: dict[str, Any] = {}
        if resume and path and path.exists():
            kept = json.loads(path.read_text())
            if any(kept[k] != v for k, v in identity.items()):
                sys.exit(f"{path} holds another {what}: --resume continues the same run")
            self.rows = [r for r in kept["rows"] if "error" not in r]
        self.done = {r[key] for r in self.rows}

    def save(self) -> None:
        if self.path:
            self.path.write_text(json.dumps({**self.header, "rows": self.rows, **self.summary}, indent=1) + "\n")

    def measure(self, name: str, compute: Callable[[], dict]) -> dict | None:
        """``compute``'s row for ``name``, kept and saved; a failure is recorded with its error and the run goes
        on (None)."""
        try:
            row = compute()
        except Exception as e:  # noqa: BLE001 - one item's failure is recorded, the run goes on
            traceback.print_exc()
            self.rows.append({self.key: name, "error": f"{type(e).__name__}: {e}"})
            self.save()
            return None
        self.rows.append(row)
        self.save()
        return row

    def finish(self, **summary: Any) -> None:
        self.summary.update(summary, complete=True)
        self.save()
