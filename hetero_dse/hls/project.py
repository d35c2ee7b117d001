"""Writing a design as a Vitis HLS project: templates rendered, test data written, then published at once.

The project is assembled in a sibling ``.partial`` directory and renamed into place as the last step, so
an interrupted run never leaves a directory that looks complete.
"""

from __future__ import annotations

import json
import shutil
from math import prod
from pathlib import Path
from typing import Any

import numpy as np
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from hetero_dse import __version__
from hetero_dse.analysis import Analysis
from hetero_dse.hardware.board import RESOURCE_KINDS, Board
from hetero_dse.atomic import atomic_directory
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hls.context import build_context
from hetero_dse.hls.lint import LintError, lint
from hetero_dse.operator import Operator, nbytes
from hetero_dse.resources import data_dir
from hetero_dse.space.point import Point

TEMPLATES = {
    "kernel.cpp.j2": "src/kernel.cpp",
    "kernel.h.j2": "src/kernel.h",
    "tb.cpp.j2": "tb/tb.cpp",
    "project.tcl.j2": "project.tcl",
    "Makefile.j2": "Makefile",
    "connectivity.cfg.j2": "connectivity.cfg",
    "hls_config.tcl.j2": "hls_config.tcl",
    "vpp_compile.cfg.j2": "vpp_compile.cfg",
    "README.md.j2": "README.md",
}
#: Files of the Vitis (v++) flow, written only for boards with an acceleration platform.
PLATFORM_ONLY = {"connectivity.cfg.j2", "vpp_compile.cfg.j2"}
STATIC = {"run_hls.tcl": "run_hls.tcl", "include/hls_streamofblocks.h": "sim/include/hls_streamofblocks.h",
          "include/hls_vector.h": "sim/include/hls_vector.h"}
#: The test bench's vectors and reference output are drawn in memory, written to disk and read back whole by
#: the C-simulation; past these, a project would fill the disk and take hours to C-simulate.
MAX_TESTBENCH_BYTES = 10**9
MAX_TESTBENCH_FLOPS = 10**12


class TestBenchTooLarge(HeteroDSEError):
    """The operator's whole tensors are too large for a test bench: the project is not written."""

    __test__ = False  # not a pytest class despite its name


def check_testbench_size(op: Operator, analysis: Analysis) -> None:
    """Refuse, in one sentence, a test bench that would not fit in memory or would take hours to compute."""
    from hetero_dse.units import fmt_bytes, si

    data = op.tensor_bytes + nbytes(op.output)  # the reference output besides
    if data > MAX_TESTBENCH_BYTES:
        raise TestBenchTooLarge(f"its test bench would hold {fmt_bytes(data)} of vectors (limit "
                                f"{fmt_bytes(MAX_TESTBENCH_BYTES)})")
    if analysis.flops > MAX_TESTBENCH_FLOPS:
        raise TestBenchTooLarge(f"its reference output takes {si(analysis.flops)}operations (limit "
                                f"{si(MAX_TESTBENCH_FLOPS)}operations)")


def environment() -> Environment:
    """The one Jinja environment: strict (a missing variable is an error), C++ untouched (no autoescape)."""
    return Environment(loader=FileSystemLoader(str(data_dir("hls_templates"))), undefined=StrictUndefined,
                       keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False)


def flow(board: Board) -> dict[str, str]:
    """The Vitis flow a board's project takes: an .xo kernel for v++ where it has an acceleration platform
    (Alveo, AWS F1), else an IP for a Vivado block design (Zynq boards)."""
    return {"flow_target": "vitis" if board.platform else "vivado",
            "export_format": "xo" if board.platform else "ip_catalog"}


def network_flow(board: Board, clock_mhz: float, word_bytes: int) -> dict[str, Any]:
    """What a whole-network project's build scripts take (project.tcl, hls_config.tcl, the Makefile, the v++
    files): the flow, the clock, and the m_axi settings for words of ``word_bytes``: bursts of AXI4's most,
    4 KB and 256 beats, as the model charges a run of words, ``NETWORK_OUTSTANDING`` of them in flight."""
    from cost_models.fpga_costs import NETWORK_OUTSTANDING, axi_max_beats

    return {"version": __version__, "platform": board.platform, "clock_period_ns": round(1000.0 / clock_mhz, 3),
            **flow(board), "memory_channels": board.memory.channels,
            "connectivity": board.memory.connectivity or "DDR",
            "axi": {"max_burst_beats": axi_max_beats(word_bytes), "outstanding": NETWORK_OUTSTANDING}}


