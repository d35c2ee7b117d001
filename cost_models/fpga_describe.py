"""Every figure of one FPGA design, JSON-ready (what design.json, the report and the HLS generator read): the
model's kernel run on one row with its detail arrays switched on, each figure named; and the terms of it a
calibration fits. ``describe(FpgaModel(space.tables), row)``."""

from __future__ import annotations

from typing import Any

import numpy as np

from cost_models.calibration import ARITHMETIC_FIELDS, DEFAULT_FIXED
from cost_models.fpga import FpgaModel
from cost_models.fpga_blocks import IMPL_NAMES
from cost_models.fpga_costs import AXI_OUTSTANDING
from cost_models.fpga_kernel import E_ADDS, E_CMPS, E_MULS, E_PORTS, T_MAX_BEATS, T_PORT_BRAM
from cost_models.fpga_slrs import slrs_spanned
from hetero_dse.hardware.board import RESOURCE_KINDS

__all__ = ["calibration_terms", "describe", "output_extents"]


def describe(model: FpgaModel, row: np.ndarray) -> dict[str, Any]:
    """Every predicted figure of one point, JSON-ready (what design.json and the report hold)."""
    sp = model.tables
    row = np.asarray(row, dtype=np.int64)[None, :]
    r = model.evaluate(row, detail=True)
    dt = int(row[0, sp.col_dtype])
    clock = sp.clocks_mhz[int(row[0, sp.col_clock])]
    bound = model.io_bound(dt)
    usage = {k: float(r["usage"][0, i]) for i, k in enumerate(RESOURCE_KINDS)}
    over = {k: v for k, v in usage.items() if v > 1.0}
    buffers = []
    for p, (g, b) in enumerate(zip(model.ports, r["buffers"], strict=True)):
        buffers.append({
            "tensor": g.name, "role": "write" if g is sp.write else "read",
            "shape": [int(x) for x in b["width"][0]], "partition": [int(x) for x in b["factor"][0]],
            "banks": int(b["banks"][0]), "words_per_bank": int(b["words_per_bank"][0]),
            "storage": IMPL_NAMES[int(np.asarray(b["impl"])[0])], "loads": int(b["loads"][0]),
            "tile_bytes": int(b["tile_bytes"][0]), "lanes": int(b["lanes"][0]), "split": int(b["split"][0]),
            "cycles_per_load": int(b["cycles"][0]), "blocks": int(b["blocks"][0]),
            "seconds_per_load": float(b["one_s"][0]),
            # how the process moves the box in port words (see fpga_blocks.plan_transfer)
            "packed": int(b["packed"][0]), "word_ii": int(b["word_ii"][0]), "rows": int(b["rows"][0]),
            "iterations_per_row": int(b["iterations"][0]),
            "beats_per_load": int(b["rows"][0] * b["iterations"][0]),
            # the sets of banks a run's words rotate through (a partition factor a multiple of the lanes)
            "bank_sets": int(b["sets"][0]),
            # the DDR runs: words a run (a burst of at most the AXI limit each), the bursts a load, and how
            # many banks a lane of a word picks among at run time (the rows walk them)
            "run_words": int(b["iterations"][0]),
            "bursts_per_load": int(b["bursts"][0]), "runtime_banks": int(b["choices"][0]),
            "funnel": bool(b["funnel"][0]), "static_offset": bool(b["static"][0]),
            "word_offset": int(b["offset"][0]), "transfer_ok": bool(b["ok"][0]),
            # the output's layout in DDR (in its DDR order): every dimension padded to whole tiles, its rows
            # to whole words
            **({"pitch": int(b["pitch"][0]), "extents": output_extents(model, g, p, b)} if g is sp.write else {}),
            # DDR order of the buffer's dimensions, outermost first; not the natural order: the host
            # transposes the tensor before the run
            "layout": list(model.layouts[p][int(b["layout"][0])]),
            # dimensions read whole into registers each iteration, each lane picking its element
            "window": [d for d in range(len(b["width"][0])) if int(b["window"][0]) >> d & 1],
        })
    stages = {name: float(r["stages"][0, i]) for i, name in enumerate(model.stage_names)}
    latency = float(r["latency_s"][0])
    bound_stage = model.stage_names[int(r["bound"][0])]
    return {
        "latency_s": latency if np.isfinite(latency) else None,
        "gops": float(r["gops"][0]) if np.isfinite(latency) else 0.0,
        "ops": int(model.total_ops),
        "roofline": float(r["roofline"][0]) if np.isfinite(latency) else 0.0,
        "peak_gops": model.peak_ops(dt, clock) / 1e9,
        "bound": bound_stage,
        "stages_s": stages,
        # what the run takes besides the bounding process's own total: waiting for its first input
        # and the processes after it finishing the last tile
        "fill_drain_s": latency - stages[bound_stage] if np.isfinite(latency) else None,
        "compute_start_s": float(r["compute_start"][0]), "write_start_s": float(r["write_start"][0]),
        "tiles": int(r["n_tiles"][0]), "trips": [int(x) for x in r["trips"][0]],
        "pe": int(r["pe"][0]), "ii": int(r["ii"][0]), "pipeline_depth": int(r["depth"][0]),
        "compute_cycles_per_tile": int(r["compute_cycles"][0]),
        "accumulation_distance": int(r["spatial_iters"][0]), "add_latency": int(r["add_latency"][0]),
        "mul_latency": int(r["mul_latency"][0]), "recurrence": int(r["recurrence"][0]),
        "accumulate": bool(r["accumulate"][0]),
        "spatial_lanes": int(r["spatial_lanes"][0]), "reduce_lanes": int(r["reduce_lanes"][0]),
        # operator instances of the PE array, as the generated code has them (checked by the HLS lint)
        "units": {"mul": int(r["mul_units"][0]), "add": int(r["add_units"][0])},
        # the operator cores those instances are (the code binds each with BIND_OP; the lint checks it)
        "cores": model.consts[dt].cost.cores(),
        # the epilogue in the write process: its lanes (elements a word iteration) and each lane's operators
        "epilogue": {"steps": list(model.tables.analysis.epilogue_steps), "lanes": int(r["epilogue_units"][0]),
                     "ports": int(model.epilogue[E_PORTS]), "adds": int(model.epilogue[E_ADDS]),
                     "muls": int(model.epilogue[E_MULS]), "compares": int(model.epilogue[E_CMPS])},
        "port_bits": int(model.port_bits),
        # the m_axi settings the model charges (hls_config.tcl asks Vitis for them; the lint checks it does)
        "axi": {"max_burst_beats": int(model.timing[T_MAX_BEATS]), "outstanding": AXI_OUTSTANDING,
                "buffer_bram18k_per_port": int(model.timing[T_PORT_BRAM])},
        "resources": {k: float(r[k][0]) for k in RESOURCE_KINDS},
        "caps": {k: float(model.caps[i]) for i, k in enumerate(RESOURCE_KINDS)},
        "utilisation": usage, "feasible": bool(r["feasible"][0]),
        "slrs": sp.board.slrs, "slrs_spanned": slrs_spanned(sp.board, [float(r[k][0]) for k in RESOURCE_KINDS]),
        # the clock the time figures are at: the target, derated by the PEs' broadcast fan-out and the SLRs the
        # design spans (estimates: fpga_costs), or by what a calibration measured
        "clock": {"target_mhz": clock, "achieved_mhz": float(r["clock"][0]) / 1e6,
                  "fanout": float(r["fanout"][0]), "slrs_spanned": int(r["slrs"][0]),
                  "basis": "calibrated" if model.calibration is not None else "estimate"},
        # the LUTs of the read and write processes' run-time bank selection
        "bank_mux_luts": float(r["mux_luts"][0]),
        "over_cap": over,
        "traffic_bytes": float(r["traffic_bytes"][0]),
        "io_lower_bound_bytes": bound.bytes, "io_bound_kind": bound.kind,
        "traffic_over_bound": float(r["traffic_bytes"][0]) / bound.bytes,
        # what the score charges: the traffic in units of the operator's tensors moved once
        "traffic_over_compulsory": float(r["traffic_bytes"][0]) / float(model.compulsory[dt]),
        "buffers": buffers,
        # what a calibration fits (hetero_dse calibrate): each figure as the part that depends on a
        # calibrated constant, by its count, plus what does not
        "calibration_terms": calibration_terms(model, dt, r),
        **({"calibration": {"designs": model.calibration.designs, "tool_version": model.calibration.tool_version,
                            "calibrated": model.calibration.calibrated}} if model.calibration else {}),
    }

