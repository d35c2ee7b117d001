"""What the FPGA target adds to the report: its record in report.json, its section of report.md (top-k
designs, Pareto front, the best design's resources and traffic) and its rows of designs.csv."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hetero_dse.explore.loop import ENDS
from hetero_dse.hardware.board import RESOURCE_KINDS
from hetero_dse.targets.fpga_winograd import winograd_markdown
from hetero_dse.units import fmt_bytes, fmt_seconds

if TYPE_CHECKING:
    from hetero_dse.targets.base import Written
    from hetero_dse.targets.fpga_search import Exploration

__all__ = ["design_row", "fpga_markdown", "fpga_record"]


def design_row(e: Exploration, rank: int, point: Any, d: dict[str, Any]) -> dict[str, Any]:
    """One flat row per design: knobs and predicted figures."""
    row: dict[str, Any] = {
        "operator": e.op.name, "shape": e.op.shape_name or "", "board": e.board.name, "rank": rank,
        "score_s": d.get("score_s"), "dtype": point["dtype"], "clock_mhz": point["clock_mhz"],
        "latency_s": d["latency_s"], "gops": d["gops"],
        "roofline": d["roofline"], "bound": d["bound"], "pe": d["pe"], "ii": d["ii"], "tiles": d["tiles"],
        "traffic_bytes": d["traffic_bytes"], "io_lower_bound_bytes": d["io_lower_bound_bytes"],
        "traffic_over_bound": d["traffic_over_bound"], "io_bound_kind": d["io_bound_kind"],
        "traffic_over_compulsory": d["traffic_over_compulsory"],
    }
    for k in RESOURCE_KINDS:
        row[k] = d["resources"][k]
        row[f"{k}_util"] = d["utilisation"][k]
    for k, v in point.items():
        if k.startswith(("tile.", "unroll.")):
            row[k] = v
    row["order"] = " ".join(point["order"])
    return row


def fpga_record(e: Exploration, written: Written | None) -> dict[str, Any]:
    r = e.result
    return {
        "operator": e.op.name, "shape": e.op.shape_name, "signature": e.op.signature(), "board": e.board.name,
        "search": {"explorer": r.explorer, "evaluations": r.evaluations, "wall_s": r.wall_s,
                   "interrupted": r.interrupted, "ended": r.ended, "ended_reason": ENDS.get(r.ended),
                   "space_size": e.space.size,
                   "pruned_size_bound": e.space.pruned_size()},
        "best": {"knobs": e.designs[0][0].to_json(), **e.designs[0][1]} if e.designs else None,
        "top": [{"knobs": p.to_json(), **d} for p, d in e.designs],
        "pareto": [{"knobs": p.to_json(), "latency_s": d["latency_s"], "dsp": d["resources"]["dsp"],
                    "bram18k": d["resources"]["bram18k"]} for p, d in e.pareto],
        "project": written.directory if written else None,
        "project_unwritten": None if written is None or written.why is None else f"not written: {written.why}",
        "csim": written.check if written else None,
        "calibration": e.model.calibration.to_json() if e.model.calibration else None,
        "winograd": e.winograd.to_json() if e.winograd is not None else None,
    }


def _clock(d: dict) -> str:
    """What the model expects the design to close at, where that is below the target."""
    clock = d.get("clock") or {}
    if not clock or clock.get("achieved_mhz", 0) >= clock.get("target_mhz", 0) * 0.999:
        return ""
    return (f" (the model expects {clock['achieved_mhz']:.0f} MHz: the PEs' broadcast fan-out of "
            f"{clock['fanout']:.0f} and {clock['slrs_spanned']} SLR{'s' if clock['slrs_spanned'] > 1 else ''} "
            f"spanned, an {clock['basis']}; its latency is at that clock)")


def fpga_markdown(e: Exploration, written: Written | None) -> list[str]:
    if not e.designs:
        return []
    r = e.result
    p, d = e.designs[0]
    res, util = d["resources"], d["utilisation"]
    project = (f"`{written.directory}`" if written and written.directory else
               f"not written{': ' + written.why if written and written.why else ''}")
    check = written.check if written else None
    csim = "" if check is None else f" C-simulation: {_verdict(check)}."
    kind = "direct " if e.winograd is not None and e.winograd.design is not None else ""
    lines = [f"## {e.op.signature()} on {e.board.name}", "",
             f"Search: {r.explorer}, {r.evaluations:,} designs scored in {r.wall_s:.2f} s"
             f"{' (interrupted)' if r.interrupted else f' (ended: {ENDS[r.ended]})' if r.ended in ENDS else ''}; "
             f"HLS project: {project}.{csim}",
             *_calibration_line(e), "", *winograd_markdown(e),
             f"Best {kind}design: {p['dtype']} at {p['clock_mhz']:g} MHz{_clock(d)}, {100 * d['roofline']:.1f} % of "
             f"the DSP roofline, bound by {d['bound']}; DSP {res['dsp']:,.0f} ({100 * util['dsp']:.0f} %), BRAM18K "
             f"{res['bram18k']:,.0f} ({100 * util['bram18k']:.0f} %), URAM {res['uram']:,.0f}, LUT {res['lut']:,.0f} "
             f"({100 * util['lut']:.0f} %) of the board's usable caps; DDR traffic {fmt_bytes(d['traffic_bytes'])}, "
             f"{d['traffic_over_bound']:.2f}× the I/O lower bound ({d['io_bound_kind']}).",
             "", f"Top {len(e.designs)}, ranked by score: the model's latency charged "
             f"{100 * e.model.traffic_weight:g} % for each time the design's DDR traffic moves the operator's "
             "tensors once (× tensors: score = latency × (1 + "
             f"{e.model.traffic_weight:g} × that), and a millionth for its fullest resource's share), so a design "
             "a little faster that moves more data ranks below one that moves less: the DDR traffic column shows "
             "it, and how far it is from the I/O lower bound.", "",
             "| rank | score | latency | DDR traffic (× tensors, × I/O bound) | GOPS | bound | PE | II | DSP | BRAM18K "
             "| tiles | unrolled | order |", "|---" * 13 + "|"]
    for rank, (p, d) in enumerate(e.designs, start=1):
        tiles = " ".join(f"{k[5:]}={v}" for k, v in p.items() if k.startswith("tile."))
        unrolled = " ".join(f"{k[7:]}×{v}" for k, v in p.items() if k.startswith("unroll.") and v > 1)
        # four digits: neighbours in the ranking often differ in the third
        score = fmt_seconds(d["score_s"], digits=4) if d.get("score_s") is not None else "—"
        lines.append(f"| {rank} | {score} | {fmt_seconds(d['latency_s'], digits=4)} | "
                     f"{fmt_bytes(d['traffic_bytes'])} ({d['traffic_over_compulsory']:.2f}×, "
                     f"{d['traffic_over_bound']:.2f}×) | {d['gops']:.1f} | "
                     f"{d['bound']} | {d['pe']} | {d['ii']} | {d['resources']['dsp']:,.0f} | "
                     f"{d['resources']['bram18k']:,.0f} | {tiles} | {unrolled or '—'} | {' '.join(p['order'])} |")
    lines += ["", f"Pareto front (latency vs DSP vs BRAM18K): {len(e.pareto)} designs.", "",
              "| latency | DSP | BRAM18K |", "|---|---|---|"]
    for _, d in e.pareto[:20]:
        lines.append(f"| {fmt_seconds(d['latency_s'])} | {d['resources']['dsp']:,.0f} | "
                     f"{d['resources']['bram18k']:,.0f} |")
    if len(e.pareto) > 20:
        lines.append(f"| … {len(e.pareto) - 20} more in report.json | | |")
    lines.append("")
    return lines


def _verdict(check: dict[str, Any]) -> str:
    if check.get("passed") is None:
        return f"not run ({check.get('why', 'no verdict')})"
    return f"{'pass' if check['passed'] else 'FAIL'} (max error {check['max_abs_error']:.2g})"


def _calibration_line(e: Exploration) -> list[str]:
    cal = e.model.calibration
    if cal is None:
        return ["", "Model: the sourced constants of cost_models/fpga_costs.py (not calibrated)."]
    return ["", f"Model calibrated for {cal.part} with Vitis {cal.tool_version} from {cal.designs} synthesized "
                f"designs: {', '.join(cal.calibrated)}."]