def tolerance(dtype: str, reduce_length: int) -> tuple[float, float]:
    """(atol, rtol) of the testbench: exact for integers; for floats, error growing with the reduction."""
    if dtype.startswith("int") or dtype.startswith("uint"):
        return 0.0, 0.0
    return 1e-5 * max(1.0, reduce_length) ** 0.5, 1e-4


def reference_output(op: Operator, inputs: list[np.ndarray]) -> tuple[np.ndarray, str]:
    """The operator's output from its library reference, or TVM's unscheduled llvm build when it has none."""
    ref = op.reference(inputs)
    if ref is not None:
        return np.asarray(ref).astype(str(op.output.dtype)), "the operator's numpy/torch reference"
    from hetero_dse.reference import run_naive

    return run_naive(op, inputs), "TVM's unscheduled llvm build"


def write_project(directory: Path, op: Operator, analysis: Analysis, point: Point, design: dict[str, Any],
                  board: Board, seed: int = 0, search_interrupted: bool = False) -> Path:
    """Render the project of ``point`` into ``directory`` (replacing it) and return the directory; raises
    :class:`TestBenchTooLarge` before drawing any data for a shape whose test bench could not be run.
    ``search_interrupted``: the design is the best of a search stopped early, which the project says."""
    check_testbench_size(op, analysis)
    context = build_context(op, analysis, point, design, board)
    inputs = op.random_inputs(seed)
    output, source = reference_output(op, inputs)
    atol, rtol = tolerance(str(op.dtype), prod(lp.extent for lp in analysis.main.reduce))
    context.update(
        version=__version__, reference_source=source, atol=repr(atol), rtol=repr(rtol), design=design, **flow(board),
        fig=_figures(design, point), search_interrupted=search_interrupted,
    )
    directory = Path(directory)
    try:
        with atomic_directory(directory) as partial:
            env = environment()
            for template, target in TEMPLATES.items():
                if template in PLATFORM_ONLY and not board.platform:
                    continue  # a Zynq board exports an IP for Vivado: no v++ compile or link
                path = partial / target
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(env.get_template(template).render(**context))
            for source_file, target in STATIC.items():
                path = partial / target
                path.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(data_dir("hls_templates") / source_file, path)
            (partial / "data").mkdir()
            for port, array in zip(context["host_inputs"], inputs, strict=True):
                np.ascontiguousarray(array, dtype=port["dtype"]).tofile(partial / "data" / f"{port['name']}.bin")
            out = context["out_port"]
            np.ascontiguousarray(output, dtype=out["dtype"]).tofile(partial / "data" / f"{out['name']}.reference.bin")
            record = {"operator": op.name, "signature": op.signature(), "board": board.name, "part": board.part,
                      "top": context["top"],
                      "knobs": point.to_json(), "predicted": design, "expectations": expectations(context, design),
                      "generator": f"hetero_dse {__version__}", "search_interrupted": search_interrupted}
            # the project's own check of what was emitted; its verdict travels with the project
            try:
                record["lint"] = lint(partial, record).to_json()
            except LintError as exc:
                record["lint"] = {"ok": None, "error": str(exc)}
            (partial / "design.json").write_text(json.dumps(record, indent=2) + "\n")
    except OSError as exc:
        raise HeteroDSEError(f"cannot write the HLS project to {directory}: {exc.strerror or exc}") from exc
    return directory