def output_extents(model: FpgaModel, g: Any, p: int, b: dict[str, Any]) -> list[int]:
    """The output's layout extents in DDR order: each dimension padded to whole tiles, the innermost (the
    row) to whole words."""
    perm = model.layouts[p][int(b["layout"][0])]
    out = [-(-int(g.shape[d]) // int(b["width"][0][d])) * int(b["width"][0][d]) for d in perm]
    out[-1] = int(b["pitch"][0])
    return out

def calibration_terms(model: FpgaModel, dt: int, r: dict[str, Any]) -> dict[str, Any]:
    cost = model.consts[dt].cost
    base, per_port, ff_base, ff_port, overhead = (float(x) for x in model.fixed)
    mul, add, ports = float(r["mul_units"][0]), float(r["add_units"][0]), float(len(model.ports))
    return {
        "dtype": model.tables.dtypes[dt], "mul_units": mul, "add_units": add, "ports": ports,
        "lut_fixed": float(r["lut"][0]) - (mul * cost.lut_mul + add * cost.lut_add + base + per_port * ports),
        "ff_fixed": float(r["ff"][0]) - (mul * cost.ff_mul + add * cost.ff_add + ff_base + ff_port * ports),
        "depth_fixed": float(r["depth"][0]) - overhead,
        "constants": {**{k: float(getattr(cost, k)) for k in ARITHMETIC_FIELDS},
                      **dict(zip(DEFAULT_FIXED, (float(x) for x in model.fixed), strict=True)),
                      "fmax_derate": model.derate},
    }
