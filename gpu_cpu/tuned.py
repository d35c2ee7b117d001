"""What a CPU or GPU exploration returns, and the atomic writing of its artefacts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from gpu_cpu.tune import TuneResult
from hetero_dse import __version__
from hetero_dse.analysis import Analysis, analyze
from hetero_dse.history import Workload, workload_spec
from hetero_dse.operator import Operator


@dataclass
class Tuned:
    """One operator's search on one device, with the library's time on the same device (None: no library
    call for the operator, or no device to run it on)."""

    op: Operator
    source: str
    tune: TuneResult
    library_seconds: float | None

    @property
    def label(self) -> str:
        return self.op.slug

    @cached_property
    def flops(self) -> int:
        return analyze(self.op).flops

    def gflops(self, seconds: float | None) -> float | None:
        return None if not seconds else self.flops / seconds / 1e9

    def record(self, directory: str | None) -> dict[str, Any]:
        best = self.tune.best
        return {
            "operator": self.op.name, "shape": self.op.shape_name, "signature": self.op.signature(),
            "explorer": self.tune.explorer, "trials": len(self.tune.trials),
            "answered_from_history": self.tune.answered,
            "failures": sum(not t.result.ok for t in self.tune.trials),
            "failure_messages": sorted({t.result.error for t in self.tune.trials if not t.result.ok})[:5],
            "wall_s": self.tune.wall_s, "interrupted": self.tune.interrupted,
            "best": None if best is None else {"knobs": best.point.to_json(), "seconds": best.result.seconds,
                                               "gflops": self.gflops(best.result.seconds)},
            "torch": None if self.library_seconds is None else {"seconds": self.library_seconds,
                                                                "gflops": self.gflops(self.library_seconds)},
            "speedup_over_torch": (self.library_seconds / best.result.seconds
                                   if best is not None and self.library_seconds else None),
            "directory": directory,
        }


def tvm_workload(op: Operator, target: dict[str, Any], analysis: Analysis) -> Workload:
    """The history's key for ``op`` (analysed as ``analysis``) measured on ``target``: numbers from other
    versions, or from TVM runtimes with another thread count, are not mixed in."""
    import os

    import tvm

    versions = {"hetero_dse": __version__, "tvm": tvm.__version__}
    if target.get("kind") == "llvm":  # a CPU schedule's time scales with the threads running its parallel loop
        versions["tvm_threads"] = os.environ.get("TVM_NUM_THREADS", "default")
    return Workload(op.name, op.signature(), json.dumps(target, sort_keys=True), versions, workload_spec(analysis))
