"""The report's section on each design a board made for a whole network: the shared network kernel at batch 1,
its compute units over a batch, and the layer pipeline beside them, against the sum of the layers' own designs
(a bound, not a design)."""

from __future__ import annotations

from typing import Any

from hetero_dse.units import fmt_seconds

__all__ = ["network_markdown"]


def network_markdown(model: dict[str, Any]) -> list[str]:
    """Each one-design-for-the-network a device made (the FPGA's shared network kernel), against the sum of its
    per-layer designs, which is a bound and not a design."""
    lines = []
    for n in model.get("networks", []):
        if n.get("why"):
            lines += ["", f"### {n['board']}: one accelerator for the network", "", f"None: {n['why']}"]
            continue
        bound = n.get("per_layer_sum_s")
        arrays = " and ".join(_engine_words(e) for e in n["engines"])
        clock = (f"{n['achieved_mhz']:.0f} of {n['clock_mhz']:g} MHz" if n["achieved_mhz"] < n["clock_mhz"]
                 else f"{n['clock_mhz']:g} MHz")
        check = n.get("check")
        verdict = ("" if not check else f" C-simulation not run: {check['why']}." if check.get("why") else
                   f" C-simulation of every layer: {'passed' if check['passed'] else 'FAILED'} "
                   f"({check['mismatches']} of {check['elements']} elements off; trips: {check['trips']}).")
        if n.get("project_why"):
            verdict += f" {n['project_why']}."
        lines += ["", f"### {n['board']}: one accelerator for the network ({n['dtype']}, {clock})", "",
                  f"One kernel — {arrays} — runs every layer one after the other from a descriptor table, each "
                  "layer's tiles chosen for it; activations stay in the board's memory in one layout"
                  f"{_arena_words(n)}. **Network latency "
                  f"{fmt_seconds(n['latency_s'])}** at batch 1 ({n['fps']:.0f} fps, {n['gops']:.0f} GOPS of "
                  f"{n['peak_gops']:.0f} peak), by {n['basis']}. "
                  + ("" if bound is None else
                     f"The layers' own designs above sum to {fmt_seconds(bound)}: each uses the whole device alone, "
                     "so the sum is a bound, not a design the device can hold. ")
                  + "Resources, counted once: " + ", ".join(
                      f"{k.upper() if k != 'bram18k' else 'BRAM18K'} {v:,.0f} ({100 * n['utilisation'][k]:.0f} %)"
                      for k, v in n["resources"].items() if v) + "."
                  + (f" Project: `{n['directory']}`." if n.get("directory") else "") + verdict
                  + _throughput_note(n), "",
                  "| layer | count | engine | tiles (K × C × rows × columns) | latency | im2col |", "|---" * 6 + "|"]
        for layer in n["layers"]:
            t = layer["tiles"]
            lines.append(f"| {layer['layer']} | {layer['count']} | {layer['engine']} | "
                         f"{t['tk']} × {t['tc']} × {t['th']} × {t['tw']} | {fmt_seconds(layer['latency_s'])} | "
                         f"{'yes' if layer['im2col'] else ''} |")
    return lines


def _arena_words(n: dict[str, Any]) -> str:
    """`` (a word of 32 activations a cycle, over 2 ports a part each)`` where the design's arena word spreads
    over several of the board's ports; nothing where one port carries it."""
    if n.get("arena_ports", 1) < 2:
        return ""
    return f" (a word of {n['word']} activations a cycle, over {n['arena_ports']} ports a part each)"


def _lanes_words(e: dict[str, Any], named: bool = False) -> str:
    """An engine's lanes (``16 × 64 lanes``; ``named``: ``16 output-channel × 64 input-channel lanes``), and the
    taps of a window row each multiplies a cycle where the depthwise engine takes several."""
    lanes = " × ".join(f"{v} {k}" if named else str(v) for k, v in e["lanes"].items()) + " lanes"
    rows = f" × {e['tap_rows']} rows" if e.get("tap_rows", 1) > 1 else ""
    return lanes + (f" of {e['taps']} taps{rows} a cycle" if e.get("taps", 1) > 1 else "")


def _engine_words(e: dict[str, Any]) -> str:
    """``a grid engine of 16 output-channel × 64 input-channel lanes`` (``, its weights over 4 ports`` where it
    reads several); a Winograd engine with its tile, the multiplies it saves and its error against direct ones."""
    lanes = _lanes_words(e, named=True)
    ports = f", its weights over {e['weight_ports']} ports" if e.get("weight_ports", 1) > 1 else ""
    if e["kind"] != "winograd":
        return f"a {e['kind']} engine of {lanes}{ports}"
    m = e["tile"]
    error = "exact" if not e["error"] else f"error {e['error']:.1e} of the output's magnitude"
    cores = ", its transforms on DSPs" if e.get("transform_cores") == "dsp" else ""
    return (f"a Winograd F({m}×{m}, 3×3) engine of {lanes}{cores} for the 3×3 stride-1 layers "
            f"({e['multiply_saving']:.2f}× "
            f"fewer multiplies than direct; {error}: {e['error_basis']}){ports}")


