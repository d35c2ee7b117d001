"""Writing a network's accelerator as one Vitis HLS project: the shared kernel (``hls_templates/network/``), the
descriptor table of its layers, the weights laid out as its buffers hold them, and a test bench that runs the
whole table in one kernel call and checks every layer's output against torch.

Two kinds of run: a traced network (``model/chain.py``: every layer in execution order, each reading the last
one's output where the network does, the references torch's own), or a network's distinct layers each on
random data of its shape (``explore --model``, where only the distinct layers are known). Either way the
activations live in one DDR arena (``network_layout``), and each layer's output stays there.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cost_models.fpga_network import DESCRIPTOR_WORDS
from cost_models.fpga_costs import ARENA_OUTSTANDING, RUNS_AHEAD
from hetero_dse import __version__
from hetero_dse.atomic import atomic_directory
from hetero_dse.errors import HeteroDSEError
from hetero_dse.resources import data_dir
from cost_models.fpga_network_placed import NetworkDesign
from hetero_dse.hls.network_layout import lay_out
from hetero_dse.hls.network_run import (ENGINE_IDS, FIELDS, FLOAT_FIELDS, NAMES, NetworkRun, arena_halves,
                                         tile_banks, weight_ports, write_process)

__all__ = ["MAX_CSIM_BYTES", "check_trips", "csim_bytes", "write_network_project", "write_network_random"]

NETWORK_TEMPLATES = {"network/kernel.cpp.j2": "src/kernel.cpp", "network/kernel.h.j2": "src/kernel.h",
                     "network/tb.cpp.j2": "tb/tb.cpp", "network/host.cpp.j2": "host/host.cpp",
                     "network/Makefile.j2": "Makefile", "network/README.md.j2": "README.md",
                     "project.tcl.j2": "project.tcl", "hls_config.tcl.j2": "hls_config.tcl",
                     "network/xrt_banks.h.j2": "sim/include/xrt/xrt_banks.h"}
#: the Vitis (v++) flow's files, for boards with an acceleration platform
PLATFORM_TEMPLATES = {"network/connectivity.cfg.j2": "connectivity.cfg", "vpp_compile.cfg.j2": "vpp_compile.cfg"}
#: the IP flow's host program, for boards without one (a Zynq's processor, the driver Vitis HLS exports), and the
#: test doubles of the driver and the board's parameters it is compiled against here (the driver's file is named
#: after the top function: ``driver_names``)
IP_TEMPLATES = {"network/host_zynq.cpp.j2": "host/zynq/main.cpp",
                "network/xparameters.h.j2": "sim/include/bsp/xparameters.h"}
#: copied as they are: the HLS build script, the headers' stand-ins for C-simulation without Vitis, and the
#: test double of XRT the host program is compiled against here
STATIC = {"run_hls.tcl": "run_hls.tcl", **{f"include/{h}": f"sim/include/{h}" for h in (
    "ap_int.h", "hls_burst_maxi.h", "hls_stream.h", "hls_streamofblocks.h", "hls_vector.h", "xrt/xrt_device.h",
    "xrt/xrt_bo.h", "xrt/xrt_kernel.h")}}
#: the standalone BSP's headers the Zynq host program includes, as test doubles (copied where it is written)
BSP_STATIC = {f"include/bsp/{h}": f"sim/include/bsp/{h}" for h in (
    "ff.h", "xil_cache.h", "xil_printf.h", "xil_types.h", "xstatus.h", "xtime_l.h")}


def driver_names(top: str) -> tuple[str, str]:
    """The driver Vitis HLS exports for top function ``top``: its instance type and its header (``XNetwork_kernel``,
    ``xnetwork_kernel.h``: the name's first letter capitalised)."""
    return "X" + top[:1].upper() + top[1:], f"x{top.lower()}.h"


def context(design: NetworkDesign, run: NetworkRun, data: dict[str, Any], top: str) -> dict[str, Any]:
    from cost_models.fpga_costs import ARITHMETIC
    from cost_models.fpga_network import network_trips

    from cost_models.fpga_network_memory import design_span
    from cost_models.fpga_network_ports import port_banks
    from cost_models.fpga_network_resources import engine_storage

    a = ARITHMETIC[design.dtype]
    integer = design.dtype == "int8"
    board = design.board
    engines = []
    for kind, e in design.engines.items():
        engines.append({"kind": kind, "name": NAMES[kind], "id": ENGINE_IDS[kind], "lanes": e.out_lanes,
                        "in_lanes": e.in_lanes, "in_rows": e.in_rows, "w_rows": e.w_rows, "out_rows": e.out_rows,
                        "packed": e.packed, "chain": e.chain,
                        "w_ports": e.w_ports, "wgts": weight_ports(e.w_ports), "in_banks": e.in_banks,
                        "box_latency": e.box_latency,
                        "taps": e.taps, "tap_rows": e.tap_rows,
                        "writer": write_process(e.out_banks, e.out_cols),
                        "tile_banks": tile_banks(e.out_banks, e.out_cols),
                        "storage": engine_storage(e, design.dtype, board.cap("uram") > 0),
                        **(winograd_context(e, design.dtype) if kind == "winograd" else {})})
    tch = max(p.tiles.tc if p.layer.engine == "depthwise" else p.tiles.tk for p in design.layers)
    wgts = weight_ports(design.w_ports)
    # the table's ints never widened to the port (its burst buffer is charged at 32 bits: kernel_ports)
    ports = [{"name": "table", "bundle": "gmem_table", "depth": data["table"].size, "extra": " max_widen_bitwidth=32"},
             # the arena's (a stream's two where its word is over two ports): twice the runs each keeps in flight
             # (ARENA_OUTSTANDING, kernel_buffers)
             *({"name": f"act_{n}{h}", "depth": data["arena_words"],
                "extra": f" num_{way}_outstanding={ARENA_OUTSTANDING}"}
               for n, way in (("in", "read"), ("res", "read"), ("out", "write"))
               for h in arena_halves(design.arena_ports)),
             # the weights' ports, each a bundle of its own, on the memory banks ``weight_banks`` puts them on
             *({"name": w, "depth": data["weight_words"]} for w in wgts),
             {"name": "params", "depth": data["param_words"]}]
    for q, p in enumerate(ports[1:]):
        p["bundle"] = f"gmem{q}"
    # each port's bank in a lone kernel: the table and the arena's on the first, the weights' as ``weight_banks``
    # puts them, the parameters on the next (the one there is on a board of one); each compute unit an instance of
    # the kernel, its ports on its own set of banks (``unit_bank``, as the model shares them: ``unit_share``)
    # (each weight port's buffer over ``span`` banks in a row where one bank cannot hold its part: ``spans``, the
    # last bank of each such port's range)
    units, span = [], design_span(design)
    for u in range(design.compute_units):
        banks = port_banks(design.first_unit + u, board.memory.channels, len(wgts), span)
        of_port = {"params": banks["params"], **dict(zip(wgts, banks["weights"], strict=True))}
        units.append({"name": f"{top}_{u + 1}", "banks": [(p["name"], of_port.get(p["name"], banks["arena"]))
                                                          for p in ports],
                      "spans": {w: b + span - 1 for w, b in zip(wgts, banks["weights"], strict=True)} if span > 1
                      else {}, "slr": design.slrs[u] if design.slrs else None})
    atol, rtol = [], []
    for r in run.layers:  # int8: exact, the reference being the same integer arithmetic
        red = r.placed.layer.C * r.placed.layer.R * r.placed.layer.S
        scale = max(1.0, float(np.abs(r.reference).max()) if r.reference.size else 1.0)
        atol.append("0.0" if integer else repr(1e-5 * scale * max(1.0, red) ** 0.5))
        rtol.append("0.0" if integer else repr(1e-4))
    from hetero_dse.hls.project import network_flow

    port_bits = design.word * (8 if integer else 32)
    build = {**network_flow(board, design.clock_mhz, board.memory.port_bits // 8), "dtype": design.dtype,
             "achieved_mhz": f"{design.achieved_mhz:.0f}", "model_ms": f"{1e3 * design.latency_s:.3f}",
             "units_fps": f"{design.fps:.0f}", "images": design.images,
             "host_atol": "0.0" if integer else "1e-3", "host_rtol": "0.0" if integer else "1e-3"}
    drv, drv_header = driver_names(top)
    return {**build, "top": top, "drv": drv, "drv_header": drv_header,
            "network": run.name, "layers": len(run.layers), "board": design.board.name,
            "part": design.board.part, "clock_mhz": design.clock_mhz, "integer": integer,
            "ctype": "signed char" if integer else "float", "acc_ctype": "int" if integer else "float",
            "params": 2 if integer else 1, "param_words": data["param_words"],
            "word": design.word, "arena_ports": design.arena_ports,
            "arena_halves": arena_halves(design.arena_ports), "wword": design.wword, "pword": design.pword,
            "port_bits": board.memory.port_bits, "act_bits": port_bits, "block": design.block,
            "descriptor_words": DESCRIPTOR_WORDS, "descriptor_fields": FIELDS, "float_fields": FLOAT_FIELDS,
            "engine_ids": list(ENGINE_IDS), "max_layers": len(run.layers), "engines": engines, "tch_max": tch,
            "writers": sorted({(write_process(*b), tuple(map(tuple, tile_banks(*b))))
                               for b in {(1, 1)} | {(e.out_banks, e.out_cols) for e in design.engines.values()}}),
            "weight_ports": design.w_ports, "wgts": wgts, "units": units, "weight_span": span,
            "axi_map": axi_map(board.memory.axi_ports, design.arena_ports, wgts,
                               [u["name"] for u in units] if len(units) > 1 else ()),
            "distance": next(iter(design.engines.values())).distance, "ports": ports, "runs_ahead": RUNS_AHEAD,
            "ops": {"mul": a.mul_core[0], "mul_impl": a.mul_core[1], "add": a.add_core[0],
                    "add_impl": a.add_core[1]},
            "arena_words": data["arena_words"], "weight_words": data["weight_words"], "atol": atol, "rtol": rtol,
            "reference_source": run.reference_source,
            "trips": [network_trips(design.engines[r.placed.layer.engine], r.placed.layer, r.placed.tiles,
                                    r.placed.shape.residual) for r in run.layers]}


#: a Zynq's AXI ports into the DDR controller, those on a controller port of their own first (UltraScale+: HP1 and
#: HP2 share one; Zynq-7000: HP0 and HP1 share one, HP2 and HP3 another)
ZYNQ_PORTS = {6: ("HP0", "HP3", "HP1", "HPC0", "HPC1", "HP2"), 4: ("HP0", "HP2", "HP1", "HP3")}


def axi_map(axi_ports: int | None, a_ports: int, wgts: list[str], units: Sequence[str] = ()
            ) -> list[tuple[str, list[str]]]:
    """On a board whose kernel ports reach memory through ``axi_ports`` AXI ports (a Zynq's HP ports; None: a
    platform's banks, no map), each read stream on a port of its own, as the model counts them a word a cycle each
    (the explorer keeps them within the ports: ``read_streams``, times the compute units): the box's and the
    residual's ports, then the weights'; the output's writes beside the box's (a port's write channel), the table
    and the parameters beside the residual's; with ``units`` (their instances' names), each unit's after the last's."""
    if not axi_ports or axi_ports not in ZYNQ_PORTS:
        return []
    halves = arena_halves(a_ports)
    streams = [[f"act_in{h}", f"act_out{h}"] for h in halves] + [[f"act_res{h}"] for h in halves]
    streams[a_ports] += ["table", "params"]
    streams += [[w] for w in wgts]
    if units:
        streams = [[f"{u}.{name}" for name in names] for u in units for names in streams]
    if len(streams) > axi_ports:
        raise HeteroDSEError(f"{len(streams)} read streams on {axi_ports} AXI ports: the explorer builds none")
    return list(zip(ZYNQ_PORTS[axi_ports], streams, strict=False))


#: test data past this is not written (as for one layer's project: ``project.MAX_TESTBENCH_BYTES``)
MAX_DATA_BYTES = 10**9
#: a C-simulation runs a layer's processes one after the other, so every block its read processes make is held
#: at once; past this the C-simulation is refused in one sentence instead of exhausting the machine
MAX_CSIM_BYTES = 4 * 2**30


def csim_bytes(design: NetworkDesign) -> int:
    """The most memory the C-simulation of one layer holds in its streams of blocks."""
    from cost_models.fpga_network import network_trips

    worst, elem = 0, 1 if design.dtype == "int8" else 4
    for p in design.layers:
        e = design.engines[p.layer.engine]
        t = network_trips(e, p.layer, p.tiles)
        if e.kind == "winograd":  # transformed inputs (int8: int16), weights, the patches' sums, the output tile
            a2 = e.alpha ** 2
            held = (t["steps"] * (e.in_rows * a2 * e.in_lanes * min(4, 2 * elem) + e.w_rows * e.row_grids(3)
                                  * e.out_lanes * e.in_lanes * elem)
                    + 4 * t["out_tiles"] * e.out_lanes * (e.out_rows * a2 + e.tile_rows))
        else:
            lanes_in = e.in_lanes if e.kind == "grid" else e.out_lanes
            weights = e.w_rows * e.out_lanes * e.lane_sums
            held = (elem * t["steps"] * (e.in_rows * e.box_banks * lanes_in + weights)
                    + 4 * t["out_tiles"] * e.out_rows * e.out_lanes)
        worst = max(worst, int(held))
    return worst


def write_network_project(directory: Path, design: NetworkDesign, run: NetworkRun, top: str = "network_kernel",
                          in_set: bool = False) -> Path:
    """Render ``design`` with the layers of ``run`` into ``directory`` (replacing it, published at once); raises
    :class:`TestBenchTooLarge` before laying out data past ``MAX_DATA_BYTES``."""
    from hetero_dse.hls.project import TestBenchTooLarge, environment
    from hetero_dse.units import fmt_bytes

    size = sum(r.weight.nbytes + 2 * r.reference.nbytes for r in run.layers) + sum(
        x.nbytes for x in run.inputs.values())
    if size > MAX_DATA_BYTES:
        raise TestBenchTooLarge(f"its test bench would hold {fmt_bytes(size)} of weights and activations (limit "
                                f"{fmt_bytes(MAX_DATA_BYTES)})")
    for r in run.layers:  # the table's epilogue reads a residual where the model charges one, and only there
        if bool(r.residual) != r.placed.shape.residual:
            raise HeteroDSEError(f"layer {r.placed.shape.name}: the run {'gives' if r.residual else 'gives no'} "
                                 f"residual where its design {'charges none' if r.residual else 'charges one'}")
    data = lay_out(run, design)
    _check_banks(design, data)
    ctx = {**context(design, run, data, top), "in_set": in_set}
    directory = Path(directory)
    try:
        with atomic_directory(directory) as partial:
            env = environment()
            ip = {**IP_TEMPLATES, "network/xdriver.h.j2": f"sim/include/bsp/{ctx['drv_header']}"}
            templates = {**NETWORK_TEMPLATES, **(PLATFORM_TEMPLATES if design.board.platform else ip)}
            for template, target in templates.items():
                path = partial / target
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(env.get_template(template).render(**ctx))
            for source, target in {**STATIC, **({} if design.board.platform else BSP_STATIC)}.items():
                (partial / target).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(data_dir("hls_templates") / source, partial / target)
            (partial / "data").mkdir()
            data["table"].tofile(partial / "data" / "table.bin")
            data["arena"].tofile(partial / "data" / "arena.bin")
            data["expected"].tofile(partial / "data" / "expected.bin")
            data["weights"].tofile(partial / "data" / "weights.bin")
            data["params"].tofile(partial / "data" / "params.bin")
            macs = sum(r.placed.layer.macs for r in run.layers)
            record = {"network": run.name, "board": design.board.name, "part": design.board.part, "top": top,
                      "generator": f"hetero_dse {__version__}", "design": design.to_json(),
                      "table": [dict(zip(FIELDS, (int(v) for v in row), strict=False)) for row in data["table"]],
                      "trips": ctx["trips"], "predicted": {"ops": 2 * macs}, "csim_bytes": csim_bytes(design),
                      "ports": ctx["ports"]}
            (partial / "design.json").write_text(json.dumps(record, indent=2, default=float) + "\n")
    except OSError as exc:
        raise HeteroDSEError(f"cannot write the network project to {directory}: {exc.strerror or exc}") from exc
    return directory


def write_network_random(directory: Path, design: NetworkDesign, ops: Sequence[Any], seed: int = 0,
                         top: str = "network_kernel", in_set: bool = False) -> tuple[Path, int]:
    """``design``'s project on random data (``random_run``): every distinct layer's, or where their data is past
    ``MAX_DATA_BYTES``, each engine's smallest layer and then others in order while they fit
    (``test_bench_layers``): (its directory, the layers it runs)."""
    from hetero_dse.hls.network_run import random_run, test_bench_layers
    from hetero_dse.hls.project import TestBenchTooLarge

    chosen = test_bench_layers(design, MAX_DATA_BYTES)
    if not chosen:
        raise TestBenchTooLarge(f"an engine's smallest layer alone has more test data than the limit of "
                                f"{MAX_DATA_BYTES / 1e9:g} GB")
    run = random_run(design, ops, seed, only=chosen)
    return write_network_project(directory, design, run, top, in_set), len(chosen)


def _check_banks(design: NetworkDesign, data: dict[str, Any]) -> None:
    """The buffers the project's host allocates, as its layout gives them (its test data: each distinct layer's
    input and residual besides the outputs, where the explorer counted the network's), on the banks its ports are
    connected to: :class:`TestBenchTooLarge` where they do not fit (the design's figures stand)."""
    from cost_models.fpga_network_memory import Footprint, overflow
    from hetero_dse.hls.project import TestBenchTooLarge

    element = 1 if design.dtype == "int8" else 4
    part = data["weight_words"] * design.wword * element
    laid = Footprint(part * design.w_ports, data["arena_words"] * design.word * element,
                     data["param_words"] * design.pword * 4, part)
    if problem := overflow(laid, design.board, design.dtype, design.w_ports, design.compute_units):
        raise TestBenchTooLarge(f"its test data, as the host would allocate it: {problem}")


def check_trips(directory: Path, output: str) -> list[str]:
    """Where the C-simulation's trip counts (``output``, the test bench's) differ from the model's in the
    project's design.json: one line each (none: the code runs the loops the model charges)."""
    import re

    record = json.loads((Path(directory) / "design.json").read_text())
    ran = {int(m.group(1)): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
           for m in re.finditer(r"layer (\d+) trips (.*)", output)}
    problems = []
    for i, model in enumerate(record["trips"]):
        got = ran.get(i)
        if got is None:
            problems.append(f"layer {i}: the C-simulation printed no trip counts")
            continue
        for kind in ("read_in", "read_w", "compute", "write", "bias", "transform_in", "transform_out"):
            if got.get(kind) != model[kind]:
                problems.append(f"layer {i}: {kind} ran {got.get(kind)} iterations, the model charges {model[kind]}")
        for kind in ("in_runs", "out_runs", "res_runs"):  # (absent from a project written before they were counted)
            if kind in model and got.get(kind) != model[kind]:
                problems.append(f"layer {i}: {kind}: {got.get(kind)} runs requested, the model charges {model[kind]} "
                                "bursts")
    return problems


def winograd_context(engine: Any, dtype: str) -> dict[str, Any]:
    """The Winograd engine's template values: its tile, types, transforms (``winograd_code``) and the exact
    division of an integer engine's output (its weights carry the weight transform's scale, squared: a shift, then
    where that leaves an odd factor, ``wino_divide``; ``fpga_winograd.exact_division``)."""
    from cost_models.fpga_winograd import exact_division, integer_types
    from hetero_dse.hls.winograd_code import transform_functions
    from hetero_dse.ops.winograd import integer_bits, transforms

    t = transforms(engine.tile, 3)
    integer = dtype == "int8"
    shift, inverse = exact_division(engine.tile) if integer else (0, None)
    types = integer_types(engine.tile) if integer else None
    bits, wide = integer_bits(engine.tile, 3, 1), integer_bits(engine.tile, 3, 512)

    def ctype(width: int | None) -> str:
        return "float" if width is None else {16: "short", 32: "int", 64: "long long"}.get(width, f"ap_int<{width}>")

    return {"tile": engine.tile, "alpha": t.alpha, "w_transform": engine.w_transform,
            "tile_rows": engine.tile_rows, "pointwise": engine.pointwise, "row_picks": engine.row_picks,
            "weight_scale": t.weight_scale, "divisor": (t.weight_scale * t.output_scale) ** 2 if integer else 1,
            "divisor_shift": shift, "divide": inverse is not None, "modular": bool(types and types.modular),
            "types": types,
            **{f"{k}_ctype": ctype(getattr(types, f, None)) for k, f in (("tr", "tr"), ("u", "u"), ("m", "sums"),
                                                                         ("y", "y"))},
            "product": f"{types.tr} x {types.u} bits" if types else "float",
            "in_bits": bits.input_transform, "w_bits": bits.weight_transform,
            "exact_bits": (wide.channel_sum, wide.output_transform),
            "transforms": transform_functions(engine.tile, dtype, engine.transform_dsp)}
