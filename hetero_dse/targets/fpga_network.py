"""The FPGA target's designs for a whole network: the shared network kernel at batch 1, its compute units at
batch > 1 (each unit's table a run of ``TargetRequest.batch`` images), the layer pipeline beside them, and their
HLS projects (C-simulated on request)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cost_models.fpga_network_design import explore_network
from cost_models.fpga_network_kernels import explore_slr_kernels
from cost_models.fpga_network_units import explore_throughput
from cost_models.fpga_pipeline import explore_pipeline, explore_traced
from hetero_dse.errors import HeteroDSEError
from hetero_dse.operator import Operator

__all__ = ["network_designs", "write_network"]


def network_designs(target: Any, graph: Any, outcomes: Sequence[Any], dtype: str, out: Path | None = None
                    ) -> dict[str, Any]:
    """One accelerator for the whole network on ``target``'s board (an ``FpgaTarget``) in ``dtype``: the shared
    network kernel
    (``cost_models/fpga_network_design``) explored for the network's layers, its HLS project written (every
    distinct layer on random data of its shape, checked against torch) under ``out``; beside it the sum of
    the layers' own designs (``outcomes``), which is a bound and not a design."""
    from hetero_dse.model.layer_shape import shape_of

    ops = graph.operators()
    clock = target.clocks[0]
    try:
        shapes = [(shape_of(op, from_host=_reads_network_input(op, graph)), layer.count)
                  for op, layer in zip(ops, graph.layers, strict=True)]
        design = explore_network(shapes, target.board, dtype, clock, algorithm=target.algorithm)
    except HeteroDSEError as exc:
        return {"board": target.board.name, "dtype": dtype, "why": str(exc)}
    record = design.to_json()
    # at batch > 1: as many compute units, each on its own images, as raise the images a second, each unit with
    # the batch-1 design's algorithm (a Winograd engine where that design has one), each run of its table
    # ``target.batch`` images (the linear layers once over them all)
    algorithm = "auto" if "winograd" in design.engines else "direct"
    units = explore_throughput(shapes, target.board, dtype, clock, algorithm=algorithm, images=target.batch)
    keep = ("compute_units", "fps", "latency_s", "engines", "utilisation", "units_stop", "unit_slrs", "images")
    record["throughput"] = {k: v for k, v in units.to_json().items() if k in keep}
    # where a shell takes part of one SLR: a kernel explored for each SLR's own room, all in one xclbin, kept where
    # it runs more images a second than the units of one kernel (``fpga_network_kernels``)
    kernels = explore_slr_kernels(shapes, target.board, dtype, clock, algorithm=algorithm, images=target.batch)
    if kernels is not None and kernels.fps > units.fps:
        record["throughput"] = {**kernels.to_json(), "units_fps": units.fps, "units_stop": units.units_stop}
    elif kernels is not None:
        record["throughput"]["kernels_fps"] = kernels.fps  # (said beside the units: the set runs fewer)
    # the second architecture, one stage a layer, to say where it would serve batch > 1 better
    record["pipeline"] = _pipeline(graph, shapes, target.board, dtype, clock, out, target.csim)
    counts = {op.shape_name: layer.count for op, layer in zip(ops, graph.layers, strict=True)}
    # the layers' own best designs, where each is of the same type and clock target as the shared one
    found = [e for e in outcomes if e.found and e.best_design[0]["dtype"] == dtype
             and e.best_design[0]["clock_mhz"] == clock]
    if len(found) == len(ops):
        record["per_layer_sum_s"] = sum(counts[e.op.shape_name] * e.kept_seconds for e in found)
    if out is not None:
        root = out / f"network-{graph.label}" / target.board.name
        record.update(write_network(design, ops, root / "hls", out, target.csim))
        if "kernels" in record["throughput"]:  # the set's kernels, each its own project, linked into one xclbin
            record["throughput"].update(_write_set(kernels, ops, root / "hls-slrs", out, target.csim))
        elif units.compute_units > 1 or units.images > 1:  # the units' kernel, instantiated compute_units times
            record["throughput"].update(write_network(units, ops, root / "hls-units", out, target.csim))
    return record


def _reads_network_input(op: Operator, graph: Any) -> bool:
    """Whether a layer's input is the network's own (its image: the host may lay it out as the layer wants)."""
    p = op.params
    return op.name == "conv2d" and (p.get("batch"), p.get("C"), p.get("H"), p.get("W")) == tuple(graph.input_shape)