def _throughput_note(n: dict[str, Any]) -> str:
    """What the device does at batch > 1 with several compute units (seed 000's pipelines), each a run of
    ``images`` images at a time (its linear layers once over the run), where it explored it."""
    t = n.get("throughput")
    if not t:
        return ""
    if "kernels" in t:
        return _kernels_note(t) + _pipeline_note(n.get("pipeline"), t["fps"], "the kernels")
    stop, arrays = t.get("units_stop") or "the device or its memory is full", " and ".join(
        f"{e['kind']} {_lanes_words(e)}" for e in t["engines"])  # (a record written before the stop was said)
    images = t.get("images", 1)
    if images > 1:
        each = f"runs of {images} images, the linear layers once over a run, {fmt_seconds(t['latency_s'])} a run"
        units = "one compute unit" if t["compute_units"] == 1 else f"**{t['compute_units']} compute units**"
        note = (f" At batch {images}, {units} (each {arrays}, in {each}) run{'s' * (t['compute_units'] == 1)} "
                f"{t['fps']:.0f} images a second: {_project(t)}. No more units: {stop}.")
    elif t["compute_units"] == 1:
        note = f" At batch > 1 a second compute unit raises no throughput ({stop})."
    else:
        note = (f" At batch > 1, **{t['compute_units']} compute units** (each {arrays}, each image on one, "
                f"{fmt_seconds(t['latency_s'])} each) run {t['fps']:.0f} images a second: {_project(t)}. "
                f"No more: {stop}.")
    return note + _pipeline_note(n.get("pipeline"), t["fps"])


def _kernels_note(t: dict[str, Any]) -> str:
    """The throughput design of kernels of different sizes in one xclbin, one an SLR room
    (``fpga_network_kernels``)."""
    def engines(k: dict[str, Any]) -> str:
        return " and ".join(f"{e['kind']} {_lanes_words(e)}" for e in k["engines"])

    each = "; ".join(f"`{k['top']}` {engines(k)} on SLR{'s' if len(k['unit_slrs']) > 1 else ''} "
                     f"{', '.join(map(str, k['unit_slrs']))}, {fmt_seconds(k['latency_s'])} a run"
                     for k in t["kernels"])
    batch = f"At batch {t['images']}" if t.get("images", 1) > 1 else "At batch > 1"
    return (f" {batch}, **{len(t['kernels'])} kernels in one xclbin, each explored for its SLR's room** ({each}) "
            f"run {t['fps']:.0f} images a second, against {t['units_fps']:.0f} for compute units of one kernel "
            f"({t['units_stop']}): {_project(t)}.")


def _csim_verdict(check: dict[str, Any]) -> str:
    """A C-simulation's verdict in a few words: passed, failed (on the outputs or on the trip counts), not run."""
    if check.get("passed") is None:
        return f"C-simulation not run: {check.get('why')}"
    if check["passed"]:
        return "C-simulated against its reference: passed"
    return ("C-simulated against its reference: **FAILED** ("
            + ("trip counts off the model's" if not check.get("mismatches") else f"{check['mismatches']} mismatches")
            + ")")


def _project(p: dict[str, Any]) -> str:
    """Where a design's project is, and its C-simulation's verdict; or why none was written."""
    if p.get("directory"):
        check, part = p.get("check"), f" (its test data {p['test_data']})" if p.get("test_data") else ""
        return f"its project `{p['directory']}`{part}" + ("" if not check else f", {_csim_verdict(check)}")
    return f"**by the model only**: {p.get('project_why', 'explore writes no project for it')}"


def _pipeline_note(p: dict[str, Any] | None, units_fps: float, against: str = "the compute units") -> str:
    """Which architecture serves throughput: the shared kernel's compute units or a layer-pipelined design."""
    if not p:
        return ""
    if "why" in p:
        return f" A layer-pipelined design (one stage a layer, weights on chip, by the model): {p['why']}."
    verdict = "would" + " not" * (p["fps"] <= units_fps) + " serve throughput better"
    n, cut = len(p.get("ddr_weights", [])), (f" in {len(p['kernels'])} kernels, one an SLR" if p.get("kernels") else "")
    ddr = f", but those of its {n} stage{'s' * (n > 1)} of one output pixel read from DDR each image" if n else ""
    return (f" A layer-pipelined design ({p['stages']} stages{cut}, weights on chip{ddr}; {_project(p)}) would run "
            f"{p['fps']:.0f} images a second at {p['achieved_mhz']:.0f} MHz, its slowest stage {p['bottleneck']}: "
            f"it {verdict} than {against} above.")