def expectations(context: dict[str, Any], design: dict[str, Any]) -> dict[str, Any]:
    """What a synthesis run of this project is checked against: per labelled loop (the pipelined nest of
    each process, outer labels first) its trip count, II and depth; per buffer its banks, storage and
    blocks; the PE array's operator instances; the width of every port."""
    loops = []
    for b in context["buffers"]:
        x = b["xfer"]
        labels = [lp["label"] for lp in x["row_loops"]] + ([x["label"]] if x["iterations"] > 1 else [])
        loops.append({"process": f"read_{b['name']}", "labels": labels, "trip_count": x["trips"], "ii": x["ii"],
                      "per": "block"})
    loops.append({"process": "compute_tile", "labels": [lp["label"] for lp in context["pipeline_loops"]],
                  "trip_count": design["compute_cycles_per_tile"] - design["pipeline_depth"],
                  "ii": design["ii"], "depth": design["pipeline_depth"], "per": "tile"})
    out = context["out_xfer"]
    loops.append({"process": "write_out",
                  "labels": ([lp["label"] for lp in out["row_loops"]]
                             + ([out["label"]] if out["iterations"] > 1 else [])),
                  "trip_count": out["trips"], "ii": out["ii"], "per": "tile"})
    buffers = [{"variable": f"{b['name']}_s", "tensor": b["tensor"], "banks": info["banks"],
                "words_per_bank": info["words_per_bank"], "storage": info["storage"], "blocks": info["blocks"]}
               for b, info in zip(context["buffers"], design["buffers"], strict=False)]
    w = design["buffers"][-1]
    buffers.append({"variable": "out_s", "tensor": w["tensor"], "banks": w["banks"],
                    "words_per_bank": w["words_per_bank"], "storage": w["storage"], "blocks": w["blocks"]})
    return {"loops": loops, "buffers": buffers, "instances": _core_instances(design),
            "port_bits": {p["name"]: design["port_bits"] for p in context["all_ports"]},
            # the m_axi bundle of each port: the RTL and the report name ports by bundle (m_axi_gmem0_RDATA)
            "port_bundles": {p["name"]: p["bundle"] for p in context["all_ports"]},
            # how the host lays each tensor out in DDR (zero words around it, the output padded to whole tiles)
            "layout": {p["name"]: {"tensor": p["tensor"], "word_elements": p["word"], "head_words": p["head"],
                                   "depth_words": p["depth"], "pitch": p["pitch"], "extents": p["extents"],
                                   "prepared_on_host": p["prepare"] is not None}
                       for p in context["all_ports"]}}


def _core_instances(design: dict[str, Any]) -> dict[str, int]:
    """The operator cores the RTL instantiates, by operation: the PE array's and the epilogue's multiplies and
    adds. An integer add in fabric is logic, not a core module, so it is not counted here."""
    cores = design["cores"]
    epilogue = design.get("epilogue") or {}
    lanes = int(epilogue.get("lanes", 0)) if epilogue.get("steps") else 0
    out: dict[str, int] = {}
    for unit, count in (("mul", design["units"]["mul"] + lanes * int(epilogue.get("muls", 0))),
                        ("add", design["units"]["add"] + lanes * int(epilogue.get("adds", 0)))):
        op, impl = cores[unit]["op"], cores[unit]["impl"]
        if count and not (impl == "fabric" and not op.startswith("f")):
            out[op] = out.get(op, 0) + count
    return out


def _figures(design: dict[str, Any], point: Point) -> dict[str, Any]:
    """Human-readable figures for the project README."""
    from hetero_dse.units import fmt_bytes, fmt_ops, fmt_seconds

    unrolled = [f"{k.split('.', 1)[1]}×{v}" for k, v in point.items() if k.startswith("unroll.") and v > 1]
    tiles = [f"{k.split('.', 1)[1]}={v}" for k, v in point.items() if k.startswith("tile.")]
    return {
        "latency": fmt_seconds(design["latency_s"]),
        "gops": fmt_ops(design["gops"] * 1e9),
        "peak": fmt_ops(design["peak_gops"] * 1e9),
        "roofline": f"{100 * design['roofline']:.1f} %",
        "unrolled": ", ".join(unrolled) or "none unrolled",
        "tiles": ", ".join(tiles),
        "traffic": fmt_bytes(design["traffic_bytes"]),
        "traffic_ratio": f"{design['traffic_over_bound']:.2f}×",
        "resources": [{"name": r.upper(), "used": f"{design['resources'][r]:,.0f}", "cap": f"{design['caps'][r]:,.0f}",
                       "share": f"{100 * design['utilisation'][r]:.1f} %"} for r in RESOURCE_KINDS],
        "stages": [(name, fmt_seconds(s)) for name, s in design["stages_s"].items()],
    }