def _pipeline(graph: Any, shapes: list, board: Any, dtype: str, clock: float, out: Path | None, run_csim: bool
              ) -> dict[str, Any]:
    """The layer-pipelined design: where the network traces as a chain of layers (``model/chain.py``), that
    chain's design and its project (C-simulated where asked); else its figure for the network's distinct layers
    and the sentence on why no project is written."""
    from hetero_dse.hls.csim import csim
    from hetero_dse.hls.pipeline_project import check_pipeline_trips, write_pipeline_project
    from hetero_dse.model.chain import trace_chain

    layers, image, why = None, None, "the network was not given as a module"
    if getattr(graph, "model", None) is not None:
        try:
            layers, image = trace_chain(graph.model, graph.example)
            if image.shape[0] != 1:
                layers, why = None, f"the layer pipeline runs an image at a time; the example is {image.shape[0]}"
        except HeteroDSEError as exc:
            why = str(exc)
        except Exception as exc:  # noqa: BLE001 - the user's forward, run again by the tracer: said, not raised
            why = f"tracing the network into a chain of layers failed: {type(exc).__name__}: {exc}"
    try:
        design = explore_traced(layers, board, dtype, clock) if layers else explore_pipeline(shapes, board, dtype,
                                                                                                 clock)
    except HeteroDSEError as exc:
        return {"why": str(exc)}
    record = {k: v for k, v in design.to_json().items() if k in ("architecture", "fps", "latency_s", "gops", "stages",
                                                                  "bottleneck", "achieved_mhz", "utilisation", "basis",
                                                                  "ddr_weights", "kernels")}
    if out is None:
        return record
    if not layers:
        record["project_why"] = f"no project written: {why}"
        return record
    try:
        written = write_pipeline_project(out / f"network-{graph.label}" / board.name / "pipeline", design, layers,
                                         image, network=graph.label)
    except HeteroDSEError as exc:  # the figure stands; what failed is said beside it
        record["project_why"] = str(exc)
        return record
    record["directory"] = str(written.relative_to(out))
    if run_csim:
        try:
            result = csim(written)
        except HeteroDSEError as exc:  # did not compile, ran too long: the project stands, the verdict says why
            record["check"] = {"passed": None, "why": str(exc)}
            return record
        problems = check_pipeline_trips(written, result.output)
        record["check"] = {"passed": result.passed and not problems, "mismatches": result.mismatches,
                           "max_abs_error": result.max_abs_error,
                           "trips": problems or "every process ran the trips the model charges"}
    return record


def write_network(design: Any, ops: Sequence[Operator], directory: Path, out: Path, run_csim: bool,
                   seed: int = 0) -> dict[str, Any]:
    """The network's HLS project (every distinct layer on random data) and, where asked, its C-simulation with
    the trip counts of every process set beside the model's."""
    from hetero_dse.hls.csim import csim
    from hetero_dse.hls.network_project import check_trips, write_network_random
    from hetero_dse.hls.project import TestBenchTooLarge

    try:  # every distinct layer on random data, or as many as the test bench holds (every engine's smallest first)
        written, ran = write_network_random(directory, design, ops, seed)
    except TestBenchTooLarge as exc:  # the design's figures still go into the report
        return {"project_why": f"no project written: {exc}"}
    record: dict[str, Any] = {"directory": str(written.relative_to(out))}
    if ran < len(design.layers):
        record["test_data"] = f"for {ran} of its {len(design.layers)} distinct layers, every engine's"
    if run_csim:
        try:
            result = csim(written)
        except HeteroDSEError as exc:  # too large to C-simulate here: said in the report, the project stands
            record["check"] = {"passed": None, "why": str(exc)}
            return record
        problems = check_trips(written, result.output)
        record["check"] = {"passed": result.passed and not problems, "mismatches": result.mismatches,
                           "max_abs_error": result.max_abs_error, "elements": result.elements,
                           "trips": problems or "every process ran the trips the model charges"}
    return record


def _write_set(kernels: Any, ops: Sequence[Operator], directory: Path, out: Path, run_csim: bool) -> dict[str, Any]:
    """A set of kernels' project (``kernel_set``), its lint's verdict and, where asked, each kernel's C-simulation
    with its trip counts against the model's (the set passes where every kernel does)."""
    from hetero_dse.hls.csim import csim
    from hetero_dse.hls.kernel_set import lint_kernel_set, set_kernels, write_kernel_set
    from hetero_dse.hls.network_project import check_trips
    from hetero_dse.hls.project import TestBenchTooLarge

    try:
        written, ran = write_kernel_set(directory, kernels, ops)
    except TestBenchTooLarge as exc:
        return {"project_why": f"no project written: {exc}"}
    record: dict[str, Any] = {"directory": str(written.relative_to(out))}
    if any(n < len(d.layers) for n, d in zip(ran, kernels.kernels, strict=True)):
        record["test_data"] = "for some of the distinct layers, every engine's"
    lint = lint_kernel_set(written)
    record["lint"] = {"ok": lint.ok, "findings": [str(f) for f in lint.findings]}
    if run_csim:
        checks = []
        for project in set_kernels(written):
            try:
                result = csim(project)
            except HeteroDSEError as exc:
                record["check"] = {"passed": None, "why": f"{project.name}: {exc}"}
                return record
            problems = check_trips(project, result.output)
            checks.append((result, problems))
        record["check"] = {"passed": all(r.passed and not p for r, p in checks),
                           "mismatches": sum(r.mismatches for r, _ in checks),
                           "max_abs_error": max(r.max_abs_error for r, _ in checks),
                           "elements": sum(r.elements for r, _ in checks),
                           "trips": [q for _, p in checks for q in p]
                           or "every process ran the trips the model charges"}
    return record
