"""``explore --synth K``: the K best designs of each FPGA exploration synthesized and held to their predictions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hetero_dse.hls.synth import JOB_TIMEOUT_S
from hetero_dse.hls.vitis import SynthTool
from hetero_dse.run.events import RunEvents

__all__ = ["SynthSettings", "synthesize_best"]


@dataclass(frozen=True)
class SynthSettings:
    """Which designs a run synthesizes, with what and where."""

    top: int  # the best K designs of each FPGA exploration
    steps: tuple[str, ...]
    tool: SynthTool
    jobs: int = 1  # local Dask workers
    scheduler: str | None = None  # or an existing Dask scheduler


def synthesize_best(out: Path, results: list, settings: SynthSettings, store: Any, seed: int,
                    events: RunEvents) -> dict[int, list[dict[str, Any]]]:
    """The best one's project and ``hls_rank<N>`` projects for the others, synthesized and validated; by index
    in ``results``, a summary a design (rank, project, status, reason, figures)."""
    from hetero_dse.analysis import analyze
    from hetero_dse.hls.project import TestBenchTooLarge, write_project
    from hetero_dse.hls.synth import SynthJob, synthesize, validate_outcomes

    ranked: list[tuple[int, int, Path]] = []
    for i, (e, written) in enumerate(results):
        if e.target.kind != "fpga" or written is None or written.directory is None:
            continue
        # where the Winograd engine was kept, the project written is the network kernel's, which synthesis does
        # not read back: the direct designs are synthesized from the first
        winograd = getattr(e, "winograd", None) is not None and e.winograd.chosen
        first = 1 if winograd else 2
        if not winograd:
            ranked.append((i, 1, out / written.directory))
        for rank, (point, design) in enumerate(e.designs[first - 1:settings.top], start=first):
            op = e.op.with_dtype(point["dtype"])
            try:
                directory = write_project(out / e.label / e.board.name / f"hls_rank{rank}", op, analyze(op), point,
                                          design, e.board, seed=seed)
            except TestBenchTooLarge:
                continue
            ranked.append((i, rank, directory))
    jobs = [SynthJob.of(directory, settings.steps, JOB_TIMEOUT_S, settings.tool) for _, _, directory in ranked]
    with events.status(f"synthesizing {len(jobs)} design{'s' if len(jobs) != 1 else ''} with Vitis "
                       f"{settings.tool.version}"):
        outcomes = synthesize(jobs, store=store, scheduler=settings.scheduler, workers=settings.jobs)
    by_project = {str(Path(s["project"]).resolve()): s for s in validate_outcomes(outcomes)}
    synthesis: dict[int, list[dict[str, Any]]] = {}
    for i, rank, directory in ranked:
        summary = by_project.get(str(Path(directory).resolve()))
        if summary is None:
            continue
        project = str(Path(directory).relative_to(out))
        if summary["validation"] is not None:
            events.validated(project, summary["validation"], summary["status"] == "skipped")
        synthesis.setdefault(i, []).append({"rank": rank, "project": project, "status": summary["status"],
                                            "reason": summary["reason"],
                                            "figures": (summary["validation"] or {}).get("figures")})
    return synthesis
